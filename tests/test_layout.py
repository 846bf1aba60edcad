"""The suite's own house rules: tests share helpers through ``tests/support/`` (or a helper
module beside them), never by importing a test module or a ``conftest``; measurement scripts
live in ``bench/``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.support.layout import imported, is_test_module

TESTS = Path(__file__).resolve().parent


def test_no_module_of_the_suite_imports_a_test_module_or_a_conftest() -> None:
    checked = subprocess.run([sys.executable, "-m", "tests.support.layout"],
                             cwd=TESTS.parent, capture_output=True, text=True, timeout=120,
                             check=False)
    assert checked.returncode == 0, "share helpers through tests/support/:\n" + checked.stdout \
        + checked.stderr


def test_the_check_sees_an_import_of_a_test_module() -> None:
    tree = ast.parse("from tests.service.test_war_service import view_of\n"
                     "from tests.support import conftest\n")
    assert [m for m in imported(tree) if is_test_module(m)] == [
        "tests.service.test_war_service", "tests.support.conftest"]


def test_measurement_scripts_live_in_bench() -> None:
    scripts = [path.relative_to(TESTS) for path in TESTS.rglob("*.py")
               if "measure" in path.name]
    assert not scripts, f"move {scripts} to bench/tapis_bench/"
