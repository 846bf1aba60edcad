"""Refusals are cheap and counted (issue 36): past its budget of refused calls (no key, a wrong
key, a bad token), an address is cut at the connection — its connections closed, its new ones
dropped for a cool-down — instead of being answered one call at a time, while other addresses
(and keyed callers) keep being served."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_service.door.caller import Caller
from tapis_service.door.connections import ConnectionLimits, RefusalBudget, counts_against_address
from tapis_service.door.proxies import TrustedProxies
from tapis_service.observe.clock import ManualClock
from tapis_service.observe.errors import ServiceError
from tapis_service.ws.endpoint import WebSocketEndpoint
from tests.support.calls import reason_of
from tests.support.refusals import from_address
from tests.support.relay import SourceRelay, tcp_state
from tests.support.server import ServerFactory
from tests.support.websocket import Client

STRANGER, PLAYER = "127.0.0.2", "127.0.0.3"
NO_KEY = ServiceError(grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED", "needs a key")


def test_only_strangers_refusals_count_and_never_a_keyed_caller_s() -> None:
    assert counts_against_address(NO_KEY)
    limited = ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", "slow down")
    assert not counts_against_address(limited)
    try:
        raise limited from ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN", "no")
    except ServiceError as error:
        assert counts_against_address(error)  # a bad token the limiter answered
    assert not counts_against_address(
        ServiceError(grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN", "wait"))
    clock = ManualClock()
    door = ConnectionLimits(RefusalBudget(1.0, 1, 10_000, clock.now_ms),
                TrustedProxies.parse("10.9.0.0/16"), keys_valid=lambda key: key == "good")
    for _ in range(5):
        door.refused("ipv4:10.0.0.2:1000", NO_KEY, api_key="good")  # a keyed caller
        door.refused("ipv4:10.9.0.1:1000", NO_KEY)  # a trusted proxy
        door.refused("ipv4:127.0.0.1:1000", NO_KEY)  # the host itself
    assert door.budget.cooling_keys() == []
    door.refused("ipv4:10.0.0.2:1000", NO_KEY, api_key="wrong")
    door.refused("ipv6:[2001:db8::1]:1000", NO_KEY)
    assert door.budget.cooling_keys() == []
    door.refused("ipv4:10.0.0.2:1000", NO_KEY)
    door.refused("ipv6:[2001:db8::2]:1000", NO_KEY)  # the same /64
    assert sorted(map(str, door.budget.cooling_keys())) == ["10.0.0.2/32", "2001:db8::/64"]


async def test_an_address_past_its_refusals_is_cut_while_another_keeps_being_served(
        make_server: ServerFactory) -> None:
    clock = ManualClock()
    harness = await make_server(clock=clock, refusal_burst=5, refusal_rate_per_s=1.0,
                                refusal_cooldown_s=60.0)
    door = harness.running.connection_limits
    assert door is not None
    game_id = (await harness.stub.CreateGame(
        pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))).game.game_id
    port = harness.running.port
    act = pb.SubmitActionRequest(game_id=game_id)  # no seat token: TOKEN_REQUIRED
    async with SourceRelay(STRANGER, "127.0.0.1", port) as far, \
            SourceRelay(PLAYER, "127.0.0.1", port) as near, \
            grpc.aio.insecure_channel(f"127.0.0.1:{far.port}") as stranger_channel, \
            grpc.aio.insecure_channel(f"127.0.0.1:{near.port}") as player_channel:
        stranger = pb_grpc.GameServiceStub(stranger_channel)
        player = pb_grpc.GameServiceStub(player_channel)
        for _ in range(5):  # within the budget: answered, one by one
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stranger.SubmitAction(act, timeout=5)
            assert reason_of(refused.value) == "TOKEN_REQUIRED"
        with pytest.raises(grpc.aio.AioRpcError):  # past it: the connection is cut
            await stranger.SubmitAction(act, timeout=5)
        assert door.budget.cooling(ipaddress.ip_network(f"{STRANGER}/32"))
        with pytest.raises(grpc.aio.AioRpcError) as cut:  # and its new connections dropped
            await stranger.GetGame(pb.GetGameRequest(game_id=game_id), timeout=1)
        assert cut.value.code() in (grpc.StatusCode.UNAVAILABLE,
                                    grpc.StatusCode.DEADLINE_EXCEEDED)
        for _ in range(3):  # another address is served all along
            answer = await player.GetGame(pb.GetGameRequest(game_id=game_id), timeout=5)
            assert answer.game.game_id == game_id
        clock.advance(60_000)  # the cool-down is over
        door.refilter()
    async with SourceRelay(STRANGER, "127.0.0.1", port) as far, \
            grpc.aio.insecure_channel(f"127.0.0.1:{far.port}") as channel:
        answer = await pb_grpc.GameServiceStub(channel).GetGame(
            pb.GetGameRequest(game_id=game_id), timeout=5, wait_for_ready=True)
        assert answer.game.game_id == game_id


async def test_wrong_keys_are_refused_precisely_and_counted(
        make_server: ServerFactory, tmp_path: Path) -> None:
    """The door checks a refused call's key (a keyed caller's refusals are never its address's)
    without changing the refusal: a wrong key is still INVALID_API_KEY."""
    keys = tmp_path / "keys"
    keys.write_text("backend-key-0123456789abcdef backend\n")
    harness = await make_server(clock=ManualClock(), api_keys_file=keys, refusal_burst=1)
    door = harness.running.connection_limits
    assert door is not None
    async with SourceRelay(STRANGER, "127.0.0.1", harness.running.port) as far, \
            grpc.aio.insecure_channel(f"127.0.0.1:{far.port}") as channel:
        stub = pb_grpc.GameServiceStub(channel)
        create = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR)
        with pytest.raises(grpc.aio.AioRpcError) as wrong:
            await stub.CreateGame(create, metadata=(("x-api-key", "not-a-key-of-this-server"),))
        assert reason_of(wrong.value) == "INVALID_API_KEY"
        assert not door.budget.cooling(ipaddress.ip_network(f"{STRANGER}/32"))
        keyed = (("x-api-key", "backend-key-0123456789abcdef"),)
        game_id = (await stub.CreateGame(create, metadata=keyed)).game.game_id
        for _ in range(3):  # a keyed backend's refusals never count against its address
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id),
                                        metadata=keyed)
            assert reason_of(refused.value) == "TOKEN_REQUIRED"
        assert not door.budget.cooling(ipaddress.ip_network(f"{STRANGER}/32"))
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.CreateGame(create)  # API_KEY_REQUIRED: the second, past the burst
        assert door.budget.cooling(ipaddress.ip_network(f"{STRANGER}/32"))


class BadTokens:
    """GetGame answered for the seat token ``good``, refused INVALID_TOKEN otherwise."""

    async def get_game(self, request: pb.GetGameRequest, caller: Caller) -> pb.GetGameResponse:
        if caller.seat_token != "good":
            raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN", "bad token")
        return pb.GetGameResponse(game=pb.GameView(game_id=request.game_id))

    def __getattr__(self, name: str) -> Any:
        async def method(*_: Any) -> Any:  # no other method is called
            raise AttributeError(name)

        return method


@pytest.fixture
async def door_and_port() -> AsyncIterator[tuple[ConnectionLimits, int]]:
    clock = ManualClock()
    door = ConnectionLimits(RefusalBudget(1.0, 2, 60_000, clock.now_ms))
    served = WebSocketEndpoint(BadTokens())  # type: ignore[arg-type]
    port = await served.start("127.0.0.1", 0, connection_limits=door)
    yield door, port
    await served.stop(0)


async def test_over_the_websocket_an_address_past_its_refusals_is_cut_too(
        door_and_port: tuple[ConnectionLimits, int]) -> None:
    door, port = door_and_port
    url = f"ws://127.0.0.1:{port}/ws"
    stranger = await Client.open(url, socket_factory=from_address(STRANGER, port))
    player = await Client.open(url, socket_factory=from_address(PLAYER, port))
    for _ in range(2):
        refused = await stranger.call(seat_token="bad", get_game=pb.GetGameRequest(game_id="g"))
        assert refused.refusal.code == grpc.StatusCode.UNAUTHENTICATED.value[0]
    stranger.send(ws_pb.ClientFrame(seat_token="bad", get_game=pb.GetGameRequest(game_id="g")))
    await asyncio.wait_for(stranger.closed(), 5)  # past the budget: the socket is closed
    assert door.budget.cooling(ipaddress.ip_network(f"{STRANGER}/32"))
    again = socket.socket()  # and its new connections are dropped before any accept
    again.setblocking(False)
    again.bind((STRANGER, 0))
    again.connect_ex(("127.0.0.1", port))
    answer = await player.call(seat_token="good", get_game=pb.GetGameRequest(game_id="g"))
    assert answer.get_game.game.game_id == "g"  # while another address is served
    other = await Client.open(url, socket_factory=from_address(PLAYER, port))
    assert tcp_state(again) == "SYN_SENT"
    again.close()
    other.close()
    player.close()
