"""RotateSpectatorToken: the table's backend revokes its spectator token and gets a new one;
the old one is refused TOKEN_REVOKED on calls and ends its open streams so (saying it was the
spectator token, not a seat's), the new one works, and both stay so across a restart."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tests.support.calls import auth
from tests.trust.door import (
    KEY_A,
    KEY_B,
    REVEAL,
    StartSecured,
    backend,
    door,
    refusal,
    refused,
    refused_saying,
    reserved_request,
)

REVOKED = (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_REVOKED",
           "this spectator token was revoked by the table's backend")


async def rotate(stub: pb_grpc.GameServiceStub, game_id: str, request_id: str = "",
                 key: str = KEY_A) -> str:
    answer = await stub.RotateSpectatorToken(pb.RotateSpectatorTokenRequest(
        game_id=game_id, request_id=request_id), metadata=backend(key))
    return str(answer.spectator_token)


async def current(stub: pb_grpc.GameServiceStub, game_id: str) -> str:
    return str((await stub.CreateSpectatorToken(pb.CreateSpectatorTokenRequest(
        game_id=game_id), metadata=backend(KEY_A))).spectator_token)


async def watches(stub: pb_grpc.GameServiceStub, game_id: str, token: str) -> bool:
    view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=auth(token))).game
    return view.game_id == game_id and not view.HasField("your_seat")


async def test_a_rotated_spectator_token_is_revoked_on_calls_and_streams(
        tmp_path: Path, start_secured: StartSecured) -> None:
    files = door(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    secured = await start_secured(files, store="sqlite", data_dir=data)
    stub = secured.stub
    created = await stub.CreateGame(reserved_request(), metadata=backend(KEY_A))
    game_id = created.game.game_id
    tokens = [t.seat_token for t in created.seat_tokens]
    old = await current(stub, game_id)
    assert await watches(stub, game_id, old)
    watching = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id), metadata=auth(old))
    playing = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                metadata=auth(tokens[0]))
    await watching.read()
    await playing.read()

    for key, expected in ((KEY_B, (grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_TABLE")),):
        assert await refused(stub.RotateSpectatorToken(pb.RotateSpectatorTokenRequest(
            game_id=game_id), metadata=backend(key))) == expected
    assert await refused(stub.RotateSpectatorToken(pb.RotateSpectatorTokenRequest(
        game_id=game_id), metadata=auth(old))) == (grpc.StatusCode.UNAUTHENTICATED,
                                                   "API_KEY_REQUIRED")
    new = await rotate(stub, game_id, "rotate-1")
    assert new != old
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        while True:
            await watching.read()
    assert (*refusal(ended.value), ended.value.details()) == REVOKED
    assert await refused_saying(stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                             metadata=auth(old))) == REVOKED
    assert await refused_saying(stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                                  metadata=auth(old)).read()) == REVOKED
    assert await watches(stub, game_id, new)
    assert await current(stub, game_id) == new
    assert await rotate(stub, game_id, "rotate-1") == new  # a retry: no second rotation
    assert await watches(stub, game_id, new)
    # the seats' streams go on
    view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=auth(new))).game
    await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                            metadata=auth(tokens[view.awaiting_seats[0]]))
    assert (await playing.read()).events
    playing.cancel()

    await secured.channel.close()
    await secured.running.stop(0)
    secured = await start_secured(files, store="sqlite", data_dir=data)
    stub = secured.stub  # restarted: the revocation read back from the journal, as it was
    assert await refused_saying(stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                             metadata=auth(old))) == REVOKED
    assert await watches(stub, game_id, new)
    assert await current(stub, game_id) == new
    assert await rotate(stub, game_id, "rotate-1") == new
    newer = await rotate(stub, game_id)
    assert newer not in (old, new)
    for revoked in (old, new):
        assert await refused_saying(stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                                 metadata=auth(revoked))) == REVOKED
    assert await watches(stub, game_id, newer)


async def test_rotation_on_a_server_that_keeps_nothing(
        tmp_path: Path, start_secured: StartSecured) -> None:
    stub = (await start_secured(door(tmp_path))).stub
    game_id = (await stub.CreateGame(reserved_request(), metadata=backend(KEY_A))).game.game_id
    old = await current(stub, game_id)
    new = await rotate(stub, game_id)
    assert await refused_saying(stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                             metadata=auth(old))) == REVOKED
    assert await watches(stub, game_id, new) and await current(stub, game_id) == new
