"""The durable store: one SQLite file under the data directory (``--store sqlite``).

Every write goes through one writer thread that group-commits whatever is queued: the first
write it takes, plus every write queued behind it, in one transaction (order preserved). The
awaitable returned to the host completes once that transaction is committed (WAL,
``synchronous=FULL``: fsynced), so an answer is never sent before its input is on disk.
See docs/durability.md for the choice and its measured cost.

The journal has no holes by construction: input N of a game is inserted only if input N-1 (or,
for the first, the game's creation record) is already there, and never over an existing one.
Each write runs in a savepoint of its own, so one refused write never takes the others of its
transaction with it; a transaction that cannot commit (disk full, I/O error) fails every write
it carried with ``StoreUnavailable``. A file that cannot be read is ``StoreCorrupt``.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from tapis_service.store import (
    JournalConflict,
    StoreCorrupt,
    StoredGame,
    StoreError,
    StoreInUse,
    StoreUnavailable,
)

JSON = dict[str, Any]
FILE_NAME = "tapis.sqlite3"
LOCK_NAME = "tapis.lock"
USED_MARKER = "join.key"
"""A file every data directory that has served holds: with it, a missing or empty database is
damage, not a fresh install."""
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
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

_APPEND = """INSERT INTO journal SELECT ?1, ?2, ?3
WHERE (?2 = 1 AND EXISTS (SELECT 1 FROM games WHERE game_id = ?1))
   OR EXISTS (SELECT 1 FROM journal WHERE game_id = ?1 AND idx = ?2 - 1)"""
"""Input N only after input N-1 (input 1 only after the creation record): no holes."""

Write = tuple[str, tuple[Any, ...], str]
"""(SQL, parameters, what it means if it changes no row: "" when that is fine)."""

Failpoint = Callable[[str], None]
"""Called by the writer at ``"commit"`` just before each COMMIT: raising ``sqlite3.Error`` there
makes that transaction fail as a full disk would (tests inject faults this way)."""


class _Job:
    """Statements to run in order, and who to tell once they are committed."""

    __slots__ = ("future", "loop", "writes")

    def __init__(self, writes: list[Write], loop: asyncio.AbstractEventLoop | None,
                 future: asyncio.Future[None] | None) -> None:
        self.writes = writes
        self.loop = loop
        self.future = future


def _dumps(data: JSON) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def checksum(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class SqliteStore:
    """Tables, their journals and snapshots in ``<data_dir>/tapis.sqlite3``."""

    keeps_journal = True

    def __init__(self, data_dir: Path | str, synchronous: str = SYNCHRONOUS,
                 max_batch: int = 0, failpoint: Failpoint | None = None) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self.path = Path(data_dir) / FILE_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_directory(self.path.parent)
        self.synchronous = synchronous
        self.max_batch = max_batch
        """Writes per transaction at most (0: everything queued; 1: no group commit)."""
        self.failpoint = failpoint
        try:
            self._refuse_lost_file()
            self._connection = self._connect()
            self._connection.executescript(_SCHEMA)
            row = self._connection.execute("SELECT COALESCE(MAX(created_order), 0) FROM games")
            self._order = int(row.fetchone()[0])
        except sqlite3.Error as error:
            os.close(self._lock)
            raise StoreCorrupt(f"{self.path}: cannot be read as a Tapis store ({error})") \
                from error
        except StoreCorrupt:
            os.close(self._lock)
            raise
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self.commits = 0
        """Transactions committed (each may carry many writes): for measurements."""
        self._writer = threading.Thread(target=self._run, name="tapis-store-writer", daemon=True)
        self._writer.start()

    def _refuse_lost_file(self) -> None:
        """A data directory that has served before must still have its database."""
        if not (self.path.parent / USED_MARKER).exists():
            return
        if not self.path.exists():
            raise StoreCorrupt(f"{self.path}: missing, but {self.path.parent} has served "
                               f"before ({USED_MARKER} is there); refusing to start empty")
        if self.path.stat().st_size == 0:
            raise StoreCorrupt(f"{self.path}: empty (0 bytes), but {self.path.parent} has "
                               f"served before ({USED_MARKER} is there); refusing to start empty")

    def _reader(self) -> sqlite3.Connection:
        """A connection that reads text columns as bytes: one row that is not UTF-8 damages
        its game (quarantined), not the whole file."""
        reader = self._connect()
        reader.text_factory = bytes
        return reader

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={self.synchronous}")
        return connection

    # --- the Store hooks (called on the event loop, in order) ----------------------------

    def created(self, game_id: str, record: JSON) -> asyncio.Future[None]:
        self._order += 1
        return self._submit([("INSERT INTO games VALUES (?, ?, ?, 0)",
                              (game_id, self._order, _dumps(record)), "")])

    def appended(self, game_id: str, index: int, entry: JSON,
                 epoch: int = 1) -> asyncio.Future[None]:
        return self._submit([(_APPEND, (game_id, index, _dumps(entry)),
                              f"game {game_id}: input {index - 1} is not committed")])

    def snapshot(self, game_id: str, index: int, data: JSON,
                 epoch: int = 1) -> asyncio.Future[None]:
        text = _dumps(data)
        finished = 1 if data.get("finished") else 0
        return self._submit([
            ("INSERT OR REPLACE INTO snapshots SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS "
             "(SELECT 1 FROM journal WHERE game_id = ?1 AND idx = ?2)",
             (game_id, index, data.get("format", 0), checksum(text), text),
             f"game {game_id}: input {index} is not committed"),
            ("UPDATE games SET finished = ? WHERE game_id = ?", (finished, game_id), ""),
        ])

    def dropped(self, game_id: str, epoch: int = 1) -> asyncio.Future[None]:
        return self._submit([(f"DELETE FROM {name} WHERE game_id = ?", (game_id,), "")
                             for name in ("journal", "snapshots", "games")])

    def probe(self) -> asyncio.Future[None]:
        """A small write of its own: completes once the store commits writes again."""
        return self._submit([("INSERT OR REPLACE INTO meta VALUES ('probe', ?)",
                              (str(self.commits),), "")])

    async def load(self) -> list[tuple[str, JSON, JSON | None, list[JSON]]]:
        """Every stored table, oldest first: (game_id, creation record, last snapshot or None,
        the whole journal). A snapshot comes back as ``{"index", "format", "checksum_ok",
        "text"}``; recovery decodes and checks it (see recovery.py). A table whose rows cannot
        be decoded comes back as ``({"damaged": why}, None, [])``: recovery quarantines it. A
        file that cannot be read raises ``StoreCorrupt``."""
        try:
            reader = self._reader()
            try:
                games = reader.execute(
                    "SELECT game_id, record FROM games ORDER BY created_order").fetchall()
                snapshots = {row[0]: row[1:] for row in reader.execute(
                    "SELECT game_id, idx, format, checksum, data FROM snapshots")}
                journals: dict[str, list[tuple[int, str]]] = {}
                for game_id, index, entry in reader.execute(
                        "SELECT game_id, idx, entry FROM journal ORDER BY game_id, idx"):
                    journals.setdefault(game_id, []).append((index, entry))
            finally:
                reader.close()
        except sqlite3.Error as error:
            raise StoreCorrupt(f"{self.path}: cannot be read ({_short(error)})") from error
        loaded: list[tuple[str, JSON, JSON | None, list[JSON]]] = []
        for raw_id, record in games:
            row = snapshots.get(raw_id)
            game_id = _text(raw_id)
            loaded.append((game_id, *_decoded(game_id, record, row, journals.get(raw_id, []))))
        return loaded

    async def load_game(self, game_id: str) -> StoredGame | None:
        """One stored table as ``load`` gives it (None: not stored). Call it once the writes
        queued before it have settled (their awaitables completed)."""
        try:
            reader = self._reader()
            try:
                row = reader.execute("SELECT record FROM games WHERE game_id = ?",
                                     (game_id,)).fetchone()
                if row is None:
                    return None
                snap_row = reader.execute(
                    "SELECT idx, format, checksum, data FROM snapshots WHERE game_id = ?",
                    (game_id,)).fetchone()
                journal = reader.execute(
                    "SELECT idx, entry FROM journal WHERE game_id = ? ORDER BY idx",
                    (game_id,)).fetchall()
            finally:
                reader.close()
        except sqlite3.Error as error:
            raise StoreUnavailable(f"{self.path}: cannot be read ({_short(error)})") from error
        return _decoded(game_id, row[0], snap_row, journal)

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

    def _submit(self, writes: list[Write]) -> asyncio.Future[None]:
        if self._closed:
            raise RuntimeError("the store is closed")
        loop = self._loop
        if loop is None or not loop.is_running():  # looked up once per loop: on Python 3.11
            loop = self._loop = asyncio.get_running_loop()  # each lookup is a getpid call
        future = loop.create_future()
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
            outcomes = self._commit(batch)
            for job, outcome in zip(batch, outcomes, strict=True):
                if job.future is not None and job.loop is not None:
                    _settle_soon(job.loop, job.future, outcome)

    def _commit(self, batch: list[_Job]) -> list[StoreError | None]:
        """One transaction for the batch, one savepoint per job: each job's outcome."""
        outcomes: list[StoreError | None] = [None] * len(batch)
        connection = self._connection
        try:
            connection.execute("BEGIN")
            for position, job in enumerate(batch):
                connection.execute("SAVEPOINT job")
                try:
                    for sql, params, unless_changed in job.writes:
                        changed = connection.execute(sql, params).rowcount
                        if unless_changed and changed == 0:
                            raise StoreUnavailable(unless_changed)
                except sqlite3.IntegrityError as error:
                    outcomes[position] = JournalConflict(str(error))
                    connection.execute("ROLLBACK TO job")
                except StoreUnavailable as refused:
                    outcomes[position] = refused
                    connection.execute("ROLLBACK TO job")
                connection.execute("RELEASE job")
            if self.failpoint is not None:
                self.failpoint("commit")
            connection.execute("COMMIT")
            self.commits += 1
        except sqlite3.Error as failure:
            log.error("store_write_failed", error=str(failure), writes=len(batch))
            with contextlib.suppress(sqlite3.Error):
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
            unavailable = StoreUnavailable(f"{self.path}: {failure}")
            return [unavailable for _ in batch]
        return outcomes


