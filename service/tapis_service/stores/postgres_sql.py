"""The PostgreSQL store's SQL, all of it: the schema and its migrations, one typed write per
operation with the function that runs it, and the reads.

The writer (``postgres_store``) decides what goes in which transaction and what each outcome
means; nothing here holds state. Every write function runs inside the caller's transaction (or
is one statement, atomic by itself) and says which of its writes the database refused.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog

from tapis_service.stores.store import RecoveryError, SchemaTooNew, StoredGame
from tapis_service.stores.stored_rows import decoded, listing

JSON = dict[str, Any]
Loaded = list[tuple[str, JSON, JSON | None, list[JSON]]]

log = structlog.get_logger("tapis.store")

# --- the writes: one type per operation ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Create:
    """A new table's creation record."""

    game_id: str
    record: str
    """The record as canonical JSON."""
    timed: bool
    """The table can move with no client call (a bot seat or a turn timer)."""
    request_id: str | None
    """The CreateGame request id (None: none given): one table per id and sender in the
    database."""
    scope: str = ""
    """The sender the request id belongs to (``ownership.scope_of``: the backend's name, ""
    without a key)."""


@dataclass(frozen=True, slots=True)
class Append:
    """Input ``index`` of a table's journal; never written over an existing one."""

    game_id: str
    index: int
    entry: str
    epoch: int | None
    """The table's fencing epoch this node holds (fenced stores; None: not fenced)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A table's state after input ``index`` (replaces the previous snapshot)."""

    game_id: str
    index: int
    format: int
    checksum: str
    text: str
    finished: bool
    epoch: int | None


@dataclass(frozen=True, slots=True)
class Drop:
    """A table forgotten: its record, journal and snapshot."""

    game_id: str
    epoch: int | None


@dataclass(frozen=True, slots=True)
class Rest:
    """A table leaves memory: its listing is kept beside it (``resting.py``)."""

    game_id: str
    listing: str
    """The listing as canonical JSON."""
    epoch: int | None


@dataclass(frozen=True, slots=True)
class Wake:
    """A table loaded back from rest changes again: its listing goes (a restart loads it)."""

    game_id: str
    epoch: int | None


@dataclass(frozen=True, slots=True)
class Probe:
    """A write of the store's own: a full disk refuses it, where a SELECT would pass."""


Write = Create | Append | Snapshot | Drop | Rest | Wake | Probe
"""Every write the store makes."""


async def create(connection: asyncpg.Connection, creates: Sequence[Create],
                 owner: str | None, epoch: int) -> None:
    """Insert the tables' records, in order (a request id its sender used before:
    UniqueViolationError)."""
    await connection.execute(
        "INSERT INTO games (game_id, record, timed, owner, epoch, create_request_id, "
        "create_scope) "
        "SELECT g, r, t, $4, $5, q, s FROM unnest($1::text[], $2::text[], $3::bool[], "
        "$6::text[], $7::text[]) WITH ORDINALITY AS u(g, r, t, q, s, n) ORDER BY n",
        [c.game_id for c in creates], [c.record for c in creates],
        [c.timed for c in creates], owner, epoch, [c.request_id for c in creates],
        [c.scope for c in creates])


async def append(connection: asyncpg.Connection, appends: Sequence[Append],
                 fenced: bool) -> list[bool]:
    """Insert the inputs in one statement; for each, whether it was written (a fenced one is
    not when its table's epoch moved on). An index already there: UniqueViolationError."""
    games = [a.game_id for a in appends]
    indexes = [a.index for a in appends]
    entries = [a.entry for a in appends]
    if not fenced:
        await connection.execute(
            "INSERT INTO journal (game_id, idx, entry) "
            "SELECT * FROM unnest($1::text[], $2::int[], $3::text[])",
            games, indexes, entries)
        return [True] * len(appends)
    rows = await connection.fetch(
        "INSERT INTO journal (game_id, idx, entry) "
        "SELECT u.g, u.i, u.e FROM unnest($1::text[], $2::int[], $3::text[], $4::bigint[]) "
        "AS u(g, i, e, ep) JOIN games ON games.game_id = u.g AND games.epoch = u.ep "
        # the table's row stays locked until this commits: a takeover waits for it
        "FOR KEY SHARE OF games RETURNING game_id, idx",
        games, indexes, entries, [a.epoch for a in appends])
    written = {(r["game_id"], r["idx"]) for r in rows}
    return [(a.game_id, a.index) in written for a in appends]


