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

A journal input (``_append``) is inserted only after its predecessor. The writer is the file's
only writer (the data directory is locked), so it remembers the last input of each table it
has seen committed (``_committed``: set only once a COMMIT returned, forgotten by a drop): when
that is the predecessor, the input goes in without reading the file; otherwise the file is
asked (``SELECT`` by primary key), so a memory that lags (a commit in doubt that did reach the
disk, a table not touched since the start) costs a read, never a wrong answer. The tables of a
batch whose COMMIT failed are forgotten (it may have reached the disk).

Inputs go into the journal's inbox (``sqlite_fold``), which the writer folds into the by-table
tree once it holds ``fold_at`` inputs, after settling a batch, in a transaction of its own. An
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from tapis_service.observe import logrepeat, metrics
from tapis_service.stores import sqlite_fold
from tapis_service.stores.store import CommitUnknown, JournalConflict, StoreError, StoreUnavailable

log = structlog.get_logger("tapis.store")

Write = tuple[str, tuple[Any, ...], str]
"""(SQL, parameters, what it means if it changes no row, or, for a ``SELECT``, finds none:
"" when that is fine)."""

Failpoint = Callable[[str], None]
"""Called by the writer at ``"commit"`` just before each COMMIT: raising ``sqlite3.Error`` there
acts as the COMMIT failing with it (a full disk; an I/O error, whose outcome is in doubt)."""

GAME_STORED = "SELECT 1 FROM games WHERE game_id = ?"
INPUT_STORED = "SELECT 1 FROM journal WHERE game_id = ? AND idx = ?"
"""The checks before an input the writer cannot vouch for: input N only after input N-1
(input 1 only after the creation record), so no holes. (One ``INSERT ... SELECT ... WHERE
EXISTS`` reading the journal costs twice as much: SQLite copies what an INSERT reads from its
own table before inserting.)"""


def _is_check(sql: str) -> bool:
    return sql.startswith("SELECT")


def _needs_savepoint(writes: list[Write]) -> bool:
    """A statement that changes rows is followed by others: a savepoint, to undo it if one of
    them is refused. (Checks, then one change: SQLite undoes that change itself.)"""
    return any(not _is_check(sql) for sql, _, _ in writes[:-1])


class _Job:
    """Statements to run in order, and who to tell once they are committed. ``forget``: a
    table whose journal the job deletes (the writer forgets what it knew of it)."""

    __slots__ = ("forget", "future", "loop", "writes")

    def __init__(self, writes: list[Write], loop: asyncio.AbstractEventLoop,
                 future: asyncio.Future[None], forget: str | None = None) -> None:
        self.writes = writes
        self.loop = loop
        self.future = future
        self.forget = forget


class _Append(_Job):
    """A journal input, ``index`` of table ``game_id``, as its row's text."""

    __slots__ = ("game_id", "index", "text")

    def __init__(self, game_id: str, index: int, text: str, loop: asyncio.AbstractEventLoop,
                 future: asyncio.Future[None]) -> None:
        self.game_id = game_id
        self.index = index
        self.text = text
        self.loop = loop
        self.future = future
        self.forget = None


