"""The SQLite store's writer: each step of the event loop's writes, committed together at its end.

The writes queued during one step of the loop (``sqlite_jobs.Handing``) go into one transaction
(order preserved), committed once (WAL, ``synchronous=FULL``: one fsync for the batch) by the
loop itself, in a callback after the step's; only then are the batch's awaitables completed.
No thread is handed anything: the loop owns the file's connection, and while SQLite writes and
fsyncs, the loop waits (the interpreter's lock released), so a commit costs no wake-up of
another thread and no lock handed back and forth per statement (docs/performance.md, "The
commit on the loop"). A write is a job of statements: each job gets its own outcome, and a
refused job never takes the others of its transaction with it. A ``SELECT`` in a job is a
check: it must find a row, or the job is refused (``StoreUnavailable`` with the job's reason).
A statement refused by SQLite (a constraint) is undone by SQLite itself, so a job of checks and
one last change needs nothing more; any other job runs in a savepoint of its own, rolled back
whole if one of its statements is refused. A transaction that cannot commit (disk full, I/O
error) fails every job it carried with ``StoreUnavailable``, or with ``CommitUnknown`` when the
COMMIT itself failed with an I/O error (it may have reached the disk).

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

A failpoint (tests) is awaited between a batch's statements and its COMMIT, as PostgreSQL's
writer awaits its own: the loop goes on meanwhile, and the writes queued behind a batch so
held wait for it, then go in the next transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog

from tapis_service.observe import logrepeat, metrics
from tapis_service.stores import sqlite_fold, sqlite_jobs
from tapis_service.stores.sqlite_jobs import Append, Job
from tapis_service.stores.store import CommitUnknown, StoreError, StoreUnavailable

log = structlog.get_logger("tapis.store")

Failpoint = Callable[[str], Awaitable[None]]
"""Awaited by the writer at ``"commit"``, once a batch's statements ran, just before its COMMIT
(the batch is then ``committing``): raising ``sqlite3.Error`` there acts as the COMMIT failing
with it (a full disk; an I/O error, whose outcome is in doubt)."""


class GroupCommitWriter:
    """The writer half of ``SqliteStore``: ``_start_writer`` once its connection is open,
    ``_submit`` and ``appended`` from the loop (``sqlite_jobs.Handing``, compiled),
    ``_stop_writer`` to commit what is queued."""

    path: Path
    max_batch: int
    """Writes per transaction at most (0: a step's writes; 1: no group commit)."""
    failpoint: Failpoint | None
    handed: sqlite_jobs.Handed | None = None
    """Told how many journal inputs each step's batch carried (a test's seam)."""
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
    """The batch a failpoint holds (for it to read)."""

    def _start_writer(self) -> None:
        self._handing = sqlite_jobs.Handing(self._write, self.handed)
        self._submit = self._handing.submit
        """Queue a job of statements (``sqlite_jobs.Handing.submit``)."""
        self.appended = self._handing.append
        self._committed: dict[str, int] = {}
        """Each table's last input known committed."""
        self._inbox_tables: set[str] = set()
        """The tables whose inputs the writer committed since the last fold."""
        self.commits = 0
        """Transactions committed (each may carry many writes): for measurements."""
        self._held: asyncio.Task[None] | None = None
        """The failpoint holding a batch before its COMMIT (None: none is held)."""
        self._behind: list[Job] = []
        """The jobs queued while a batch is held: the next transaction's."""
        self._holding: tuple[list[Job], list[StoreError | None], int] = ([], [], 0)
        """The held batch, its outcomes so far and its inputs put in."""
        self._appended: dict[str, int] = {}
        """The open transaction's inputs: each table's last (committed with it)."""

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
        """Commit what is queued, in order: a held batch too (a store that stops holds
        nothing more), the writes behind it, then those of the loop's current step."""
        self.failpoint = None
        held, self._held = self._held, None
        if held is not None:
            held.cancel()
            self._seal(*self._holding)
            self.committing = []
        behind, self._behind = self._behind, []
        self._write(behind)
        self._handing.hand_off()

    def _write(self, jobs: list[Job]) -> None:
        """Commit ``jobs`` (a step's writes, in order): in transactions of ``max_batch`` at
        most, each settled before the next; behind a held batch, once it is committed."""
        if self._held is not None:
            self._behind.extend(jobs)
            return
        while jobs:
            if self.max_batch and len(jobs) > self.max_batch:
                batch, jobs = jobs[:self.max_batch], jobs[self.max_batch:]
            else:
                batch, jobs = jobs, []
            started = time.perf_counter()
            outcomes: list[StoreError | None] = []
            added = self._run(batch, outcomes)
            if added is None:  # the transaction failed before its COMMIT
                metrics.observe_commit("sqlite", time.perf_counter() - started, False)
                self._settle(batch, outcomes)
                continue
            if self.failpoint is not None:
                self._behind = jobs
                self._holding = batch, outcomes, added
                self.committing = batch
                self._held = asyncio.ensure_future(self._hold(self.failpoint))
                return
            self._seal(batch, outcomes, added, started)

    async def _hold(self, failpoint: Failpoint) -> None:
        """The held batch's COMMIT once its failpoint returns (or its failure, if it raised),
        then the jobs queued behind it."""
        batch, outcomes, added = self._holding
        try:
            await failpoint("commit")
        except Exception as error:  # a failpoint that raises fails the COMMIT
            failure = error if isinstance(error, sqlite3.Error) else sqlite3.OperationalError(
                f"the failpoint raised {error!r}")
            self._held = None
            self._settle(batch, self._failed(batch, outcomes, failure, committing=True))
        else:
            self._held = None
            self._seal(batch, outcomes, added)
        self.committing = []
        behind, self._behind = self._behind, []
        self._write(behind)

    def _run(self, batch: list[Job], outcomes: list[StoreError | None]) -> int | None:
        """BEGIN and the batch's statements, each job's outcome into ``outcomes``: how many
        inputs went in (None: the transaction failed, each job's failure in ``outcomes``)."""
        cursor = self._connection.cursor()
        self._appended = {}
        try:
            cursor.execute("BEGIN")
            return sqlite_jobs.run_batch(cursor, batch, self._committed, self._appended,
                                         outcomes)
        except sqlite3.Error as error:
            outcomes[:] = self._failed(batch, outcomes, error, committing=False)
            return None

    def _seal(self, batch: list[Job], outcomes: list[StoreError | None], added: int,
              started: float | None = None) -> None:
        """The open transaction's COMMIT, the batch settled, and a fold if one is due."""
        started = time.perf_counter() if started is None else started
        try:
            self._connection.execute("COMMIT")
        except sqlite3.Error as error:
            outcomes = self._failed(batch, outcomes, error, committing=True)
            committed = False
        else:
            self._committed.update(self._appended)
            self._inbox_tables.update(self._appended)
            self.commits += 1
            self._inbox += added
            committed = True
        metrics.observe_commit("sqlite", time.perf_counter() - started, committed)
        self._settle(batch, outcomes)
        if self.fold_at and self._inbox >= max(
                self._fold_due, self.fold_per_table * len(self._inbox_tables)):
            self._fold("full")

    def _fold(self, when: str) -> None:
        """Fold the journal's inbox into the tree (at open and close, and after a batch). A
        fold that fails moved nothing (every reader reads both parts): logged, and tried again
        ``fold_at`` inputs later."""
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
        """Each job's outcome into its awaitable."""
        sqlite_jobs.settle(batch, outcomes)

    def _failed(self, batch: list[Job], outcomes: list[StoreError | None],
                error: sqlite3.Error, committing: bool) -> list[StoreError | None]:
        """A transaction that cannot commit: rolled back, its tables forgotten, and the
        failure of each of its jobs."""
        logrepeat.limited(log.error, "store_write_failed", error=str(error), writes=len(batch))
        self._inbox += sum(outcome is None and type(job) is Append  # in doubt: they may
                           for job, outcome in zip(batch, outcomes, strict=False))  # be there
        for job in batch:  # nor vouched for: a commit in doubt may have reached the disk
            if type(job) is Append:
                self._committed.pop(job.game_id, None)
        with contextlib.suppress(sqlite3.Error):
            if self._connection.in_transaction:
                self._connection.execute("ROLLBACK")
        failed: StoreError
        if committing and _in_doubt(error):
            failed = CommitUnknown(f"{self.path}: the commit failed with an I/O error and "
                                   f"may have reached the disk ({error})")
        else:
            failed = StoreUnavailable(f"{self.path}: {error}")
        return [failed for _ in batch]


def _in_doubt(failure: sqlite3.Error) -> bool:
    """A COMMIT that failed with an I/O error (a failed fsync, a short write): its frames may
    be in the WAL, and a later recovery may find it committed. A full disk is not in doubt:
    SQLite could not write the transaction at all."""
    code = getattr(failure, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_IOERR