async def snapshot(connection: asyncpg.Connection, write: Snapshot) -> bool:
    """Replace the table's snapshot (and its finished flag); False when the table is gone or
    its epoch moved on."""
    status = await connection.execute(
        "WITH g AS (UPDATE games SET finished = $6 WHERE game_id = $1 "
        "AND ($7::bigint IS NULL OR epoch = $7) RETURNING game_id) "
        "INSERT INTO snapshots (game_id, idx, format, checksum, data) "
        "SELECT $1, $2, $3, $4, $5 FROM g ON CONFLICT (game_id) DO UPDATE SET "
        "idx = EXCLUDED.idx, format = EXCLUDED.format, checksum = EXCLUDED.checksum, "
        "data = EXCLUDED.data",
        write.game_id, write.index, write.format, write.checksum, write.text, write.finished,
        write.epoch)
    return bool(status.endswith(" 1"))


async def drop(connection: asyncpg.Connection, write: Drop) -> bool:
    """Delete the table and all it holds; False when it is gone or its epoch moved on."""
    status = await connection.execute(
        "DELETE FROM games WHERE game_id = $1 AND ($2::bigint IS NULL OR epoch = $2)",
        write.game_id, write.epoch)
    if not status.endswith(" 1"):
        return False
    await connection.execute("DELETE FROM journal WHERE game_id = $1", write.game_id)
    await connection.execute("DELETE FROM snapshots WHERE game_id = $1", write.game_id)
    return True


async def rest(connection: asyncpg.Connection, write: Rest | Wake) -> bool:
    """Keep (``Rest``) or forget (``Wake``) the table's listing; False when the table is gone
    or its epoch moved on."""
    status = await connection.execute(
        "UPDATE games SET listing = $2 WHERE game_id = $1 "
        "AND ($3::bigint IS NULL OR epoch = $3)",
        write.game_id, write.listing if isinstance(write, Rest) else None, write.epoch)
    return bool(status.endswith(" 1"))


async def probe(connection: asyncpg.Connection) -> None:
    """A real write of one row."""
    await connection.execute("INSERT INTO meta VALUES ('probe', now()::text) "
                             "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value")


# --- the reads -------------------------------------------------------------------------------


async def load_all(connection: asyncpg.Connection) -> Loaded:
    """Every stored table not at rest (``resting`` lists those), oldest first: (game_id,
    record, snapshot or None, journal); one whose rows cannot be decoded, marked damaged
    (``stored_rows``: recovery quarantines it). Nothing of a resting table is read."""
    games = await connection.fetch(
        "SELECT game_id, record FROM games WHERE listing IS NULL ORDER BY created_order")
    snapshots = {r["game_id"]: r for r in await connection.fetch(
        "SELECT s.game_id, s.idx, s.format, s.checksum, s.data FROM snapshots s "
        "JOIN games g ON g.game_id = s.game_id WHERE g.listing IS NULL")}
    journals: dict[str, list[tuple[int, str]]] = {}
    for row in await connection.fetch(
            "SELECT j.game_id, j.idx, j.entry FROM journal j JOIN games g "
            "ON g.game_id = j.game_id WHERE g.listing IS NULL ORDER BY j.game_id, j.idx"):
        journals.setdefault(row["game_id"], []).append((row["idx"], row["entry"]))
    return [(r["game_id"], *decoded(r["record"], _snapshot_row(snapshots.get(r["game_id"])),
                                    journals.get(r["game_id"], []))) for r in games]


async def resting(connection: asyncpg.Connection) -> list[tuple[str, JSON | None]]:
    """The tables at rest, oldest first: (game_id, listing; None when it cannot be decoded)."""
    return [(row["game_id"], listing(row["listing"])) for row in await connection.fetch(
        "SELECT game_id, listing FROM games WHERE listing IS NOT NULL ORDER BY created_order")]


