"""One suite for every durable store (SQLite and PostgreSQL): committed before the awaitable
completes, in order, group-committed; close commits what is queued; a table is read back as
it was written; the journal key refuses a second input at an index; a table whose rows
cannot be decoded is read back as that table damaged, its neighbours intact."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tapis_service.stores.postgres_store import PostgresStore
from tapis_service.stores.sqlite_store import FILE_NAME, SqliteStore
from tapis_service.stores.store import JournalConflict
from tests.support.damage import TOO_DEEP


@dataclass
class Kit:
    """How to open and close one kind of store on one place."""

    name: str
    open: Callable[[], Awaitable[Any]]
    close: Callable[[Any], Awaitable[None]]
    tamper: Callable[[str], Awaitable[None]]
    """Runs a statement on the stored tables behind the store's back (the store closed)."""


async def _close_sqlite(store: SqliteStore) -> None:
    store.close()


async def _close_postgres(store: PostgresStore) -> None:
    await store.aclose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
async def kit(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Kit]:
    opened: list[Any] = []
    database = None
    if request.param == "sqlite":
        async def open_sqlite() -> SqliteStore:
            opened.append(SqliteStore(tmp_path))
            return opened[-1]

        async def tamper_sqlite(statement: str) -> None:
            stored = sqlite3.connect(tmp_path / FILE_NAME)
            with stored:
                stored.execute(statement)
            stored.close()
        made = Kit("sqlite", open_sqlite, _close_sqlite, tamper_sqlite)  # type: ignore[arg-type]
    else:
        postgres = request.getfixturevalue("postgres")
        database = await postgres.create_database()
        url = postgres.url(database)

        async def open_postgres() -> PostgresStore:
            opened.append(await PostgresStore.open(url))
            return opened[-1]

        async def tamper_postgres(statement: str) -> None:
            connection = await asyncpg.connect(url)
            try:
                await connection.execute(statement)
            finally:
                await connection.close()
        made = Kit("postgres", open_postgres, _close_postgres,  # type: ignore[arg-type]
                   tamper_postgres)
    yield made
    for store in opened:
        await made.close(store)
    if database is not None:
        await postgres.drop_database(database)


def must(pending: Awaitable[None]) -> Awaitable[None]:
    """A write's awaitable (the store queued it when it was called)."""
    return pending


async def loaded(store: Any) -> list[tuple[str, Any, Any, list[Any]]]:
    return await store.load()  # type: ignore[no-any-return]


async def one(store: Any, game_id: str) -> Any:
    return await store.load_game(game_id)


async def test_an_append_is_committed_when_its_awaitable_completes(kit: Kit) -> None:
    store = await kit.open()
    await must(store.created("g", {"kind": "war"}))
    await must(store.appended("g", 1, {"input": {"input": "Claim", "seat": 0}}))
    await kit.close(store)
    reopened = await kit.open()
    assert [(gid, record, journal) for gid, record, _, journal in await loaded(reopened)] == [
        ("g", {"kind": "war"}, [{"input": {"input": "Claim", "seat": 0}}])]


async def test_concurrent_appends_are_group_committed_in_order(kit: Kit) -> None:
    store = await kit.open()
    pending = [must(store.created(f"g{n}", {"kind": "war", "n": n})) for n in range(20)]
    pending += [must(store.appended(f"g{n}", i, {"i": i}))
                for i in range(1, 51) for n in range(20)]
    await asyncio.gather(*pending)
    assert store.commits < len(pending)  # several writes per transaction
    await kit.close(store)
    stored = await loaded(await kit.open())
    assert [game_id for game_id, *_ in stored] == [f"g{n}" for n in range(20)]
    assert all(journal == [{"i": i} for i in range(1, 51)] for *_, journal in stored)


