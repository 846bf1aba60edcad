"""A PostgreSQL table whose rows cannot be decoded (here a journal input or a creation record
nested deeper than the JSON decoder follows) is damage, as on SQLite: that table alone is
quarantined (refused with GAME_QUARANTINED, listed as such), and the server still starts, wakes
and adopts every other table. (Which rows are damage, on both stores: test_store_contract.py.)"""

from __future__ import annotations

from dataclasses import replace

import asyncpg
import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine.war import RULES as WAR
from tapis_engine.war import Reveal
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.postgres_store import PostgresStore
from tapis_service.tables.host import GameHost
from tests.support.calls import auth, person_seats, reason_of
from tests.support.damage import TOO_DEEP, adopt_each
from tests.support.resting import REVEAL, finished_war
from tests.support.server import TEST_SETTINGS, Harness, ServerFactory
from tests.support.tables import live_of, quarantined_of, resting_of


async def _tamper(url: str, statement: str, *args: object) -> None:
    """Change stored rows behind the servers' backs (one row, or the test is wrong)."""
    connection = await asyncpg.connect(url)
    try:
        assert await connection.execute(statement, *args) == "UPDATE 1"
    finally:
        await connection.close()


async def _war_played(h: Harness) -> str:
    """A War between two people, two cards revealed (four journal inputs)."""
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=7, seat_configs=person_seats(2)))
    game_id = created.game.game_id
    tokens = [(await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=s))).seat_token
              for s in (0, 1)]
    for _ in range(2):
        view = (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                  metadata=auth(tokens[view.awaiting_seats[0]]))
    return game_id


async def _assert_refused_quarantined(h: Harness, game_id: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(refused.value) == "GAME_QUARANTINED"


@pytest.mark.parametrize(("column", "why"), [
    ("journal", "journal input 4 is not valid JSON (nested too deep)"),
    ("record", "the creation record is not valid JSON (nested too deep)"),
])
async def test_a_row_nested_too_deep_is_quarantined_and_the_server_starts(
        make_server: ServerFactory, database_url: str, column: str, why: str) -> None:
    first = await make_server(clock=ManualClock(), store=await PostgresStore.open(database_url))
    damaged, other = [await _war_played(first) for _ in range(2)]
    await first.running.stop(0)
    if column == "journal":
        await _tamper(database_url, "UPDATE journal SET entry = $1 WHERE game_id = $2 "
                      "AND idx = 4", TOO_DEEP, damaged)
    else:
        await _tamper(database_url, "UPDATE games SET record = $1 WHERE game_id = $2",
                      TOO_DEEP, damaged)

    second = await make_server(clock=ManualClock(),
                               store=await PostgresStore.open(database_url))
    assert set(live_of(second.host)) == {other}
    assert why in quarantined_of(second.host)[damaged].why
    await _assert_refused_quarantined(second, damaged)
    view = (await second.stub.GetGame(pb.GetGameRequest(game_id=other))).game
    assert view.status == pb.GAME_STATUS_IN_PROGRESS


async def test_a_resting_table_nested_too_deep_is_quarantined_when_woken(
        make_server: ServerFactory, database_url: str) -> None:
    first = await make_server(clock=ManualClock(), store=await PostgresStore.open(database_url))
    (damaged, _, _), (other, _, _) = [await finished_war(first.stub, create_id=f"c{n}")
                                      for n in range(2)]
    assert first.host.shelf.rest_idle(force=True) == 2
    await first.running.stop(0)
    await _tamper(database_url, "UPDATE journal SET entry = $1 WHERE game_id = $2 AND idx = 3",
                  TOO_DEEP, damaged)

    second = await make_server(clock=ManualClock(),
                               store=await PostgresStore.open(database_url))
    assert set(resting_of(second.host)) == {damaged, other}
    await _assert_refused_quarantined(second, damaged)  # woken by the call
    assert "journal input 3 is not valid JSON (nested too deep)" in \
        quarantined_of(second.host)[damaged].why
    view = (await second.stub.GetGame(pb.GetGameRequest(game_id=other))).game
    assert view.status == pb.GAME_STATUS_GAME_OVER
    assert set(live_of(second.host)) == {other}


async def test_a_table_nested_too_deep_is_quarantined_when_adopted(database_url: str) -> None:
    """As a cluster node adopts a dead node's tables one by one (``GameHost.adopt``)."""
    settings = replace(TEST_SETTINGS, abandon_after_s=0, unjoined_ttl_s=0)
    dead_store = await PostgresStore.open(database_url, preload=False)
    dead = GameHost(settings, ManualClock(), dead_store)
    games = []
    for seed in (1, 2, 3):
        session = await dead.create(kind="war", seats=2, seed=seed, turn_time_ms=0,
                                    bots=[None, None], options=WAR.default_options(),
                                    stacked_deck=None, stacked_first=None)
        for seat in (0, 1):
            await dead.join(session.game_id, seat, f"p{seat}")
        seat = next(iter(WAR.to_act(session.table.state)))
        await dead.actor.submit(dead.get(session.game_id), seat, tbl.Act(seat, Reveal()), "",
                                None)
        games.append(session.game_id)
    await dead.close()
    await dead_store.aclose()
    damaged = games[1]
    await _tamper(database_url, "UPDATE journal SET entry = $1 WHERE game_id = $2 AND idx = 3",
                  TOO_DEEP, damaged)

    store = await PostgresStore.open(database_url, preload=False)
    adopting = GameHost(settings, ManualClock(), store)
    try:
        await adopt_each(adopting, games, damaged)
        assert "journal input 3 is not valid JSON (nested too deep)" in \
            quarantined_of(adopting)[damaged].why
    finally:
        await adopting.close()
        await store.aclose()
