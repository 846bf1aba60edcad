"""The cluster's directory queries on a real PostgreSQL, rows written by hand: which tables the
orphan sweep takes over, what a takeover waits for, and what a renewal counts. Liveness is
judged on an injected clock (``Liveness``): a member is dead once its heartbeat was read
unchanged a TTL apart, whatever any wall clock says."""

from __future__ import annotations

import asyncio

import asyncpg

from tapis_service.cluster.directory import UNOWNED, Directory, Owner
from tapis_service.cluster.liveness import Liveness
from tapis_service.observe.clock import ManualClock
from tapis_service.stores import postgres_sql
from tapis_service.stores.postgres_store import PostgresStore
from tests.support.damage import TOO_DEEP


def seconds(clock: ManualClock) -> Liveness:
    """A TTL-3 s liveness read on ``clock`` (the test moves it)."""
    return Liveness(3.0, lambda: clock.now_ms() / 1000)


async def waiting_on_a_lock(store: PostgresStore, *queries: asyncio.Future[object]) -> None:
    """Until as many sessions of the database wait on a lock as ``queries`` (which must not
    end first)."""
    async with store.pool.acquire() as connection:
        while await connection.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()") < len(queries):
            assert not any(query.done() for query in queries)
            await asyncio.sleep(0.01)


async def beat(connection: asyncpg.Connection, node_id: str) -> None:
    """A renewal of ``node_id``'s membership, as its trigger sees one: a new heartbeat."""
    await connection.execute("UPDATE members SET expires_at = now() WHERE node_id = $1",
                             node_id)


async def test_the_sweep_takes_dead_and_departed_owners_tables_never_its_own(
        database_url: str) -> None:
    store = await PostgresStore.open(database_url)
    clock = ManualClock()
    try:
        async with store.pool.acquire() as connection:
            for node_id in ("me", "dead", "alive"):
                await connection.execute(
                    "INSERT INTO members (node_id, address, expires_at) "
                    "VALUES ($1, 'x', now())", node_id)
            for game_id, owner, finished in (
                    ("mine", "me", False), ("of-the-dead", "dead", False),
                    ("of-the-living", "alive", False), ("handed-off", None, False),
                    ("over", "dead", True)):
                await connection.execute(
                    "INSERT INTO games (game_id, record, owner, epoch, finished) "
                    "VALUES ($1, '{}', $2, 3, $3)", game_id, owner, finished)
            directory = Directory(store.pool, "me", "x", 3.0, seconds(clock))
            assert sorted(await directory.live_members()) == ["alive", "dead", "me"]
            clock.advance(2900)  # within a TTL of the first reading: nobody is dead yet
            await beat(connection, "alive")
            assert sorted(await directory.live_members()) == ["alive", "dead", "me"]
            assert await directory.sweep_orphans(10) == [("handed-off", 4)]
            clock.advance(100)  # a TTL: "dead" (and "me", late renewing) did not beat
            await beat(connection, "alive")
            assert sorted(await directory.live_members()) == ["alive"]
        # "me" is late renewing: its own table stays as it is
        swept = await directory.sweep_orphans(10)
        assert sorted(swept) == [("of-the-dead", 4)]
        async with store.pool.acquire() as connection:
            rows = await connection.fetch("SELECT game_id, owner, epoch FROM games")
            taken = dict(await connection.fetch("SELECT node_id, taken FROM members"))
        assert {r["game_id"]: (r["owner"], r["epoch"]) for r in rows} == {
            "mine": ("me", 3), "of-the-dead": ("me", 4), "of-the-living": ("alive", 3),
            "handed-off": ("me", 4), "over": ("dead", 3)}
        assert taken == {"me": 0, "dead": 1, "alive": 0}  # counted on the loser's row
    finally:
        await store.aclose()