async def test_close_commits_what_is_queued_and_dropped_games_are_gone(kit: Kit) -> None:
    store = await kit.open()
    for n in range(3):
        store.created(f"g{n}", {"kind": "war"})
        store.appended(f"g{n}", 1, {"i": 1})
    store.snapshot("g0", 1, {"format": 1, "index": 1, "table": {}, "finished": True})
    store.dropped("g1")
    await kit.close(store)
    reopened = await kit.open()
    stored = {game_id: (snapshot, journal) for game_id, _, snapshot, journal
              in await loaded(reopened)}
    assert sorted(stored) == ["g0", "g2"]
    snapshot = stored["g0"][0]
    assert snapshot is not None and snapshot["index"] == 1 and snapshot["checksum_ok"]
    assert stored["g2"] == (None, [{"i": 1}])


async def test_load_game_reads_one_table_after_the_writes_queued_before(kit: Kit) -> None:
    store = await kit.open()
    store.created("g", {"kind": "war"})
    store.created("h", {"kind": "basra"})
    for i in range(1, 4):
        store.appended("g", i, {"i": i})
    store.snapshot("g", 2, {"format": 1, "index": 2, "table": {"x": 1}, "finished": False})
    await asyncio.gather(*(must(store.appended("h", i, {"j": i})) for i in (1, 2)))
    record, snapshot, journal = await one(store, "g")
    assert record == {"kind": "war"}
    assert journal == [{"i": 1}, {"i": 2}, {"i": 3}]
    assert snapshot["index"] == 2 and snapshot["checksum_ok"]
    assert await one(store, "nobody") is None


async def test_the_journal_key_refuses_a_second_input_at_an_index(kit: Kit) -> None:
    store = await kit.open()
    await must(store.created("g", {"kind": "war"}))
    await must(store.appended("g", 1, {"first": True}))
    with pytest.raises(JournalConflict):
        await must(store.appended("g", 1, {"second": True}))
    _, _, journal = await one(store, "g")
    assert journal == [{"first": True}]


@pytest.mark.parametrize(("statement", "why"), [
    (f"UPDATE journal SET entry = '{TOO_DEEP}' WHERE game_id = 'g' AND idx = 2",
     "journal input 2 is not valid JSON (nested too deep)"),
    ("UPDATE journal SET entry = '{\"i\": ' WHERE game_id = 'g' AND idx = 2",
     "journal input 2 is not valid JSON"),
    ("UPDATE journal SET entry = '[1, 2]' WHERE game_id = 'g' AND idx = 2",
     "journal input 2 is not a JSON object"),
    ("DELETE FROM journal WHERE game_id = 'g' AND idx = 2", "journal input 2 is missing"),
    (f"UPDATE games SET record = '{TOO_DEEP}' WHERE game_id = 'g'",
     "the creation record is not valid JSON (nested too deep)"),
    ("UPDATE games SET record = '\"war\"' WHERE game_id = 'g'",
     "the creation record is not a JSON object"),
], ids=["input-too-deep", "input-cut", "input-list", "input-missing", "record-too-deep",
        "record-string"])
async def test_a_row_it_cannot_decode_reads_back_as_that_table_damaged(
        kit: Kit, statement: str, why: str) -> None:
    """``load`` and ``load_game`` alike: the table is marked damaged (recovery quarantines
    it), saying why without quoting the row; its neighbour reads back intact."""
    store = await kit.open()
    for game_id in ("g", "h"):
        store.created(game_id, {"kind": "war", "ownership": {"backend": "b"}})
        for i in (1, 2, 3):
            store.appended(game_id, i, {"i": i})
    await kit.close(store)
    await kit.tamper(statement)
    reopened = await kit.open()
    stored = {game_id: (record, snapshot, journal)
              for game_id, record, snapshot, journal in await loaded(reopened)}
    assert stored["h"] == ({"kind": "war", "ownership": {"backend": "b"}}, None,
                           [{"i": 1}, {"i": 2}, {"i": 3}])
    record, snapshot, journal = stored["g"]
    assert record["damaged"] == why or record["damaged"].startswith(why + " (")
    assert (snapshot, journal) == (None, [])
    assert await one(reopened, "g") == stored["g"]
    assert await one(reopened, "h") == stored["h"]
