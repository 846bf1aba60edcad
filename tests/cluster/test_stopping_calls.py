"""A unary call still in flight when a node's graceful stop ends its grace: cut by the node
with a precise status (``stopcalls``), never grpc's reasonless ``UNAVAILABLE "Cancelling all
calls"`` (what such a call was answered before) nor ``CANCELLED``. A read is ``SERVER_STOPPING``,
a write ``COMMIT_UNKNOWN`` (it may have committed), and the write's retry with the same
request id on the other node is answered. The call is held in flight by a gate on the serving
node's method (nothing is timed): served at the stopping node, or relayed by it to the other."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tapis.v1 import game_service_pb2 as pb
from tests.cluster.inprocess import Running, two_nodes
from tests.support.calls import person_seats, refusal
from tests.support.postgres import Postgres


def hold(node: Running, method: str) -> asyncio.Event:
    """Calls of ``method`` served at ``node`` wait for ever (the event: one reached it)."""
    relay = node.node.cluster.relay
    rpc, _ = relay.served[method]
    reached = asyncio.Event()

    async def held(request: Any, caller: Any) -> Any:
        reached.set()
        await asyncio.Event().wait()

    relay.served[method] = (rpc, held)
    return reached


@pytest.mark.parametrize("relayed", [False, True], ids=["served", "relayed"])
@pytest.mark.parametrize(("method", "reason"), [("GetGame", "SERVER_STOPPING"),
                                                ("JoinGame", "COMMIT_UNKNOWN")])
async def test_a_call_in_flight_when_the_grace_ends_gets_a_precise_status(
        postgres: Postgres, relayed: bool, method: str, reason: str) -> None:
    async with two_nodes(postgres, store_retry_ms=50) as (_, a, b):
        owner = b if relayed else a  # a stopping: the call is served there, or relayed to b
        created = await owner.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
        game_id = created.game.game_id
        reached = hold(owner, method)
        join = pb.JoinGameRequest(game_id=game_id, display_name="Al", request_id="join-1")
        call = asyncio.ensure_future(refusal(
            a.stub.GetGame(pb.GetGameRequest(game_id=game_id)) if method == "GetGame"
            else a.stub.JoinGame(join)))
        await reached.wait()
        stop = a.node.stop

        async def stopped(grace_s: float | None = None) -> None:
            """a stopped already (the cluster's teardown stops it no second time)."""

        a.node.stop = stopped  # type: ignore[method-assign]
        await stop(0)  # the grace ends with the call in flight
        code, got, _ = await call
        assert (code, got) == ("UNAVAILABLE", reason)
        if method == "JoinGame":  # its retry, on the node left, is answered
            relay = owner.node.cluster.relay
            relay.served[method] = (relay.served[method][0], owner.node.api.join_game)
            joined = await b.stub.JoinGame(join)
            assert joined.seat_token
            assert await b.stub.JoinGame(join) == joined


@pytest.mark.parametrize("method", ["GetGame", "JoinGame"])
async def test_a_call_relayed_to_the_stopping_node_is_served_where_the_table_goes(
        postgres: Postgres, method: str) -> None:
    """The other direction: b relays the call to a, which stops with it in flight; b's tunnel
    ends, b looks the table up again, takes it over and answers (the held attempt applied
    nothing, so the write is applied once, here)."""
    async with two_nodes(postgres, store_retry_ms=50) as (_, a, b):
        created = await a.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
        game_id = created.game.game_id
        reached = hold(a, method)
        join = pb.JoinGameRequest(game_id=game_id, display_name="Al", request_id="join-1")
        call = asyncio.ensure_future(
            b.stub.GetGame(pb.GetGameRequest(game_id=game_id)) if method == "GetGame"
            else b.stub.JoinGame(join))
        await reached.wait()
        stop = a.node.stop

        async def stopped(grace_s: float | None = None) -> None:
            """a stopped already (the cluster's teardown stops it no second time)."""

        a.node.stop = stopped  # type: ignore[method-assign]
        await stop(0)
        answer = await call
        if method == "JoinGame":
            assert await b.stub.JoinGame(join) == answer
        view = (await b.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert sum(seat.taken for seat in view.seats) == (method == "JoinGame")
