"""Stored tables that ``restore`` fails on with something other than a ``RecoveryError``: damage
nothing foresaw, and a bug met on one table only. Whatever reads a table back (the start, an
adoption, a wake, the healer) must quarantine that table alone."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tapis_service.stores.checksums import checksum
from tapis_service.stores.sqlite_store import FILE_NAME
from tapis_service.tables import recovery

TOO_DEEP = "[" * 100_000 + "]" * 100_000
"""Valid JSON nested deeper than the decoder follows: ``json.loads`` raises RecursionError."""


def nest_snapshot_too_deep(data_dir: Path, game_id: str) -> None:
    """The snapshot of ``game_id`` becomes ``TOO_DEEP``, its checksum valid (written so by a
    faulty server): no ``RecoveryError`` names it, reading it raises RecursionError."""
    stored = sqlite3.connect(data_dir / FILE_NAME)
    with stored:
        changed = stored.execute("UPDATE snapshots SET data = ?, checksum = ? WHERE game_id = ?",
                                 (TOO_DEEP, checksum(TOO_DEEP), game_id)).rowcount
    stored.close()
    assert changed == 1, "the table has a snapshot"


def nest_journal_too_deep(data_dir: Path) -> str:
    """The last journal input of a stored table becomes ``TOO_DEEP`` (a row the store reads
    back before ``restore``: decoding it raises RecursionError); that table's id."""
    stored = sqlite3.connect(data_dir / FILE_NAME)
    with stored:
        game_id, index = stored.execute(
            "SELECT game_id, MAX(idx) FROM journal GROUP BY game_id LIMIT 1").fetchone()
        stored.execute("UPDATE journal SET entry = ? WHERE game_id = ? AND idx = ?",
                       (TOO_DEEP, game_id, index))
    stored.close()
    return str(game_id)


def fail_restoring(monkeypatch: pytest.MonkeyPatch, game_id: str) -> None:
    """Restoring ``game_id`` (and no other table) raises a RuntimeError: a bug met on it."""
    plain = recovery._restore

    def failing(restored_id: str, *stored: Any) -> recovery.Restored:
        if restored_id == game_id:
            raise RuntimeError("a bug met on this table only")
        return plain(restored_id, *stored)

    monkeypatch.setattr(recovery, "_restore", failing)
