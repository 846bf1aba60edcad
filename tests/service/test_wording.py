"""What the server says in words: seat counts, and what a waiting table shows."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tests.support.calls import person_seats
from tests.support.server import Harness


async def refusal(call: object) -> tuple[grpc.StatusCode, str, str]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call  # type: ignore[misc]
    status = rpc_status.from_call(refused.value)  # type: ignore[arg-type]
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return refused.value.code(), info.reason, refused.value.details() or ""


@pytest.mark.parametrize(("kind", "seats", "words"), [
    (pb.GAME_KIND_WAR, 3, "this game is for exactly 2 players"),
    (pb.GAME_KIND_BATAILLE_CORSE, 7, "this game is for 2 to 6 players"),
    (pb.GAME_KIND_BOUTONS, 5, "this game is for 2 to 4 players"),
])
async def test_a_wrong_seat_count_names_the_game_s_range(
        server: Harness, kind: pb.GameKind, seats: int, words: str) -> None:
    code, reason, message = await refusal(
        server.stub.CreateGame(pb.CreateGameRequest(kind=kind, seats=seats)))
    assert (code, reason, message) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SEAT_COUNT",
                                       words)


async def test_a_waiting_table_gives_its_target_in_the_settings(server: Harness) -> None:
    created = await server.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2),
        war=war_pb2.WarOptions(target_points=30)))
    game = created.game
    assert game.status == pb.GAME_STATUS_WAITING_FOR_PLAYERS
    assert game.WhichOneof("game") is None  # no game is dealt yet: no WarView to read
    assert game.settings.war.target_points == 30
    default = (await server.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))).game
    assert default.settings.war.target_points == 50  # the default is spelled out
