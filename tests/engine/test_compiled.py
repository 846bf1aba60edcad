"""The compiled hot path (``tools/compiled.py``: mypyc) is the plain Python, only faster.

After ``make setup`` every listed module runs compiled, built from the sources as they are (a
stale build would shadow an edited ``.py``); and seeded series of every game give the same
bytes (every event for every view, every answer, every ``GameView``, the engine's views and
legal actions, the snapshot) on the compiled modules as on a copy of the pure sources.
``TAPIS_PURE=1`` (no compiled modules) turns the first check around.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tools import compiled

GAMES = Path(__file__).with_name("compiled_games.py")


def test_every_listed_module_runs_compiled_from_the_sources_as_they_are() -> None:
    names = compiled.modules()
    assert "tapis_engine.table" in names and "tapis_service.codec.wire" in names
    origins = {name: str(importlib.import_module(name).__spec__.origin) for name in names}
    if os.environ.get("TAPIS_PURE"):
        assert all(origin.endswith(".py") for origin in origins.values()), origins
        return
    assert [name for name, origin in origins.items() if not origin.endswith(".so")] == [], \
        "not compiled: run make setup (a C compiler is needed: build/compiled.log)"
    assert compiled.fresh(), "the compiled modules are stale: run make setup"


def test_no_compiled_class_shows_the_collector_a_reference_twice() -> None:
    """Each native class's ``tp_traverse`` (the generated C) visits each attribute once. An
    attribute annotated again in a subclass (``self.x: T = ...`` over the base's ``x: T``) is
    visited twice by mypyc 2.4's (mypyc/mypyc#948's kin): the collector then takes a
    reference held elsewhere for one of a cycle's own and clears objects still in use (the
    host's ``__dict__``, emptied under the server)."""
    if os.environ.get("TAPIS_PURE"):
        assert not list(compiled.TARGET.glob("*.c"))
        return
    twice: dict[str, list[str]] = {}
    traversals = 0
    for source in sorted(compiled.TARGET.glob("*.c")):
        for name, body in re.findall(r"\n(\w+_traverse)\([^\n]*\)\n\{\n(.*?)\n\}",
                                     source.read_text(), re.S):
            traversals += 1
            visits = re.findall(r"Py_VISIT\((.*)\);", body)
            doubled = sorted({visit for visit in visits if visits.count(visit) > 1})
            if doubled:
                twice[name] = doubled
    assert traversals > 100  # the generated C was read
    assert twice == {}


def _records(path: Path) -> tuple[list[str], list[bytes]]:
    data = path.read_bytes()
    start = data.index(b"\n") + 1
    records = []
    while start < len(data):
        size = int.from_bytes(data[start:start + 4], "big")
        records.append(data[start + 4:start + 4 + size])
        start += 4 + size
    return data[:data.index(b"\n")].decode().split(), records


def _play(python_path: str | None, out: Path) -> tuple[list[str], list[bytes]]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if python_path is not None:  # before the editable install's finder
        env["PYTHONPATH"] = python_path
    subprocess.run([sys.executable, str(GAMES), str(out), *compiled.modules()], env=env,
                   check=True, timeout=240)
    return _records(out)


def test_seeded_games_give_the_same_bytes_compiled_and_pure(tmp_path: Path) -> None:
    pure = tmp_path / "service"
    shutil.copytree(compiled.SERVICE, pure, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    ran_pure, expected = _play(str(pure), tmp_path / "pure.bin")
    ran_compiled, got = _play(None, tmp_path / "compiled.bin")
    assert ran_pure == []
    if not os.environ.get("TAPIS_PURE"):
        assert ran_compiled == compiled.modules()
    assert len(expected) > 10_000  # every game played, its events and views written
    for index, (want, have) in enumerate(zip(expected, got, strict=False)):
        assert have == want, f"record {index} differs (after {expected[index - 1][:80]!r})"
    assert len(got) == len(expected)
