"""The SQLite store's writer: group commit, by the event loop itself or by a writer thread.

The writes queued during one step of the loop (``sqlite_jobs.Handing``) are handed over together
after it and committed in one transaction (order preserved; WAL, ``synchronous=FULL``: one
fsync for the batch); only then are their awaitables completed. Who commits depends on the
step (docs/performance.md, "The commit on the loop, for a step of many writes"):

- **a step of many writes** (``inline_at`` or more) while the writer thread holds none: the
  loop commits it itself, once it gathered the writes of the steps right behind it (while
  each adds some, ``gather_max`` writes and ``gather_s`` at most: ``Handing.gathering``).
  While SQLite writes and fsyncs, the loop waits (the interpreter's lock released), but that
  one fsync carries many inputs, and the commit costs no thread woken and no lock handed back
  and forth: a WebSocket server under load, its frames read many at a time.
- **a step of a few**, or any step while the thread holds writes: the writer thread, which
  group-commits everything queued while its last transaction ran, the loop going on
  meanwhile: a gRPC server, its calls arriving about one per step, whose fsyncs the loop
  would otherwise wait for one action at a time.

So the file has one writer at a time: the loop commits only when every hand-off to the thread
is settled (``_in_thread``, counted on the loop). A write is a
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
input the writer vouches for is in neither part; any other goes into the inbox only if no
part holds it (``JournalConflict`` otherwise, as the journal's key did before it had two
parts), so no input is ever in both and a fold never meets a duplicate. The inbox has no index
(schema 4): the writer, the file's only writer, knows which tables may have inputs there
(``_inbox_tables``: committed since the last fold, or in a commit in doubt) and reads the
inbox, whole, only for an input of one of those it cannot vouch for (rare: after a commit in
doubt, or a repeat). A snapshot needs its input committed: known by the writer, or read.

A failpoint (tests) is awaited on the loop between a batch's statements and its COMMIT, as
PostgreSQL's writer awaits its own: the writer thread waits for it; a batch the loop holds so
has the writes queued meanwhile wait behind it, then go in the next transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

import structlog

from tapis_service.observe import logrepeat, metrics
from tapis_service.stores import sqlite_fold, sqlite_jobs
from tapis_service.stores.sqlite_jobs import Append, Job
from tapis_service.stores.store import CommitUnknown, StoreError, StoreUnavailable

log = structlog.get_logger("tapis.store")

Failpoint = Callable[[str], Awaitable[None]]
"""Awaited on the loop at ``"commit"``, once a batch's statements ran, just before its COMMIT
(the batch is then ``committing``): raising ``sqlite3.Error`` there acts as the COMMIT failing
with it (a full disk; an I/O error, whose outcome is in doubt)."""
INLINE_AT = 8
"""The writes of one step of the loop from which the loop commits them itself (when the writer
thread holds none), once they gathered (``sqlite_jobs.Handing``)."""
GATHER_MAX = 256
"""A batch gathers the writes of the loop's next steps while it holds fewer than this many..."""
GATHER_S = 0.002
"""...and for 2 ms at most: the longest an answer waits for the writes behind it (measured:
docs/performance.md, "Group commit across the loop's steps")."""


class Opened(NamedTuple):
    """A batch whose statements ran in the open transaction, not yet committed."""

    batch: list[Job]
    outcomes: list[StoreError | None]
    """Each job's outcome so far (None: its statements went in)."""
    added: int
    """The journal inputs it put in."""
    started: float
    """``time.perf_counter()`` at its BEGIN (the commit's duration, for the metrics)."""


