"""The SQLite writer's per-write work, compiled (``tools/compiled.py``): a write queued during a
step of the event loop and the step's writes handed to the writer after it (``Handing``), a
journal input run in the writer's open transaction (``run_append``), a job's statements
(``run_job``) and the batch's outcomes settled (``settle``). Who commits (the loop or the
writer thread), the transaction, its failure paths and the fold stay in ``sqlite_writer.py``
(``GroupCommitWriter``, which ``SqliteStore`` extends: a compiled class cannot have an
interpreted subclass). docs/performance.md, "SQLite's cost per action", says what compiling
this paid.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from tapis_service.stores import sqlite_fold
from tapis_service.stores.checksums import canonical_json
from tapis_service.stores.store import JournalConflict, StoreError, StoreUnavailable

Write = tuple[str, tuple[Any, ...], str]
"""(SQL, parameters, what it means if it changes no row, or, for a ``SELECT``, finds none:
"" when that is fine)."""

GAME_STORED = "SELECT 1 FROM games WHERE game_id = ?"
INPUT_FOLDED = "SELECT 1 FROM journal_folded WHERE game_id = ? AND idx = ?"
INPUT_STORED = "SELECT 1 FROM journal WHERE game_id = ? AND idx = ?"
"""The checks before an input the writer cannot vouch for: input N only after input N-1
(input 1 only after the creation record), so no holes; in the tree alone for a table with no
input in the inbox, in both parts (the inbox read whole: it has no index) for one that may
have some. (One ``INSERT ... SELECT ... WHERE EXISTS`` reading the journal costs twice as
much: SQLite copies what an INSERT reads from its own table before inserting.)"""


class Job:
    """Statements to run in order, and who to tell once they are committed. ``forget``: a
    table whose journal the job deletes (the writer forgets what it knew of it). ``after``:
    (table, input) the job needs committed first, or it is refused (a snapshot's input)."""

    def __init__(self, writes: list[Write], loop: asyncio.AbstractEventLoop,
                 future: asyncio.Future[None], forget: str | None = None,
                 after: tuple[str, int] | None = None) -> None:
        self.writes = writes
        self.loop = loop
        self.future = future
        self.forget = forget
        self.after = after


class Append(Job):
    """A journal input, ``index`` of table ``game_id``, as its row's text."""

    def __init__(self, game_id: str, index: int, text: str, loop: asyncio.AbstractEventLoop,
                 future: asyncio.Future[None]) -> None:
        super().__init__([], loop, future)
        self.game_id = game_id
        self.index = index
        self.text = text


Handed = Callable[[int], None]
"""Told on the loop, before each hand-off to the writer, how many journal inputs it carries (a
test's seam: ``SqliteStore(handed=...)``)."""


class Handing:
    """The loop's side of the writer: each write queued behind the others of the loop's current
    step, the step's writes handed to the writer in one call after it (``hand_off``, a callback
    the step's first write schedules): one batch, the inputs one step of the loop applied,
    committed together.

    A batch of ``gather_at`` writes or more (a loop reading many requests at once: the writes
    the loop commits itself) first gathers (``gathering``): its hand-off waits one step of the
    loop, then one more for each step that added writes to it, until a step adds none, it holds
    ``gather_max`` writes, or ``gather_s`` passed since it began. The steps behind a busy one
    bring the inputs of the requests read meanwhile: their writes go in the same transaction,
    one fsync for all (docs/performance.md, "Group commit across the loop's steps"). A batch
    of fewer writes (a request or two a step: gRPC, a quiet socket) is handed over at once."""

    def __init__(self, write: Callable[[list[Job]], None],
                 handed: Handed | None = None, gather_at: int = 0, gather_max: int = 0,
                 gather_s: float = 0.0) -> None:
        self.write = write
        """The writer's: commits a step's jobs, in order, and settles them."""
        self.handed = handed
        self.gather_at = gather_at
        """A batch of this many writes or more gathers before its hand-off (0: none does)."""
        self.gather_max = gather_max
        """...as long as it holds fewer than this many."""
        self.gather_s = gather_s
        """...and for this long at most (seconds since its first step of gathering)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop the writes come from, looked up once per loop: on Python 3.11 each lookup
        is a ``getpid`` call."""
        self.jobs: list[Job] = []
        """The jobs queued since the last hand-off (during the loop's current step, or the
        steps a gathering batch waited)."""
        self.gathered = 0
        """The batch's writes at its last step of gathering (0: it has not gathered)."""
        self.gathering_since = 0.0
        """``time.monotonic()`` at the batch's first step of gathering."""
        self.closed = False

    def running_loop(self) -> asyncio.AbstractEventLoop:
        loop = self.loop
        if loop is None or not loop.is_running():
            loop = self.loop = asyncio.get_running_loop()
        return loop

    def submit(self, writes: list[Write], forget: str | None = None,
               after: tuple[str, int] | None = None) -> asyncio.Future[None]:
        """Queue a job of ``writes`` (``Job``): its awaitable completes once they are
        committed."""
        if self.closed:
            raise RuntimeError("the store is closed")
        loop = self.running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self.put(Job(writes, loop, future, forget, after), loop)
        return future

    def append(self, game_id: str, index: int, entry: dict[str, Any],
               epoch: int = 1) -> asyncio.Future[None]:
        """Queue journal input ``index`` of ``game_id`` (its entry, written as canonical JSON):
        the store's ``appended`` itself (``epoch``: unused, a file has one writer)."""
        if self.closed:
            raise RuntimeError("the store is closed")
        loop = self.running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self.put(Append(game_id, index, canonical_json(entry), loop, future), loop)
        return future

    def put(self, job: Job, loop: asyncio.AbstractEventLoop) -> None:
        """Queue ``job`` behind the others of this step: the first of a step has them handed
        to the writer once the step's callbacks ran."""
        jobs = self.jobs
        jobs.append(job)
        if len(jobs) == 1:
            loop.call_soon(self.hand_off)

    def hand_off(self) -> None:
        """The loop's callback after a step that queued writes: the batch to the writer, in
        order, unless it is gathering (then this callback runs again after the next step)."""
        jobs = self.jobs
        if jobs and self.gathering(len(jobs)):
            loop = self.loop
            assert loop is not None  # set by the write that queued the first job
            loop.call_soon(self.hand_off)
            return
        self.flush()

    def gathering(self, count: int) -> bool:
        """Whether a batch of ``count`` writes waits one more step of the loop (``Handing``)."""
        if not self.gather_at or count < self.gather_at or count >= self.gather_max \
                or self.closed:
            return False
        now = time.monotonic()
        if not self.gathered:
            self.gathering_since = now
        elif count == self.gathered or now - self.gathering_since >= self.gather_s:
            return False
        self.gathered = count
        return True

    def flush(self) -> None:
        """The jobs queued since the last hand-off, to the writer in one call, in order, at
        once (a stop's too)."""
        jobs = self.jobs
        self.gathered = 0
        if jobs:
            self.jobs = []
            if self.handed is not None:
                self.handed(sum(1 for job in jobs if type(job) is Append))
            self.write(jobs)


def vouched(job: Append, committed: dict[str, int], appended: dict[str, int]) -> bool:
    """Whether the writer knows the input before ``job``'s is in (committed, or put in by this
    batch): then no part of the journal can hold it, and it goes in unchecked."""
    known = appended.get(job.game_id)
    if known is None:
        known = committed.get(job.game_id)
    return known == job.index - 1 and job.index != 1


def run_append(cursor: sqlite3.Cursor, job: Append, appended: dict[str, int],
               inbox: set[str]) -> StoreError | None:
    """One journal input the writer cannot vouch for, in the open transaction, after its
    predecessor (for the first, the creation record) is found in the file, unless the file
    holds it: None, or why it changed nothing. ``inbox``: the tables that may have inputs in
    the inbox (the others' inputs are all in the tree, or in ``appended``)."""
    game_id, index = job.game_id, job.index
    in_inbox = may_be_in_inbox(game_id, appended, inbox)
    try:
        if index == 1:
            cursor.execute(GAME_STORED, (game_id,))
            found = cursor.fetchone() is not None
        else:
            found = input_stored(cursor, game_id, index - 1, in_inbox)
        if not found:
            return StoreUnavailable(f"game {game_id}: input {index - 1} is not committed")
        cursor.execute(sqlite_fold.INSERT_UNLESS_STORED if in_inbox
                       else sqlite_fold.INSERT_UNLESS_FOLDED, (game_id, index, job.text))
        if not cursor.rowcount:
            return JournalConflict(f"game {game_id}: input {index} is already in the journal")
    except sqlite3.IntegrityError as error:  # undone by SQLite itself
        return JournalConflict(str(error))
    appended[game_id] = index
    return None


def has_input(cursor: sqlite3.Cursor, game_id: str, index: int, committed: dict[str, int],
              appended: dict[str, int], inbox: set[str]) -> bool:
    """Whether input ``index`` of ``game_id`` is committed, or put in by this batch: known
    when the writer saw it (a table's inputs have no holes), else read from the file."""
    known = appended.get(game_id)
    if known is None:
        known = committed.get(game_id)
    if known is not None and known >= index:
        return True
    return input_stored(cursor, game_id, index, may_be_in_inbox(game_id, appended, inbox))


def may_be_in_inbox(game_id: str, appended: dict[str, int], inbox: set[str]) -> bool:
    """Whether ``game_id`` may have inputs in the inbox: committed there since the last fold
    (or in doubt), or put there by this batch; the others' inputs are all in the tree."""
    return game_id in inbox or game_id in appended


def input_stored(cursor: sqlite3.Cursor, game_id: str, index: int, in_inbox: bool) -> bool:
    """Whether the file holds input ``index`` of ``game_id``: read in the tree alone, or in
    both parts when the table ``may_be_in_inbox`` (the inbox read whole: it has no index)."""
    cursor.execute(INPUT_STORED if in_inbox else INPUT_FOLDED, (game_id, index))
    return cursor.fetchone() is not None


def is_check(sql: str) -> bool:
    return sql.startswith("SELECT")


def needs_savepoint(writes: list[Write]) -> bool:
    """A statement that changes rows is followed by others: a savepoint, to undo it if one of
    them is refused. (Checks, then one change: SQLite undoes that change itself.)"""
    return any(not is_check(sql) for sql, _, _ in writes[:-1])


def run_job(cursor: sqlite3.Cursor, job: Job) -> StoreError | None:
    """One job's statements in the open transaction: None, or why it changed nothing."""
    savepoint = needs_savepoint(job.writes)
    if savepoint:
        cursor.execute("SAVEPOINT job")
    outcome: StoreError | None = None
    try:
        for sql, params, unless_changed in job.writes:
            cursor.execute(sql, params)
            done = cursor.fetchone() is not None if is_check(sql) else cursor.rowcount != 0
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


def settle_all(settled: list[tuple[asyncio.Future[None], StoreError | None]]) -> None:
    """On the loop: each write's outcome into its awaitable (unless it was cancelled)."""
    for future, error in settled:
        if not future.done():
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)


