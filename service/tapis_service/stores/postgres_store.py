"""The shared store: PostgreSQL over asyncpg (``--database-url postgresql://...``).

It keeps what the SQLite store keeps (creation records, the journal of inputs, snapshots, the
listing of a table at rest; the seat-token hashes and join request ids ride in the journal
entries). Each hook call becomes one
typed write (``postgres_sql``: one type and one function per operation), handed to the writer
(``postgres_writer``), which group-commits what is queued for a table, in order; the awaitable
handed to the host completes once its transaction is committed, or fails saying whether the
write was not applied (``StoreUnavailable``) or may have been (``CommitUnknown``).

The journal's primary key ``(game_id, idx)`` is the arbiter: an append is a plain INSERT, never
an upsert, so two writers can never both append index N; the loser's write fails with
``JournalConflict``, and every later write this store holds for that table fails too (nothing is
appended past a refused index) until the table is read again with ``load_game``. In a cluster
(``fenced``) an append also carries the table's fencing epoch and is refused in the same
statement when the table's epoch moved on, so a node that lost a table fails fast.

The schema is versioned (``tapis_schema``): missing migrations are applied at open, and a
database whose schema is newer than this server knows is refused (``SchemaError``).

A database that has served is marked so outside its tables (the database-level setting
``tapis.served``, which a ``DROP SCHEMA``, a ``DROP TABLE`` or a ``TRUNCATE`` leaves): opened
again without its tables, or with its secrets gone, it is refused (``StoreCorrupt``) rather
than started empty with new keys, as an emptied SQLite file is. So is a database whose tables
hold games but whose secrets are missing (a half-done restore).
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import structlog

from tapis_service.settings import redacted
from tapis_service.stores import postgres_sql as sql
from tapis_service.stores.checksums import canonical_json, checksum
from tapis_service.stores.postgres_sql import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Append,
    Create,
    Drop,
    Loaded,
    Probe,
    Rest,
    SchemaError,
    Snapshot,
    Wake,
)
from tapis_service.stores.postgres_writer import ACQUIRE_TIMEOUT_S, Failpoint, Writer
from tapis_service.stores.store import RecoveryError, StoreCorrupt, StoredGame, StoreUnavailable

__all__ = ["ACQUIRE_TIMEOUT_S", "DATABASE_ERRORS", "MIGRATIONS", "SCHEMA_VERSION",
           "DatabaseUnreachable", "PostgresStore", "SchemaError", "redacted"]

JSON = dict[str, Any]

COMMAND_TIMEOUT_S = 30.0
"""A statement the database does not answer within this fails (never hangs)."""
FENCED_SETTINGS = {"idle_in_transaction_session_timeout": "10000"}
"""A cluster node's sessions: a transaction left open by a frozen node (its appends lock
their tables' rows against a takeover) is ended by the database after 10 s."""
LANES = 1
"""Writers per store: a table's writes go through one of them (by its id), in order. One: more
lanes measured no better on 2 shared cores, and the reconnect path is only proven with one."""


DATABASE_ERRORS: tuple[type[Exception], ...] = (
    OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError,
    asyncpg.InternalClientError)
"""Whatever a query may raise when the database is away, restarting or breaks a connection:
an error it answered (``PostgresError``, ``ConnectionDoesNotExistError`` among them), a
client-side one (``InterfaceError``; ``InternalClientError``: a connection left in a state it
cannot leave, "cannot switch to state 12", ``ProtocolError``), a socket's (``OSError``) or a
timeout (a pool's acquire, a statement's)."""


class DatabaseUnreachable(RecoveryError):
    """The database cannot be reached at start; the server refuses to start."""


def _timed(record: JSON) -> bool:
    """A table that can move with no client call: it has a bot seat or a turn timer (its
    initial table as ``tapis_engine.table_codec.encode_table`` writes it: seats are
    ``[bot, claimed, taken_over]``)."""
    initial = record.get("initial") or {}
    seats = initial.get("seats") or []
    return bool(initial.get("turn_time_ms")) or any(
        isinstance(seat, list) and seat and seat[0] for seat in seats)


SERVED = "tapis.served"
"""The database-level setting a database that has served carries (outside its tables)."""
SECRETS = ("join_key", "relay_key")
log = structlog.get_logger("tapis.store")


