"""Calls that reach the server just as its graceful stop begins grpc's shutdown: grpc.aio asks
grpc's core for one call at a time, and a call that arrives while none is asked for waits in
the core; the shutdown kills those with ``RST_STREAM CANCEL`` (the client: ``CANCELLED``, no
reason, no Python code run). The stop first lets Python take what the core holds
(``corecalls.caught_up``) and refuses what it takes from then on with ``SERVER_STOPPING``
(nothing applied), so every such call gets a reason.

The calls are made to wait in the core deterministically: the stop's last step before the
shutdown (``host.end_streams``) is held, the event loop blocked, until channelz counts them
started in the core (which matches the first to the one call asked for; the others wait)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import grpc
import pytest
from grpc._cython import cygrpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tests.support.calls import person_seats, reason_of
from tests.support.server import ServerFactory

ARRIVING = 4
WITHIN_S = 10.0
"""The longest the test waits for grpc's core to count the calls (they are local)."""


def started(server_id: int) -> int:
    """The calls grpc's core has started for the server (channelz)."""
    data = json.loads(cygrpc.channelz_get_server(server_id))["server"]["data"]
    return int(data.get("callsStarted", 0))


def outcome(future: Any) -> tuple[str, str]:
    """(code name, ErrorInfo reason) of a finished call ("OK", "" when answered)."""
    try:
        future.result()
    except grpc.RpcError as error:
        return error.code().name, reason_of(error)  # type: ignore[arg-type]
    return "OK", ""


@pytest.mark.parametrize("write", [False, True], ids=["reads", "writes"])
async def test_calls_waiting_in_grpcs_core_when_the_stop_begins_get_a_reason(
        make_server: ServerFactory, write: bool) -> None:
    harness = await make_server()
    running = harness.running
    assert running.core_id is not None
    game_ids = [(await harness.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))).game.game_id
        for _ in range(ARRIVING)]
    game_id = game_ids[0]
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")  # its own threads
    stub = pb_grpc.GameServiceStub(channel)
    await asyncio.to_thread(stub.GetGame, pb.GetGameRequest(game_id=game_id))  # connected
    calls: list[Any] = []
    plain = running.host.end_streams

    def arriving() -> None:
        """The calls sent, and the loop held until the core has them all."""
        plain()
        running.host.end_streams = plain  # type: ignore[method-assign]  # once
        before = started(running.core_id)  # type: ignore[arg-type]
        for table in game_ids:
            calls.append(stub.JoinGame.future(pb.JoinGameRequest(
                game_id=table, display_name="Al", request_id="join-1"))
                if write else stub.GetGame.future(pb.GetGameRequest(game_id=table)))
        give_up = time.monotonic() + WITHIN_S
        while started(running.core_id) < before + ARRIVING:  # type: ignore[arg-type]
            assert time.monotonic() < give_up, "the calls never reached grpc's core"
            time.sleep(0.001)  # the loop held on purpose: nothing of the server runs

    running.host.end_streams = arriving  # type: ignore[method-assign]
    await running.stop(5.0)
    outcomes = [await asyncio.to_thread(outcome, call) for call in calls]
    channel.close()
    assert len(outcomes) == ARRIVING
    for code, reason in outcomes:  # answered, or refused with a reason (nothing applied)
        assert (code, reason) in {("OK", ""), ("UNAVAILABLE", "SERVER_STOPPING")}, outcomes
