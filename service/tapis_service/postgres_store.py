"""The shared store: PostgreSQL over asyncpg (``--database-url postgresql://...``).

It keeps what the SQLite store keeps (creation records, the journal of inputs, snapshots; the
seat-token hashes and join request ids ride in the journal entries). A table's writes go
through one writer task of a few (``LANES``, picked by the table's id), which group-commits
whatever is queued for it, in order, in one transaction; the awaitable handed to the host
completes once that transaction is committed.

The journal's primary key ``(game_id, idx)`` is the arbiter: an append is a plain INSERT, never
an upsert, so two writers can never both append index N; the loser's write fails with
``JournalConflict``, and every later write this store holds for that table fails too (nothing is
appended past a refused index) until the table is read again with ``load_game``. In a cluster
(``fenced``) an append also carries the table's fencing epoch and is refused in the same
statement when the table's epoch moved on, so a node that lost a table fails fast.

The schema is versioned (``tapis_schema``): missing migrations are applied at open, and a
database whose schema is newer than this server knows is refused (``SchemaError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import structlog
from prometheus_client import Counter

from tapis_service.recovery import RecoveryError
from tapis_service.sqlite_store import checksum
from tapis_service.store import (
    CreateConflict,
    JournalConflict,
    StoredGame,
    StoreError,
    StoreUnavailable,
)

JSON = dict[str, Any]
Loaded = list[tuple[str, JSON, JSON | None, list[JSON]]]

log = structlog.get_logger("tapis.store")

APPENDS_REFUSED = Counter(
    "tapis_appends_refused_total",
    "Journal appends refused because the journal already held the index or the table's "
    "fencing epoch moved on (another node owns the table)")

MIGRATIONS: tuple[str, ...] = (
    # 1: tables, their journals and snapshots; cluster membership and table ownership.
    """
    CREATE TABLE games (
        game_id TEXT PRIMARY KEY,
        created_order BIGSERIAL NOT NULL,
        record TEXT NOT NULL,
        finished BOOLEAN NOT NULL DEFAULT FALSE,
        timed BOOLEAN NOT NULL DEFAULT FALSE,
        owner TEXT,
        epoch BIGINT NOT NULL DEFAULT 0
    );
    CREATE INDEX games_owner ON games (owner);
    CREATE TABLE journal (
        game_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (game_id, idx)
    );
    CREATE TABLE snapshots (
        game_id TEXT PRIMARY KEY,
        idx INTEGER NOT NULL,
        format INTEGER NOT NULL,
        checksum TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE members (
        node_id TEXT PRIMARY KEY,
        address TEXT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    );
    """,
    # 2: a CreateGame request id names one table in the whole database, so a retried create
    # finds its table whichever node it reaches (the oldest table keeps an id used twice).
    """
    ALTER TABLE games ADD COLUMN create_request_id TEXT;
    UPDATE games SET create_request_id = first.request_id
    FROM (SELECT DISTINCT ON (record::json->>'request_id') game_id,
                 record::json->>'request_id' AS request_id
          FROM games WHERE COALESCE(record::json->>'request_id', '') <> ''
          ORDER BY record::json->>'request_id', created_order) AS first
    WHERE games.game_id = first.game_id;
    CREATE UNIQUE INDEX games_create_request ON games (create_request_id)
        WHERE create_request_id IS NOT NULL;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this server writes and reads."""

_MIGRATION_LOCK = 7_261_736  # pg_advisory_xact_lock key: one migrating server at a time


class SchemaError(RecoveryError):
    """The database's schema is not one this server can use; it refuses to start."""


class DatabaseUnreachable(RecoveryError):
    """The database cannot be reached at start; the server refuses to start."""


def redacted(url: str) -> str:
    """The URL without its password (for messages and logs)."""
    return re.sub(r"(://[^:/@?]*):[^@/?]*@", r"\1:***@", url)


def _dumps(data: JSON) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def _timed(record: JSON) -> bool:
    """A table that can move with no client call: it has a bot seat or a turn timer (its
    initial table as ``tapis_engine.table.encode_table`` writes it: seats are
    ``[bot, claimed, taken_over]``)."""
    initial = record.get("initial") or {}
    seats = initial.get("seats") or []
    return bool(initial.get("turn_time_ms")) or any(
        isinstance(seat, list) and seat and seat[0] for seat in seats)


@dataclass(slots=True)
class _Job:
    """One hook call: what to write, and who to tell once committed."""

    kind: str
    """``created``, ``appended``, ``snapshot``, ``dropped``, ``probe`` (a write of the store's
    own) or ``barrier`` (nothing)."""
    game_id: str
    args: tuple[Any, ...]
    future: asyncio.Future[None]
    epoch: int | None = None


@dataclass(eq=False)
class _Lane:
    """One writer: its queue, its task and its connection. A table's writes all go through
    the same lane (by its id), so they commit in the order they were made."""

    queue: deque[_Job] = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    connection: asyncpg.Connection | None = None
    task: asyncio.Future[None] | None = None


@dataclass
class _Batch:
    jobs: list[_Job]
    failed: dict[int, StoreError] = field(default_factory=dict)


_DISCONNECTED = (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError)
ACQUIRE_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 30.0
"""A connection or a statement the database does not give within this fails (never hangs)."""
LANES = 1
"""Writers per store: a table's writes go through one of them (by its id), in order. One: more
lanes measured no better on 2 shared cores, and the reconnect path is only proven with one."""


def _usable(connection: asyncpg.Connection) -> bool:
    """A writer connection still open and still ours (a pool may have taken it back)."""
    try:
        return not connection.is_closed()
    except asyncpg.InterfaceError:  # released back to the pool
        return False


class PostgresStore:
    """Tables, their journals and snapshots in a PostgreSQL database.

    Open it with ``await PostgresStore.open(url)``. ``node_id`` and ``fenced`` are for a
    cluster node: created tables are owned by ``node_id`` at epoch 1, writes check the epoch
    they are given (the one the node holds the table under), and ``load`` gives nothing
    (tables are adopted one by one).
    """

    keeps_journal = True

    def __init__(self, url: str, pool: asyncpg.Pool, node_id: str | None = None,
                 fenced: bool = False, max_batch: int = 0, lanes: int = LANES) -> None:
        self.url = url
        self.pool = pool
        self.node_id = node_id
        self.fenced = fenced
        self.max_batch = max_batch
        """Writes per transaction at most (0: everything queued; 1: no group commit)."""
        self.join_key = b""
        """The secret retried joins derive their tokens from: one per database, so every
        node (and every restart) answers a retried join with the same token."""
        self.relay_key = b""
        """The secret by which cluster nodes know each other's relayed calls (one per
        database)."""
        self.commits = 0
        """Transactions committed (each may carry many writes): for measurements."""
        self._poisoned: set[str] = set()
        self._appended_to: dict[str, int] = {}
        self._preloaded: Loaded | None = None
        self._closed = False
        self._lanes = [_Lane() for _ in range(max(lanes, 1))]
        for lane in self._lanes:
            lane.task = asyncio.ensure_future(self._run(lane))

    @classmethod
    async def open(cls, url: str, node_id: str | None = None, fenced: bool = False,
                   preload: bool = True, max_batch: int = 0) -> PostgresStore:
        """Connect, apply the missing schema migrations, and (``preload``) read every table
        for recovery. ``DatabaseUnreachable`` / ``SchemaError`` when it cannot serve."""
        try:
            pool = await asyncpg.create_pool(url, min_size=1, max_size=LANES + 4, timeout=10,
                                             command_timeout=COMMAND_TIMEOUT_S)
        except (*_DISCONNECTED, asyncpg.PostgresError, TimeoutError) as error:
            raise DatabaseUnreachable(
                f"cannot reach the database at {redacted(url)}: {error}") from error
        try:
            await migrate(pool)
            store = cls(url, pool, node_id=node_id, fenced=fenced, max_batch=max_batch)
            store.join_key = await _secret(pool, "join_key")
            store.relay_key = await _secret(pool, "relay_key")
            if preload:
                store._preloaded = await store._load()
        except BaseException:
            await pool.close()
            raise
        return store

    # --- the Store hooks (called on the event loop, in order) ----------------------------

    def created(self, game_id: str, record: JSON) -> asyncio.Future[None]:
        request_id = record.get("request_id") or None
        return self._submit("created", game_id, (_dumps(record), _timed(record), request_id),
                            1)

    def appended(self, game_id: str, index: int, entry: JSON,
                 epoch: int = 1) -> asyncio.Future[None]:
        return self._submit("appended", game_id, (index, _dumps(entry)), epoch)

    def snapshot(self, game_id: str, index: int, data: JSON,
                 epoch: int = 1) -> asyncio.Future[None]:
        text = _dumps(data)
        return self._submit("snapshot", game_id, (index, int(data.get("format", 0)),
                                                  checksum(text), text,
                                                  bool(data.get("finished"))), epoch)

    def dropped(self, game_id: str, epoch: int = 1) -> asyncio.Future[None]:
        return self._submit("dropped", game_id, (), epoch)

    async def load(self) -> Loaded:
        """Every stored table, oldest first, as read at open (``preload``); once only."""
        loaded, self._preloaded = self._preloaded or [], None
        return loaded

    async def load_all(self) -> Loaded:
        """Every stored table, oldest first, read now (after the writes queued before)."""
        await self.settled()
        return await self._load()

    async def load_game(self, game_id: str) -> StoredGame | None:
        """One stored table as ``load`` gives it (None: not stored), read after every write
        queued before the call. Its refused writes are forgotten: appends may go on from the
        durable prefix read here."""
        await self.settled()
        self._poisoned.discard(game_id)
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            row = await connection.fetchrow("SELECT record FROM games WHERE game_id = $1",
                                            game_id)
            if row is None:
                return None
            snap_row = await connection.fetchrow(
                "SELECT idx, format, checksum, data FROM snapshots WHERE game_id = $1", game_id)
            entries = await connection.fetch(
                "SELECT idx, entry FROM journal WHERE game_id = $1 ORDER BY idx", game_id)
        if entries:
            self._appended_to[game_id] = entries[-1]["idx"]
        return (json.loads(row["record"]), _snapshot(snap_row),
                [json.loads(r["entry"]) for r in entries])

    def probe(self) -> asyncio.Future[None]:
        """A small write through the writer: completes once the database commits again."""
        return self._submit("probe", "", ())

    async def settled(self) -> None:
        """Once every write queued before the call has been committed or refused."""
        loop = asyncio.get_running_loop()
        futures = []
        for lane in self._lanes:
            futures.append(loop.create_future())
            lane.queue.append(_Job("barrier", "", (), futures[-1]))
            lane.wake.set()
        await asyncio.gather(*futures, return_exceptions=True)

    def close(self) -> None:
        """Stop taking writes; ``aclose`` commits what is queued and closes the pool."""
        self._closed = True
        for lane in self._lanes:
            lane.wake.set()

    async def aclose(self) -> None:
        """Commit what is queued, then close every connection."""
        self.close()
        for lane in self._lanes:
            with contextlib.suppress(asyncio.CancelledError):
                await lane.task  # type: ignore[misc]
            if lane.connection is not None:
                with contextlib.suppress(*_DISCONNECTED):
                    await self.pool.release(lane.connection)
                lane.connection = None
        await self.pool.close()

    # --- reading ---------------------------------------------------------------------------

    async def _load(self) -> Loaded:
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            games = await connection.fetch(
                "SELECT game_id, record FROM games ORDER BY created_order")
            snapshots = {r["game_id"]: r for r in await connection.fetch(
                "SELECT game_id, idx, format, checksum, data FROM snapshots")}
            journals: dict[str, list[JSON]] = {}
            for row in await connection.fetch(
                    "SELECT game_id, entry FROM journal ORDER BY game_id, idx"):
                journals.setdefault(row["game_id"], []).append(json.loads(row["entry"]))
        return [(r["game_id"], json.loads(r["record"]), _snapshot(snapshots.get(r["game_id"])),
                 journals.get(r["game_id"], [])) for r in games]

    # --- the writer task --------------------------------------------------------------------

    def _submit(self, kind: str, game_id: str, args: tuple[Any, ...],
                epoch: int | None = None) -> asyncio.Future[None]:
        if self._closed:
            raise RuntimeError("the store is closed")
        future = asyncio.get_running_loop().create_future()
        lane = self._lanes[hash(game_id) % len(self._lanes)]
        lane.queue.append(_Job(kind, game_id, args, future, epoch if self.fenced else None))
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
            jobs: list[_Job] = []
            while lane.queue and (not self.max_batch or len(jobs) < self.max_batch):
                jobs.append(lane.queue.popleft())
            batch = _Batch(jobs)
            try:
                await self._commit(lane, batch)
            except Exception as failure:  # never leave a writer waiting on a dead task
                try:
                    self._fail_all(lane, batch, list(enumerate(batch.jobs)), failure)
                except Exception:
                    for position in range(len(batch.jobs)):
                        batch.failed[position] = StoreUnavailable("the write failed")
            for position, job in enumerate(batch.jobs):
                error = batch.failed.get(position)
                if job.future.done():
                    continue
                if error is None:
                    job.future.set_result(None)
                else:
                    if job.kind not in ("barrier", "probe"):
                        self._poisoned.add(job.game_id)
                    job.future.set_exception(error)
                    job.future.exception()  # a write nobody awaits must not warn

    async def _connection(self, lane: _Lane) -> asyncpg.Connection:
        if lane.connection is not None and not _usable(lane.connection):
            with contextlib.suppress(*_DISCONNECTED, asyncpg.InterfaceError):
                await self.pool.release(lane.connection)
            lane.connection = None
        if lane.connection is None:
            lane.connection = await self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S)
        return lane.connection

    async def _commit(self, lane: _Lane, batch: _Batch) -> None:
        """Every job of the batch in one transaction; if the journal key refuses one, each job
        again in its own, so that only the refused ones (and what follows them) fail."""
        for position, job in enumerate(batch.jobs):
            if job.kind not in ("barrier", "probe") and job.game_id in self._poisoned:
                batch.failed[position] = JournalConflict(
                    f"game {job.game_id}: an earlier write was refused")
        live = [(p, j) for p, j in enumerate(batch.jobs)
                if p not in batch.failed and j.kind != "barrier"]
        if not live:
            return
        try:
            connection = await self._connection(lane)
            refused = await self._write(connection, [j for _, j in live])
        except asyncpg.UniqueViolationError:
            await self._one_by_one(lane, batch, live)
            return
        except (*_DISCONNECTED, asyncpg.PostgresError, TimeoutError) as error:
            self._fail_all(lane, batch, live, error)
            return
        self.commits += 1
        for position, job in live:
            if id(job) in refused:
                batch.failed[position] = self._refusal(job)
            elif job.kind == "appended":
                self._appended_to[job.game_id] = job.args[0]

    async def _one_by_one(self, lane: _Lane, batch: _Batch,
                          live: list[tuple[int, _Job]]) -> None:
        for position, job in live:
            if job.game_id in self._poisoned:
                batch.failed[position] = JournalConflict(
                    f"game {job.game_id}: an earlier write was refused")
                continue
            try:
                connection = await self._connection(lane)
                refused = await self._write(connection, [job])
            except asyncpg.UniqueViolationError:
                refused = {id(job)}
            except (*_DISCONNECTED, asyncpg.PostgresError, TimeoutError) as error:
                self._fail_all(lane, batch, [(p, j) for p, j in live if p >= position], error)
                return
            self.commits += 1
            if refused:
                self._poisoned.add(job.game_id)
                batch.failed[position] = self._refusal(job)
            elif job.kind == "appended":
                self._appended_to[job.game_id] = job.args[0]

    def _refusal(self, job: _Job) -> JournalConflict:
        """A write refused by the journal key or the fence (never a probe)."""
        if job.kind == "created":
            return CreateConflict(f"game {job.game_id}: a table was already created with "
                                  "this request id")
        if job.kind == "appended":
            APPENDS_REFUSED.inc()
            log.warning("append_refused", game=job.game_id, index=job.args[0], epoch=job.epoch)
        return JournalConflict(f"game {job.game_id}: the journal refused this {job.kind} "
                               "(another writer holds the table)")

    def _fail_all(self, lane: _Lane, batch: _Batch, jobs: list[tuple[int, _Job]],
                  error: BaseException) -> None:
        log.error("store_write_failed", error=str(error)[:200], writes=len(jobs))
        if isinstance(error, _DISCONNECTED | asyncpg.InterfaceError) \
                and lane.connection is not None:
            with contextlib.suppress(Exception):  # it may be gone already: never kill the writer
                lane.connection.terminate()
            lane.connection = None
        for position, _ in jobs:
            batch.failed[position] = StoreUnavailable(f"the database refused the write: {error}")

    async def _write(self, connection: asyncpg.Connection, jobs: list[_Job]) -> set[int]:
        """Run the jobs in one transaction; the ids of those refused by fencing (their
        table's epoch moved on, or a snapshot whose input this store did not commit). A batch
        of appends alone (the common case) is one statement: atomic by itself, one round
        trip."""
        if all(j.kind == "appended" for j in jobs):
            return await self._append(connection, jobs)
        async with connection.transaction():
            return await self._write_all(connection, jobs)

    async def _write_all(self, connection: asyncpg.Connection, jobs: list[_Job]) -> set[int]:
        refused: set[int] = set()
        creates = [j for j in jobs if j.kind == "created"]
        appends = [j for j in jobs if j.kind == "appended"]
        if creates:
            await connection.execute(
                "INSERT INTO games (game_id, record, timed, owner, epoch, create_request_id) "
                "SELECT g, r, t, $4, $5, q FROM unnest($1::text[], $2::text[], $3::bool[], "
                "$6::text[]) WITH ORDINALITY AS u(g, r, t, q, n) ORDER BY n",
                [j.game_id for j in creates], [j.args[0] for j in creates],
                [j.args[1] for j in creates], self.node_id, 1 if self.fenced else 0,
                [j.args[2] for j in creates])
        if appends:
            refused |= await self._append(connection, appends)
        committed = {(j.game_id, j.args[0]) for j in appends if id(j) not in refused}
        for job in jobs:
            if job.kind == "probe":  # a real write: a full disk refuses it, a SELECT would pass
                await connection.execute(
                    "INSERT INTO meta VALUES ('probe', now()::text) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value")
                continue
            if job.kind == "snapshot":
                written = await self._snapshot(connection, job, committed)
            elif job.kind == "dropped":
                written = await self._drop(connection, job)
            else:
                continue
            if not written:
                refused.add(id(job))
        return refused

    async def _append(self, connection: asyncpg.Connection, appends: list[_Job]) -> set[int]:
        games = [j.game_id for j in appends]
        indexes = [j.args[0] for j in appends]
        entries = [j.args[1] for j in appends]
        if not self.fenced:
            await connection.execute(
                "INSERT INTO journal (game_id, idx, entry) "
                "SELECT * FROM unnest($1::text[], $2::int[], $3::text[])",
                games, indexes, entries)
            return set()
        rows = await connection.fetch(
            "INSERT INTO journal (game_id, idx, entry) "
            "SELECT u.g, u.i, u.e FROM unnest($1::text[], $2::int[], $3::text[], $4::bigint[]) "
            "AS u(g, i, e, ep) JOIN games ON games.game_id = u.g AND games.epoch = u.ep "
            "RETURNING game_id, idx",
            games, indexes, entries, [j.epoch for j in appends])
        written = {(r["game_id"], r["idx"]) for r in rows}
        return {id(j) for j in appends if (j.game_id, j.args[0]) not in written}

    async def _snapshot(self, connection: asyncpg.Connection, job: _Job,
                        committed: set[tuple[str, int]]) -> bool:
        index, fmt, digest, text, finished = job.args
        if (job.game_id, index) not in committed \
                and self._appended_to.get(job.game_id, -1) < index:
            return False  # never checkpoint an input this store did not commit
        status = await connection.execute(
            "WITH g AS (UPDATE games SET finished = $6 WHERE game_id = $1 "
            "AND ($7::bigint IS NULL OR epoch = $7) RETURNING game_id) "
            "INSERT INTO snapshots (game_id, idx, format, checksum, data) "
            "SELECT $1, $2, $3, $4, $5 FROM g ON CONFLICT (game_id) DO UPDATE SET "
            "idx = EXCLUDED.idx, format = EXCLUDED.format, checksum = EXCLUDED.checksum, "
            "data = EXCLUDED.data",
            job.game_id, index, fmt, digest, text, finished, self._fence(job))
        return bool(status.endswith(" 1"))

    async def _drop(self, connection: asyncpg.Connection, job: _Job) -> bool:
        status = await connection.execute(
            "DELETE FROM games WHERE game_id = $1 AND ($2::bigint IS NULL OR epoch = $2)",
            job.game_id, self._fence(job))
        if not status.endswith(" 1"):
            return False
        for table in ("journal", "snapshots"):
            await connection.execute(f"DELETE FROM {table} WHERE game_id = $1", job.game_id)
        self._appended_to.pop(job.game_id, None)
        return True

    def _fence(self, job: _Job) -> int | None:
        if not self.fenced:
            return None
        return job.epoch if job.epoch is not None else -1