async def _refuse_lost_tables(connection: asyncpg.Connection, url: str) -> None:
    """``StoreCorrupt`` for a database that has served (``tapis.served``) but lost its tables
    or its secrets, and for one whose tables hold games without their secrets."""
    served = await connection.fetchval("SELECT current_setting($1, true)", SERVED) == "on"
    has_meta = await connection.fetchval("SELECT to_regclass('meta') IS NOT NULL")
    has_games = await connection.fetchval("SELECT to_regclass('games') IS NOT NULL")
    secrets = set()
    if has_meta:
        secrets = {row["key"] for row in await connection.fetch(
            "SELECT key FROM meta WHERE key = ANY($1::text[])", list(SECRETS))}
    games = has_games and await connection.fetchval("SELECT EXISTS (SELECT 1 FROM games)")
    # a database from before the relay key has its join key alone; one marked has both
    missing = [name for name in (SECRETS if served else SECRETS[:1]) if name not in secrets]
    where = redacted(url)
    if served and not (has_meta and has_games):
        raise StoreCorrupt(
            f"{where}: the Tapis tables are gone, but this database has served before "
            f"({SERVED} is set); refusing to start empty with new keys: restore it "
            f"(docs/operations.md), or to start afresh on purpose: ALTER DATABASE ... RESET "
            f"{SERVED}")
    if (served or games) and missing:
        raise StoreCorrupt(
            f"{where}: the meta table has lost {' and '.join(missing)}, but this database "
            f"{f'has served before ({SERVED} is set)' if served else 'holds tables'}; "
            f"refusing to start with "
            f"new keys (retried joins and the cluster's relays would fail): restore meta "
            f"from the same dump as the tables")


async def _mark_served(connection: asyncpg.Connection) -> None:
    """Mark the database as one that has served (once; needs its owner's rights: without
    them, one warning, and an emptied database goes unnoticed)."""
    if await connection.fetchval("SELECT current_setting($1, true)", SERVED) == "on":
        return
    name = await connection.fetchval("SELECT current_database()")
    quoted = '"' + str(name).replace('"', '""') + '"'
    try:
        await connection.execute(f"ALTER DATABASE {quoted} SET {SERVED} = 'on'")
    except asyncpg.PostgresError as error:
        log.warning("database_not_marked", setting=SERVED, error=str(error)[:200])


def _scope(record: JSON) -> str:
    """Whose the table's CreateGame request id is: its backend's name ("" without a key)."""
    ownership = record.get("ownership") or {}
    return str(ownership.get("backend") or "")