async def load_game(connection: asyncpg.Connection, game_id: str
                    ) -> tuple[StoredGame, int] | None:
    """One stored table as ``load_all`` gives it, and its last journal index (0: none); None
    when not stored."""
    row = await connection.fetchrow("SELECT record FROM games WHERE game_id = $1", game_id)
    if row is None:
        return None
    snap_row = await connection.fetchrow(
        "SELECT idx, format, checksum, data FROM snapshots WHERE game_id = $1", game_id)
    entries = await connection.fetch(
        "SELECT idx, entry FROM journal WHERE game_id = $1 ORDER BY idx", game_id)
    stored = decoded(row["record"], _snapshot_row(snap_row),
                     [(r["idx"], r["entry"]) for r in entries])
    return stored, entries[-1]["idx"] if entries else 0


def _snapshot_row(row: Any) -> tuple[int, int, str, str] | None:
    """A snapshot's row as ``stored_rows.decoded`` reads it (None: no snapshot)."""
    if row is None:
        return None
    return row["idx"], row["format"], row["checksum"], row["data"]


async def secret(connection: asyncpg.Connection, name: str) -> bytes:
    """The database's secret ``name`` (made by the first server that asks for it)."""
    await connection.execute("INSERT INTO meta VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                             name, secrets.token_hex(32))
    value = await connection.fetchval("SELECT value FROM meta WHERE key = $1", name)
    return bytes.fromhex(value)


# --- the schema ------------------------------------------------------------------------------

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
    # 3: the listing of a table at rest (not held in memory): NULL while the table must be
    # loaded at start; recovery reads only the listings of the others (resting.py).
    """
    ALTER TABLE games ADD COLUMN listing TEXT;
    """,
    # 4: a CreateGame request id is its sender's (issue 36.3): unique per backend (the
    # record's ownership; "" for the tables created without a key), so another backend's
    # same id creates a table of its own and never finds this one.
    """
    ALTER TABLE games ADD COLUMN create_scope TEXT NOT NULL DEFAULT '';
    UPDATE games SET create_scope = COALESCE(record::json->'ownership'->>'backend', '')
    WHERE create_request_id IS NOT NULL;
    DROP INDEX games_create_request;
    CREATE UNIQUE INDEX games_create_request_by_sender ON games (create_scope, create_request_id)
        WHERE create_request_id IS NOT NULL;
    """,
    # 5: liveness without clocks (cluster/liveness.py): each renewal of a membership gives it
    # a new heartbeat (a number from a sequence: never seen twice, even for a node id that
    # left and came back), and each table taken from a member is counted on its row, which
    # its next renewal reads. Both by trigger, so nodes of schema 4 in a rolling upgrade (which
    # renew and take over by ``expires_at``) keep them true too.
    """
    CREATE SEQUENCE member_beats;
    ALTER TABLE members ADD COLUMN beat BIGINT NOT NULL DEFAULT nextval('member_beats');
    ALTER TABLE members ADD COLUMN taken BIGINT NOT NULL DEFAULT 0;
    CREATE FUNCTION tapis_member_beat() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.taken = OLD.taken THEN
            NEW.beat := nextval('member_beats');
        END IF;
        RETURN NEW;
    END $$;
    CREATE TRIGGER members_beat BEFORE UPDATE ON members
        FOR EACH ROW EXECUTE FUNCTION tapis_member_beat();
    CREATE FUNCTION tapis_count_takeover() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF OLD.owner IS NOT NULL AND NEW.owner IS NOT NULL AND NEW.owner <> OLD.owner THEN
            UPDATE members SET taken = taken + 1 WHERE node_id = OLD.owner;
        END IF;
        RETURN NEW;
    END $$;
    CREATE TRIGGER games_takeover AFTER UPDATE OF owner ON games
        FOR EACH ROW EXECUTE FUNCTION tapis_count_takeover();
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this server writes and reads."""

_MIGRATION_LOCK = 7_261_736  # pg_advisory_xact_lock key: one migrating server at a time


class SchemaError(SchemaTooNew, RecoveryError):
    """The database's schema is newer than this server's; it refuses to start."""


async def migrate(pool: asyncpg.Pool, timeout: float) -> int:
    """Apply the migrations the database lacks (one server at a time); its version after.
    ``SchemaError`` for a version newer than this server's."""
    async with pool.acquire(timeout=timeout) as connection, connection.transaction():
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