class GroupCommitWriter:
    """The writer half of ``SqliteStore``: ``_start_writer`` once its connection is open,
    ``_submit`` and ``_append`` from the loop, ``_stop_writer`` to commit what is queued and
    stop."""

    path: Path
    max_batch: int
    """Writes per transaction at most (0: everything queued; 1: no group commit)."""
    failpoint: Failpoint | None
    fold_at: int
    """Inputs in the journal's inbox at which the writer folds it (0: at open and close only)."""
    _connection: sqlite3.Connection
    _inbox = 0
    """Inputs put in the inbox since its last fold (at most: those of a commit in doubt too)."""
    _fold_due = 0
    """``_inbox`` at which the writer folds next."""
    folds = 0
    """Folds done (for tests and measurements)."""

    def _start_writer(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: queue.SimpleQueue[list[_Job] | None] = queue.SimpleQueue()
        self._handing: list[_Job] = []
        """The jobs queued on the loop during its current step, handed to the writer together
        after it (``_hand_off``)."""
        self._closed = False
        self._committed: dict[str, int] = {}
        """The writer thread's own: each table's last input known committed."""
        self.commits = 0
        """Transactions committed (each may carry many writes): for measurements."""
        self._writer = threading.Thread(target=self._run, name="tapis-store-writer", daemon=True)
        self._writer.start()

    def _stop_writer(self) -> None:
        self._hand_off()
        self._queue.put(None)
        self._writer.join()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None or not loop.is_running():  # looked up once per loop: on Python 3.11
            loop = self._loop = asyncio.get_running_loop()  # each lookup is a getpid call
        return loop

    def _submit(self, writes: list[Write], forget: str | None = None) -> asyncio.Future[None]:
        if self._closed:
            raise RuntimeError("the store is closed")
        loop = self._running_loop()
        future = loop.create_future()
        self._put(_Job(writes, loop, future, forget), loop)
        return future

    def _append(self, game_id: str, index: int, text: str) -> asyncio.Future[None]:
        """Queue journal input ``index`` of ``game_id`` (its row's text)."""
        if self._closed:
            raise RuntimeError("the store is closed")
        loop = self._running_loop()
        future = loop.create_future()
        self._put(_Append(game_id, index, text, loop, future), loop)
        return future

    def _put(self, job: _Job, loop: asyncio.AbstractEventLoop) -> None:
        """Queue ``job`` behind the others of this step of the loop: the first of a step has
        them handed to the writer once the step's callbacks ran (``_hand_off``)."""
        handing = self._handing
        handing.append(job)
        if len(handing) == 1:
            loop.call_soon(self._hand_off)

    def _hand_off(self) -> None:
        """The jobs queued during a step of the loop, to the writer in one put, in order: one
        wake-up of its thread for them all, and one batch (the inputs one step of the loop
        applied, committed together), not a batch cut short by a writer that woke for the
        first of them. (Before a stop: whatever is queued.)"""
        handing = self._handing
        if handing:
            self._handing = []
            self._queue.put(handing)

    def _run(self) -> None:
        stopping = False
        carried: list[_Job] = []  # beyond the last batch's ``max_batch``: the next one's first
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
            if self.fold_at and self._inbox >= self._fold_due:  # the answers are out first
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
        self.folds += 1

    def _settle(self, batch: Sequence[_Job], outcomes: Sequence[StoreError | None]) -> None:
        """The batch's awaitables completed by one wake-up of each loop, not one per write."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Any, StoreError | None]]] = {}
        for job, outcome in zip(batch, outcomes, strict=True):
            by_loop.setdefault(job.loop, []).append((job.future, outcome))
        for loop, settled in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(_settle_all, settled)

    def _commit(self, batch: list[_Job]) -> list[StoreError | None]:
        """One transaction for the batch: each job's outcome."""
        outcomes: list[StoreError | None] = [None] * len(batch)
        cursor = self._connection.cursor()
        committed = self._committed
        appended: dict[str, int] = {}  # this transaction's inputs: committed with it
        added = 0  # inputs put in the inbox
        committing = False
        try:
            cursor.execute("BEGIN")
            for position, job in enumerate(batch):
                if type(job) is _Append:
                    outcome = outcomes[position] = _run_append(cursor, job, committed, appended)
                    added += outcome is None
                else:
                    if job.forget is not None:  # forgotten at once: a read if in doubt
                        committed.pop(job.forget, None)
                        appended.pop(job.forget, None)
                    outcomes[position] = _run_job(cursor, job)
            committing = True
            if self.failpoint is not None:
                self.failpoint("commit")
            cursor.execute("COMMIT")
            committed.update(appended)
            self.commits += 1
            self._inbox += added
        except sqlite3.Error as error:
            logrepeat.limited(log.error, "store_write_failed", error=str(error), writes=len(batch))
            self._inbox += added  # in doubt: they may be there
            for job in batch:  # nor vouched for: a commit in doubt may have reached the disk
                if type(job) is _Append:
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


def _run_append(cursor: sqlite3.Cursor, job: _Append, committed: dict[str, int],
                appended: dict[str, int]) -> StoreError | None:
    """One journal input in the open transaction: None, or why it changed nothing."""
    game_id, index = job.game_id, job.index
    known = appended.get(game_id)
    if known is None:
        known = committed.get(game_id)
    try:
        if known == index - 1 and index != 1:  # the writer vouches: no part holds it
            cursor.execute(sqlite_fold.INSERT_INPUT, (game_id, index, job.text))
        else:  # the predecessor (or, for the first, the creation record) from the file
            if index == 1:
                cursor.execute(GAME_STORED, (game_id,))
            else:
                cursor.execute(INPUT_STORED, (game_id, index - 1))
            if cursor.fetchone() is None:
                return StoreUnavailable(f"game {game_id}: input {index - 1} is not committed")
            cursor.execute(sqlite_fold.INSERT_UNLESS_FOLDED, (game_id, index, job.text))
            if not cursor.rowcount:
                return JournalConflict(f"game {game_id}: input {index} is already in the "
                                       "journal")
    except sqlite3.IntegrityError as error:  # the inbox holds it; undone by SQLite itself
        return JournalConflict(str(error))
    appended[game_id] = index
    return None


def _run_job(cursor: sqlite3.Cursor, job: _Job) -> StoreError | None:
    """One job's statements in the open transaction: None, or why it changed nothing."""
    savepoint = _needs_savepoint(job.writes)
    if savepoint:
        cursor.execute("SAVEPOINT job")
    outcome: StoreError | None = None
    try:
        for sql, params, unless_changed in job.writes:
            cursor.execute(sql, params)
            done = cursor.fetchone() is not None if _is_check(sql) else cursor.rowcount
            if unless_changed and not done:
                raise StoreUnavailable(unless_changed)
    except sqlite3.IntegrityError as error:
        outcome = JournalConflict(str(error))
    except StoreUnavailable as refused:
        outcome = refused
    if savepoint:
        if outcome is not None:
            cursor.execute("ROLLBACK TO job")
        cursor.execute("RELEASE job")
    return outcome


def _in_doubt(failure: sqlite3.Error) -> bool:
    """A COMMIT that failed with an I/O error (a failed fsync, a short write): its frames may
    be in the WAL, and a later recovery may find it committed. A full disk is not in doubt:
    SQLite could not write the transaction at all."""
    code = getattr(failure, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_IOERR


def _settle_all(settled: list[tuple[asyncio.Future[None], StoreError | None]]) -> None:
    """On the loop: each write's outcome into its awaitable (unless it was cancelled)."""
    for future, error in settled:
        if not future.done():
            future.set_result(None) if error is None else future.set_exception(error)
