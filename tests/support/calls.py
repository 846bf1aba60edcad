"""Calls to a server as the tests make them: credentials, seat configs, views, refusals."""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tests.support.server import Harness

STREAM_DEADLINE_S = 60.0
"""The deadline of every event stream a test opens: a stream the server never ends fails its test
with DEADLINE_EXCEEDED instead of waiting forever."""

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))


def auth(token: str) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying a seat token."""
    return (("authorization", f"Bearer {token}"),)


def person_seats(n: int) -> list[pb.SeatConfig]:
    return [pb.SeatConfig(type=pb.SEAT_TYPE_PERSON) for _ in range(n)]


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


async def events_until(stub: pb_grpc.GameServiceStub, game_id: str, token: str,
                       version: int) -> list[bytes]:
    """A seat's events from the first, serialized, until one reaches ``version``."""
    call = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id), metadata=auth(token))
    seen: list[bytes] = []
    async for message in call:
        seen.extend(event.SerializeToString() for event in message.events)
        if message.events[-1].version >= version:
            call.cancel()
            return seen
    raise AssertionError("the stream ended first")


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


async def new_war(h: Harness, target: int = 3, seed: int = 5, turn_ms: int = 0,
                  ) -> tuple[str, list[str]]:
    """A Bataille table for two named people, seats 0 and 1 taken in order."""
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=seed, seat_configs=person_seats(2),
        turn_time_limit_ms=turn_ms, war=war_pb2.WarOptions(target_points=target)))
    game_id = created.game.game_id
    tokens = []
    for seat in (0, 1):
        joined = await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat,
                                                          display_name=f"p{seat}"))
        assert joined.seat == seat
        tokens.append(joined.seat_token)
    return game_id, tokens


def refusal_error(code: grpc.StatusCode, reason: str, **metadata: str) -> grpc.aio.AioRpcError:
    """A refusal as the server sends it (its ErrorInfo in the rich status), for a client's test
    without a server."""
    info = error_details_pb2.ErrorInfo(reason=reason, domain="tapis.v1", metadata=metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message="no",
                               details=[detail])
    trailing = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, "no")
