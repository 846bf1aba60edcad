"""The durable store: one SQLite file under the data directory (``--store sqlite``).

Every write goes through one writer that group-commits the writes of each step of the event
loop, on the loop or on its thread (``sqlite_writer.py``): the awaitable returned to the host
completes once the write's transaction is committed (WAL, ``synchronous=FULL``: fsynced), so an
answer is never sent before its input is on disk. See docs/durability.md for the choice and its
measured cost.

The journal has no holes by construction: input N of a game is inserted only if input N-1 (or,
for the first, the game's creation record) is already there (a check in the same transaction),
and never over an existing one. A refused write never takes the others of its transaction with
it. A file that cannot be read is ``StoreCorrupt``. The journal is kept in two parts, read as
one (the view ``journal``): the newest inputs by arrival, folded into the by-table tree in bulk
(``sqlite_fold.py``).

The schema is versioned (``tapis_schema``, as on PostgreSQL): missing migrations are applied at
open, and a file whose schema is newer than this server knows is refused (``SchemaTooNew``).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
from pathlib import Path
from typing import Any

import structlog

from tapis_service.stores import sqlite_fold
from tapis_service.stores.checksums import canonical_json, checksum
from tapis_service.stores.sqlite_jobs import Handed
from tapis_service.stores.sqlite_writer import (
    GATHER_MAX,
    GATHER_S,
    INLINE_AT,
    Failpoint,
    GroupCommitWriter,
)
from tapis_service.stores.store import (
    SchemaTooNew,
    StoreCorrupt,
    StoredGame,
    StoreInUse,
    StoreUnavailable,
    paced,
)
from tapis_service.stores.stored_rows import decoded, listing, row_text, short

JSON = dict[str, Any]
FILE_NAME = "tapis.sqlite3"
LOCK_NAME = "tapis.lock"
USED_MARKER = "join.key"
"""A file every data directory that has served holds: with it, a missing or empty database is
damage, not a fresh install."""
SYNCHRONOUS = "FULL"
TEMP_STORE = "MEMORY"
"""Where SQLite keeps its temporary data: the statement journal of a fold (which moves hundreds
of rows in one statement) spilled past 64 KiB into a file of ``/var/tmp`` (or ``/tmp`` in the
read-only container), about 270 writes a fold; in memory it writes nothing (docs/
performance.md, "The fold's statement journal, and its size by tables in play")."""

log = structlog.get_logger("tapis.store")

MIGRATIONS: tuple[str, ...] = (
    # 1: tables, their journals and snapshots (IF NOT EXISTS: a file written before the schema
    # was versioned has them already, and is adopted as version 1 unchanged).
    """
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
    """,
    # 2: the listing of a table at rest (not held in memory): NULL while the table must be
    # loaded at start; set when the host lets a finished table leave memory, cleared by its
    # next input. ListGames reads it instead of loading the table.
    """
    ALTER TABLE games ADD COLUMN listing TEXT;
    """,
    # 3: the journal in two parts read as one (the view ``journal``): new inputs by arrival
    # (``journal_inbox``), folded into the by-table tree (``journal_folded``) in bulk.
    sqlite_fold.SCHEMA,
    # 4: the inbox without a unique index of its own (the writer keeps it free of repeats).
    sqlite_fold.UNKEYED_INBOX,
)
SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this server writes and reads."""


