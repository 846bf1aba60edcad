"""The cluster's directory queries on a real PostgreSQL, rows written by hand: which tables the
orphan sweep takes over."""

from __future__ import annotations

from tapis_service.cluster.directory import Directory
from tapis_service.postgres_store import PostgresStore


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
