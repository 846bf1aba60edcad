"""The cluster's directory queries on a real PostgreSQL, rows written by hand: which tables the
orphan sweep takes over, and what a takeover waits for."""

from __future__ import annotations

import asyncio

import asyncpg

from tapis_service.cluster.directory import RENEW, UNOWNED, Directory
from tapis_service.stores import postgres_sql
from tapis_service.stores.postgres_store import PostgresStore


async def test_the_sweep_takes_dead_and_departed_owners_tables_never_its_own(
        database_url: str) -> None:
    store = await PostgresStore.open(database_url)
    try:
        async with store.pool.acquire() as connection:
            for node_id, alive in (("me", False), ("dead", False), ("alive", True)):
                await connection.execute(
                    "INSERT INTO members (node_id, address, expires_at) VALUES ($1, 'x', "
                    f"now() {'+' if alive else '-'} interval '1 hour')", node_id)
            for game_id, owner, finished in (
                    ("mine", "me", False), ("of-the-dead", "dead", False),
                    ("of-the-living", "alive", False), ("handed-off", None, False),
                    ("over", "dead", True)):
                await connection.execute(
                    "INSERT INTO games (game_id, record, owner, epoch, finished) "
                    "VALUES ($1, '{}', $2, 3, $3)", game_id, owner, finished)
        # "me" is late renewing (its row expired): its own table stays as it is
        swept = await Directory(store.pool, "me", "x", 3.0).sweep_orphans(10)
        assert sorted(swept) == [("handed-off", 4), ("of-the-dead", 4)]
        async with store.pool.acquire() as connection:
            rows = await connection.fetch("SELECT game_id, owner, epoch FROM games")
        assert {r["game_id"]: (r["owner"], r["epoch"]) for r in rows} == {
            "mine": ("me", 3), "of-the-dead": ("me", 4), "of-the-living": ("alive", 3),
            "handed-off": ("me", 4), "over": ("dead", 3)}
    finally:
        await store.aclose()


async def test_a_takeover_waits_for_an_append_in_flight_and_never_takes_a_live_owners_table(
        database_url: str) -> None:
    """The old owner's append, begun at its epoch and not yet committed (a node frozen between
    its INSERT and its COMMIT), holds the table's row: the takeover waits for it, so what it
    commits is in what the new owner loads; and a takeover of a live owner's table fails."""
    store = await PostgresStore.open(database_url)
    try:
        async with store.pool.acquire() as connection:
            await connection.execute(
                "INSERT INTO members (node_id, address, expires_at) VALUES "
                "('old', 'a', now() - interval '1 second'), "
                "('live', 'b', now() + interval '1 hour')")
            await connection.execute(
                "INSERT INTO games (game_id, record, owner, epoch) VALUES "
                "('moving', '{}', 'old', 1), ('kept', '{}', 'live', 1)")
        heir = Directory(store.pool, "heir", "c", 3.0)
        assert await heir.take_over("kept", 1) is None
        frozen = await asyncpg.connect(database_url)
        try:
            transaction = frozen.transaction()
            await transaction.start()
            assert await postgres_sql.append(
                frozen, [postgres_sql.Append("moving", 1, "{}", 1)], fenced=True) == [True]
            taking = asyncio.ensure_future(heir.take_over("moving", 1))
            async with store.pool.acquire() as connection:  # until it waits on the row
                while not await connection.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                        "'Lock' AND datname = current_database()"):
                    assert not taking.done()
                    await asyncio.sleep(0.01)
            assert not taking.done()
            await transaction.commit()
            assert await taking == 2
        finally:
            await frozen.close()
        async with store.pool.acquire() as connection:
            assert await connection.fetchval(
                "SELECT count(*) FROM journal WHERE game_id = 'moving'") == 1
        assert await heir.holds("moving", 2) and not await heir.holds("moving", 1)
    finally:
        await store.aclose()


async def test_the_owners_no_listed_node_lists_are_named_finished_tables_when_asked(
        database_url: str) -> None:
    store = await PostgresStore.open(database_url)
    try:
        async with store.pool.acquire() as connection:
            for node_id, alive in (("live", True), ("dead", False)):
                await connection.execute(
                    "INSERT INTO members (node_id, address, expires_at) VALUES ($1, $2, "
                    f"now() {'+' if alive else '-'} interval '1 hour')", node_id,
                    f"{node_id}:1")
            for game_id, owner, finished in (
                    ("of-the-living", "live", False), ("of-the-dead", "dead", True),
                    ("of-the-gone", "gone", False), ("handed-off", None, True)):
                await connection.execute(
                    "INSERT INTO games (game_id, record, owner, epoch, finished) "
                    "VALUES ($1, '{}', $2, 1, $3)", game_id, owner, finished)
        directory = Directory(store.pool, "live", "live:1", 3.0)
        assert await directory.unlisted_owners(["live"], True) == ["dead:1", "gone", UNOWNED]
        assert await directory.unlisted_owners(["live"], False) == ["gone"]
        assert await directory.unlisted_owners(["live", "dead", "gone"], False) == []
        assert await directory.unlisted_owners([], False) == ["gone", "live:1"]
    finally:
        await store.aclose()


async def test_a_renewal_begun_before_its_expiry_that_waited_for_a_takeover_says_lapsed(
        database_url: str) -> None:
    """A renewal whose statement began just before its membership expired, and that reached
    the row only after another node's takeover (begun just after the expiry) committed, must
    say lapsed: its node rechecks and gives the table up. Here the statement's start is pinned
    by a transaction begun before the expiry."""
    store = await PostgresStore.open(database_url)
    late = await asyncpg.connect(database_url)
    try:
        async with store.pool.acquire() as connection:
            expires = await connection.fetchval(
                "INSERT INTO members (node_id, address, expires_at) VALUES "
                "('late', 'a', clock_timestamp() + interval '300 milliseconds') "
                "RETURNING expires_at")
            await connection.execute(
                "INSERT INTO games (game_id, record, owner, epoch) VALUES "
                "('taken', '{}', 'late', 1)")
        transaction = late.transaction()
        await transaction.start()
        assert await late.fetchval("SELECT now() < $1", expires)  # its statement's start
        async with store.pool.acquire() as connection:  # until the membership expired
            while await connection.fetchval("SELECT clock_timestamp() < $1", expires):
                await asyncio.sleep(0.05)
        assert await Directory(store.pool, "heir", "b", 3.0).take_over("taken", 1) == 2
        assert await late.fetchval(RENEW, "late", "a", 3.0) is True
        await transaction.commit()
    finally:
        await late.close()
        await store.aclose()
