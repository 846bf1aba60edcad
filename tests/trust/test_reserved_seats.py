"""A backend's tables: reserved seats named by the backend, private tables nobody else lists,
joins or watches, spectator tokens, a series that ends — over a real channel, and across a
restart of a durable server."""

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
    StartSecured,
    backend,
    door,
    play_war,
    refusal,
    refused,
    reserved_request,
)

PERSON = pb.SEAT_TYPE_PERSON


async def test_reserved_seats_come_back_with_their_tokens_and_nobody_else_sits(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    created = await stub.CreateGame(reserved_request(request_id="create-1"),
                                    metadata=backend(KEY_A))
    game_id = created.game.game_id
    assert [(t.seat, t.player_id) for t in created.seat_tokens] == [(0, "u-17"), (1, "u-42")]
    assert created.game.settings.visibility == pb.VISIBILITY_PRIVATE
    assert [s.reserved for s in created.game.seats] == [True, True]
    tokens = [t.seat_token for t in created.seat_tokens]
    # a retried create answers the same tokens
    again = await stub.CreateGame(reserved_request(request_id="create-1"),
                                  metadata=backend(KEY_A))
    assert [t.seat_token for t in again.seat_tokens] == tokens
    # strangers: no join, no listing, no watching
    assert await refused(stub.JoinGame(pb.JoinGameRequest(game_id=game_id))) == (
        grpc.StatusCode.PERMISSION_DENIED, "PRIVATE_TABLE")
    assert await refused(stub.JoinGame(pb.JoinGameRequest(
        game_id=game_id, request_id="\0reserved:0"))) == (
        grpc.StatusCode.FAILED_PRECONDITION, "SEAT_RESERVED")
    assert game_id not in {g.game_id for g in (await stub.ListGames(pb.ListGamesRequest(
        include_finished=True))).games}
    assert game_id not in {g.game_id for g in (await stub.ListGames(pb.ListGamesRequest(
        include_finished=True), metadata=backend(KEY_B))).games}
    assert game_id in {g.game_id for g in (await stub.ListGames(pb.ListGamesRequest(
        include_finished=True), metadata=backend(KEY_A))).games}
    assert await refused(stub.GetGame(pb.GetGameRequest(game_id=game_id))) == (
        grpc.StatusCode.PERMISSION_DENIED, "PRIVATE_TABLE")
    # the players play with their tokens; their views show the backend's names
    mine = (await stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=auth(tokens[1])))
    assert mine.game.your_seat == 1
    assert [s.display_name for s in mine.game.seats] == ["Ada", "u-42"]
    assert mine.game.status == pb.GAME_STATUS_IN_PROGRESS
    assert await play_war_as(stub, game_id, tokens) > 0


async def play_war_as(stub: pb_grpc.GameServiceStub, game_id: str, tokens: list[str]) -> int:
    """play_war, reading the table with a seat's token (a private table has no spectators)."""
    return await play_war(stub, game_id, tokens, metadata=auth(tokens[0]))


async def test_spectator_tokens_are_for_the_backend_to_give(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    game_id = (await stub.CreateGame(reserved_request(), metadata=backend(KEY_A))).game.game_id
    assert await refused(stub.CreateSpectatorToken(pb.CreateSpectatorTokenRequest(
        game_id=game_id))) == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_REQUIRED")
    assert await refused(stub.CreateSpectatorToken(pb.CreateSpectatorTokenRequest(
        game_id=game_id), metadata=backend(KEY_B))) == (
        grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_TABLE")
    token = (await stub.CreateSpectatorToken(pb.CreateSpectatorTokenRequest(game_id=game_id),
                                             metadata=backend(KEY_A))).spectator_token
    watched = await stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=auth(token))
    assert not watched.game.HasField("your_seat") and not watched.game.legal_actions
    stream = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id), metadata=auth(token))
    first = await stream.read()
    assert first.events
    stream.cancel()
    with pytest.raises(grpc.aio.AioRpcError) as acting:
        await stub.SubmitAction(pb.SubmitActionRequest(
            game_id=game_id, action=pb.Action(start_next_game=pb.StartNextGame())),
            metadata=auth(token))
    assert refusal(acting.value) == (grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN")
    assert "spectator token" in (acting.value.details() or "")
    watched = await stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=backend(KEY_A))
    assert not watched.game.HasField("your_seat")  # the backend's key alone watches too


async def test_a_backend_s_public_table_keeps_its_reserved_seats(
        tmp_path: Path, start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    request = reserved_request(visibility=pb.VISIBILITY_PUBLIC)
    request.seat_configs[1].ClearField("player_id")
    request.seat_configs[1].ClearField("display_name")
    created = await stub.CreateGame(request, metadata=backend(KEY_A))
    game_id = created.game.game_id
    listed = await stub.ListGames(pb.ListGamesRequest())
    assert [(g.game_id, list(g.open_seats)) for g in listed.games] == [(game_id, [1])]
    assert await refused(stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=0))) == (
        grpc.StatusCode.FAILED_PRECONDITION, "SEAT_RESERVED")
    joined = await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, display_name="walk-in"))
    assert joined.seat == 1
    assert await refused(stub.JoinGame(pb.JoinGameRequest(game_id=game_id))) == (
        grpc.StatusCode.FAILED_PRECONDITION, "NO_FREE_SEAT")


async def test_a_series_ends_after_its_length(tmp_path: Path,
                                              start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    stub = secured.stub
    created = await stub.CreateGame(reserved_request(series_length=1), metadata=backend(KEY_A))
    game_id, tokens = created.game.game_id, [t.seat_token for t in created.seat_tokens]
    assert created.game.settings.series_length == 1
    await play_war_as(stub, game_id, tokens)
    view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                               metadata=auth(tokens[0]))).game
    assert view.status == pb.GAME_STATUS_SERIES_OVER and not view.legal_actions
    assert await refused(stub.SubmitAction(pb.SubmitActionRequest(
        game_id=game_id, action=pb.Action(start_next_game=pb.StartNextGame())),
        metadata=auth(tokens[0]))) == (grpc.StatusCode.FAILED_PRECONDITION, "SERIES_OVER")


async def test_a_durable_server_keeps_the_ownership_and_the_tokens_across_a_restart(
        tmp_path: Path, start_secured: StartSecured) -> None:
    files = door(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    first = await start_secured(files, store="sqlite", data_dir=data)
    created = await first.stub.CreateGame(reserved_request(), metadata=backend(KEY_A))
    game_id, tokens = created.game.game_id, [t.seat_token for t in created.seat_tokens]
    await first.channel.close()
    await first.running.stop(0)
    second = await start_secured(files, store="sqlite", data_dir=data)
    stub = second.stub
    assert await refused(stub.GetGame(pb.GetGameRequest(game_id=game_id))) == (
        grpc.StatusCode.PERMISSION_DENIED, "PRIVATE_TABLE")
    view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                               metadata=auth(tokens[0]))).game
    assert view.your_seat == 0 and [s.display_name for s in view.seats] == ["Ada", "u-42"]
    assert [s.reserved for s in view.seats] == [True, True]
    assert await play_war_as(stub, game_id, tokens) > 0
