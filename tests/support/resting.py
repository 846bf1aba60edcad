"""Finished tables for the tests of tables at rest (resting.py), on any store."""

from __future__ import annotations

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tests.support.calls import auth, person_seats

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))


async def finished_war(stub: pb_grpc.GameServiceStub, create_id: str = "c1",
                       ) -> tuple[str, list[str], list[tuple[int, bytes]]]:
    """A War to 1 point between two people (joined with request ids ``j0``/``j1``), played
    to its end with request ids ``r1``, ``r2``...; the id, the tokens and each answer (the
    seat that sent it, its bytes)."""
    created = await stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=7, seat_configs=person_seats(2),
        war=war_pb2.WarOptions(target_points=1), request_id=create_id))
    game_id = created.game.game_id
    tokens = []
    for seat in (0, 1):
        joined = await stub.JoinGame(pb.JoinGameRequest(
            game_id=game_id, seat=seat, display_name=f"p{seat}", request_id=f"j{seat}"))
        tokens.append(joined.seat_token)
    answers = []
    for number in range(1, 200):
        view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        if view.status == pb.GAME_STATUS_GAME_OVER:
            return game_id, tokens, answers
        seat = view.awaiting_seats[0]
        answer = await stub.SubmitAction(pb.SubmitActionRequest(
            game_id=game_id, action=REVEAL, request_id=f"r{number}"),
            metadata=auth(tokens[seat]))
        answers.append((seat, answer.SerializeToString()))
    raise AssertionError("the game did not end")


async def views(stub: pb_grpc.GameServiceStub, game_id: str, tokens: list[str]) -> list[bytes]:
    """The spectator's view and each seat's, serialized."""
    found = [(await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game]
    for token in tokens:
        found.append((await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                         metadata=auth(token))).game)
    return [v.SerializeToString() for v in found]
