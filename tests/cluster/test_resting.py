"""Tables at rest on a cluster node (resting.py): a finished table leaves its owner's memory
and the owner stays its owner; ListGames lists it from any node, and a call through any node
loads it back on its owner, confirmed at its epoch. Once the owner leaves, the next call
adopts it elsewhere as any orphan (the node takes it over at a new epoch and loads it), and
its request ids answer as before; a ListGames that takes the orphans over holds them at rest,
loading none. Nodes run in this process (``create_server``)."""

from __future__ import annotations

from dataclasses import replace

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.door.caller import Caller
from tapis_service.observe.errors import ServiceError
from tapis_service.process.server import RunningServer, create_server
from tests.support.calls import auth
from tests.support.postgres import Postgres
from tests.support.process import free_port
from tests.support.resting import REVEAL, finished_war, views
from tests.support.server import TEST_SETTINGS
from tests.support.tables import live_of, resting_of

TABLES = 3


async def start_node(url: str) -> RunningServer:
    port = free_port()
    return await create_server(replace(
        TEST_SETTINGS, port=port, store="postgres", database_url=url,
        advertise=f"127.0.0.1:{port}", node_ttl_s=3.0))


async def test_a_resting_table_stays_with_its_owner_and_wakes_through_any_node(
        postgres: Postgres) -> None:
    database = await postgres.create_database()
    nodes: list[RunningServer] = []
    running: list[RunningServer] = []
    channels: list[grpc.aio.Channel] = []
    try:
        nodes = [await start_node(postgres.url(database)) for _ in range(2)]
        running.extend(nodes)
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{n.port}") for n in nodes]
        owner, other = (pb_grpc.GameServiceStub(c) for c in channels)
        played = [await finished_war(owner, create_id=f"c{n}") for n in range(TABLES)]
        before = {game_id: await views(owner, game_id, tokens)
                  for game_id, tokens, _ in played}
        assert nodes[0].host.shelf.rest_idle(force=True) == TABLES
        assert not live_of(nodes[0].host) and len(resting_of(nodes[0].host)) == TABLES
        listed = await other.ListGames(pb.ListGamesRequest(include_finished=True))
        assert {g.game_id for g in listed.games} == set(before) and not listed.partial
        assert not live_of(nodes[0].host) and not live_of(nodes[1].host)  # listed, not loaded

        game_id, tokens, answers = played[0]
        assert await views(other, game_id, tokens) == before[game_id]  # relayed to its owner
        assert set(live_of(nodes[0].host)) == {game_id} and not live_of(nodes[1].host)
        seat, first = answers[0]
        retried = await other.SubmitAction(pb.SubmitActionRequest(
            game_id=game_id, action=REVEAL, request_id="r1"), metadata=auth(tokens[seat]))
        assert retried.SerializeToString() == first

        leaving = nodes[0]
        running.remove(leaving)
        await leaving.stop(0)  # a graceful stop hands every table off, resting ones too
        nodes[1].cluster.listing._orphans_asked.clear()  # as a sweep period later
        listed = await other.ListGames(pb.ListGamesRequest(include_finished=True))
        assert {g.game_id for g in listed.games} == set(before)
        assert set(resting_of(nodes[1].host)) == set(before)  # taken over at rest: not loaded
        assert not live_of(nodes[1].host)
        game_id, tokens, answers = played[1]
        assert await views(other, game_id, tokens) == before[game_id]  # adopted here
        assert set(live_of(nodes[1].host)) == {game_id}
        seat, first = answers[-1]
        retried = await other.SubmitAction(pb.SubmitActionRequest(
            game_id=game_id, action=REVEAL, request_id=f"r{len(answers)}"),
            metadata=auth(tokens[seat]))
        assert retried.SerializeToString() == first
        joined = await other.JoinGame(pb.JoinGameRequest(
            game_id=game_id, seat=1, display_name="p1", request_id="j1"))
        assert joined.seat_token == tokens[1]
        assert live_of(nodes[1].host)[game_id].epoch == 2  # taken over at a new epoch
        assert nodes[1].host.shelf.rest_idle(force=True) == 1  # and it rests there
        assert resting_of(nodes[1].host)[game_id].epoch == 2
    finally:
        for channel in channels:
            await channel.close()
        for node in reversed(running):
            await node.stop(0)
        await postgres.drop_database(database)


async def test_a_call_reaching_a_node_that_let_its_table_go_is_told_it_moved(
        postgres: Postgres) -> None:
    """A call routed here just before a graceful stop handed the table off finds no session:
    TABLE_MOVED (retried where the table went), not NOT_FOUND (a rolling restart once told a
    player its game did not exist)."""
    node = await start_node(postgres.url(await postgres.create_database()))
    try:
        assert node.cluster is not None
        raw = pb.GetGameRequest(game_id="handed-off").SerializeToString()
        for leaving, expected in ((False, "GAME_NOT_FOUND"), (True, "TABLE_MOVED")):
            node.cluster.locator.leaving = leaving
            try:
                await node.cluster.relay.local("GetGame", raw, Caller())
            except ServiceError as refused:
                assert refused.reason == expected
            else:
                raise AssertionError("a table nobody holds was served")
        node.cluster.locator.leaving = False
    finally:
        await node.stop(0)
