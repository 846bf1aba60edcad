"""The SQLite writer's compiled per-write work (``sqlite_jobs.py``, ``checksums.py``: see
``tools/compiled.py``) is the plain Python, only faster: the tests that prove the writer equal
to the plain way (seeded batches with holes, repeats and unknown tables; failed and doubtful
commits; the fold; canonical JSON) pass on a copy of the pure sources as they pass here on
the compiled modules."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tools import compiled

ROOT = compiled.ROOT
SAME_TESTS = ("tests/stores/test_sqlite_writer.py", "tests/stores/test_sqlite_fold.py",
              "tests/stores/test_canonical_json.py")
PER_WRITE = ("tapis_service.stores.sqlite_jobs", "tapis_service.stores.checksums")


def test_the_writers_tests_pass_on_the_pure_sources(tmp_path: Path) -> None:
    pure = tmp_path / "service"
    shutil.copytree(compiled.SERVICE, pure, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(pure)}  # before the editable install's finder
    files = subprocess.run(
        [sys.executable, "-c", "import importlib, sys\n"
         "print(*(importlib.import_module(name).__file__ for name in sys.argv[1:]))",
         *PER_WRITE], env=env, cwd=ROOT, check=True, capture_output=True, text=True,
        timeout=60).stdout.split()
    assert files == [str(pure.joinpath(*name.split(".")[:-1], name.split(".")[-1] + ".py"))
                     for name in PER_WRITE]
    ran = subprocess.run([sys.executable, "-m", "pytest", "-x", "-p", "no:warnings",
                          *SAME_TESTS], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert re.search(r"^\d+ passed", ran.stdout, re.M), ran.stdout[-2000:]  # none skipped
