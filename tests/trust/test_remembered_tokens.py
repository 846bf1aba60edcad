"""A socket (and a gRPC connection) remembers its seat token's verification
(``caller.Remembered``) until the server revokes a token: every answer is the plain path's (a
``Caller`` built and its token looked up per frame) for a valid, a wrong, another table's, a
revoked and a replacing token, the same status, reason and message, and a revoked token is
refused on its very next request."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_service.door.door import Door
from tapis_service.ws.connection import Connection
from tapis_service.ws.frames import Format
from tests.support.calls import auth
from tests.trust.door import (
    KEY_A,
    OWN_CONNECTION,
    REVEAL,
    StartSecured,
    backend,
    door,
    refusal,
    reserved_request,
)


class Socket:
    """One player socket to the server's GameApi, through its door (plain or not)."""

    def __init__(self, api: Any, door: Door, peer: str, plain: bool) -> None:
        self.frames: list[ws_pb.ServerFrame] = []
        self.arrived = asyncio.Event()
        self.connection = Connection(api, peer, self, door=door, plain=plain)
        self.next_id = 0

    def send(self, message: bytes | str) -> None:
        assert isinstance(message, bytes)
        self.frames.append(ws_pb.ServerFrame.FromString(message))
        self.arrived.set()

    def send_all(self, messages: list[bytes | str]) -> None:
        for message in messages:
            self.send(message)

    def close(self, code: int, reason: str) -> None:
        raise AssertionError(f"closed: {code} {reason}")

    async def call(self, token: str, **request: Any) -> ws_pb.ServerFrame:
        self.next_id += 1
        self.connection.received(ws_pb.ClientFrame(id=self.next_id, seat_token=token,
                                                   **request).SerializeToString(),
                                 Format.BINARY)
        while not (found := [f for f in self.frames if f.id == self.next_id]):
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 10)
        return found[0]


async def test_a_socket_s_remembered_token_answers_as_the_plain_path(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path), tls=False)
    running = secured.running
    assert running.api is not None and running.guard is not None
    stub = secured.stub
    created = await stub.CreateGame(reserved_request(), metadata=backend(KEY_A))
    game_id = created.game.game_id
    old = created.seat_tokens[0].seat_token
    elsewhere = (await stub.CreateGame(reserved_request(),
                                       metadata=backend(KEY_A))).seat_tokens[0].seat_token
    sockets = [Socket(running.api, running.guard.door, f"ipv4:10.0.0.{n}:4000", plain)
               for n, plain in enumerate((True, False))]

    async def both(token: str, **request: Any) -> ws_pb.ServerFrame:
        plain, remembered = [await s.call(token, **request) for s in sockets]
        assert remembered == plain  # the same answer, or the same status, reason, message
        return plain

    look = {"get_game": pb.GetGameRequest(game_id=game_id)}
    act = {"submit_action": pb.SubmitActionRequest(game_id=game_id, action=REVEAL)}
    assert (await both(old, **look)).get_game.game.your_seat == 0
    assert (await both(old, **look)).get_game.game.your_seat == 0  # remembered now
    [caller] = sockets[1].connection._callers.values()
    assert caller.remembered is not None and caller.remembered.game_id == game_id
    assert (await both("not-a-token", **look)).refusal.code == 16  # UNAUTHENTICATED
    assert (await both(elsewhere, **look)).refusal.code == 7  # PERMISSION_DENIED
    replaced = await stub.ReplaceSeat(pb.ReplaceSeatRequest(
        game_id=game_id, seat=0, player_id="u-99"), metadata=backend(KEY_A))
    revoked = await both(old, **act)  # the very next request of the same socket
    assert revoked.refusal.code == 16 and "revoked" in revoked.refusal.message
    revoked = await both(old, **look)
    assert revoked.refusal.code == 16 and "revoked" in revoked.refusal.message
    new = replaced.seat_token.seat_token
    assert (await both(new, **look)).get_game.game.your_seat == 0
    await stub.EndTable(pb.EndTableRequest(game_id=game_id), metadata=backend(KEY_A))
    assert (await both(new, **look)).get_game.game.status == pb.GAME_STATUS_ABANDONED


async def test_a_grpc_connection_s_remembered_token_is_refused_on_its_next_call(
        tmp_path: Path, start_secured: StartSecured) -> None:
    """A gRPC connection remembers its token too (``door.caller_of``): after ReplaceSeat its
    very next call with the former token is refused as a new connection's first call is."""
    secured = await start_secured(door(tmp_path), tls=False)
    stub = secured.stub
    created = await stub.CreateGame(reserved_request(), metadata=backend(KEY_A))
    game_id = created.game.game_id
    old = created.seat_tokens[0].seat_token
    look = pb.GetGameRequest(game_id=game_id)
    for _ in range(2):  # verified, then remembered
        assert (await stub.GetGame(look, metadata=auth(old))).game.your_seat == 0
    await stub.ReplaceSeat(pb.ReplaceSeatRequest(game_id=game_id, seat=0, player_id="u-99"),
                           metadata=backend(KEY_A))
    with pytest.raises(grpc.aio.AioRpcError) as remembered:
        await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                metadata=auth(old))
    async with grpc.aio.insecure_channel(secured.target, options=OWN_CONNECTION) as fresh:
        with pytest.raises(grpc.aio.AioRpcError) as plain:
            await pb_grpc.GameServiceStub(fresh).SubmitAction(pb.SubmitActionRequest(
                game_id=game_id, action=REVEAL), metadata=auth(old))
    assert refusal(remembered.value) == refusal(plain.value) == (
        grpc.StatusCode.UNAUTHENTICATED, "TOKEN_REVOKED")
    assert remembered.value.details() == plain.value.details()
