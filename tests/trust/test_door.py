"""The server behind its door, over a real channel: TLS on the game port (health and
reflection included), API keys for CreateGame, keys never in the logs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import grpc
import pytest
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.door.exposure import Exposed
from tapis_service.door.security import CannotSecure
from tapis_service.process.server import create_server
from tests.support.server import TEST_SETTINGS
from tests.support.tables import live_of
from tests.trust.door import (
    KEY_A,
    KEY_B,
    OWN_CONNECTION,
    StartSecured,
    backend,
    door,
    play_war,
    refusal,
    war_request,
)


async def test_over_tls_health_reflection_and_a_whole_game(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path), keys=False)
    health = await health_pb2_grpc.HealthStub(secured.channel).Check(
        health_pb2.HealthCheckRequest(service="tapis.v1.GameService"))
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(secured.channel)
    answers = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
        list_services="")]))
    services = {s.name async for a in answers for s in a.list_services_response.service}
    assert "tapis.v1.GameService" in services
    created = await secured.stub.CreateGame(war_request())
    game_id = created.game.game_id
    tokens = [(await secured.stub.JoinGame(pb.JoinGameRequest(
        game_id=game_id, seat=seat, display_name=f"p{seat}"))).seat_token for seat in (0, 1)]
    assert await play_war(secured.stub, game_id, tokens) > 0
    view = (await secured.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    assert view.status == pb.GAME_STATUS_GAME_OVER


async def test_a_plaintext_client_gets_nothing_from_a_tls_port(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path), keys=False)
    async with grpc.aio.insecure_channel(secured.target, options=OWN_CONNECTION) as plain:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await pb_grpc.GameServiceStub(plain).ListGames(pb.ListGamesRequest(), timeout=10)
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_with_keys_create_needs_a_valid_key(tmp_path: Path,
                                                  start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await secured.stub.CreateGame(war_request())
    assert refusal(missing.value) == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED")
    with pytest.raises(grpc.aio.AioRpcError) as wrong:
        await secured.stub.CreateGame(war_request(), metadata=backend("not-a-key-of-this-one"))
    assert refusal(wrong.value) == (grpc.StatusCode.UNAUTHENTICATED, "INVALID_API_KEY")
    assert "not-a-key" not in (wrong.value.details() or "")
    assert not live_of(secured.running.host)
    created = await secured.stub.CreateGame(war_request(), metadata=backend(KEY_A))
    assert created.game.game_id in live_of(secured.running.host)


async def test_wrong_keys_are_rate_limited_like_wrong_tokens(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path), bad_token_rate_per_s=1.0, bad_token_burst=2)
    reasons = []
    for _ in range(3):
        with pytest.raises(grpc.aio.AioRpcError) as wrong:
            await secured.stub.CreateGame(war_request(), metadata=backend("wrong-key-000000"))
        reasons.append(refusal(wrong.value)[1])
    assert reasons == ["INVALID_API_KEY", "INVALID_API_KEY", "RATE_LIMITED"]


async def test_open_mode_refuses_a_key_it_cannot_check(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path), tls=False, keys=False)
    await secured.stub.CreateGame(war_request())
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await secured.stub.CreateGame(war_request(), metadata=backend(KEY_A))
    assert refusal(raised.value) == (grpc.StatusCode.UNAUTHENTICATED, "INVALID_API_KEY")


async def test_keys_never_reach_the_logs(tmp_path: Path, start_secured: StartSecured) -> None:
    with structlog.testing.capture_logs() as lines:
        secured = await start_secured(door(tmp_path))
        await secured.stub.CreateGame(war_request(), metadata=backend(KEY_A))
        with pytest.raises(grpc.aio.AioRpcError):
            await secured.stub.CreateGame(war_request(), metadata=backend(KEY_B + "x"))
        secured.running.security.reload()
    text = repr(lines)
    assert lines and KEY_A not in text and KEY_B not in text


async def test_files_that_cannot_be_used_refuse_to_start(tmp_path: Path) -> None:
    files = door(tmp_path)
    with pytest.raises(CannotSecure, match="go together"):
        await create_server(replace(TEST_SETTINGS, tls_cert=files.server.cert))
    with pytest.raises(Exposed, match="--insecure"):
        await create_server(replace(TEST_SETTINGS, host="0.0.0.0"))