class SqliteStore(GroupCommitWriter):
    """Tables, their journals and snapshots in ``<data_dir>/tapis.sqlite3``."""

    keeps_journal = True
    can_rest = True

    def __init__(self, data_dir: Path | str, synchronous: str = SYNCHRONOUS,
                 max_batch: int = 0, failpoint: Failpoint | None = None,
                 fold_at: int = sqlite_fold.FOLD_AT, handed: Handed | None = None,
                 fold_per_table: int = sqlite_fold.FOLD_PER_TABLE,
                 inline_at: int = INLINE_AT, gather_max: int = GATHER_MAX,
                 gather_s: float = GATHER_S) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_directory(self.path.parent)
        self.synchronous = synchronous
        self.max_batch = max_batch
        """Writes per transaction at most (0: everything queued; 1: no group commit)."""
        self.failpoint = failpoint
        self.fold_at = fold_at
        """Inputs in the journal's inbox at which the writer folds it into the tree."""
        self.fold_per_table = fold_per_table
        """...or inputs per table it holds inputs of, when that is more."""
        self.handed = handed
        self.inline_at = inline_at
        """A step's writes from which the loop commits them itself (0: never)."""
        self.gather_max = gather_max
        self.gather_s = gather_s
        """How many writes, and how long, such a batch gathers (``sqlite_jobs.Handing``)."""
        try:
            self._refuse_lost_file()
            self._connection = self._connect()
            migrate(self._connection, self.path)
            self._fold("open")  # recovery then reads a tree that holds everything
            row = self._connection.execute("SELECT COALESCE(MAX(created_order), 0) FROM games")
            self._order = int(row.fetchone()[0])
        except sqlite3.Error as error:
            os.close(self._lock)
            raise StoreCorrupt(f"{self.path}: cannot be read as a Tapis store ({error})") \
                from error
        except StoreCorrupt:  # SchemaTooNew included
            os.close(self._lock)
            raise
        self._start_writer()

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
        """A connection to the file: WAL, ``synchronous`` as set, and SQLite's temporary data
        in memory (``TEMP_STORE``)."""
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={self.synchronous}")
        connection.execute(f"PRAGMA temp_store={TEMP_STORE}")
        return connection

    # --- the Store hooks (called on the event loop, in order) ----------------------------

    def created(self, game_id: str, record: JSON) -> asyncio.Future[None]:
        self._order += 1
        return self._submit([("INSERT INTO games VALUES (?, ?, ?, 0, NULL)",
                              (game_id, self._order, canonical_json(record)), "")])

    def snapshot(self, game_id: str, index: int, data: JSON,
                 epoch: int = 1) -> asyncio.Future[None]:
        text = canonical_json(data)
        finished = 1 if data.get("finished") else 0
        return self._submit([
            ("INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?, ?, ?)",
             (game_id, index, data.get("format", 0), checksum(text), text), ""),
            ("UPDATE games SET finished = ? WHERE game_id = ?", (finished, game_id), ""),
        ], after=(game_id, index))

    def dropped(self, game_id: str, epoch: int = 1) -> asyncio.Future[None]:
        return self._submit([(f"DELETE FROM {name} WHERE game_id = ?", (game_id,), "")
                             for name in (*sqlite_fold.DROP_PARTS, "snapshots", "games")],
                            forget=game_id)

    def rested(self, game_id: str, listing: JSON, epoch: int = 1) -> asyncio.Future[None]:
        return self._submit([("UPDATE games SET listing = ? WHERE game_id = ?",
                              (canonical_json(listing), game_id), "")])

    def woken(self, game_id: str, epoch: int = 1) -> asyncio.Future[None]:
        return self._submit([("UPDATE games SET listing = NULL WHERE game_id = ?",
                              (game_id,), "")])

    async def resting(self) -> list[tuple[str, JSON | None]]:
        """The tables at rest, oldest first: (game_id, its listing; None when the listing
        cannot be decoded: the host loads that table instead). Nothing else is read."""
        try:
            reader = self._reader()
            try:
                rows = reader.execute("SELECT game_id, listing FROM games WHERE listing IS NOT "
                                      "NULL ORDER BY created_order").fetchall()
            finally:
                reader.close()
        except sqlite3.Error as error:
            raise StoreCorrupt(f"{self.path}: cannot be read ({short(error)})") from error
        return [(row_text(raw_id), listing(text)) for raw_id, text in rows]

    def probe(self) -> asyncio.Future[None]:
        """A small write of its own: completes once the store commits writes again."""
        return self._submit([("INSERT OR REPLACE INTO meta VALUES ('probe', ?)",
                              (str(self.commits),), "")])

    async def load(self) -> list[tuple[str, JSON, JSON | None, list[JSON]]]:
        """Every stored table not at rest (``resting`` lists those), oldest first: (game_id,
        creation record, last snapshot or None, the whole journal). A snapshot comes back as
        ``{"index", "format", "checksum_ok", "text"}``; recovery decodes and checks it (see
        recovery.py). A table whose rows cannot be decoded comes back as ``({"damaged": why},
        None, [])``: recovery quarantines it. A file that cannot be read raises
        ``StoreCorrupt``."""
        try:
            reader = self._reader()
            try:
                games = reader.execute(
                    "SELECT game_id, record FROM games WHERE listing IS NULL "
                    "ORDER BY created_order").fetchall()
                snapshots = {row[0]: row[1:] for row in reader.execute(
                    "SELECT s.game_id, s.idx, s.format, s.checksum, s.data FROM snapshots s "
                    "JOIN games g ON g.game_id = s.game_id WHERE g.listing IS NULL")}
                journals = {game_id: reader.execute(  # by primary key: only these games
                    "SELECT idx, entry FROM journal WHERE game_id = CAST(? AS TEXT) "
                    "ORDER BY idx", (game_id,)).fetchall() async for game_id, _ in paced(games)}
            finally:
                reader.close()
        except sqlite3.Error as error:
            raise StoreCorrupt(f"{self.path}: cannot be read ({short(error)})") from error
        loaded: list[tuple[str, JSON, JSON | None, list[JSON]]] = []
        async for raw_id, record in paced(games):  # the health service answers meanwhile
            row = snapshots.get(raw_id)
            game_id = row_text(raw_id)
            loaded.append((game_id, *decoded(record, row, journals.get(raw_id, []))))
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
            raise StoreUnavailable(f"{self.path}: cannot be read ({short(error)})") from error
        return decoded(row[0], snap_row, journal)

    def close(self) -> None:
        """Commit what is queued, fold the journal's inbox (a file closed cleanly has every
        input in the tree) and close the file."""
        if self._closed:
            return
        self._closed = True
        self._stop_writer()
        self._fold("close")
        self._connection.close()
        os.close(self._lock)

def schema_version(connection: sqlite3.Connection) -> int:
    """The schema version of the file open on ``connection`` (0: written before versions, or
    empty). Reads only: ``tapis-admin`` may ask a file it must not change."""
    found = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tapis_schema'").fetchone()
    if found is None:
        return 0
    return int(connection.execute(
        "SELECT COALESCE(MAX(version), 0) FROM tapis_schema").fetchone()[0])


def migrate(connection: sqlite3.Connection, path: Path) -> int:
    """Apply the migrations the file lacks, each in a transaction of its own with its version
    recorded in ``tapis_schema``; the file's version after. ``SchemaTooNew`` for a file that a
    newer server wrote (nothing is changed in it)."""
    connection.execute("CREATE TABLE IF NOT EXISTS tapis_schema (version INTEGER PRIMARY KEY, "
                       "applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)")
    current = schema_version(connection)
    if current > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{path}: its schema is at version {current}, newer than this server's "
            f"({SCHEMA_VERSION}): run the server version that wrote it (or a newer one)")
    for version in range(current + 1, SCHEMA_VERSION + 1):
        try:
            connection.executescript(
                f"BEGIN IMMEDIATE; {MIGRATIONS[version - 1]}; "
                f"INSERT INTO tapis_schema (version) VALUES ({version}); COMMIT;")
        except sqlite3.Error:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        log.info("schema_migrated", version=version, file=str(path))
    return SCHEMA_VERSION


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
