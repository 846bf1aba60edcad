"""The results ledger in PostgreSQL, shared by a cluster's nodes: tables of its own
(``tapis_results``, ``tapis_result_cursors``), created if missing. The backend's cursor row is
locked while a record is filed, so cursors rise in commit order whichever node files; a
``NOTIFY tapis_results`` tells every node's feed which backend has a new record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg

from tapis_service.stores.results import CursorAhead, Filed, Pending, Unacknowledged

CHANNEL = "tapis_results"
_SCHEMA_LOCK = 7_461_706_972
"""An advisory lock taken while the schema is created (one node at a time)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tapis_result_cursors (
    backend TEXT PRIMARY KEY,
    last BIGINT NOT NULL,
    acknowledged BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS tapis_results (
    backend TEXT NOT NULL,
    cursor BIGINT NOT NULL,
    key TEXT NOT NULL,
    game_id TEXT NOT NULL,
    payload BYTEA,
    filed_ms BIGINT NOT NULL,
    PRIMARY KEY (backend, cursor),
    UNIQUE (backend, key)
);
CREATE INDEX IF NOT EXISTS tapis_results_game ON tapis_results (game_id);
CREATE INDEX IF NOT EXISTS tapis_results_unacknowledged ON tapis_results (filed_ms)
    WHERE payload IS NOT NULL;
"""


class PostgresResults:
    """The ledger in the cluster's database (a pool of the caller's)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self._listener: asyncpg.Connection | None = None
        self._notified: Callable[..., None] | None = None

    @classmethod
    async def open(cls, pool: asyncpg.Pool) -> PostgresResults:
        async with pool.acquire() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK)
            await connection.execute(_SCHEMA)
        return cls(pool)

    async def listen(self, wake: Callable[[str], None]) -> None:
        """Call ``wake(backend)`` whenever any node files a record."""
        self._listener = await self.pool.acquire()

        def notified(connection: Any, pid: int, channel: str, backend: str) -> None:
            wake(backend)

        self._notified = notified
        await self._listener.add_listener(CHANNEL, notified)

    async def file(self, backend: str, key: str, game_id: str, payload: bytes,
                   now_ms: int) -> int:
        async with self.pool.acquire() as connection, connection.transaction():
            await connection.execute("INSERT INTO tapis_result_cursors VALUES ($1, 0, 0) "
                                     "ON CONFLICT DO NOTHING", backend)
            await connection.execute("SELECT 1 FROM tapis_result_cursors WHERE backend = $1 "
                                     "FOR UPDATE", backend)
            known = await connection.fetchval(
                "SELECT cursor FROM tapis_results WHERE backend = $1 AND key = $2",
                backend, key)
            if known is not None:
                return int(known)
            cursor = await connection.fetchval(
                "UPDATE tapis_result_cursors SET last = last + 1 WHERE backend = $1 "
                "RETURNING last", backend)
            await connection.execute("INSERT INTO tapis_results VALUES ($1, $2, $3, $4, $5, $6)",
                                     backend, cursor, key, game_id, payload, now_ms)
            await connection.execute("SELECT pg_notify($1, $2)", CHANNEL, backend)
        return int(cursor)

    async def after(self, backend: str, cursor: int, limit: int) -> list[Filed]:
        rows = await self.pool.fetch(
            "SELECT cursor, game_id, payload, filed_ms FROM tapis_results WHERE backend = $1 "
            "AND cursor > $2 AND payload IS NOT NULL ORDER BY cursor LIMIT $3",
            backend, cursor, limit)
        return [Filed(int(r["cursor"]), r["game_id"], bytes(r["payload"]), int(r["filed_ms"]))
                for r in rows]

    async def acknowledge(self, backend: str, cursor: int) -> int:
        async with self.pool.acquire() as connection, connection.transaction():
            row = await connection.fetchrow(
                "SELECT last, acknowledged FROM tapis_result_cursors WHERE backend = $1 "
                "FOR UPDATE", backend)
            last, acknowledged = (row["last"], row["acknowledged"]) if row else (0, 0)
            if cursor > last:
                raise CursorAhead(f"cursor {cursor} is beyond the last record ({last})")
            acknowledged = max(acknowledged, cursor)
            await connection.execute("UPDATE tapis_result_cursors SET acknowledged = $2 "
                                     "WHERE backend = $1", backend, acknowledged)
            await connection.execute(
                "UPDATE tapis_results SET payload = NULL WHERE backend = $1 AND cursor <= $2 "
                "AND payload IS NOT NULL", backend, acknowledged)
        return int(acknowledged)

    async def held_games(self) -> set[str]:
        rows = await self.pool.fetch(
            "SELECT DISTINCT game_id FROM tapis_results WHERE payload IS NOT NULL")
        return {r["game_id"] for r in rows}

    async def expire(self, now_ms: int, max_age_ms: int) -> list[tuple[str, str]]:
        rows = await self.pool.fetch(
            "UPDATE tapis_results SET payload = NULL WHERE payload IS NOT NULL "
            "AND filed_ms < $1 RETURNING backend, game_id", now_ms - max_age_ms)
        return [(r["backend"], r["game_id"]) for r in rows]

    async def unacknowledged(self, before_ms: int, limit: int) -> Unacknowledged:
        async with self.pool.acquire() as connection, connection.transaction(
                isolation="repeatable_read", readonly=True):
            summary = await connection.fetchrow(
                "SELECT COUNT(*) AS count, MIN(filed_ms) AS oldest FROM tapis_results "
                "WHERE payload IS NOT NULL")
            near = await connection.fetch(
                "SELECT backend, cursor, game_id, filed_ms FROM tapis_results "
                "WHERE payload IS NOT NULL AND filed_ms < $1 ORDER BY filed_ms, cursor "
                "LIMIT $2", before_ms, limit)
        oldest = summary["oldest"]
        return Unacknowledged(int(summary["count"]), None if oldest is None else int(oldest),
                              [Pending(r["backend"], int(r["cursor"]), r["game_id"],
                                       int(r["filed_ms"])) for r in near])

    async def forget_game(self, game_id: str) -> None:
        await self.pool.execute("DELETE FROM tapis_results WHERE game_id = $1", game_id)

    async def close(self) -> None:
        """Stop listening (the pool is the store's: it closes it)."""
        listener, notified = self._listener, self._notified
        self._listener = self._notified = None
        if listener is None or notified is None:
            return
        try:
            await listener.remove_listener(CHANNEL, notified)
            await self.pool.release(listener)
        except (asyncpg.InterfaceError, asyncpg.PostgresError, OSError):
            pass  # the pool was closed first: its connections, the listener's too, are gone
