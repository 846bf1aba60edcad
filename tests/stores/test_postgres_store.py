"""What only the PostgreSQL store does: versioned schema, clear refusals at start, the
fencing epoch of a cluster node, and no input past a refused one."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tapis_service.stores.postgres_store import (
    MIGRATIONS,
    SCHEMA_VERSION,
    DatabaseUnreachable,
    PostgresStore,
    SchemaError,
    redacted,
)
from tapis_service.stores.store import JournalConflict


async def test_the_schema_is_versioned_and_migrating_twice_changes_nothing(
        database_url: str) -> None:
    await (await PostgresStore.open(database_url)).aclose()
    store = await PostgresStore.open(database_url)
    async with store.pool.acquire() as connection:
        versions = await connection.fetch("SELECT version FROM tapis_schema ORDER BY version")
    assert [r["version"] for r in versions] == list(range(1, SCHEMA_VERSION + 1))
    await store.aclose()


async def test_version_2_names_each_create_request_id_once_keeping_the_oldest_table(
        database_url: str) -> None:
    connection = await asyncpg.connect(database_url)
    await connection.execute("CREATE TABLE tapis_schema (version INTEGER PRIMARY KEY, "
                             "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
    await connection.execute(MIGRATIONS[0])
    await connection.execute("INSERT INTO tapis_schema (version) VALUES (1)")
    await connection.execute("INSERT INTO meta VALUES ('join_key', $1)", "00" * 32)
    for game_id, request_id in (("old", "r"), ("new", "r"), ("none", ""), ("other", "s")):
        await connection.execute("INSERT INTO games (game_id, record) VALUES ($1, $2)",
                                 game_id, f'{{"request_id": "{request_id}"}}')
    await connection.close()
    store = await PostgresStore.open(database_url)
    async with store.pool.acquire() as connection:
        rows = await connection.fetch("SELECT game_id, create_request_id FROM games")
        assert {r["game_id"]: r["create_request_id"] for r in rows} == {
            "old": "r", "new": None, "none": None, "other": "s"}
    for request_id in ("r", "s"):
        with pytest.raises(JournalConflict, match="already created with this request id"):
            await store.created(f"again-{request_id}", {"kind": "war", "request_id": request_id})
    await store.created("fresh", {"kind": "war", "request_id": "t"})
    await store.created("plain", {"kind": "war", "request_id": ""})
    await store.created("plain-too", {"kind": "war"})
    await store.aclose()


async def test_version_4_makes_a_create_request_id_unique_per_sender(
        database_url: str) -> None:
    connection = await asyncpg.connect(database_url)
    await connection.execute("CREATE TABLE tapis_schema (version INTEGER PRIMARY KEY, "
                             "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
    for version in (1, 2, 3):
        await connection.execute(MIGRATIONS[version - 1])
        await connection.execute("INSERT INTO tapis_schema (version) VALUES ($1)", version)
    await connection.execute(
        "INSERT INTO games (game_id, record, create_request_id) VALUES "
        "('a-table', '{\"request_id\": \"r\", \"ownership\": {\"backend\": \"a\"}}', 'r'),"
        "('keyless', '{\"request_id\": \"s\"}', 's')")
    await connection.execute("INSERT INTO meta VALUES ('join_key', $1)", "00" * 32)  # as served
    await connection.close()
    store = await PostgresStore.open(database_url)
    async with store.pool.acquire() as connection:
        rows = await connection.fetch("SELECT game_id, create_scope FROM games")
        assert {r["game_id"]: r["create_scope"] for r in rows} == {"a-table": "a",
                                                                   "keyless": ""}
    with pytest.raises(JournalConflict, match="already created with this request id"):
        await store.created("a-again", {"kind": "war", "request_id": "r",
                                        "ownership": {"backend": "a"}})
    with pytest.raises(JournalConflict, match="already created with this request id"):
        await store.created("keyless-again", {"kind": "war", "request_id": "s"})
    # the same ids from other senders: tables of their own
    await store.created("b-table", {"kind": "war", "request_id": "r",
                                    "ownership": {"backend": "b"}})
    await store.created("keyless-r", {"kind": "war", "request_id": "r"})
    await store.created("a-s", {"kind": "war", "request_id": "s",
                                "ownership": {"backend": "a"}})
    await store.aclose()


async def test_version_5_gives_heartbeats_and_counts_takeovers_for_nodes_of_either_schema(
        database_url: str) -> None:
    """A member of a database at version 4 gets a heartbeat; a renewal as a node of schema 4
    writes it (its expiry only) moves it on, as a takeover as one makes it (its owner only) is
    counted on the loser's row; a member that left and came back never gets a heartbeat it had
    before."""
    connection = await asyncpg.connect(database_url)
    await connection.execute("CREATE TABLE tapis_schema (version INTEGER PRIMARY KEY, "
                             "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
    for version in (1, 2, 3, 4):
        await connection.execute(MIGRATIONS[version - 1])
        await connection.execute("INSERT INTO tapis_schema (version) VALUES ($1)", version)
    await connection.execute("INSERT INTO members (node_id, address, expires_at) VALUES "
                             "('old', 'a', now()), ('heir', 'b', now())")
    await connection.execute("INSERT INTO games (game_id, record, owner, epoch) VALUES "
                             "('t1', '{}', 'old', 1), ('t2', '{}', 'old', 1)")
    await connection.execute("INSERT INTO meta VALUES ('join_key', $1)", "00" * 32)  # as served
    await connection.close()
    await (await PostgresStore.open(database_url)).aclose()
    connection = await asyncpg.connect(database_url)
    try:
        beats = [await connection.fetchval("SELECT beat FROM members WHERE node_id = 'old'")]
        for _ in range(2):  # schema 4's renewal
            await connection.execute("UPDATE members SET expires_at = now() + interval '3 s' "
                                     "WHERE node_id = 'old'")
            beats.append(await connection.fetchval(
                "SELECT beat FROM members WHERE node_id = 'old'"))
        assert beats == sorted(set(beats))
        await connection.execute("UPDATE games SET owner = 'heir', epoch = epoch + 1")
        await connection.execute("UPDATE games SET owner = NULL WHERE game_id = 't2'")
        rows = await connection.fetch("SELECT node_id, beat, taken FROM members")
        assert {r["node_id"]: r["taken"] for r in rows} == {"old": 2, "heir": 0}
        assert {r["node_id"]: r["beat"] for r in rows}["old"] == beats[-1]  # not a renewal
        await connection.execute("DELETE FROM members WHERE node_id = 'old'")
        await connection.execute("INSERT INTO members (node_id, address, expires_at) "
                                 "VALUES ('old', 'a', now())")
        again = await connection.fetchval("SELECT beat FROM members WHERE node_id = 'old'")
        assert again not in beats
    finally:
        await connection.close()


async def test_a_newer_schema_is_refused(database_url: str) -> None:
    await (await PostgresStore.open(database_url)).aclose()
    connection = await asyncpg.connect(database_url)
    await connection.execute("INSERT INTO tapis_schema (version) VALUES ($1)",
                             SCHEMA_VERSION + 1)
    await connection.close()
    with pytest.raises(SchemaError, match=f"version {SCHEMA_VERSION + 1}, newer"):
        await PostgresStore.open(database_url)


async def test_an_unreachable_database_is_refused_naming_the_url_without_password() -> None:
    url = "postgresql://tapis:s3cret@127.0.0.1:1/tapis"
    with pytest.raises(DatabaseUnreachable) as refused:
        await PostgresStore.open(url)
    assert "127.0.0.1:1/tapis" in str(refused.value) and "s3cret" not in str(refused.value)
    assert redacted(url) == "postgresql://tapis:***@127.0.0.1:1/tapis"


async def test_a_fenced_append_is_refused_once_the_epoch_moved_on(database_url: str) -> None:
    store = await PostgresStore.open(database_url, node_id="a", fenced=True, preload=False)
    await store.created("g", {"kind": "war"})
    await store.appended("g", 1, {"i": 1})
    async with store.pool.acquire() as connection:  # another node takes the table over
        await connection.execute("UPDATE games SET owner = 'b', epoch = epoch + 1")
    with pytest.raises(JournalConflict):
        await store.appended("g", 2, {"i": 2})
    with pytest.raises(JournalConflict):  # nothing after a refused input, not even index 3
        await store.appended("g", 3, {"i": 3})
    with pytest.raises(JournalConflict):  # nor a snapshot of it
        await store.snapshot("g", 2, {"format": 1, "index": 2, "table": {}})
    _, snapshot, journal = await store.load_game("g")
    assert journal == [{"i": 1}] and snapshot is None
    await store.aclose()


async def test_a_refused_input_fails_the_ones_queued_behind_it_and_no_other_table(
        database_url: str) -> None:
    store = await PostgresStore.open(database_url)
    await asyncio.gather(store.created("g", {"kind": "war"}), store.created("h", {"k": 1}))
    await store.appended("g", 1, {"mine": True})
    async with store.pool.acquire() as connection:  # another writer appends index 2 first
        await connection.execute("INSERT INTO journal VALUES ('g', 2, '{\"theirs\":true}')")
    results = await asyncio.gather(store.appended("g", 2, {"mine": 2}),
                                   store.appended("h", 1, {"h": 1}),
                                   store.appended("g", 3, {"mine": 3}),
                                   return_exceptions=True)
    assert isinstance(results[0], JournalConflict) and isinstance(results[2], JournalConflict)
    assert results[1] is None
    _, _, journal = await store.load_game("g")
    assert journal == [{"mine": True}, {"theirs": True}]
    await store.appended("g", 3, {"after": "reload"})  # read again: appends go on
    assert (await store.load_game("g"))[2][-1] == {"after": "reload"}
    await store.aclose()


def test_a_table_with_a_bot_or_a_turn_timer_is_timed() -> None:
    from tapis_engine import table as tbl
    from tapis_engine import table_codec
    from tapis_engine.protocol import GameSetup
    from tapis_engine.registry import rules_for
    from tapis_service.stores.postgres_store import _timed

    rules = rules_for("war")
    assert rules is not None

    def record(bots: tuple[str | None, ...], turn_time_ms: int) -> dict[str, object]:
        initial = tbl.Table(kind="war", setup=GameSetup(seats=2, seed=1,
                                                        options=rules.default_options(),
                                                        stacked_deck=None, stacked_first=None),
                            turn_time_ms=turn_time_ms,
                            seats=tuple(tbl.SeatSlot(bot=b, claimed=b is not None)
                                        for b in bots))
        return {"initial": table_codec.encode_table(rules, initial)}

    assert _timed(record(("basic", None), 0)) and _timed(record((None, None), 5000))
    assert not _timed(record((None, None), 0))


async def test_the_probe_commits_a_write_of_its_own(database_url: str) -> None:
    store = await PostgresStore.open(database_url)
    await store.probe()
    async with store.pool.acquire() as connection:
        assert await connection.fetchval("SELECT count(*) FROM meta WHERE key = 'probe'") == 1
    await store.aclose()


async def test_a_lost_connection_fails_the_write_unavailable_then_the_store_reconnects(
        database_url: str) -> None:
    from tapis_service.stores.store import CommitUnknown, StoreUnavailable

    store = await PostgresStore.open(database_url)
    await store.created("g", {"kind": "war"})
    await store.appended("g", 1, {"i": 1})
    async with store.pool.acquire() as connection:
        database = await connection.fetchval("SELECT current_database()")
    admin = await asyncpg.connect(database_url, database="postgres")
    # The database drops the writer's session and takes no new one until told again.
    await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
    killed = [row["pid"] for row in await admin.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1", database)]
    assert killed
    await admin.execute("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) pid", killed)
    async with asyncio.timeout(30):  # pg_terminate_backend only signals: wait until gone
        while await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", killed):
            await asyncio.sleep(0.01)
        writer = store.writer._lanes[0].connection
        while writer is not None and _open(writer):  # and until the writer has seen it
            await asyncio.sleep(0.01)
    # Refused (no session to be had), or in doubt when the pool handed the writer another of
    # its idle sessions, killed too, before it noticed: both UNAVAILABLE, neither applied.
    with pytest.raises((StoreUnavailable, CommitUnknown)):
        await store.appended("g", 2, {"i": 2})
    await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
    await admin.close()
    await store.probe()  # the writer reconnects
    _, _, journal = await store.load_game("g")  # read again: appends go on from here
    assert journal == [{"i": 1}]
    await store.appended("g", 2, {"i": 2, "again": True})
    assert (await store.load_game("g"))[2] == [{"i": 1}, {"i": 2, "again": True}]
    await store.aclose()


def _open(connection: asyncpg.Connection) -> bool:
    try:
        return not connection.is_closed()
    except asyncpg.InterfaceError:  # released back to the pool
        return False
