"""The suite's import check, run in a process of its own (``python -m tests.support.layout``).

It parses every module of the suite. In a fresh interpreter: CPython 3.11's ``ast.parse`` can
fail with "AST constructor recursion depth mismatch" in a process whose earlier work left its
recursion bookkeeping off (CPython gh-106905), which a long test session may do.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def is_test_module(dotted: str) -> bool:
    """Whether a dotted name is a test module or a conftest."""
    last = dotted.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def imported(tree: ast.AST) -> list[str]:
    """Every ``tests.…`` module the tree imports (``from tests.a import b`` may name one)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("tests.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
            module = node.module or ""
            found += [module, *(f"{module}.{alias.name}" for alias in node.names)]
    return found


def offenders() -> list[str]:
    """``path imports module`` for every module of the suite importing a test module."""
    return [f"{path.relative_to(TESTS)} imports {module}"
            for path in sorted(TESTS.rglob("*.py"))
            for module in imported(ast.parse(path.read_text(encoding="utf-8")))
            if is_test_module(module)]


if __name__ == "__main__":
    found = offenders()
    print("\n".join(found))
    sys.exit(1 if found else 0)
