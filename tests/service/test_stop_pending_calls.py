"""Calls that reach the server just as its graceful stop begins grpc's shutdown: grpc.aio asks
grpc's core for one call at a time, and a call that arrives while none is asked for waits in
the core; the shutdown kills those with ``RST_STREAM CANCEL`` (the client: ``CANCELLED``, no
reason, no Python code run). The stop first lets Python take what the core holds
(``corecalls.caught_up``) and refuses what it takes from then on with ``SERVER_STOPPING``
(nothing applied), so every such call gets a reason (``tests.support.core_queue``: the calls
made to wait in the core deterministically)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.process.startup import WaitingRoom
from tests.support.calls import person_seats
from tests.support.core_queue import outcome, queue, queue_at_stop
from tests.support.process import free_port
from tests.support.server import TEST_SETTINGS, ServerFactory

ARRIVING = 4


@pytest.mark.parametrize("write", [False, True], ids=["reads", "writes"])
async def test_calls_waiting_in_grpcs_core_when_the_stop_begins_get_a_reason(
        make_server: ServerFactory, write: bool) -> None:
    harness = await make_server()
    running = harness.running
    game_ids = [(await harness.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))).game.game_id
        for _ in range(ARRIVING)]
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")  # its own threads
    stub = pb_grpc.GameServiceStub(channel)
    await asyncio.to_thread(stub.GetGame, pb.GetGameRequest(game_id=game_ids[0]))  # connected
    calls = queue_at_stop(running, lambda: [
        stub.JoinGame.future(pb.JoinGameRequest(game_id=game_id, display_name="Al",
                                                request_id="join-1"))
        if write else stub.GetGame.future(pb.GetGameRequest(game_id=game_id))
        for game_id in game_ids])
    await running.stop(5.0)
    outcomes = [await asyncio.to_thread(outcome, call) for call in calls]
    channel.close()
    assert len(outcomes) == ARRIVING
    for code, reason in outcomes:  # answered, or refused with a reason (nothing applied)
        assert (code, reason) in {("OK", ""), ("UNAVAILABLE", "SERVER_STOPPING")}, outcomes


async def test_calls_waiting_in_the_waiting_rooms_core_at_the_hand_over_get_a_reason() -> None:
    """The health-only server that holds the port while the server starts gives it up the same
    way: the calls waiting in its core are taken first, each answered SERVER_STARTING (a
    client retries and reaches the real server), none CANCELLED."""
    port = free_port()
    room = await WaitingRoom.open(replace(TEST_SETTINGS, port=port))
    assert room is not None and room.core_id is not None
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")  # its own threads
    stub = pb_grpc.GameServiceStub(channel)
    first = await asyncio.to_thread(outcome, stub.GetGame.future(pb.GetGameRequest(game_id="g")))
    assert first == ("UNAVAILABLE", "SERVER_STARTING")  # connected
    calls = queue(room.core_id, lambda: [
        stub.GetGame.future(pb.GetGameRequest(game_id="g")) for _ in range(ARRIVING)])
    await room.close()
    outcomes = [await asyncio.to_thread(outcome, call) for call in calls]
    channel.close()
    assert outcomes == [("UNAVAILABLE", "SERVER_STARTING")] * ARRIVING
