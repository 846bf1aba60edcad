"""Helpers shared by the limits tests."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tests.conftest import Harness, auth, person_seats

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))


def reason_of(error: grpc.aio.AioRpcError) -> str:
    """The ErrorInfo reason of a refusal ("" when there is none)."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    if status is None:
        return ""
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            assert info.domain == "tapis.v1"
            return info.reason
    return ""


async def refusal(call: object) -> tuple[str, str, str]:
    """(code name, reason, details) of an awaited call that must be refused."""
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code().name, reason_of(error), error.details() or ""
    raise AssertionError("the call was not refused")


async def war_for_two(h: Harness, target: int = 3) -> tuple[str, list[str]]:
    """A Bataille table for two people, both seated; returns the id and the seat tokens."""
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=person_seats(2),
        war=war_pb2.WarOptions(target_points=target)))
    game_id = created.game.game_id
    tokens = []
    for seat in (0, 1):
        joined = await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat))
        tokens.append(joined.seat_token)
    return game_id, tokens


async def view_of(h: Harness, game_id: str, token: str | None = None) -> pb.GameView:
    metadata = auth(token) if token else None
    return (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=metadata)).game