def _snapshot(row: Any) -> JSON | None:
    if row is None:
        return None
    return {"index": row["idx"], "format": row["format"],
            "checksum_ok": checksum(row["data"]) == row["checksum"], "text": row["data"]}


async def _secret(pool: asyncpg.Pool, name: str) -> bytes:
    """The database's secret ``name`` (made by the first server that asks for it)."""
    async with pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
        await connection.execute(
            "INSERT INTO meta VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            name, secrets.token_hex(32))
        value = await connection.fetchval("SELECT value FROM meta WHERE key = $1", name)
    return bytes.fromhex(value)


async def migrate(pool: asyncpg.Pool) -> int:
    """Apply the migrations the database lacks (one server at a time); its version after.
    ``SchemaError`` for a version newer than this server's."""
    async with pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection, connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await connection.execute(
            "CREATE TABLE IF NOT EXISTS tapis_schema (version INTEGER PRIMARY KEY, "
            "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        current = await connection.fetchval(
            "SELECT COALESCE(MAX(version), 0) FROM tapis_schema")
        if current > SCHEMA_VERSION:
            raise SchemaError(
                f"the database's schema is at version {current}, newer than this server's "
                f"({SCHEMA_VERSION}): upgrade the server, or point it at another database")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            await connection.execute(MIGRATIONS[version - 1])
            await connection.execute("INSERT INTO tapis_schema (version) VALUES ($1)", version)
            log.info("schema_migrated", version=version)
        return SCHEMA_VERSION
