"""The suite's own house rules: tests share helpers through ``tests/support/`` (or a helper
module beside them), never by importing a test module or a ``conftest``; measurement scripts
live in ``bench/``."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _is_test_module(dotted: str) -> bool:
    last = dotted.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def _imported(tree: ast.AST) -> list[str]:
    """Every ``tests.…`` module the tree imports (``from tests.a import b`` may name one)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("tests.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
            module = node.module or ""
            found += [module, *(f"{module}.{alias.name}" for alias in node.names)]
    return found


def test_no_module_of_the_suite_imports_a_test_module_or_a_conftest() -> None:
    offenders = [f"{path.relative_to(TESTS)} imports {module}"
                 for path in sorted(TESTS.rglob("*.py"))
                 for module in _imported(ast.parse(path.read_text(encoding="utf-8")))
                 if _is_test_module(module)]
    assert not offenders, "share helpers through tests/support/:\n" + "\n".join(offenders)


def test_the_check_sees_an_import_of_a_test_module() -> None:
    tree = ast.parse("from tests.service.test_war_service import view_of\n"
                     "from tests.support import conftest\n")
    assert [m for m in _imported(tree) if _is_test_module(m)] == [
        "tests.service.test_war_service", "tests.support.conftest"]


def test_measurement_scripts_live_in_bench() -> None:
    scripts = [path.relative_to(TESTS) for path in TESTS.rglob("*.py")
               if "measure" in path.name]
    assert not scripts, f"move {scripts} to bench/tapis_bench/"
