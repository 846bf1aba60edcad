"""Run a function of the suite in a fresh interpreter and get its (picklable) result.

For the checks that parse source files with ``ast``: CPython 3.11's ``ast.parse`` can fail with
"AST constructor recursion depth mismatch" in a process whose earlier work changed the
recursion limit (CPython gh-106905: fixed in later releases), which a long test session does.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

R = TypeVar("R")
ROOT = Path(__file__).resolve().parents[2]
CHILD = ("import pickle, sys, importlib; module, name, args = pickle.load(sys.stdin.buffer); "
         "result = getattr(importlib.import_module(module), name)(*args); "
         "sys.stdout.buffer.write(pickle.dumps(result))")


def in_fresh_interpreter(function: Callable[..., R], *args: Any) -> R:
    """``function(*args)``, run by a new Python process from the repository's root."""
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True,
                          input=pickle.dumps((function.__module__, function.__name__, args)),
                          timeout=120, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{function.__name__} failed in a fresh interpreter:\n"
                             + done.stderr.decode(errors="replace")[-2000:])
    result: R = pickle.loads(done.stdout)  # our own child's answer
    return result
