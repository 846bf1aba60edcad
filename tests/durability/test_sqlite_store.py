"""The SQLite store: committed before the awaitable completes, in order, group-committed."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tapis_service.sqlite_store import FILE_NAME, SqliteStore
from tapis_service.store import StoreInUse


def must(pending: asyncio.Future[None] | None) -> asyncio.Future[None]:
    assert pending is not None, "inside a running loop the store returns an awaitable"
    return pending


def committed(data_dir: Path, sql: str) -> list[tuple[object, ...]]:
    """What another connection (another process, after a crash) would read."""
    reader = sqlite3.connect(data_dir / FILE_NAME)
    try:
        return reader.execute(sql).fetchall()
    finally:
        reader.close()


async def test_an_append_is_committed_when_its_awaitable_completes(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    await must(store.created("g", {"kind": "war"}))
    await must(store.appended("g", 1, {"input": {"input": "Claim", "seat": 0}}))
    assert committed(tmp_path, "SELECT idx FROM journal WHERE game_id = 'g'") == [(1,)]
    assert committed(tmp_path, "PRAGMA journal_mode") == [("wal",)]
    store.close()


async def test_concurrent_appends_are_group_committed_in_order(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    pending = [must(store.created(f"g{n}", {"kind": "war", "n": n})) for n in range(20)]
    pending += [must(store.appended(f"g{n}", i, {"i": i}))
                for i in range(1, 51) for n in range(20)]
    await asyncio.gather(*pending)
    assert store.commits < len(pending)  # several writes per transaction
    loaded = await store.load()
    assert [game_id for game_id, *_ in loaded] == [f"g{n}" for n in range(20)]
    assert all(journal == [{"i": i} for i in range(1, 51)] for *_, journal in loaded)
    store.close()


async def test_close_commits_what_is_queued_and_dropped_games_are_gone(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    for n in range(3):
        store.created(f"g{n}", {"kind": "war"})
        store.appended(f"g{n}", 1, {"i": 1})
    store.snapshot("g0", 1, {"format": 1, "index": 1, "table": {}, "finished": True})
    store.dropped("g1")
    store.close()
    reopened = SqliteStore(tmp_path)
    stored = await reopened.load()
    loaded = {game_id: (snapshot, journal) for game_id, _, snapshot, journal in stored}
    assert sorted(loaded) == ["g0", "g2"]
    snapshot = loaded["g0"][0]
    assert snapshot is not None and snapshot["index"] == 1 and snapshot["checksum_ok"]
    assert committed(tmp_path, "SELECT finished FROM games ORDER BY game_id") == [(1,), (0,)]
    reopened.close()


def test_a_second_store_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    with pytest.raises(StoreInUse, match="another tapis-server is using"):
        SqliteStore(tmp_path)
    store.close()
    SqliteStore(tmp_path).close()  # free again once closed
