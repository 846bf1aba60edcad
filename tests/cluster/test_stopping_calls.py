"""A unary call still in flight when a node's graceful stop ends its grace: cut by the node
with a precise status (``stopcalls``), never grpc's reasonless ``UNAVAILABLE "Cancelling all
calls"`` (what such a call was answered before) nor ``CANCELLED``. A read is ``SERVER_STOPPING``,
a write ``COMMIT_UNKNOWN`` (it may have committed), and the write's retry with the same
request id on the other node is answered. The call is held in flight by a gate on the serving
node's method (nothing is timed): served at the stopping node, or relayed by it to the other."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.cluster.node import HAND_OFF_MIN_S
from tapis_service.process.server import CLOSE_MARGIN_S, CUT_MARGIN_S, RunningServer, create_server
from tests.cluster.inprocess import Running, two_nodes
from tests.support.calls import person_seats, reason_of, refusal
from tests.support.core_queue import outcome, queue_at_stop
from tests.support.frozen_database import FreezableProxy, socket_of
from tests.support.postgres import Postgres
from tests.support.process import free_port
from tests.support.server import TEST_SETTINGS


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


GRACE_S = 0.5
STOP_BOUND_S = max(GRACE_S, HAND_OFF_MIN_S) + CUT_MARGIN_S + CLOSE_MARGIN_S + 1.0
"""The longest a stop may take whatever its database does (the 1 s: the test's own slack)."""
TAKEOVER_WITHIN_S = 30.0


async def answered(call: Callable[[], Awaitable[Any]]) -> Any:
    """``call()``'s answer once it gives one: UNAVAILABLE (the old owner's lease not run
    out yet, TABLE_MOVED) is retried until then."""
    give_up = asyncio.get_running_loop().time() + TAKEOVER_WITHIN_S
    while True:
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE \
                    or asyncio.get_running_loop().time() > give_up:
                raise
        await asyncio.sleep(0.1)


async def test_a_stop_returns_within_its_bound_while_its_database_is_frozen(
        postgres: Postgres) -> None:
    """A node whose PostgreSQL answers nothing (frozen: connections open, no byte back) stops
    within its grace and margins: its hand-off is abandoned, the write in flight is cut
    COMMIT_UNKNOWN, and once its lease runs out the other node takes the table over with the
    acknowledged write there and the cut one applied once on its retry."""
    database = await postgres.create_database()
    url = postgres.url(database)
    channels: list[grpc.aio.Channel] = []
    nodes: list[RunningServer] = []
    try:
        async with FreezableProxy(socket_of(url)) as proxy:
            for through in (proxy.url(database), url):  # a: through the proxy; b: direct
                port = free_port()
                nodes.append(await create_server(replace(
                    TEST_SETTINGS, port=port, store="postgres", database_url=through,
                    advertise=f"127.0.0.1:{port}", node_ttl_s=1.5, store_retry_ms=50,
                    grace_s=GRACE_S)))
                channels.append(grpc.aio.insecure_channel(f"127.0.0.1:{port}"))
            a, b = (pb_grpc.GameServiceStub(channel) for channel in channels)
            created = await a.CreateGame(pb.CreateGameRequest(
                kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
            game_id = created.game.game_id
            first = pb.JoinGameRequest(game_id=game_id, display_name="Al", request_id="j-1")
            acknowledged = await a.JoinGame(first)
            proxy.freeze()
            second = pb.JoinGameRequest(game_id=game_id, display_name="Bo", request_id="j-2")
            cut = asyncio.ensure_future(refusal(a.JoinGame(second)))
            guard = nodes[0].guard
            assert guard is not None
            while not guard.calls:  # the write is in flight at a (waiting on its database)
                await asyncio.sleep(0.01)
            await asyncio.wait_for(nodes[0].stop(GRACE_S), STOP_BOUND_S)
            stopped = nodes.pop(0)
            assert (await cut)[:2] == ("UNAVAILABLE", "COMMIT_UNKNOWN")
            # b: the table once a's lease ran out; the acknowledged write is there
            assert await answered(lambda: b.JoinGame(first)) == acknowledged
            await answered(lambda: b.JoinGame(second))
            view = (await b.GetGame(pb.GetGameRequest(game_id=game_id))).game
            assert [seat.display_name for seat in view.seats] == ["Al", "Bo"]
            assert stopped.cluster.node_id != nodes[0].cluster.node_id
    finally:
        for channel in channels:
            await channel.close()
        for node in nodes:
            await node.stop(0)
        await postgres.drop_database(database)


@pytest.mark.parametrize("method", ["GetGame", "JoinGame"])
async def test_calls_for_another_nodes_table_waiting_in_grpcs_core_at_the_stop_get_a_reason(
        postgres: Postgres, method: str) -> None:
    """Calls that wait in the stopping node's grpc core for a table the other node owns (they
    would be relayed): taken before the shutdown and refused SERVER_STOPPING, never relayed
    (``tests.support.core_queue``); the other node's table is unchanged."""
    async with two_nodes(postgres, store_retry_ms=50) as (_, a, b):
        game_ids = [(await b.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))).game.game_id
            for _ in range(3)]
        channel = grpc.insecure_channel(f"127.0.0.1:{a.node.port}")  # its own threads
        stub = pb_grpc.GameServiceStub(channel)
        await asyncio.to_thread(stub.GetGame, pb.GetGameRequest(game_id=game_ids[0]))
        calls = queue_at_stop(a.node, lambda: [
            stub.GetGame.future(pb.GetGameRequest(game_id=game_id)) if method == "GetGame"
            else stub.JoinGame.future(pb.JoinGameRequest(game_id=game_id, display_name="Al",
                                                         request_id="join-1"))
            for game_id in game_ids])
        stop = a.node.stop

        async def stopped(grace_s: float | None = None) -> None:
            """a stopped already (the cluster's teardown stops it no second time)."""

        a.node.stop = stopped  # type: ignore[method-assign]
        await stop(5.0)
        outcomes = [await asyncio.to_thread(outcome, call) for call in calls]
        channel.close()
        assert outcomes == [("UNAVAILABLE", "SERVER_STOPPING")] * len(game_ids)
        for game_id in game_ids:  # nothing was relayed
            view = (await b.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
            assert not any(seat.taken for seat in view.seats)


async def test_a_call_waiting_for_the_lease_when_the_stop_begins_gets_a_reason(
        postgres: Postgres) -> None:
    """A call waiting for the node's lease renewal (its lease ran out) when the stop begins:
    the stop ends the heartbeat, which was waiting for the same renewal; that renewal must not
    be cancelled under the call (whose task would end with CancelledError: grpc then answers
    ``CANCELLED`` with no reason). The renewal is held by an event."""
    async with two_nodes(postgres, store_retry_ms=50) as (_, a, _b):
        created = await a.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
        cluster = a.node.cluster
        renew = cluster.directory.renew
        reached, release = asyncio.Event(), asyncio.Event()

        async def held() -> bool:
            reached.set()
            await release.wait()
            return bool(await renew())

        cluster.directory.renew = held
        await reached.wait()  # the heartbeat's renewal is under way (one a second)
        cluster.locator.lease_until = -math.inf  # the lease ran out: calls wait for it
        call = asyncio.ensure_future(answer_of(a.stub.GetGame(pb.GetGameRequest(
            game_id=created.game.game_id))))
        guard = a.node.guard
        assert guard is not None
        while not guard.calls:  # the call waits for the renewal
            await asyncio.sleep(0.01)
        stop = a.node.stop

        async def stopped(grace_s: float | None = None) -> None:
            """a stopped already (the cluster's teardown stops it no second time)."""

        a.node.stop = stopped  # type: ignore[method-assign]
        stopping = asyncio.ensure_future(stop(0.5))
        while not cluster.locator.leaving:  # the stop has ended the heartbeat
            await asyncio.sleep(0.01)
        await asyncio.sleep(0)
        release.set()
        code, reason = await call
        await stopping
        assert code == "OK" or (code, reason) in {("UNAVAILABLE", "TABLE_MOVED"),
                                                  ("UNAVAILABLE", "SERVER_STOPPING")}, code


async def answer_of(call: Awaitable[Any]) -> tuple[str, str]:
    """(code name, ErrorInfo reason) of an awaited call ("OK", "" when answered)."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return error.code().name, reason_of(error)
    return "OK", ""
