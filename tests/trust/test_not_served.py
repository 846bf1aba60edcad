"""The contract's methods not served yet are refused precisely (UNIMPLEMENTED /
FEATURE_NOT_AVAILABLE), on a single server and on a cluster node's registration alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service import not_served
from tapis_service.servicer import SERVICE, GameServicer
from tests.support.calls import person_seats
from tests.support.server import Harness


def refusal(error: grpc.aio.AioRpcError) -> tuple[grpc.StatusCode, str]:
    status = rpc_status.from_call(error)
    assert status is not None, error
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return error.code(), info.reason


UNIMPLEMENTED = (grpc.StatusCode.UNIMPLEMENTED, "FEATURE_NOT_AVAILABLE")


async def unary_calls(stub: pb_grpc.GameServiceStub) -> list[Callable[[], Awaitable[Any]]]:
    return [lambda: stub.ReplaceSeat(pb.ReplaceSeatRequest(game_id="g", seat=0, player_id="p"))]


async def check_every_method_is_refused(stub: pb_grpc.GameServiceStub) -> None:
    for call in await unary_calls(stub):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call()
        assert refusal(raised.value) == UNIMPLEMENTED


async def test_the_methods_not_served_yet_are_refused(server: Harness) -> None:
    await check_every_method_is_refused(server.stub)


async def test_the_handlers_a_cluster_node_registers_refuse_the_same() -> None:
    refusing = grpc.aio.server()
    refusing.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        SERVICE, not_served.method_handlers(not_served.NotServedYet())),))
    port = refusing.add_insecure_port("127.0.0.1:0")
    await refusing.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await check_every_method_is_refused(pb_grpc.GameServiceStub(channel))
    finally:
        await refusing.stop(0)


def test_every_method_of_the_contract_is_served_or_refused() -> None:
    """A method the servicer leaves to the generated base class would answer UNIMPLEMENTED
    without an ErrorInfo."""
    methods = {m.name for m in pb.DESCRIPTOR.services_by_name["GameService"].methods}
    refused = set(not_served.UNARY_METHODS) | set(not_served.STREAM_METHODS)
    assert refused <= methods
    assert [name for name in sorted(methods) if getattr(GameServicer, name)
            is getattr(pb_grpc.GameServiceServicer, name)] == []


async def test_a_public_table_is_today_s_lobby(server: Harness) -> None:
    created = await server.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, visibility=pb.VISIBILITY_PUBLIC, seat_configs=person_seats(2)))
    listed = await server.stub.ListGames(pb.ListGamesRequest())
    assert [g.game_id for g in listed.games] == [created.game.game_id]
    assert not created.seat_tokens
