"""The PostgreSQL store's writer: lanes that group-commit the queued writes, in order, and
say how each one ended.

A table's writes go through one lane (by its id): one task and one connection that takes
whatever is queued, runs it in one transaction (a batch of appends alone is one INSERT), and
settles each write's future. If the journal key refuses a write, the batch is run again one
write per transaction, so only the refused one (and its table's later writes) fail, and the
writes committed before a failure stay committed.

A write that fails says whether it may have been applied. Lost before COMMIT was sent (no
connection, an error inside the transaction, the connection seen closed just before the
commit): nothing of it is kept, ``StoreUnavailable``. Lost while the COMMIT (or a lone INSERT,
its own transaction) was under way, or a statement that timed out: the database may have
committed it, ``CommitUnknown``. A connection that did not end with a plain ERROR from the
database is closed and never used again (reused, asyncpg fails "cannot switch to state 12;
another operation is in progress").
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import asyncpg
import structlog
from prometheus_client import Counter

from tapis_service.observe import logrepeat, metrics
from tapis_service.stores import postgres_sql as sql
from tapis_service.stores.postgres_sql import (
    Append,
    Create,
    Drop,
    Probe,
    Rest,
    Snapshot,
    Wake,
    Write,
)
from tapis_service.stores.store import (
    CommitUnknown,
    CreateConflict,
    JournalConflict,
    StoreError,
    StoreUnavailable,
)

log = structlog.get_logger("tapis.store")

APPENDS_REFUSED = Counter(
    "tapis_appends_refused_total",
    "Journal appends refused because the journal already held the index or the table's "
    "fencing epoch moved on (another node owns the table)")

ACQUIRE_TIMEOUT_S = 10.0
"""A connection the pool does not give within this fails (never hangs)."""

Failpoint = Callable[[str, asyncpg.Connection], Awaitable[None]]
"""Awaited by the writer at ``"commit"`` with its connection, just before the statement that
commits (the COMMIT, or a lone INSERT of appends): tests break the connection there."""


@dataclass(slots=True, eq=False)
class _Barrier:
    """Nothing to write: settles once every write queued before it has."""

    future: asyncio.Future[None]


TableWrite = Create | Append | Snapshot | Drop | Rest | Wake
"""A write that belongs to one table (its refusal stops that table's later writes)."""


@dataclass(slots=True, eq=False)
class _Queued:
    """One hook call: its write, who to tell, and (once known) how it ended."""

    job: Write
    future: asyncio.Future[None]
    committed: bool = False
    error: StoreError | None = None

    @property
    def settled(self) -> bool:
        return self.committed or self.error is not None


@dataclass(eq=False)
class _Lane:
    """One writer: its queue, its task and its connection. A table's writes all go through
    the same lane (by its id), so they commit in the order they were made."""

    queue: deque[_Queued | _Barrier] = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    connection: asyncpg.Connection | None = None
    task: asyncio.Future[None] | None = None


class _WriteFailed(Exception):
    """A transaction that did not commit, or (``in_doubt``) may have."""

    def __init__(self, cause: Exception, in_doubt: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.in_doubt = in_doubt


def _refused_by_server(error: BaseException) -> bool:
    """The database answered the statement with an ERROR: it rolled the statement (and its
    transaction) back, and the session goes on. Anything else (a lost connection, a FATAL, a
    timeout, a client-side failure) leaves the connection unusable and the outcome unsaid."""
    if not isinstance(error, asyncpg.PostgresError):
        return False
    severity = getattr(error, "severity_en", None) or getattr(error, "severity", None)
    return severity == "ERROR"


def _usable(connection: asyncpg.Connection) -> bool:
    """A writer connection still open and still ours (a pool may have taken it back)."""
    try:
        return not connection.is_closed()
    except asyncpg.InterfaceError:  # released back to the pool
        return False


class Writer:
    """The lanes of one store, writing through ``pool``. ``node_id`` owns the tables it
    creates; ``fenced`` writes carry their table's epoch and are refused once it moved on."""

    def __init__(self, pool: asyncpg.Pool, node_id: str | None, fenced: bool, max_batch: int,
                 lanes: int, failpoint: Failpoint | None) -> None:
        self.pool = pool
        self.node_id = node_id
        self.fenced = fenced
        self.max_batch = max_batch
        """Writes per transaction at most (0: everything queued; 1: no group commit)."""
        self.failpoint = failpoint
        metrics.store_opened("postgres")
        self.commits = 0
        """Transactions committed (each may carry many writes): for measurements."""
        self._poisoned: set[str] = set()
        """Tables with a refused or failed write: their later writes fail until read again."""
        self._appended_to: dict[str, int] = {}
        """The last journal index committed (or read) for each table."""
        self._closed = False
        self._lanes = [_Lane() for _ in range(max(lanes, 1))]
        for lane in self._lanes:
            lane.task = asyncio.ensure_future(self._run(lane))

    def read_again(self, game_id: str, last_index: int) -> None:
        """The table was read (its journal ends at ``last_index``): its refused writes are
        forgotten, and appends may go on from there."""
        self._poisoned.discard(game_id)
        self._appended_to[game_id] = last_index

    async def settled(self) -> None:
        """Once every write queued before the call has been committed or refused."""
        loop = asyncio.get_running_loop()
        barriers = [_Barrier(loop.create_future()) for _ in self._lanes]
        for lane, barrier in zip(self._lanes, barriers, strict=True):
            lane.queue.append(barrier)
            lane.wake.set()
        await asyncio.gather(*(b.future for b in barriers), return_exceptions=True)

    def close(self) -> None:
        """Stop taking writes; ``aclose`` commits what is queued."""
        self._closed = True
        for lane in self._lanes:
            lane.wake.set()

    async def aclose(self) -> None:
        """Commit what is queued, then hand every connection back to the pool."""
        self.close()
        for lane in self._lanes:
            with contextlib.suppress(asyncio.CancelledError):
                await lane.task  # type: ignore[misc]
            if lane.connection is not None:
                with contextlib.suppress(Exception):
                    await self.pool.release(lane.connection)
                lane.connection = None

    def stop_now(self) -> None:
        """Stop at once (``PostgresStore.terminate``): each lane's task is cancelled, the
        writes it holds left unsettled (never acknowledged)."""
        self.close()
        for lane in self._lanes:
            if lane.task is not None:
                lane.task.cancel()

    def submit(self, job: Write) -> asyncio.Future[None]:
        """Queue ``job`` on its table's lane; the future completes once it is committed (or
        fails with the ``StoreError`` saying why not, or that it may have been)."""
        if self._closed:
            raise RuntimeError("the store is closed")
        future = asyncio.get_running_loop().create_future()
        game_id = job.game_id if isinstance(job, TableWrite) else ""
        lane = self._lanes[hash(game_id) % len(self._lanes)]
        lane.queue.append(_Queued(job, future))
        lane.wake.set()
        return future

    async def _run(self, lane: _Lane) -> None:
        while True:
            if not lane.queue:
                if self._closed:
                    return
                lane.wake.clear()
                await lane.wake.wait()
                continue
            batch: list[_Queued] = []
            barriers: list[_Barrier] = []
            while lane.queue and (not self.max_batch or len(batch) < self.max_batch):
                item = lane.queue.popleft()
                if isinstance(item, _Barrier):
                    barriers.append(item)
                else:
                    batch.append(item)
            try:
                await self._commit(lane, batch)
            except Exception as failure:  # a fault of this code: never leave a writer waiting
                log.exception("store_writer_failed", writes=len(batch))
                await self._close_connection(lane)
                unknown = CommitUnknown(f"the write may have been applied: {failure}")
                for queued in batch:
                    if not queued.settled:
                        queued.error = unknown
            for queued in batch:
                self._settle(queued)
            for barrier in barriers:
                if not barrier.future.done():
                    barrier.future.set_result(None)

    def _settle(self, queued: _Queued) -> None:
        if queued.future.done():
            return
        if queued.error is None:
            queued.future.set_result(None)
            return
        if isinstance(queued.job, TableWrite):
            self._poisoned.add(queued.job.game_id)
        queued.future.set_exception(queued.error)
        queued.future.exception()  # a write nobody awaits must not warn

    async def _commit(self, lane: _Lane, batch: list[_Queued]) -> None:
        """Every write of the batch in one transaction; if the journal key refuses one, each
        again in its own, so that only the refused ones (and what follows them) fail."""
        writes: list[_Queued] = []
        for queued in batch:
            if (refusal := self._refused_before(queued.job)) is not None:
                queued.error = refusal
            else:
                writes.append(queued)
        if not writes:
            return
        try:
            written = await self._transaction(lane, [q.job for q in writes])
        except asyncpg.UniqueViolationError:
            await self._one_by_one(lane, writes)
            return
        except _WriteFailed as failed:
            await self._failed(lane, writes, failed)
            return
        self._record(writes, written)

    async def _one_by_one(self, lane: _Lane, writes: list[_Queued]) -> None:
        for position, queued in enumerate(writes):
            if (refusal := self._refused_before(queued.job)) is not None:
                queued.error = refusal
                continue
            try:
                written = await self._transaction(lane, [queued.job])
            except asyncpg.UniqueViolationError:
                written = [False]
            except _WriteFailed as failed:
                await self._failed(lane, [queued], failed)
                for later in writes[position + 1:]:  # not sent: nothing of them was kept
                    later.error = StoreUnavailable(
                        f"not written: an earlier write of its transaction failed ({failed})")
                return
            self._record([queued], written)

    def _refused_before(self, job: Write) -> JournalConflict | None:
        """A write refused without asking the database: its table had a write refused or
        failed (nothing goes past it), or it is fenced and this node holds no epoch for it."""
        if not isinstance(job, TableWrite):
            return None
        if job.game_id in self._poisoned:
            return JournalConflict(f"game {job.game_id}: an earlier write was refused")
        if self.fenced and not isinstance(job, Create) and job.epoch is None:
            return self._refusal(job)
        return None

    async def _transaction(self, lane: _Lane, jobs: Sequence[Write]) -> list[bool]:
        """Run the writes in one transaction; for each, whether the database wrote it (a
        fenced write is not when its table's epoch moved on). A batch of appends alone (the
        common case) is one statement: atomic by itself, one round trip.

        ``UniqueViolationError`` when the journal key refused one (nothing was written);
        ``_WriteFailed`` for any other failure, ``in_doubt`` when it may have committed.
        Timed into ``tapis_store_commit_seconds``; a failure also counts in
        ``tapis_store_write_failures_total``."""
        started = time.perf_counter()
        failed = True
        try:
            written = await self._run_transaction(lane, jobs)
            failed = False
            return written
        except asyncpg.UniqueViolationError:  # refused by the journal key: not a failure
            failed = False
            raise
        finally:
            metrics.observe_commit("postgres", time.perf_counter() - started, not failed)

    async def _run_transaction(self, lane: _Lane, jobs: Sequence[Write]) -> list[bool]:
        try:
            connection = await self._connection(lane)
        except Exception as error:  # no connection: nothing was sent
            raise _WriteFailed(error, in_doubt=False) from error
        appends = [job for job in jobs if isinstance(job, Append)]
        if len(appends) == len(jobs):
            await self._at_commit(connection)
            try:
                return await sql.append(connection, appends, self.fenced)
            except asyncpg.UniqueViolationError:
                raise
            except Exception as error:
                raise _WriteFailed(error, in_doubt=not _refused_by_server(error)) from error
        transaction = connection.transaction()
        try:
            await transaction.start()
            written = await self._write_all(connection, jobs)
        except Exception as error:  # before COMMIT: the database keeps nothing of it
            if _refused_by_server(error):
                with contextlib.suppress(Exception):
                    await transaction.rollback()
            if isinstance(error, asyncpg.UniqueViolationError):
                raise
            raise _WriteFailed(error, in_doubt=False) from error
        await self._at_commit(connection)
        try:
            await transaction.commit()
        except Exception as error:
            raise _WriteFailed(error, in_doubt=not _refused_by_server(error)) from error
        return written

    async def _write_all(self, connection: asyncpg.Connection,
                         jobs: Sequence[Write]) -> list[bool]:
        written = [True] * len(jobs)
        creates = [job for job in jobs if isinstance(job, Create)]
        if creates:
            await sql.create(connection, creates, self.node_id, 1 if self.fenced else 0)
        appends = [(p, job) for p, job in enumerate(jobs) if isinstance(job, Append)]
        if appends:
            outcomes = await sql.append(connection, [job for _, job in appends], self.fenced)
            for (position, _), ok in zip(appends, outcomes, strict=True):
                written[position] = ok
        appended = {(job.game_id, job.index) for p, job in enumerate(jobs)
                    if isinstance(job, Append) and written[p]}
        for position, job in enumerate(jobs):
            if isinstance(job, Probe):
                await sql.probe(connection)
            elif isinstance(job, Snapshot):
                # never checkpoint an input this store did not commit
                committed = ((job.game_id, job.index) in appended
                             or self._appended_to.get(job.game_id, 0) >= job.index)
                written[position] = committed and await sql.snapshot(connection, job)
            elif isinstance(job, Drop):
                written[position] = await sql.drop(connection, job)
            elif isinstance(job, Rest | Wake):
                written[position] = await sql.rest(connection, job)
        return written

    async def _at_commit(self, connection: asyncpg.Connection) -> None:
        """Just before the statement that commits: a connection already lost has sent
        nothing of it, so the database kept nothing (its transaction is rolled back)."""
        if self.failpoint is not None:
            await self.failpoint("commit", connection)
        if not _usable(connection):
            raise _WriteFailed(ConnectionError("the connection to the database was lost "
                                               "before the commit was sent"), in_doubt=False)

    def _record(self, writes: list[_Queued], written: list[bool]) -> None:
        """A transaction committed: each write is done, or was refused by the fence."""
        self.commits += 1
        for queued, ok in zip(writes, written, strict=True):
            job = queued.job
            if not ok:
                queued.error = self._refusal(job)
                if isinstance(job, TableWrite):
                    self._poisoned.add(job.game_id)
                continue
            queued.committed = True
            if isinstance(job, Append):
                self._appended_to[job.game_id] = job.index
            elif isinstance(job, Drop):
                self._appended_to.pop(job.game_id, None)

    def _refusal(self, job: Write) -> JournalConflict:
        """A write refused by the journal key or the fence (never a probe)."""
        if isinstance(job, Create):
            return CreateConflict(f"game {job.game_id}: a table was already created with "
                                  "this request id")
        game_id = job.game_id if isinstance(job, TableWrite) else ""
        if isinstance(job, Append):
            APPENDS_REFUSED.inc()
            log.warning("append_refused", game=game_id, index=job.index, epoch=job.epoch)
        return JournalConflict(f"game {game_id}: the journal refused this "
                               f"{type(job).__name__.lower()} (another writer holds the table)")

    async def _failed(self, lane: _Lane, writes: list[_Queued], failed: _WriteFailed) -> None:
        """A transaction that did not commit (or may have): its writes fail, and a connection
        that did not end with a plain ERROR from the database is closed."""
        logrepeat.limited(log.error, "store_write_failed", error=str(failed.cause)[:200],
                          writes=len(writes), in_doubt=failed.in_doubt)
        if not _refused_by_server(failed.cause):
            await self._close_connection(lane)
        error: StoreError
        if failed.in_doubt:
            error = CommitUnknown(f"the write's commit was cut short (the connection lost, "
                                  f"or no answer in time): it may have been applied "
                                  f"({failed.cause})")
        else:
            error = StoreUnavailable(f"the database refused the write: {failed.cause}")
        for queued in writes:
            queued.error = error

    async def _connection(self, lane: _Lane) -> asyncpg.Connection:
        if lane.connection is not None and not _usable(lane.connection):
            await self._close_connection(lane)
        if lane.connection is None:
            lane.connection = await self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S)
        return lane.connection

    async def _close_connection(self, lane: _Lane) -> None:
        """Drop the lane's connection for good (its holder goes back to the pool)."""
        connection, lane.connection = lane.connection, None
        if connection is None:
            return
        with contextlib.suppress(Exception):  # it may be gone already: never kill the writer
            connection.terminate()
        with contextlib.suppress(Exception):
            await self.pool.release(connection)
