"""Servers behind their door for the trust tests: TLS and API keys from settings, a channel
trusting the test CA, a backend's metadata, and a short game of War played to its end."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_service.process.server import RunningServer
from tests.support.calls import auth
from tests.support.certificates import Issued, issue

KEY_A = "backend-a-key-0123456789abcdef"
KEY_B = "backend-b-key-fedcba9876543210"
REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))
OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)


def backend(key: str) -> tuple[tuple[str, str], ...]:
    return (("x-api-key", key),)


def refusal(error: grpc.aio.AioRpcError) -> tuple[grpc.StatusCode, str]:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None, error
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return error.code(), info.reason


async def refused(call: object) -> tuple[grpc.StatusCode, str]:
    """The code and reason ``call`` (an awaitable RPC) is refused with."""
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call  # type: ignore[misc]
    return refusal(raised.value)


async def refused_saying(call: object) -> tuple[grpc.StatusCode, str, str]:
    """The code, reason and message ``call`` (an awaitable RPC) is refused with."""
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call  # type: ignore[misc]
    return (*refusal(raised.value), str(raised.value.details()))


@dataclass
class Door:
    """Files for a server's door under one directory."""

    directory: Path
    server: Issued
    keys: Path

    def settings(self, tls: bool = True, keys: bool = True,
                 **overrides: object) -> dict[str, object]:
        found: dict[str, object] = {}
        if tls:
            found.update(tls_cert=self.server.cert, tls_key=self.server.key)
        if keys:
            found["api_keys_file"] = self.keys
        return found | overrides


def door(directory: Path) -> Door:
    keys = directory / "api-keys"
    keys.write_text(f"{KEY_A} backend-a\n{KEY_B} backend-b\n", encoding="utf-8")
    return Door(directory, issue(directory, "server"), keys)


@dataclass
class Secured:
    running: RunningServer
    channel: grpc.aio.Channel
    stub: pb_grpc.GameServiceStub
    target: str


StartSecured = Callable[..., Awaitable[Secured]]
"""The ``start_secured`` fixture (tests/trust/conftest.py)."""


async def play_war(stub: pb_grpc.GameServiceStub, game_id: str, tokens: list[str],
                   metadata: tuple[tuple[str, str], ...] | None = None) -> int:
    """Reveal for whoever is awaited until the game is over (reading the table with
    ``metadata``); the actions played."""
    actions = 0
    while True:
        view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=metadata)).game
        if view.status != pb.GAME_STATUS_IN_PROGRESS:
            return actions
        await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                metadata=auth(tokens[view.awaiting_seats[0]]))
        actions += 1


def war_request(**fields: object) -> pb.CreateGameRequest:
    return pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, seats=2, seed=5,
                                war=war_pb2.WarOptions(target_points=1),
                                seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2,
                                **fields)


def reserved_request(**fields: object) -> pb.CreateGameRequest:
    """A backend's War table with two reserved person seats (u-17 "Ada" and u-42)."""
    request = war_request(**fields)
    del request.seat_configs[:]
    request.seat_configs.extend([
        pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id="u-17", display_name="Ada"),
        pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id="u-42")])
    return request
