"""Who may call each method is declared once (``rpcs.RPCS``, its ``Access`` column): with API
keys configured, every method is called with no credential, with another backend's key and
with the table owner's, and each answer is the one its declared access calls for. A method
added to ``RPCS`` without a request below fails here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from google.protobuf.message import Message

from tapis.v1 import game_service_pb2 as pb
from tapis_service.door.rpcs import RPCS, Access, Rpc
from tests.support.calls import auth
from tests.trust.door import (
    KEY_A,
    KEY_B,
    REVEAL,
    Secured,
    StartSecured,
    backend,
    door,
    refusal,
    war_request,
)

REQUESTS: dict[str, Callable[[str], Message]] = {
    "CreateGame": lambda game_id: war_request(),
    "JoinGame": lambda game_id: pb.JoinGameRequest(game_id=game_id, seat=1),
    "GetGame": lambda game_id: pb.GetGameRequest(game_id=game_id),
    "SubmitAction": lambda game_id: pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
    "StreamEvents": lambda game_id: pb.StreamEventsRequest(game_id=game_id),
    "ListGames": lambda game_id: pb.ListGamesRequest(),
    "CreateSpectatorToken": lambda game_id: pb.CreateSpectatorTokenRequest(game_id=game_id),
    "WatchResults": lambda game_id: pb.WatchResultsRequest(),
    "AckResults": lambda game_id: pb.AckResultsRequest(),
    "EndTable": lambda game_id: pb.EndTableRequest(game_id=game_id),
    "ReplaceSeat": lambda game_id: pb.ReplaceSeatRequest(game_id=game_id, seat=1),
    "RotateSpectatorToken": lambda game_id: pb.RotateSpectatorTokenRequest(game_id=game_id),
}

Metadata = tuple[tuple[str, str], ...]


async def _call(secured: Secured, rpc: Rpc, request: Message,
                metadata: Metadata) -> tuple[grpc.StatusCode, str]:
    """The call's outcome: OK and "" when it was served (a stream: its first answer, or its
    end), else its refusal."""
    method = getattr(secured.stub, rpc.name)
    try:
        if rpc.streams:
            call = method(request, metadata=metadata, timeout=3)
            try:
                async for _ in call:
                    break
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise  # a refusal comes at once; an accepted stream may wait for news
            finally:
                call.cancel()
        else:
            await method(request, metadata=metadata, timeout=10)
    except grpc.aio.AioRpcError as error:
        return refusal(error)
    return grpc.StatusCode.OK, ""


async def _table(secured: Secured, started: bool) -> tuple[str, str]:
    """A public War table of backend A's with seat 0 taken (and seat 1: ``started``): its id
    and the token of the seat it awaits (seat 0 before it starts)."""
    created = await secured.stub.CreateGame(war_request(visibility=pb.VISIBILITY_PUBLIC),
                                            metadata=backend(KEY_A))
    game_id = created.game.game_id
    tokens = [(await secured.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat),
                                           metadata=backend(KEY_A))).seat_token
              for seat in ((0, 1) if started else (0,))]
    view = (await secured.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    return game_id, tokens[view.awaiting_seats[0] if started else 0]


def test_every_method_has_a_request_here() -> None:
    assert set(REQUESTS) == {rpc.name for rpc in RPCS}


@pytest.mark.parametrize("rpc", RPCS, ids=lambda rpc: rpc.name)
async def test_each_method_answers_as_its_declared_access_says(
        rpc: Rpc, tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    outcomes = {}
    for who, metadata in (("nobody", ()), ("another backend", backend(KEY_B)),
                          ("the owner", backend(KEY_A))):
        game_id, seat_token = await _table(secured, started=rpc.name == "SubmitAction")
        if rpc.access is Access.SEAT and who == "the owner":
            metadata = auth(seat_token)
        outcomes[who] = await _call(secured, rpc, REQUESTS[rpc.name](game_id), metadata)
    served = (grpc.StatusCode.OK, "")
    if rpc.access in (Access.ANYONE, Access.PLAYER):
        assert outcomes == dict.fromkeys(outcomes, served)
    elif rpc.access is Access.SEAT:
        assert outcomes["nobody"][0] == grpc.StatusCode.UNAUTHENTICATED
        assert outcomes["another backend"][0] == grpc.StatusCode.UNAUTHENTICATED
        assert outcomes["the owner"] == served  # the seat's holder
    elif rpc.access is Access.BACKEND:
        assert outcomes["nobody"] == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED")
        assert outcomes["another backend"] == served
        assert outcomes["the owner"] == served
    else:
        assert rpc.access is Access.TABLE_OWNER
        assert outcomes["nobody"] == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED")
        assert outcomes["another backend"] == (grpc.StatusCode.PERMISSION_DENIED,
                                               "NOT_YOUR_TABLE")
        assert outcomes["the owner"] == served
