"""The durable store: one SQLite file under the data directory (``--store sqlite``).

Every write goes through one writer thread that group-commits whatever is queued: the first
write it takes, plus every write queued behind it, in one transaction (order preserved). The
awaitable returned to the host completes once that transaction is committed (WAL,
``synchronous=FULL``: fsynced), so an answer is never sent before its input is on disk.
See docs/durability.md for the choice and its measured cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from tapis_service.store import StoredGame

JSON = dict[str, Any]
FILE_NAME = "tapis.sqlite3"
LOCK_NAME = "tapis.lock"
SYNCHRONOUS = "FULL"

log = structlog.get_logger("tapis.store")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS games (
    game_id TEXT PRIMARY KEY,
    created_order INTEGER NOT NULL,
    record TEXT NOT NULL,
    finished INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS journal (
    game_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (game_id, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    game_id TEXT PRIMARY KEY,
    idx INTEGER NOT NULL,
    format INTEGER NOT NULL,
    checksum TEXT NOT NULL,
    data TEXT NOT NULL
);
"""

Write = tuple[str, tuple[Any, ...]]


class _Job:
    """Statements to run in order, and who to tell once they are committed."""

    __slots__ = ("future", "loop", "writes")

    def __init__(self, writes: list[Write], loop: asyncio.AbstractEventLoop | None,
                 future: asyncio.Future[None] | None) -> None:
        self.writes = writes
        self.loop = loop
        self.future = future


def checksum(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _dumps(data: JSON) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


class SqliteStore:
    """Tables, their journals and snapshots in ``<data_dir>/tapis.sqlite3``."""

    def __init__(self, data_dir: Path | str, synchronous: str = SYNCHRONOUS,
                 max_batch: int = 0) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_directory(self.path.parent)
        self.synchronous = synchronous
        self.max_batch = max_batch
        """Writes per transaction at most (0: everything queued; 1: no group commit)."""
        self._connection = self._connect()
        self._connection.executescript(_SCHEMA)
        row = self._connection.execute("SELECT COALESCE(MAX(created_order), 0) FROM games")
        self._order = int(row.fetchone()[0])
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self.commits = 0
        """Transactions committed (each may carry many writes): for measurements."""
        self._writer = threading.Thread(target=self._run, name="tapis-store-writer", daemon=True)
        self._writer.start()

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={self.synchronous}")
        return connection

    # --- the Store hooks (called on the event loop, in order) ----------------------------

    def created(self, game_id: str, record: JSON) -> asyncio.Future[None] | None:
        self._order += 1
        return self._submit([("INSERT OR REPLACE INTO games VALUES (?, ?, ?, 0)",
                              (game_id, self._order, _dumps(record)))])

    def appended(self, game_id: str, index: int, entry: JSON) -> asyncio.Future[None] | None:
        return self._submit([("INSERT OR REPLACE INTO journal VALUES (?, ?, ?)",
                              (game_id, index, _dumps(entry)))])

    def snapshot(self, game_id: str, index: int, data: JSON) -> asyncio.Future[None] | None:
        text = _dumps(data)
        finished = 1 if data.get("finished") else 0
        return self._submit([
            ("INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?, ?, ?)",
             (game_id, index, data.get("format", 0), checksum(text), text)),
            ("UPDATE games SET finished = ? WHERE game_id = ?", (finished, game_id)),
        ])

    def dropped(self, game_id: str) -> asyncio.Future[None] | None:
        return self._submit([(f"DELETE FROM {name} WHERE game_id = ?", (game_id,))
                             for name in ("journal", "snapshots", "games")])

    def load(self) -> list[tuple[str, JSON, JSON | None, list[JSON]]]:
        """Every stored table, oldest first: (game_id, creation record, last snapshot or None,
        the whole journal). A snapshot comes back as ``{"index", "format", "checksum_ok",
        "text"}``; recovery decodes and checks it (see recovery.py)."""
        reader = self._connect()
        try:
            games = reader.execute(
                "SELECT game_id, record FROM games ORDER BY created_order").fetchall()
            snapshots = {row[0]: row[1:] for row in reader.execute(
                "SELECT game_id, idx, format, checksum, data FROM snapshots")}
            journals: dict[str, list[JSON]] = {}
            for game_id, entry in reader.execute(
                    "SELECT game_id, entry FROM journal ORDER BY game_id, idx"):
                journals.setdefault(game_id, []).append(json.loads(entry))
        finally:
            reader.close()
        loaded: list[tuple[str, JSON, JSON | None, list[JSON]]] = []
        for game_id, record in games:
            snap: JSON | None = None
            if game_id in snapshots:
                index, fmt, digest, text = snapshots[game_id]
                snap = {"index": index, "format": fmt, "checksum_ok": checksum(text) == digest,
                        "text": text}
            loaded.append((game_id, json.loads(record), snap, journals.get(game_id, [])))
        return loaded

    def load_game(self, game_id: str) -> StoredGame | None:
        """One stored table as ``load`` gives it (None: not stored). Call it once the writes
        queued before it have settled (their awaitables completed)."""
        reader = self._connect()
        try:
            row = reader.execute("SELECT record FROM games WHERE game_id = ?",
                                 (game_id,)).fetchone()
            if row is None:
                return None
            snap_row = reader.execute(
                "SELECT idx, format, checksum, data FROM snapshots WHERE game_id = ?",
                (game_id,)).fetchone()
            journal = [json.loads(entry) for (entry,) in reader.execute(
                "SELECT entry FROM journal WHERE game_id = ? ORDER BY idx", (game_id,))]
        finally:
            reader.close()
        snap: JSON | None = None
        if snap_row is not None:
            index, fmt, digest, text = snap_row
            snap = {"index": index, "format": fmt, "checksum_ok": checksum(text) == digest,
                    "text": text}
        return json.loads(row[0]), snap, journal

    def close(self) -> None:
        """Commit what is queued, then stop the writer and close the file."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._writer.join()
        self._connection.close()
        os.close(self._lock)

    # --- the writer thread ----------------------------------------------------------------

    def _submit(self, writes: list[Write]) -> asyncio.Future[None] | None:
        if self._closed:
            raise RuntimeError("the store is closed")
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        future = loop.create_future() if loop is not None else None
        self._queue.put(_Job(writes, loop, future))
        return future

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            while not self.max_batch or len(batch) < self.max_batch:  # group commit
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stopping = True
                    break
                batch.append(job)
            error: BaseException | None = None
            try:
                self._connection.execute("BEGIN")
                for job in batch:
                    for sql, params in job.writes:
                        self._connection.execute(sql, params)
                self._connection.execute("COMMIT")
                self.commits += 1
            except sqlite3.Error as failure:
                error = failure
                log.error("store_write_failed", error=str(failure), writes=len(batch))
                if self._connection.in_transaction:
                    self._connection.execute("ROLLBACK")
            for job in batch:
                if job.future is not None and job.loop is not None:
                    _settle_soon(job.loop, job.future, error)


def _lock_directory(data_dir: Path) -> int:
    """One server per data directory: an exclusive lock, released when the process ends."""
    descriptor = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as error:
        os.close(descriptor)
        raise RuntimeError(f"another tapis-server is using {data_dir}") from error
    return descriptor


def _settle_soon(loop: asyncio.AbstractEventLoop, future: asyncio.Future[None],
                 error: BaseException | None) -> None:
    settle: Callable[[], None]
    if error is None:
        def settle() -> None:
            if not future.done():
                future.set_result(None)
    else:
        def settle() -> None:
            if not future.done():
                future.set_exception(error)
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
        loop.call_soon_threadsafe(settle)