async def test_a_member_that_beats_again_after_it_was_judged_dead_keeps_its_tables(
        database_url: str) -> None:
    """Judged dead, then renewed before the sweep (a pause just past the TTL): the sweep and
    a takeover both find its heartbeat moved on and take nothing."""
    store = await PostgresStore.open(database_url)
    clock = ManualClock()
    try:
        async with store.pool.acquire() as connection:
            await connection.execute("INSERT INTO members (node_id, address, expires_at) "
                                     "VALUES ('paused', 'a', now())")
            await connection.execute("INSERT INTO games (game_id, record, owner, epoch) "
                                     "VALUES ('kept', '{}', 'paused', 1)")
            heir = Directory(store.pool, "heir", "b", 3.0, seconds(clock))
            seen = await heir.owner_of("kept")
            assert seen is not None and seen.alive
            clock.advance(3000)
            judged = await heir.owner_of("kept")
            assert judged is not None and not judged.alive and judged.beat == seen.beat
            await beat(connection, "paused")  # it came back
        assert await heir.sweep_orphans(10) == []
        assert await heir.take_over("kept", judged) is None
        assert await heir.holds("kept", 1) is False
        owner = await heir.owner_of("kept")
        assert owner is not None and owner.alive and owner.node_id == "paused"
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
                "('old', 'a', now()), ('live', 'b', now())")
            await connection.execute(
                "INSERT INTO games (game_id, record, owner, epoch) VALUES "
                "('moving', '{}', 'old', 1), ('kept', '{}', 'live', 1)")
            beats = dict(await connection.fetch("SELECT node_id, beat FROM members"))
            await beat(connection, "live")  # it renewed since it was judged dead
        heir = Directory(store.pool, "heir", "c", 3.0)
        assert await heir.take_over("kept", Owner("live", 1, "b", False, beats["live"])) is None
        frozen = await asyncpg.connect(database_url)
        try:
            transaction = frozen.transaction()
            await transaction.start()
            assert await postgres_sql.append(
                frozen, [postgres_sql.Append("moving", 1, "{}", 1)], fenced=True) == [True]
            taking = asyncio.ensure_future(
                heir.take_over("moving", Owner("old", 1, "a", False, beats["old"])))
            await waiting_on_a_lock(store, taking)
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


async def dead_owner_of_two_tables(store: PostgresStore) -> Owner:
    """Members "dead", "a" and "b"; tables "t1" and "t2" of "dead" at epoch 1: "dead" as
    judged dead (its heartbeat)."""
    async with store.pool.acquire() as connection:
        await connection.execute("INSERT INTO members (node_id, address, expires_at) VALUES "
                                 "('dead', 'x', now()), ('a', 'a', now()), ('b', 'b', now())")
        await connection.execute("INSERT INTO games (game_id, record, owner, epoch) VALUES "
                                 "('t1', '{}', 'dead', 1), ('t2', '{}', 'dead', 1)")
        beat_of_dead = await connection.fetchval(
            "SELECT beat FROM members WHERE node_id = 'dead'")
    return Owner("dead", 1, "x", False, beat_of_dead)


async def test_two_takeovers_of_one_dead_owners_tables_at_once_both_succeed(
        database_url: str) -> None:
    """Two nodes take over two tables of one dead owner while a third session holds its row
    (a renewal's read): once it lets go, both succeed and both are counted. Each takeover
    counts itself on that row, so each must hold it for update from the start: two that had
    each shared it waited for each other (a deadlock, one of them aborted)."""
    store = await PostgresStore.open(database_url)
    holder = await asyncpg.connect(database_url)
    try:
        dead = await dead_owner_of_two_tables(store)
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute("SELECT 1 FROM members WHERE node_id = 'dead' FOR SHARE")
        first = asyncio.ensure_future(Directory(store.pool, "a", "a", 3.0).take_over("t1", dead))
        await waiting_on_a_lock(store, first)
        second = asyncio.ensure_future(
            Directory(store.pool, "b", "b", 3.0).take_over("t2", dead))
        await waiting_on_a_lock(store, first, second)
        await transaction.commit()
        assert await asyncio.gather(first, second) == [2, 2]
        async with store.pool.acquire() as connection:
            assert await connection.fetchval(
                "SELECT taken FROM members WHERE node_id = 'dead'") == 2
            assert dict(await connection.fetch("SELECT game_id, owner FROM games")) == {
                "t1": "a", "t2": "b"}
    finally:
        await holder.close()
        await store.aclose()


async def test_two_sweeps_of_one_dead_owners_tables_at_once_both_succeed(
        database_url: str) -> None:
    """The same for two nodes' orphan sweeps (one table each): both take one, neither is
    aborted."""
    store = await PostgresStore.open(database_url)
    holder = await asyncpg.connect(database_url)
    clock = ManualClock()
    try:
        await dead_owner_of_two_tables(store)
        liveness = seconds(clock)  # both sweepers judge by one reading: "dead" stood still
        sweepers = [Directory(store.pool, node, node, 3.0, liveness) for node in ("a", "b")]
        await sweepers[0].live_members()
        clock.advance(3000)
        async with store.pool.acquire() as connection:
            for node in ("a", "b"):
                await beat(connection, node)
        assert sorted(await sweepers[0].live_members()) == ["a", "b"]
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute("SELECT 1 FROM members WHERE node_id = 'dead' FOR SHARE")
        first = asyncio.ensure_future(sweepers[0].sweep_orphans(1))
        await waiting_on_a_lock(store, first)
        second = asyncio.ensure_future(sweepers[1].sweep_orphans(1))
        await waiting_on_a_lock(store, first, second)
        await transaction.commit()
        swept = await asyncio.gather(first, second)
        assert sorted(game for taken in swept for game, _ in taken) == ["t1", "t2"]
        async with store.pool.acquire() as connection:
            assert await connection.fetchval(
                "SELECT taken FROM members WHERE node_id = 'dead'") == 2
    finally:
        await holder.close()
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


