"""The results ledger, the same on every store (memory, SQLite, PostgreSQL): cursors rise from
1 per backend, a record filed twice is filed once, acknowledged ones are forgotten but their
keys kept, held tables are those with unacknowledged records, old records expire, and the feed
wakes a watcher on a new record. SQLite and PostgreSQL keep it across a reopen."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from tapis_service.stores.results import (
    CursorAhead,
    MemoryResults,
    Pending,
    ResultsFeed,
    ResultsStore,
    Unacknowledged,
)
from tapis_service.stores.results_postgres import PostgresResults
from tapis_service.stores.results_sqlite import SqliteResults

Opener = Callable[[], Awaitable[ResultsStore]]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens the ledger (again, on the same data, for the durable stores)."""
    opened: list[ResultsStore] = []
    pools: list[asyncpg.Pool] = []
    memory = MemoryResults()
    server = request.getfixturevalue("postgres") if request.param == "postgres" else None
    database = await server.create_database() if server is not None else ""

    async def open_store() -> ResultsStore:
        store: ResultsStore
        if request.param == "memory":
            store = memory
        elif request.param == "sqlite":
            store = SqliteResults(tmp_path)
        else:
            assert server is not None
            pool = await asyncpg.create_pool(server.url(database), min_size=1, max_size=4)
            pools.append(pool)
            store = await PostgresResults.open(pool)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        await store.close()
    for pool in pools:
        await pool.close()
    if server is not None:
        await server.drop_database(database)


async def test_cursors_rise_per_backend_and_a_record_is_filed_once(opener: Opener) -> None:
    store = await opener()
    assert await store.file("a", "g1/game/1", "g1", b"one", 1000) == 1
    assert await store.file("b", "g2/game/1", "g2", b"other", 1000) == 1
    assert await store.file("a", "g1/game/2", "g1", b"two", 1001) == 2
    assert await store.file("a", "g1/game/1", "g1", b"again", 1002) == 1  # a repeat
    assert [(f.cursor, f.game_id, f.payload) for f in await store.after("a", 0, 10)] == [
        (1, "g1", b"one"), (2, "g1", b"two")]
    assert [f.cursor for f in await store.after("a", 1, 10)] == [2]
    assert [f.cursor for f in await store.after("a", 0, 1)] == [1]
    assert await store.after("nobody", 0, 10) == []


async def test_acknowledged_records_are_forgotten_but_not_filed_again(opener: Opener) -> None:
    store = await opener()
    for n in (1, 2, 3):
        await store.file("a", f"g1/game/{n}", "g1", b"x%d" % n, 1000)
    await store.file("a", "g2/series", "g2", b"s", 1000)
    assert await store.held_games() == {"g1", "g2"}
    assert await store.acknowledge("a", 3) == 3
    assert await store.acknowledge("a", 2) == 3  # never backwards
    assert [f.cursor for f in await store.after("a", 0, 10)] == [4]
    assert await store.held_games() == {"g2"}
    assert await store.file("a", "g1/game/2", "g1", b"x2", 1000) == 2  # the key is kept
    assert [f.cursor for f in await store.after("a", 0, 10)] == [4]
    with pytest.raises(CursorAhead):
        await store.acknowledge("a", 5)
    await store.forget_game("g1")
    assert await store.file("a", "g1/game/1", "g1", b"new", 1000) == 5


async def test_old_records_expire(opener: Opener) -> None:
    store = await opener()
    await store.file("a", "g1/game/1", "g1", b"old", 1000)
    await store.file("a", "g2/game/1", "g2", b"new", 5000)
    assert await store.expire(now_ms=6000, max_age_ms=2000) == [("a", "g1")]
    assert await store.held_games() == {"g2"}
    assert [f.game_id for f in await store.after("a", 0, 10)] == ["g2"]


