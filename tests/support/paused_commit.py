"""`tapis-server` whose SQLite writer can be stopped between a batch's writes and its COMMIT
(run as a script: ``python paused_commit.py CONTROL_DIR SERVER_ARGS...``).

The failpoint is the store's own (``SqliteStore(failpoint=...)``, called by the writer thread
once every write of a batch has run in the open transaction, just before the COMMIT and its
fsync). It does nothing until the test writes ``CONTROL_DIR/arm`` (a number N). Then:

1. the first batch to reach its COMMIT writes ``CONTROL_DIR/holding`` and waits there until N
   more writes are queued behind it (the test sends them once it sees ``holding``), and
   commits (its actions are answered);
2. the next batch (those N writes or more, all taken at once) stops before its COMMIT: the
   failpoint writes its size to ``CONTROL_DIR/paused`` and blocks the writer for good, so the
   test can SIGKILL the process with the batch written to SQLite but never committed.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tapis_service import sqlite_store


class Pause:
    """The failpoint of one store (see the module's docstring)."""

    def __init__(self, store: sqlite_store.SqliteStore, control: Path) -> None:
        self.store = store
        self.control = control
        self.held_first = False
        self.batch = 0

    def __call__(self, stage: str) -> None:
        arm = self.control / "arm"
        if stage != "commit" or not arm.exists():
            return
        if not self.held_first:
            self.held_first = True
            wanted = int(arm.read_text())
            (self.control / "holding").touch()
            while self.store._queue.qsize() < wanted:  # the writes the test sent, queued
                time.sleep(0.001)
            return
        written = self.control / "paused.tmp"
        written.write_text(f"{self.batch}\n")
        written.rename(self.control / "paused")  # whole, or not there at all
        threading.Event().wait()  # never commits: the test kills the process here


def main() -> None:
    control = Path(sys.argv[1])
    plain_init = sqlite_store.SqliteStore.__init__
    plain_commit = sqlite_store.SqliteStore._commit

    def init(self: sqlite_store.SqliteStore, *args: Any, **kwargs: Any) -> None:
        self._pause = Pause(self, control)  # type: ignore[attr-defined]
        plain_init(self, *args, **{**kwargs, "failpoint": self._pause})  # type: ignore[attr-defined]

    def commit(self: sqlite_store.SqliteStore, batch: list[Any]) -> Any:
        self._pause.batch = len(batch)  # type: ignore[attr-defined]
        return plain_commit(self, batch)

    sqlite_store.SqliteStore.__init__ = init  # type: ignore[method-assign]
    sqlite_store.SqliteStore._commit = commit  # type: ignore[method-assign]
    sys.argv = ["tapis-server", *sys.argv[2:]]
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    runpy.run_module("tapis_service.main", run_name="__main__")


if __name__ == "__main__":
    main()