async def test_a_renewal_that_waited_for_a_takeover_counts_it(database_url: str) -> None:
    """A takeover holds the loser's row until it commits; the loser's renewal, which waited
    for it, reads the table counted taken (its node rechecks what it holds), and a renewal
    after that reads the same count (a lost answer hides nothing: the node compares with the
    last count it saw)."""
    store = await PostgresStore.open(database_url)
    taker = await asyncpg.connect(database_url)
    try:
        late = Directory(store.pool, "late", "a", 3.0)
        assert await late.renew() == 0
        async with store.pool.acquire() as connection:
            await connection.execute("INSERT INTO games (game_id, record, owner, epoch) "
                                     "VALUES ('taken', '{}', 'late', 1)")
        transaction = taker.transaction()
        await transaction.start()
        await taker.execute("UPDATE games SET owner = 'heir', epoch = 2 "
                            "WHERE game_id = 'taken'")
        renewing = asyncio.ensure_future(late.renew())
        await waiting_on_a_lock(store, renewing)
        await transaction.commit()
        assert await renewing == 1
        assert await late.renew() == 1
    finally:
        await taker.close()
        await store.aclose()


async def test_a_step_of_the_databases_clock_moves_no_table(database_url: str) -> None:
    """Every membership made to look expired by the database's clock (a step forward of a
    year; the heartbeats not renewed meanwhile) and then not (a step back): the members stay
    alive while their heartbeats move, and the sweep takes nothing."""
    store = await PostgresStore.open(database_url)
    clock = ManualClock()
    try:
        directory = Directory(store.pool, "me", "x", 3.0, seconds(clock))
        async with store.pool.acquire() as connection:
            await connection.execute("INSERT INTO members (node_id, address, expires_at) "
                                     "VALUES ('other', 'y', now())")
            await connection.execute("INSERT INTO games (game_id, record, owner, epoch) "
                                     "VALUES ('theirs', '{}', 'other', 1)")
            assert sorted(await directory.live_members()) == ["other"]
            await connection.execute("ALTER TABLE members DISABLE TRIGGER members_beat")
            for step in ("- interval '1 year'", "+ interval '1 year'"):
                await connection.execute(f"UPDATE members SET expires_at = now() {step}")
                clock.advance(1000)
                assert sorted(await directory.live_members()) == ["other"]
                assert await directory.sweep_orphans(10) == []
                assert await directory.orphans(False, 10) == []
            await connection.execute("ALTER TABLE members ENABLE TRIGGER members_beat")
            await beat(connection, "other")
            clock.advance(2900)
            assert sorted(await directory.live_members()) == ["other"]
        assert await directory.sweep_orphans(10) == []
        owner = await directory.owner_of("theirs")
        assert owner is not None and owner.alive and owner.node_id == "other"
    finally:
        await store.aclose()


async def test_an_orphan_whose_listing_cannot_be_read_is_listed_without_it(
        database_url: str) -> None:
    """A stored listing that is not JSON, nested deeper than the decoder follows, or not an
    object reads as None (the node loads that table instead), never failing the sweep's read
    of every orphan."""
    store = await PostgresStore.open(database_url)
    try:
        directory = Directory(store.pool, "me", "x", 3.0, seconds(ManualClock()))
        async with store.pool.acquire() as connection:
            for game_id, listing in (("readable", '{"kind": "war"}'), ("cut", '{"kind'),
                                     ("too-deep", TOO_DEEP), ("a-list", "[1]")):
                await connection.execute(
                    "INSERT INTO games (game_id, record, finished, listing) "
                    "VALUES ($1, '{}', TRUE, $2)", game_id, listing)
        assert await directory.orphans(True, 10) == [
            ("readable", {"kind": "war"}), ("cut", None), ("too-deep", None), ("a-list", None)]
    finally:
        await store.aclose()