async def test_the_unacknowledged_records_oldest_first(opener: Opener) -> None:
    store = await opener()
    assert await store.unacknowledged(before_ms=10_000, limit=10) == Unacknowledged(0, None, [])
    await store.file("a", "g1/game/1", "g1", b"one", 3000)
    await store.file("b", "g2/game/1", "g2", b"two", 1000)
    await store.file("a", "g3/game/1", "g3", b"three", 2000)
    await store.file("a", "g4/game/1", "g4", b"late", 9000)
    await store.acknowledge("a", 1)
    found = await store.unacknowledged(before_ms=5000, limit=10)
    assert found == Unacknowledged(3, 1000, [Pending("b", 1, "g2", 1000),
                                            Pending("a", 2, "g3", 2000)])
    assert (await store.unacknowledged(before_ms=5000, limit=1)).near == [
        Pending("b", 1, "g2", 1000)]
    assert await store.expire(now_ms=2500, max_age_ms=1000) == [("b", "g2")]
    assert await store.unacknowledged(before_ms=5000, limit=10) == Unacknowledged(
        2, 2000, [Pending("a", 2, "g3", 2000)])


async def test_a_durable_ledger_survives_a_reopen(opener: Opener,
                                                   request: pytest.FixtureRequest) -> None:
    store = await opener()
    await store.file("a", "g1/game/1", "g1", b"one", 1000)
    await store.file("a", "g1/game/2", "g1", b"two", 1000)
    await store.acknowledge("a", 1)
    await store.close()
    again = await opener()
    assert [f.cursor for f in await again.after("a", 0, 10)] == [2]
    assert await again.file("a", "g1/game/3", "g1", b"three", 1000) == 3
    with pytest.raises(CursorAhead):
        await again.acknowledge("a", 4)


async def test_the_feed_sends_the_missed_records_then_wakes_on_a_new_one() -> None:
    feed = ResultsFeed(MemoryResults())
    await feed.file("a", "g1/game/1", "g1", b"one", 1000)
    watch = feed.watch("a", 0)
    assert [f.cursor for f in await anext(watch)] == [1]
    waiting = asyncio.ensure_future(anext(watch))
    await asyncio.sleep(0)
    assert not waiting.done()
    await feed.file("b", "g2/game/1", "g2", b"other", 1000)  # another backend's: no wake-up
    await asyncio.sleep(0)
    assert not waiting.done()
    await feed.file("a", "g1/game/2", "g1", b"two", 1000)
    assert [f.payload for f in await waiting] == [b"two"]
    await watch.aclose()


async def test_a_record_another_node_files_wakes_this_node_s_watcher(postgres) -> None:  # type: ignore[no-untyped-def]
    database = await postgres.create_database()
    pools = [await asyncpg.create_pool(postgres.url(database), min_size=1, max_size=3)
             for _ in range(2)]
    here, there = [await PostgresResults.open(pool) for pool in pools]
    try:
        feed = ResultsFeed(here)
        await here.listen(feed.wake)
        watch = feed.watch("a", 0)
        waiting = asyncio.ensure_future(anext(watch))
        await asyncio.sleep(0)
        assert await there.file("a", "g1/game/1", "g1", b"one", 1000) == 1
        batch = await asyncio.wait_for(waiting, timeout=30)
        assert [f.payload for f in batch] == [b"one"]
        await watch.aclose()
    finally:
        for store in (here, there):
            await store.close()
        for pool in pools:
            await pool.close()
        await postgres.drop_database(database)


async def test_a_cancelled_caller_leaves_the_sqlite_connection_busy_until_its_transaction_ends(
        tmp_path: Path) -> None:
    """A caller cancelled while its transaction runs on the writer thread (a stream closed, the
    server stopping) must not free the connection for the next one: two transactions at once
    on one connection fail ("cannot start a transaction within a transaction")."""
    store = SqliteResults(tmp_path)
    inside, release = threading.Event(), threading.Event()

    def slow(db: sqlite3.Connection) -> int:
        inside.set()
        release.wait(10)
        return int(db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    first = asyncio.ensure_future(store._run(slow))
    await asyncio.to_thread(inside.wait, 10)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    second = asyncio.ensure_future(store.file("b", "k-1", "g-1", b"x", 1))
    await asyncio.sleep(0)  # the second caller is queued behind the running transaction
    assert not second.done()
    release.set()
    assert await second == 1
    await store.close()
