"""`tapis-server` whose SQLite writer can be stopped between a batch's writes and its COMMIT
(run as a script: ``python paused_commit.py CONTROL_DIR SERVER_ARGS...``).

The failpoint is the store's own (``SqliteStore(failpoint=...)``, awaited by the writer once
every write of a batch has run in the open transaction, just before the COMMIT and its fsync;
the batch is then ``store.committing``), and so is the count of the journal inputs
handed to the writer (``SqliteStore(handed=...)``). It does nothing until the test writes
``CONTROL_DIR/arm`` (a number N). Then:

1. the first batch to reach its COMMIT writes ``CONTROL_DIR/holding`` and waits there until N
   more journal inputs are handed to the writer behind it (the test sends them once it sees
   ``holding``; counted as inputs, not as hand-offs, which may carry several, nor as writes,
   which include the health probe's), and commits (its actions are answered);
2. the next batch (those N inputs or more, all taken at once) stops before its COMMIT: once
   the event loop has settled the first batch's writes and turned ``ANSWER_TURNS`` more times
   (so that their answers are out before the kill, however fast the writer got there), the
   failpoint writes the table of each journal input in it, one per line, to
   ``CONTROL_DIR/paused`` and blocks the event loop for good, so the test can SIGKILL the process
   with the batch written to SQLite but never committed.

``CONTROL_DIR/fold_at`` (a number), when there at start, is the store's ``fold_at`` (and its
``fold_per_table`` 0): how many inputs its journal's inbox takes before the writer folds it
into the by-table tree.
"""

from __future__ import annotations

import asyncio
import os
import runpy
import sys
import threading
from pathlib import Path
from typing import Any

from tapis_service.stores import sqlite_jobs, sqlite_store

ANSWER_TURNS = 50
"""Turns of the event loop given to the held batch's answers (a handful carry an answer from
its settled write to the socket)."""


class Pause:
    """The failpoint of one store (see the module's docstring)."""

    def __init__(self, store: sqlite_store.SqliteStore, control: Path) -> None:
        self.store = store
        self.control = control
        self.held_first = False
        self.held: list[asyncio.Future[None]] = []
        self.handed = 0
        """Journal inputs handed to the writer so far (counted on the loop, at each hand-off:
        the store's ``handed`` seam)."""
        self.wanted = 0
        """``handed`` at which the first held batch may commit."""
        self.arrived = asyncio.Event()

    def count(self, inputs: int) -> None:
        self.handed += inputs
        if self.held_first and self.handed >= self.wanted:
            self.arrived.set()

    async def __call__(self, stage: str) -> None:
        arm = self.control / "arm"
        if stage != "commit" or not arm.exists():
            return
        if not self.held_first:
            self.held_first = True
            self.held = [job.future for job in self.store.committing]
            self.wanted = self.handed + int(arm.read_text())
            (self.control / "holding").touch()
            if self.handed < self.wanted:  # the inputs the test sent, queued behind this batch
                await self.arrived.wait()
            return
        await _answered(self.held)  # the held batch's answers go out first
        written = self.control / "paused.tmp"
        tables = [job.game_id for job in self.store.committing
                  if isinstance(job, sqlite_jobs.Append)]
        written.write_text("".join(f"{game_id}\n" for game_id in tables))
        written.rename(self.control / "paused")  # whole, or not there at all
        threading.Event().wait()  # never commits: the loop stops here, the test kills it


async def _answered(settled: list[asyncio.Future[None]]) -> None:
    """On the server's loop: until ``settled`` are done, then ``ANSWER_TURNS`` turns more."""
    while not all(future.done() for future in settled):
        await asyncio.sleep(0)
    for _ in range(ANSWER_TURNS):
        await asyncio.sleep(0)


def main() -> None:
    control = Path(sys.argv[1])
    plain_init = sqlite_store.SqliteStore.__init__

    def init(self: sqlite_store.SqliteStore, *args: Any, **kwargs: Any) -> None:
        pause = Pause(self, control)
        if (control / "fold_at").exists():  # the journal's inbox folded that often
            kwargs["fold_at"] = int((control / "fold_at").read_text())
            kwargs["fold_per_table"] = 0
        plain_init(self, *args, **{**kwargs, "failpoint": pause, "handed": pause.count})

    sqlite_store.SqliteStore.__init__ = init  # type: ignore[method-assign]
    sys.argv = ["tapis-server", *sys.argv[2:]]
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    runpy.run_module("tapis_service.process.main", run_name="__main__")


if __name__ == "__main__":
    main()
