"""The SQLite store's writer: one thread that group-commits whatever is queued.

The first write it takes, plus every write queued behind it, go into one transaction (order
preserved), committed once (WAL, ``synchronous=FULL``: one fsync for the batch); only then are
the batch's awaitables completed, all of them by one wake-up of each waiting loop. A write is a
job of statements: each job gets its own outcome, and a refused job never takes the others of
its transaction with it. A ``SELECT`` in a job is a check: it must find a row, or the job is
refused (``StoreUnavailable`` with the job's reason). A statement refused by SQLite (a
constraint) is undone by SQLite itself, so a job of checks and one last change needs nothing
more; any other job runs in a savepoint of its own, rolled back whole if one of its statements
is refused. A transaction that cannot commit (disk full,
I/O error) fails every job it carried with ``StoreUnavailable``, or with ``CommitUnknown`` when
the COMMIT itself failed with an I/O error (it may have reached the disk).

A journal input (``appended``) is inserted only after its predecessor. The writer is the file's
only writer (the data directory is locked), so it remembers the last input of each table it
has seen committed (``_committed``: set only once a COMMIT returned, forgotten by a drop): when
that is the predecessor, the input goes in without reading the file; otherwise the file is
asked (``SELECT`` by primary key), so a memory that lags (a commit in doubt that did reach the
disk, a table not touched since the start) costs a read, never a wrong answer. The tables of a
batch whose COMMIT failed are forgotten (it may have reached the disk).

Inputs go into the journal's inbox (``sqlite_fold``), which the writer folds into the by-table
tree once it holds ``fold_at`` inputs (or ``fold_per_table`` per table it holds inputs of, if
that is more), after settling a batch, in a transaction of its own. An
input the writer vouches for is in neither part; any other goes into the inbox only if the
tree does not hold it, and the inbox's own key refuses one it holds (``JournalConflict``, as
the journal's key did before it had two parts), so no input is ever in both and a fold never
meets a duplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from tapis_service.observe import logrepeat, metrics
from tapis_service.stores import sqlite_fold, sqlite_jobs
from tapis_service.stores.sqlite_jobs import Append, Job
from tapis_service.stores.store import CommitUnknown, StoreError, StoreUnavailable

log = structlog.get_logger("tapis.store")

Failpoint = Callable[[str], None]
"""Called by the writer at ``"commit"`` just before each COMMIT: raising ``sqlite3.Error`` there
acts as the COMMIT failing with it (a full disk; an I/O error, whose outcome is in doubt)."""

class GroupCommitWriter:
    """The writer half of ``SqliteStore``: ``_start_writer`` once its connection is open,
    ``_submit`` and ``appended`` from the loop (``sqlite_jobs.Handing``, compiled),
    ``_stop_writer`` to commit what is queued and stop."""

    path: Path
    max_batch: int
    """Writes per transaction at most (0: everything queued; 1: no group commit)."""
    failpoint: Failpoint | None
    handed: sqlite_jobs.Handed | None = None
    """Told how many journal inputs each hand-off to the writer carried (a test's seam)."""
    fold_at: int
    """Inputs in the journal's inbox at which the writer folds it (0: at open and close only)."""
    fold_per_table: int
    """...or this many per table it holds inputs of, when that is more (0: ``fold_at`` only)."""
    _connection: sqlite3.Connection
    _inbox = 0
    """Inputs put in the inbox since its last fold (at most: those of a commit in doubt too)."""
    _fold_due = 0
    """``_inbox`` at which the writer folds next (at the least)."""
    folds = 0
    """Folds done (for tests and measurements)."""
    appended: Callable[..., asyncio.Future[None]]
    """The store's ``appended(game_id, index, entry, epoch=1)``: ``sqlite_jobs.Handing.append``
    itself, so a journal input runs no interpreted frame on the loop."""
    committing: list[Job] = []
    """The batch being committed (on the writer thread; for a failpoint to read)."""

    def _start_writer(self) -> None:
        self._queue: queue.SimpleQueue[list[Job] | None] = queue.SimpleQueue()
        self._handing = sqlite_jobs.Handing(self._queue, self.handed)
        self._submit = self._handing.submit
        """Queue a job of statements (``sqlite_jobs.Handing.submit``)."""
        self.appended = self._handing.append
        self._committed: dict[str, int] = {}
        """The writer thread's own: each table's last input known committed."""
        self._inbox_tables: set[str] = set()
        """The writer thread's own: the tables whose inputs it committed since the last fold."""
        self.commits = 0
        """Transactions committed (each may carry many writes): for measurements."""
        self._writer = threading.Thread(target=self._run, name="tapis-store-writer", daemon=True)
        self._writer.start()

    @property
    def _loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the writes come from (None before the first)."""
        return self._handing.loop

    @property
    def _closed(self) -> bool:
        return self._handing.closed

    @_closed.setter
    def _closed(self, closed: bool) -> None:
        self._handing.closed = closed

    def _stop_writer(self) -> None:
        self._handing.hand_off()
        self._queue.put(None)
        self._writer.join()

    def _run(self) -> None:
        stopping = False
        carried: list[Job] = []  # beyond the last batch's ``max_batch``: the next one's first
        while carried or not stopping:
            if not carried:
                first = self._queue.get()
                if first is None:
                    break
                carried = first
            batch, carried = carried, []
            while not stopping:  # group commit: every job queued meanwhile
                try:
                    jobs = self._queue.get_nowait()
                except queue.Empty:
                    break
                if jobs is None:
                    stopping = True
                    break
                batch.extend(jobs)
            if self.max_batch and len(batch) > self.max_batch:
                batch, carried = batch[:self.max_batch], batch[self.max_batch:]
            started, commits = time.perf_counter(), self.commits
            outcomes = self._commit(batch)
            metrics.observe_commit("sqlite", time.perf_counter() - started,
                                   self.commits > commits)
            self._settle(batch, outcomes)
            if self.fold_at and self._inbox >= max(  # the answers are out first
                    self._fold_due, self.fold_per_table * len(self._inbox_tables)):
                self._fold("full")

    def _fold(self, when: str) -> None:
        """Fold the journal's inbox into the tree (at open and close, and on the writer
        thread). A fold that fails moved nothing (every reader reads both parts): logged, and
        tried again ``fold_at`` inputs later."""
        try:
            sqlite_fold.fold(self._connection)
        except sqlite3.Error as error:
            logrepeat.limited(log.warning, "journal_fold_failed", when=when, error=str(error))
            self._fold_due = self._inbox + self.fold_at
            return
        self._inbox, self._fold_due = 0, self.fold_at
        self._inbox_tables = set()
        self.folds += 1

    def _settle(self, batch: list[Job], outcomes: list[StoreError | None]) -> None:
        """The batch's awaitables completed by one wake-up of each loop, not one per write."""
        sqlite_jobs.settle(batch, outcomes)

    def _commit(self, batch: list[Job]) -> list[StoreError | None]:
        """One transaction for the batch: each job's outcome."""
        cursor = self._connection.cursor()
        committed = self._committed
        appended: dict[str, int] = {}  # this transaction's inputs: committed with it
        outcomes: list[StoreError | None] = []
        committing = False
        try:
            cursor.execute("BEGIN")
            added = sqlite_jobs.run_batch(cursor, batch, committed, appended, outcomes)
            committing = True
            if self.failpoint is not None:
                self.committing = batch
                self.failpoint("commit")
            cursor.execute("COMMIT")
            committed.update(appended)
            self._inbox_tables.update(appended)
            self.commits += 1
            self._inbox += added
        except sqlite3.Error as error:
            logrepeat.limited(log.error, "store_write_failed", error=str(error), writes=len(batch))
            self._inbox += sum(outcome is None and type(job) is Append  # in doubt: they may
                               for job, outcome in zip(batch, outcomes, strict=False))  # be there
            for job in batch:  # nor vouched for: a commit in doubt may have reached the disk
                if type(job) is Append:
                    committed.pop(job.game_id, None)
            with contextlib.suppress(sqlite3.Error):
                if self._connection.in_transaction:
                    cursor.execute("ROLLBACK")
            failed: StoreError
            if committing and _in_doubt(error):
                failed = CommitUnknown(f"{self.path}: the commit failed with an I/O error and "
                                       f"may have reached the disk ({error})")
            else:
                failed = StoreUnavailable(f"{self.path}: {error}")
            return [failed for _ in batch]
        return outcomes


def _in_doubt(failure: sqlite3.Error) -> bool:
    """A COMMIT that failed with an I/O error (a failed fsync, a short write): its frames may
    be in the WAL, and a later recovery may find it committed. A full disk is not in doubt:
    SQLite could not write the transaction at all."""
    code = getattr(failure, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_IOERR
