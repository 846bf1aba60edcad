"""A server on the PostgreSQL store: its games survive a restart; a database it cannot use
makes `tapis-server` refuse to start (exit 2) with a message naming the database."""

from __future__ import annotations

import subprocess
import sys

from tapis.v1 import game_service_pb2 as pb
from tapis_service.clock import ManualClock
from tapis_service.postgres_store import PostgresStore
from tests.support.calls import auth, person_seats
from tests.support.server import ServerFactory


async def test_a_game_survives_a_restart_on_postgres(make_server: ServerFactory,
                                                     database_url: str) -> None:
    first = await make_server(clock=ManualClock(), store=await PostgresStore.open(database_url))
    created = await first.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=7, seat_configs=person_seats(2)))
    game_id = created.game.game_id
    tokens = [(await first.stub.JoinGame(pb.JoinGameRequest(
        game_id=game_id, seat=s, request_id=f"join-{s}"))).seat_token for s in range(2)]
    view = (await first.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                     metadata=auth(tokens[0]))).game
    answer = await first.stub.SubmitAction(
        pb.SubmitActionRequest(game_id=game_id, action=view.legal_actions[0]),
        metadata=auth(tokens[0]))
    await first.running.stop(0)

    second = await make_server(clock=ManualClock(),
                               store=await PostgresStore.open(database_url))
    again = (await second.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                       metadata=auth(tokens[1]))).game
    retried = await second.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=1,
                                                             request_id="join-1"))
    assert retried.seat_token == tokens[1]  # the join key lives in the database
    assert again.version == answer.version and again.last_sequence == view.last_sequence + len(
        answer.events)


def test_an_unreachable_database_refuses_the_start_naming_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tapis_service.main", "--port", "0",
         "--database-url", "postgresql://tapis:s3cret@127.0.0.1:1/tapis"],
        capture_output=True, timeout=60, check=False)
    message = result.stderr.decode()
    assert result.returncode == 2, message
    assert "refusing to start" in message and "127.0.0.1:1/tapis" in message
    assert "s3cret" not in message
