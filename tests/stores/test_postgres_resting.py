"""Tables at rest on PostgreSQL (one server): finished tables leave memory, a restart loads
none of them (only their listings), and a call wakes one with its views and request ids
unchanged (resting.py)."""

from __future__ import annotations

import asyncpg

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.postgres_store import PostgresStore
from tests.support.calls import auth
from tests.support.resting import REVEAL, finished_war, views
from tests.support.server import ServerFactory
from tests.support.tables import live_of, resting_of

TABLES = 4


async def test_finished_tables_rest_in_postgres_and_a_restart_loads_none_of_them(
        make_server: ServerFactory, database_url: str) -> None:
    first = await make_server(clock=ManualClock(), store=await PostgresStore.open(database_url))
    played = [await finished_war(first.stub, create_id=f"c{n}") for n in range(TABLES)]
    before = {game_id: await views(first.stub, game_id, tokens)
              for game_id, tokens, _ in played}
    assert first.host.shelf.rest_idle(force=True) == TABLES
    assert not live_of(first.host) and len(resting_of(first.host)) == TABLES
    await first.running.stop(0)
    admin = await asyncpg.connect(database_url)
    try:
        assert await admin.fetchval("SELECT count(*) FROM games WHERE listing IS NOT NULL") \
            == TABLES
    finally:
        await admin.close()

    second = await make_server(clock=ManualClock(),
                               store=await PostgresStore.open(database_url))
    assert not live_of(second.host)  # recovery read their listings only
    assert set(resting_of(second.host)) == set(before)
    listed = await second.stub.ListGames(pb.ListGamesRequest(include_finished=True))
    # created in one millisecond (the clock stands still): listed by id
    assert [g.game_id for g in listed.games] == sorted(game_id for game_id, _, _ in played)
    assert not live_of(second.host)
    game_id, tokens, answers = played[1]
    assert await views(second.stub, game_id, tokens) == before[game_id]  # GetGame wakes it
    assert set(live_of(second.host)) == {game_id}
    seat, first_answer = answers[0]
    retried = await second.stub.SubmitAction(pb.SubmitActionRequest(
        game_id=game_id, action=REVEAL, request_id="r1"), metadata=auth(tokens[seat]))
    assert retried.SerializeToString() == first_answer
    joined = await second.stub.JoinGame(pb.JoinGameRequest(
        game_id=game_id, seat=1, display_name="p1", request_id="j1"))
    assert joined.seat_token == tokens[1]
    again = await second.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, request_id="c3"))  # a retry wakes its table
    assert again.game.game_id == played[3][0]
    assert set(live_of(second.host)) == {game_id, played[3][0]}
    assert second.host.shelf.rest_idle(force=True) == 2  # and they rest again
