"""`tapis-server` whose SQLite writer can be stopped between a batch's writes and its COMMIT
(run as a script: ``python paused_commit.py CONTROL_DIR SERVER_ARGS...``).

The failpoint is the store's own (``SqliteStore(failpoint=...)``, called by the writer thread
once every write of a batch has run in the open transaction, just before the COMMIT and its
fsync). It does nothing until the test writes ``CONTROL_DIR/arm`` (a number N). Then:

1. the first batch to reach its COMMIT writes ``CONTROL_DIR/holding`` and waits there until N
   more writes are queued behind it (the test sends them once it sees ``holding``), and
   commits (its actions are answered);
2. the next batch (those N writes or more, all taken at once) stops before its COMMIT: once
   the event loop has settled the first batch's writes and turned ``ANSWER_TURNS`` more times
   (so that their answers are out before the kill, however fast the writer got there), the
   failpoint writes its size to ``CONTROL_DIR/paused`` and blocks the writer for good, so the
   test can SIGKILL the process with the batch written to SQLite but never committed.

``CONTROL_DIR/fold_at`` (a number), when there at start, is the store's ``fold_at``: how many
inputs its journal's inbox takes before the writer folds it into the by-table tree.
"""

from __future__ import annotations

import asyncio
import os
import runpy
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tapis_service.stores import sqlite_store

ANSWER_TURNS = 50
"""Turns of the event loop given to the held batch's answers (a handful carry an answer from
its settled write to the socket)."""


class Pause:
    """The failpoint of one store (see the module's docstring)."""

    def __init__(self, store: sqlite_store.SqliteStore, control: Path) -> None:
        self.store = store
        self.control = control
        self.held_first = False
        self.batch: list[Any] = []
        """The jobs of the batch being committed."""
        self.held: list[asyncio.Future[None]] = []

    def __call__(self, stage: str) -> None:
        arm = self.control / "arm"
        if stage != "commit" or not arm.exists():
            return
        if not self.held_first:
            self.held_first = True
            self.held = [job.future for job in self.batch]
            wanted = int(arm.read_text())
            (self.control / "holding").touch()
            while self.store._queue.qsize() < wanted:  # the writes the test sent, queued
                time.sleep(0.001)
            return
        loop = self.store._loop
        if loop is not None:  # the held batch's answers go out first
            asyncio.run_coroutine_threadsafe(_answered(self.held), loop).result(timeout=30)
        written = self.control / "paused.tmp"
        written.write_text(f"{len(self.batch)}\n")
        written.rename(self.control / "paused")  # whole, or not there at all
        threading.Event().wait()  # never commits: the test kills the process here


async def _answered(settled: list[asyncio.Future[None]]) -> None:
    """On the server's loop: until ``settled`` are done, then ``ANSWER_TURNS`` turns more."""
    while not all(future.done() for future in settled):
        await asyncio.sleep(0)
    for _ in range(ANSWER_TURNS):
        await asyncio.sleep(0)


def main() -> None:
    control = Path(sys.argv[1])
    plain_init = sqlite_store.SqliteStore.__init__
    plain_commit = sqlite_store.SqliteStore._commit

    def init(self: sqlite_store.SqliteStore, *args: Any, **kwargs: Any) -> None:
        self._pause = Pause(self, control)  # type: ignore[attr-defined]
        if (control / "fold_at").exists():  # the journal's inbox folded that often
            kwargs["fold_at"] = int((control / "fold_at").read_text())
        plain_init(self, *args, **{**kwargs, "failpoint": self._pause})  # type: ignore[attr-defined]

    def commit(self: sqlite_store.SqliteStore, batch: list[Any]) -> Any:
        self._pause.batch = batch  # type: ignore[attr-defined]
        return plain_commit(self, batch)

    sqlite_store.SqliteStore.__init__ = init  # type: ignore[method-assign]
    sqlite_store.SqliteStore._commit = commit  # type: ignore[method-assign]
    sys.argv = ["tapis-server", *sys.argv[2:]]
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    runpy.run_module("tapis_service.process.main", run_name="__main__")


if __name__ == "__main__":
    main()