def _lock_directory(data_dir: Path) -> int:
    """One server per data directory: an exclusive lock, released when the process ends."""
    descriptor = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as error:
        os.close(descriptor)
        raise StoreInUse(f"another tapis-server is using {data_dir} ({LOCK_NAME} is "
                         "locked)") from error
    return descriptor


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _short(error: BaseException) -> str:
    """An error's text cut short: SQLite may quote a whole stored row in it."""
    text = str(error)
    return text if len(text) <= 80 else text[:80] + "…"


def _decoded(game_id: str, record: bytes | str, snapshot_row: tuple[Any, ...] | None,
             journal: Sequence[tuple[int, bytes | str]]) -> StoredGame:
    """Decode one table's rows; a table that cannot be decoded is marked damaged. Messages
    never quote the stored text (it holds request ids and cards)."""
    snap: JSON | None = None
    if snapshot_row is not None:
        index, fmt, digest, data = snapshot_row
        try:
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            valid = checksum(text) == _text(digest)
        except UnicodeDecodeError:
            text, valid = "", False
        snap = {"index": index, "format": fmt, "checksum_ok": valid, "text": text}
    try:
        decoded_record = json.loads(record)
    except (ValueError, TypeError) as error:
        return {"damaged": f"the creation record is not valid JSON ({_short(error)})"}, None, []
    if not isinstance(decoded_record, dict):
        return {"damaged": "the creation record is not a JSON object"}, None, []

    def damaged(why: str) -> StoredGame:
        return {"damaged": why, "kind": decoded_record.get("kind")}, None, []

    entries = []
    for expected, (index, entry) in enumerate(journal, start=1):
        if index != expected:
            return damaged(f"journal input {expected} is missing")
        try:
            decoded = json.loads(entry)
        except (ValueError, TypeError) as error:
            return damaged(f"journal input {index} is not valid JSON ({_short(error)})")
        if not isinstance(decoded, dict):
            return damaged(f"journal input {index} is not a JSON object")
        entries.append(decoded)
    return decoded_record, snap, entries


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
