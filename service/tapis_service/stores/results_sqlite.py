"""The results ledger in SQLite: a file of its own beside the store's (``results.sqlite3``), so
the journal's writer and its format are untouched. WAL and ``synchronous=FULL``: a filed record
is on disk before ``file`` returns. Calls run in a worker thread, one at a time (records are
filed once per game: this is not a hot path)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tapis_service.stores.results import CursorAhead, Filed, Pending, Unacknowledged

FILE_NAME = "results.sqlite3"
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS result_cursors (
    backend TEXT PRIMARY KEY,
    last INTEGER NOT NULL,
    acknowledged INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    backend TEXT NOT NULL,
    cursor INTEGER NOT NULL,
    key TEXT NOT NULL,
    game_id TEXT NOT NULL,
    payload BLOB,
    filed_ms INTEGER NOT NULL,
    PRIMARY KEY (backend, cursor),
    UNIQUE (backend, key)
);
CREATE INDEX IF NOT EXISTS results_game ON results (game_id);
CREATE INDEX IF NOT EXISTS results_unacknowledged ON results (filed_ms)
    WHERE payload IS NOT NULL;
"""


def _file(db: sqlite3.Connection, backend: str, key: str, game_id: str, payload: bytes,
          now_ms: int) -> int:
    known = db.execute("SELECT cursor FROM results WHERE backend = ? AND key = ?",
                       (backend, key)).fetchone()
    if known is not None:
        return int(known[0])
    db.execute("INSERT OR IGNORE INTO result_cursors VALUES (?, 0, 0)", (backend,))
    (cursor,) = db.execute("UPDATE result_cursors SET last = last + 1 WHERE backend = ? "
                           "RETURNING last", (backend,)).fetchone()
    db.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?)",
               (backend, cursor, key, game_id, payload, now_ms))
    return int(cursor)


def _acknowledge(db: sqlite3.Connection, backend: str, cursor: int) -> int:
    row = db.execute("SELECT last, acknowledged FROM result_cursors WHERE backend = ?",
                     (backend,)).fetchone()
    last, acknowledged = row if row is not None else (0, 0)
    if cursor > last:
        raise CursorAhead(f"cursor {cursor} is beyond the last record ({last})")
    acknowledged = max(acknowledged, cursor)
    db.execute("UPDATE result_cursors SET acknowledged = ? WHERE backend = ?",
               (acknowledged, backend))
    db.execute("UPDATE results SET payload = NULL WHERE backend = ? AND cursor <= ? "
               "AND payload IS NOT NULL", (backend, acknowledged))
    return int(acknowledged)


def _expire(db: sqlite3.Connection, now_ms: int, max_age_ms: int) -> list[tuple[str, str]]:
    return [(str(b), str(g)) for b, g in db.execute(
        "UPDATE results SET payload = NULL WHERE payload IS NOT NULL AND filed_ms < ? "
        "RETURNING backend, game_id", (now_ms - max_age_ms,)).fetchall()]


def _unacknowledged(db: sqlite3.Connection, before_ms: int, limit: int) -> Unacknowledged:
    count, oldest = db.execute("SELECT COUNT(*), MIN(filed_ms) FROM results "
                               "WHERE payload IS NOT NULL").fetchone()
    near = db.execute("SELECT backend, cursor, game_id, filed_ms FROM results "
                      "WHERE payload IS NOT NULL AND filed_ms < ? ORDER BY filed_ms, cursor "
                      "LIMIT ?", (before_ms, limit)).fetchall()
    return Unacknowledged(int(count), None if oldest is None else int(oldest),
                          [Pending(str(b), int(c), str(g), int(t)) for b, c, g, t in near])


class SqliteResults:
    """The ledger in ``data_dir/results.sqlite3``. A record acknowledged or expired keeps its
    row, without its payload, until its table is forgotten."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._lock = asyncio.Lock()

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in one transaction on the writer thread, one at a time. The connection is
        free again only when the thread is done: a caller cancelled meanwhile (a stream
        closed, the server stopping) leaves its transaction to finish, still holding it."""
        await self._lock.acquire()
        try:
            job = asyncio.ensure_future(asyncio.to_thread(self._transaction, work))
        except BaseException:
            self._lock.release()
            raise
        job.add_done_callback(self._finished)
        return await asyncio.shield(job)

    def _finished(self, job: asyncio.Future[Any]) -> None:
        self._lock.release()
        if not job.cancelled():
            job.exception()  # retrieved: a cancelled caller's failure is not reported twice

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            result = work(self._db)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return result

    async def file(self, backend: str, key: str, game_id: str, payload: bytes,
                   now_ms: int) -> int:
        return await self._run(lambda db: _file(db, backend, key, game_id, payload, now_ms))

    async def after(self, backend: str, cursor: int, limit: int) -> list[Filed]:
        rows = await self._run(lambda db: db.execute(
            "SELECT cursor, game_id, payload, filed_ms FROM results WHERE backend = ? "
            "AND cursor > ? AND payload IS NOT NULL ORDER BY cursor LIMIT ?",
            (backend, cursor, limit)).fetchall())
        return [Filed(int(c), str(g), bytes(p), int(t)) for c, g, p, t in rows]

    async def acknowledge(self, backend: str, cursor: int) -> int:
        return await self._run(lambda db: _acknowledge(db, backend, cursor))

    async def held_games(self) -> set[str]:
        rows = await self._run(lambda db: db.execute(
            "SELECT DISTINCT game_id FROM results WHERE payload IS NOT NULL").fetchall())
        return {str(g) for (g,) in rows}

    async def expire(self, now_ms: int, max_age_ms: int) -> list[tuple[str, str]]:
        return await self._run(lambda db: _expire(db, now_ms, max_age_ms))

    async def unacknowledged(self, before_ms: int, limit: int) -> Unacknowledged:
        return await self._run(lambda db: _unacknowledged(db, before_ms, limit))

    async def forget_game(self, game_id: str) -> None:
        await self._run(lambda db: db.execute("DELETE FROM results WHERE game_id = ?",
                                              (game_id,)))

    async def close(self) -> None:
        async with self._lock:
            self._db.close()
