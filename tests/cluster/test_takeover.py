"""Takeover in the cases that need no client to notice: an all-bot table on a killed node
finishes on another with no client call (the orphan sweep), and a paused node (a zombie) that
comes back after its table was taken over gives its tables up (its renewal finds its
membership lapsed, or its appends are refused) and never applies an action twice."""

from __future__ import annotations

import asyncio
import random
import signal

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tests.cluster.harness import TTL_S, StartNodes, fetch, journals
from tests.cluster.play import Stats, ledger_problems, new_table, play_to_the_end, retrying
from tests.support.calls import auth

WAIT_S = 60.0


async def until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    """Poll ``await condition()`` until true (bounded: the test fails, never hangs)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + WAIT_S
    while not await condition():
        assert loop.time() < give_up, f"not within {WAIT_S} s: {what}"
        await asyncio.sleep(0.05)


async def test_an_all_bot_table_on_a_killed_node_finishes_on_another_without_a_call(
        start_nodes: StartNodes, cluster_url: str) -> None:
    first, second = await start_nodes(2)
    async with grpc.aio.insecure_channel(first.address) as channel:
        created = await pb_grpc.GameServiceStub(channel).CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seats=2, seed=11, war=war_pb2.WarOptions(target_points=40),
            seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_BOT) for _ in range(2)]))
    game_id = created.game.game_id

    async def inputs() -> int:
        rows = await fetch(cluster_url, "SELECT count(*) AS n FROM journal WHERE game_id = $1",
                           game_id)
        return int(rows[0]["n"])

    async def moving() -> bool:
        return await inputs() >= 5

    await until(moving, "the bots play on the first node")
    first.kill()
    before = await inputs()

    async def finished() -> bool:
        rows = await fetch(cluster_url, "SELECT finished FROM games WHERE game_id = $1",
                           game_id)
        return bool(rows[0]["finished"])

    await until(finished, "the table finishes on the other node")
    assert await inputs() > before
    assert [e["game"] for e in second.events("table_taken_over")
            if e.get("trigger") == "sweep"] == [game_id]
    assert second.metric("tapis_cluster_takeovers_total", trigger="sweep") == 1
    for node in (first, second):  # every log line names its node
        lines = node.log_lines()
        assert lines and len({line.get("node") for line in lines}) == 1
        assert None not in {line.get("node") for line in lines}
    journal = (await journals(cluster_url))[game_id]
    assert [index for index, _ in journal] == list(range(1, len(journal) + 1))


async def test_a_zombie_node_is_refused_gives_its_tables_up_and_applies_nothing_twice(
        start_nodes: StartNodes, cluster_url: str) -> None:
    zombie, survivor = await start_nodes(2)
    stats = Stats()
    async with grpc.aio.insecure_channel(zombie.address) as to_zombie, \
            grpc.aio.insecure_channel(survivor.address) as to_survivor:
        at_zombie = pb_grpc.GameServiceStub(to_zombie)
        at_survivor = pb_grpc.GameServiceStub(to_survivor)
        table = await new_table(at_zombie, stats, "war", seed=5)
        bots = await at_zombie.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seats=2, seed=6, war=war_pb2.WarOptions(target_points=200),
            seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_BOT) for _ in range(2)]))
        rng = random.Random(3)
        await play_to_the_end(at_zombie, stats, table, rng, max_actions=6)

        zombie.signal(signal.SIGSTOP)  # past its TTL: the survivor takes both tables over
        await play_to_the_end(at_survivor, stats, table, rng, max_actions=12)

        async def bots_moved_on() -> bool:
            rows = await fetch(cluster_url, "SELECT epoch FROM games WHERE game_id = $1",
                               bots.game.game_id)
            return int(rows[0]["epoch"]) > 1 and bots.game.game_id in {
                e["game"] for e in survivor.events("table_taken_over")}

        await until(bots_moved_on, "the survivor sweeps the bot table")
        # its bot timers fire at once (appends at a stale epoch, refused) and its lapsed
        # membership is renewed (its tables given up before it serves them): either comes first
        zombie.signal(signal.SIGCONT)

        async def zombie_gave_up() -> bool:
            lost = {e["game"] for e in zombie.events("table_lost_to_another_node")}
            return {table.game_id, bots.game.game_id} <= lost

        await until(zombie_gave_up, "the zombie lets both tables go")

        async def zombie_forwards() -> bool:  # it serves the survivor's table, not its own
            view = (await retrying(stats, lambda: at_zombie.GetGame(
                pb.GetGameRequest(game_id=table.game_id),
                metadata=auth(table.tokens[0])))).game
            return view.version == table.acks[-1].version

        await until(zombie_forwards, "the zombie relays to the new owner")
        await play_to_the_end(at_zombie, stats, table, rng, max_actions=18)
    assert stats.errors == []
    assert zombie.metric("tapis_appends_refused_total") >= 1 or zombie.events(
        "membership_lapsed")
    assert zombie.metric("tapis_cluster_forwards_total", method="SubmitAction") >= 1
    assert len(table.acks) == 18
    stored = await journals(cluster_url)
    assert ledger_problems([table], stored) == []
    bot_journal = stored[bots.game.game_id]
    assert [index for index, _ in bot_journal] == list(range(1, len(bot_journal) + 1))
    assert TTL_S < WAIT_S


async def test_a_relaying_node_looks_past_a_frozen_owner_it_knew_the_address_of(
        start_nodes: StartNodes, cluster_url: str) -> None:
    """The relaying node had the owner's address from earlier calls; the table then passes to a
    third node (its row in the database) while the old owner freezes with its connections open
    (SIGSTOP: as a machine lost without a reset). The relaying node trusts the address it knew
    for one TTL only, then looks again and relays to the new owner."""
    frozen, relay, heir = await start_nodes(3)
    stats = Stats()
    async with grpc.aio.insecure_channel(frozen.address) as to_frozen, \
            grpc.aio.insecure_channel(relay.address) as to_relay:
        table = await new_table(pb_grpc.GameServiceStub(to_frozen), stats, "war", seed=8)
        at_relay = pb_grpc.GameServiceStub(to_relay)
        rng = random.Random(8)
        await play_to_the_end(at_relay, stats, table, rng, max_actions=3)  # relayed: known
        assert relay.metric("tapis_cluster_forwards_total", method="SubmitAction") == 3
        frozen.signal(signal.SIGSTOP)
        heir_id = (await fetch(cluster_url, "SELECT node_id FROM members WHERE address = $1",
                               heir.address))[0]["node_id"]
        await fetch(cluster_url, "UPDATE games SET owner = $1, epoch = epoch + 1 "
                    "WHERE game_id = $2 RETURNING epoch", heir_id, table.game_id)
        await play_to_the_end(at_relay, stats, table, rng, max_actions=8)
    assert stats.errors == []
    assert len(table.acks) == 8
    assert relay.metric("tapis_cluster_forwards_total", method="SubmitAction") == 8
    assert any(e.get("game") == table.game_id for e in heir.events("action_applied"))
    assert ledger_problems([table], await journals(cluster_url)) == []