def run_batch(cursor: sqlite3.Cursor, batch: list[Job], committed: dict[str, int],
              appended: dict[str, int], inbox: set[str],
              outcomes: list[StoreError | None]) -> int:
    """Every job of ``batch`` in the open transaction, in order, each one's outcome appended
    to ``outcomes``: how many inputs went in. ``appended`` gets each table's last input put
    in (committed with the transaction); a job that deletes a table's journal forgets it in
    both maps at once (a read if in doubt). ``inbox``: the tables that may have inputs in the
    inbox since its last fold. A statement SQLite fails otherwise (no refusal: a full disk,
    an I/O error) is raised: the transaction cannot commit.

    The inputs the writer vouches for (``vouched``) go in by runs, one ``executemany`` per
    run of them in a row, before the next job or input that is checked (which may read them).
    No part of the journal can hold a vouched input: the writer is the file's only writer."""
    added = 0
    run: list[tuple[str, int, str]] = []
    for job in batch:
        if type(job) is Append and vouched(job, committed, appended):
            run.append((job.game_id, job.index, job.text))  # in with the run
            appended[job.game_id] = job.index
            outcome: StoreError | None = None
        else:
            if run:  # before a check, which may read them
                cursor.executemany(sqlite_fold.INSERT_INPUT, run)
                run = []
            if type(job) is Append:
                outcome = run_append(cursor, job, appended, inbox)
            else:
                if job.forget is not None:
                    committed.pop(job.forget, None)
                    appended.pop(job.forget, None)
                after = job.after
                if after is not None and not has_input(cursor, after[0], after[1], committed,
                                                       appended, inbox):
                    outcome = StoreUnavailable(f"game {after[0]}: input {after[1]} is not "
                                               "committed")
                else:
                    outcome = run_job(cursor, job)
        if outcome is None and type(job) is Append:
            added += 1
        outcomes.append(outcome)
    if run:
        cursor.executemany(sqlite_fold.INSERT_INPUT, run)
    return added


def settle(batch: list[Job], outcomes: list[StoreError | None]) -> None:
    """The batch's awaitables completed: at once when the loop they wait on commits them
    itself; by one wake-up of that loop, not one per write, from the writer thread."""
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:  # the writer thread, or a store closed after its loop
        running = None
    by_loop: dict[asyncio.AbstractEventLoop,
                  list[tuple[asyncio.Future[None], StoreError | None]]] = {}
    for job, outcome in zip(batch, outcomes, strict=True):
        by_loop.setdefault(job.loop, []).append((job.future, outcome))
    for loop, settled in by_loop.items():
        if loop is running:
            settle_all(settled)
            continue
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            loop.call_soon_threadsafe(settle_all, settled)
