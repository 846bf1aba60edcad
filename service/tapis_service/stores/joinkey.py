"""The join key: the secret that retried joins derive their seat tokens from.

On one machine it is ``join.key`` in the data directory (created once, readable by the
server's user only); a cluster keeps it in PostgreSQL. It is part of the data: a backup without
it restores tables whose retried ``JoinGame`` calls would get tokens that no longer work, so a
data directory that has a database but no key is refused (``JoinKeyMissing``), never given a
new key. A fresh directory (or one whose database holds no table yet: a first start that
stopped before it made its key) gets a new key.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from pathlib import Path

from tapis_service.settings import Settings

KEY_NAME = "join.key"
DATABASE_NAME = "tapis.sqlite3"
KEY_BYTES = 32


class JoinKeyMissing(Exception):
    """A data directory with a database but no join key: the server refuses to start."""


def prepare(data_dir: Path) -> None:
    """Before the store opens: refuse a directory whose database holds tables but that has no
    key (``JoinKeyMissing``)."""
    if (data_dir / KEY_NAME).exists() or not (data_dir / DATABASE_NAME).exists():
        return
    if holds_tables(data_dir / DATABASE_NAME):
        raise JoinKeyMissing(
            f"{data_dir} has a database but no {KEY_NAME}: retried joins could not get their "
            f"seat tokens again (restore {KEY_NAME} from the same backup as the database)")


def holds_tables(database: Path) -> bool:
    """Whether the SQLite file holds at least one table (game); False if it cannot say (the
    store then judges the file itself)."""
    try:
        connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        return bool(connection.execute("SELECT EXISTS (SELECT 1 FROM games)").fetchone()[0])
    except sqlite3.Error:
        return False
    finally:
        connection.close()


def create(path: Path) -> None:
    """A new key at ``path`` (fails if one is there), written durably, mode 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as key_file:
        key_file.write(secrets.token_bytes(KEY_BYTES))
        key_file.flush()
        os.fsync(key_file.fileno())
    sync_path(path.parent)


def sync_path(path: Path) -> None:
    """fsync a file, or a directory (the names created in it become durable)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def join_key(settings: Settings) -> bytes:
    """The key of the data directory (created there if missing), or a fresh one per process
    without one."""
    if settings.data_dir is None or settings.store == "memory":
        return secrets.token_bytes(KEY_BYTES)
    path = Path(settings.data_dir) / KEY_NAME
    if not path.exists():
        create(path)
    return path.read_bytes()