class PostgresStore:
    """Tables, their journals and snapshots in a PostgreSQL database.

    Open it with ``await PostgresStore.open(url)``. ``node_id`` and ``fenced`` are for a
    cluster node: created tables are owned by ``node_id`` at epoch 1, writes check the epoch
    they are given (the one the node holds the table under), and ``load`` gives nothing
    (tables are adopted one by one).
    """

    keeps_journal = True

    def __init__(self, url: str, pool: asyncpg.Pool, node_id: str | None = None,
                 fenced: bool = False, max_batch: int = 0, lanes: int = LANES,
                 failpoint: Failpoint | None = None) -> None:
        self.url = url
        self.pool = pool
        self.node_id = node_id
        self.fenced = fenced
        self.join_key = b""
        """The secret retried joins derive their tokens from: one per database, so every
        node (and every restart) answers a retried join with the same token."""
        self.relay_key = b""
        """The secret by which cluster nodes know each other's relayed calls (one per
        database)."""
        self.writer = Writer(pool, node_id, fenced, max_batch, lanes, failpoint)
        self._preloaded: Loaded | None = None

    @classmethod
    async def open(cls, url: str, node_id: str | None = None, fenced: bool = False,
                   preload: bool = True, max_batch: int = 0,
                   failpoint: Failpoint | None = None) -> PostgresStore:
        """Connect, apply the missing schema migrations, and (``preload``) read every table
        for recovery. ``DatabaseUnreachable`` / ``SchemaError`` when it cannot serve."""
        try:
            pool = await asyncpg.create_pool(url, min_size=1, max_size=LANES + 4, timeout=10,
                                             command_timeout=COMMAND_TIMEOUT_S,
                                             server_settings=FENCED_SETTINGS if fenced else None)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError,
                TimeoutError) as error:
            raise DatabaseUnreachable(
                f"cannot reach the database at {redacted(url)}: {error}") from error
        try:
            async with pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
                await _refuse_lost_tables(connection, url)
            await sql.migrate(pool, ACQUIRE_TIMEOUT_S)
            store = cls(url, pool, node_id=node_id, fenced=fenced, max_batch=max_batch,
                        failpoint=failpoint)
            async with pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
                store.join_key = await sql.secret(connection, "join_key")
                store.relay_key = await sql.secret(connection, "relay_key")
                await _mark_served(connection)
            if preload:
                store._preloaded = await store._load()
        except BaseException:
            await pool.close()
            raise
        return store

    # --- the Store hooks (called on the event loop, in order) ----------------------------

    def created(self, game_id: str, record: JSON) -> asyncio.Future[None]:
        return self.writer.submit(Create(game_id, canonical_json(record), _timed(record),
                                         record.get("request_id") or None,
                                         _scope(record)))

    def appended(self, game_id: str, index: int, entry: JSON,
                 epoch: int = 1) -> asyncio.Future[None]:
        return self.writer.submit(Append(game_id, index, canonical_json(entry),
                                         self._fence(epoch)))

    def snapshot(self, game_id: str, index: int, data: JSON,
                 epoch: int = 1) -> asyncio.Future[None]:
        text = canonical_json(data)
        return self.writer.submit(Snapshot(game_id, index, int(data.get("format", 0)),
                                           checksum(text), text, bool(data.get("finished")),
                                           self._fence(epoch)))

    def dropped(self, game_id: str, epoch: int = 1) -> asyncio.Future[None]:
        return self.writer.submit(Drop(game_id, self._fence(epoch)))

    def rested(self, game_id: str, listing: JSON, epoch: int = 1) -> asyncio.Future[None]:
        return self.writer.submit(Rest(game_id, canonical_json(listing), self._fence(epoch)))

    def woken(self, game_id: str, epoch: int = 1) -> asyncio.Future[None]:
        return self.writer.submit(Wake(game_id, self._fence(epoch)))

    async def resting(self) -> list[tuple[str, JSON | None]]:
        """The tables at rest, oldest first: (game_id, listing; None when it cannot be
        decoded: the host loads that table instead). Nothing else of them is read. None on a
        cluster node (``fenced``): it adopts tables one by one, those at rest too."""
        if self.fenced:
            return []
        await self.settled()
        try:
            async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
                return await sql.resting(connection)
        except DATABASE_ERRORS as error:
            raise StoreUnavailable(f"the database cannot be read: {str(error)[:200]}") from error

    def probe(self) -> asyncio.Future[None]:
        """A small write through the writer: completes once the database commits again."""
        return self.writer.submit(Probe())

    def _fence(self, epoch: int) -> int | None:
        """The epoch a write is checked against (None: an unfenced store checks none)."""
        return epoch if self.fenced else None

    async def load(self) -> Loaded:
        """Every stored table not at rest, oldest first, as read at open (``preload``); once
        only."""
        loaded, self._preloaded = self._preloaded or [], None
        return loaded

    async def load_all(self) -> Loaded:
        """Every stored table not at rest, oldest first, read now (after the writes queued
        before)."""
        await self.settled()
        return await self._load()

    async def load_game(self, game_id: str) -> StoredGame | None:
        """One stored table as ``load`` gives it (None: not stored), read after every write
        queued before the call. Its refused writes are forgotten: appends may go on from the
        durable prefix read here."""
        await self.settled()
        try:
            async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
                found = await sql.load_game(connection, game_id)
        except DATABASE_ERRORS as error:
            raise StoreUnavailable(f"the database cannot be read: {str(error)[:200]}") from error
        if found is None:
            return None
        stored, last_index = found
        self.writer.read_again(game_id, last_index)
        return stored

    @property
    def commits(self) -> int:
        """Transactions committed (each may carry many writes): for measurements."""
        return self.writer.commits

    async def settled(self) -> None:
        """Once every write queued before the call has been committed or refused."""
        await self.writer.settled()

    def close(self) -> None:
        """Stop taking writes; ``aclose`` commits what is queued and closes the pool."""
        self.writer.close()

    async def aclose(self) -> None:
        """Commit what is queued, then close every connection."""
        await self.writer.aclose()
        await self.pool.close()

    def terminate(self) -> None:
        """Close every connection at once, waiting for nothing (a stop whose database does
        not answer): what is queued is not committed, and was not acknowledged."""
        self.writer.stop_now()
        self.pool.terminate()

    async def _load(self) -> Loaded:
        async with self.pool.acquire(timeout=ACQUIRE_TIMEOUT_S) as connection:
            return await sql.load_all(connection)