class GroupCommitWriter:
    """The writer half of ``SqliteStore``: ``_start_writer`` once its connection is open,
    ``_submit`` and ``appended`` from the loop (``sqlite_jobs.Handing``, compiled),
    ``_stop_writer`` to commit what is queued and stop."""

    path: Path
    max_batch: int
    """Writes per transaction at most (0: everything queued; 1: no group commit)."""
    inline_at: int = INLINE_AT
    """A step's writes from which the loop commits them itself (0: never; 1: always, when the
    thread holds none), once they gathered the next steps' writes."""
    gather_max: int = GATHER_MAX
    gather_s: float = GATHER_S
    """How long a batch gathers at most (0: it waits one step of the loop, no more)."""
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
    _holding: Opened | None = None
    """The batch a failpoint holds before its COMMIT (None: none is held)."""

    def _start_writer(self) -> None:
        self._queue: queue.SimpleQueue[list[Job] | None] = queue.SimpleQueue()
        self._handing = sqlite_jobs.Handing(self._write, self.handed, self.inline_at,
                                            self.gather_max, self.gather_s)
        self._submit = self._handing.submit
        """Queue a job of statements (``sqlite_jobs.Handing.submit``)."""
        self.appended = self._handing.append
        self._committed: dict[str, int] = {}
        """Each table's last input known committed (whoever commits: one at a time)."""
        self._inbox_tables: set[str] = {row[0] for row in self._connection.execute(
            "SELECT DISTINCT game_id FROM journal_inbox")}  # none, unless the open fold failed
        """The tables that may have inputs in the inbox: those whose inputs were committed, or
        in a commit in doubt, since the last fold (the inbox has no index: an input the writer
        cannot vouch for is looked for there only for these tables)."""
        self.commits = 0
        """Transactions committed (each may carry many writes): for measurements."""
        self._in_thread = 0
        """The hand-offs to the writer thread not yet settled (counted on the loop)."""
        self._held: asyncio.Task[None] | None = None
        """The failpoint holding a batch the loop commits (None: none is held)."""
        self._behind: list[Job] = []
        """The jobs queued while the loop holds a batch: the next transaction's."""
        self._appended: dict[str, int] = {}
        """The open transaction's inputs: each table's last (committed with it)."""
        self._writer = threading.Thread(target=self._run, name="tapis-store-writer", daemon=True)
        self._writer.start()

    @property
    def committing(self) -> list[Job]:
        """The batch a failpoint holds (for it to read; empty when none is held)."""
        return [] if self._holding is None else self._holding.batch

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
        """Commit what is queued, in order (a held batch too: a store that stops holds
        nothing more), and stop the writer thread."""
        self.failpoint = None
        held, self._held = self._held, None
        if held is not None and self._holding is not None:
            held.cancel()
            opened, self._holding = self._holding, None
            self._seal(opened)
        behind, self._behind = self._behind, []
        self._write(behind)
        self._handing.flush()
        self._queue.put(None)
        self._writer.join()

    # --- on the loop ----------------------------------------------------------------------

    def _write(self, jobs: list[Job]) -> None:
        """A step's jobs, in order: to the writer thread, or committed by the loop at once (in
        transactions of ``max_batch`` at most; behind a held batch, once it is committed)."""
        if self._held is not None:
            self._behind.extend(jobs)
            return
        if not jobs:
            return
        if self._in_thread or not self.inline_at or len(jobs) < self.inline_at:
            self._in_thread += 1
            self._queue.put(jobs)
            return
        while jobs:
            if self.max_batch and len(jobs) > self.max_batch:
                batch, jobs = jobs[:self.max_batch], jobs[self.max_batch:]
            else:
                batch, jobs = jobs, []
            opened = self._open(batch)
            if opened is None:
                continue
            if self.failpoint is not None:
                self._behind, self._holding = jobs, opened
                self._held = asyncio.ensure_future(self._hold(self.failpoint))
                return
            self._seal(opened)
            self._fold_if_due()

    async def _hold(self, failpoint: Failpoint) -> None:
        """The held batch's COMMIT once its failpoint returns (or its failure, if it raised),
        then the jobs queued behind it."""
        failure = await _failure_of(failpoint)
        opened, self._holding, self._held = self._holding, None, None
        assert opened is not None
        self._seal(opened, failure)
        self._fold_if_due()
        behind, self._behind = self._behind, []
        self._write(behind)

    def _thread_done(self, handed: int) -> None:
        """The writer thread settled ``handed`` hand-offs (and folded, if one was due)."""
        self._in_thread -= handed

    # --- on the writer thread -------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        carried: list[Job] = []  # beyond the last batch's ``max_batch``: the next one's first
        handed = 0  # hand-offs taken, told to the loop once none of their jobs is carried
        while carried or not stopping:
            if not carried:
                first = self._queue.get()
                if first is None:
                    break
                carried, handed = first, handed + 1
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
                handed += 1
            if self.max_batch and len(batch) > self.max_batch:
                batch, carried = batch[:self.max_batch], batch[self.max_batch:]
            self._commit(batch)
            self._fold_if_due()  # the answers are out first
            if handed and not carried:
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody counts
                    batch[0].loop.call_soon_threadsafe(self._thread_done, handed)
                handed = 0

    def _commit(self, batch: list[Job]) -> None:
        """One transaction for the batch, on the writer thread, then its outcomes settled."""
        opened = self._open(batch)
        if opened is None:
            return
        failure, failpoint = None, self.failpoint
        if failpoint is not None:  # awaited on the loop, this thread waiting
            self._holding = opened
            failure = asyncio.run_coroutine_threadsafe(_failure_of(failpoint),
                                                       batch[0].loop).result()
            self._holding = None
        self._seal(opened, failure)

    # --- by whichever commits (one at a time) ---------------------------------------------

    def _open(self, batch: list[Job]) -> Opened | None:
        """BEGIN and the batch's statements, each job's outcome kept (None: the transaction
        failed, and the batch is settled with each job's failure)."""
        started = time.perf_counter()
        outcomes: list[StoreError | None] = []
        cursor = self._connection.cursor()
        self._appended = {}
        try:
            cursor.execute("BEGIN")
            added = sqlite_jobs.run_batch(cursor, batch, self._committed, self._appended,
                                          self._inbox_tables, outcomes)
        except sqlite3.Error as error:
            metrics.observe_commit("sqlite", time.perf_counter() - started, False)
            self._settle(batch, self._failed(batch, outcomes, error, committing=False))
            return None
        return Opened(batch, outcomes, added, started)

    def _seal(self, opened: Opened, failure: sqlite3.Error | None = None) -> None:
        """The open transaction's COMMIT (or, with ``failure``, the COMMIT failing with it),
        then the batch settled."""
        batch, outcomes = opened.batch, opened.outcomes
        try:
            if failure is not None:
                raise failure
            self._connection.execute("COMMIT")
        except sqlite3.Error as error:
            outcomes = self._failed(batch, outcomes, error, committing=True)
            committed = False
        else:
            self._committed.update(self._appended)
            self._inbox_tables.update(self._appended)
            self.commits += 1
            self._inbox += opened.added
            committed = True
        metrics.observe_commit("sqlite", time.perf_counter() - opened.started, committed)
        self._settle(batch, outcomes)

    def _fold_if_due(self) -> None:
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
        """Each job's outcome into its awaitable (``sqlite_jobs.settle``)."""
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
                self._inbox_tables.add(job.game_id)
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


async def _failure_of(failpoint: Failpoint) -> sqlite3.Error | None:
    """What a failpoint makes of the COMMIT it stands before: None (go on), or the failure it
    raised (as SQLite's, if it was not one)."""
    try:
        await failpoint("commit")
    except sqlite3.Error as error:
        return error
    except Exception as error:  # a failpoint that raises anything fails the COMMIT
        return sqlite3.OperationalError(f"the failpoint raised {error!r}")
    return None


def _in_doubt(failure: sqlite3.Error) -> bool:
    """A COMMIT that failed with an I/O error (a failed fsync, a short write): its frames may
    be in the WAL, and a later recovery may find it committed. A full disk is not in doubt:
    SQLite could not write the transaction at all."""
    code = getattr(failure, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_IOERR
