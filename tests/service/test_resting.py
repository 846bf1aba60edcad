"""Tables at rest: a finished table leaves memory, the store keeps it, and every kind of call
that needs it brings it back unchanged (resting.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.clock import ManualClock
from tapis_service.sqlite_store import FILE_NAME, SqliteStore
from tests.support.calls import auth, person_seats, reason_of
from tests.support.driver import all_events
from tests.support.resting import REVEAL, finished_war, views
from tests.support.server import Harness, Restartable, ServerFactory

NEXT = pb.Action(start_next_game=pb.StartNextGame())


async def listed(stub: pb_grpc.GameServiceStub, include_finished: bool) -> list[pb.GameListing]:
    answer = await stub.ListGames(pb.ListGamesRequest(include_finished=include_finished))
    return list(answer.games)


async def streams_closed(h: Harness, game_id: str) -> None:
    """Wait (bounded) until the server has seen the table's cancelled streams end."""
    for _ in range(500):
        if not h.host.sessions[game_id].subscribers:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the cancelled streams did not end")


def rest(h: Harness) -> int:
    """Two sweeps' worth: the first forgets what was used before it, the second rests."""
    return int(h.host.shelf.rest_idle()) + int(h.host.shelf.rest_idle())


@pytest.fixture
async def durable(make_server: ServerFactory, tmp_path: Path) -> Harness:
    return await make_server(clock=ManualClock(), store=SqliteStore(tmp_path))


async def test_a_finished_table_leaves_memory_and_get_game_brings_it_back(
        durable: Harness) -> None:
    game_id, tokens, _ = await finished_war(durable.stub)
    before = await views(durable.stub, game_id, tokens)
    assert rest(durable) == 1
    assert game_id not in durable.host.sessions and game_id in durable.host.resting
    assert await views(durable.stub, game_id, tokens) == before
    assert game_id in durable.host.sessions and game_id not in durable.host.resting


async def test_list_games_lists_a_resting_table_without_loading_it(durable: Harness) -> None:
    game_id, _, _ = await finished_war(durable.stub)
    assert isinstance(durable.clock, ManualClock)
    durable.clock.advance(1)  # listed oldest first
    live = await durable.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=person_seats(2)))
    before = await listed(durable.stub, include_finished=True)
    assert rest(durable) == 1
    assert await listed(durable.stub, include_finished=True) == before
    assert [g.game_id for g in await listed(durable.stub, include_finished=False)] == [
        live.game.game_id]
    assert game_id in durable.host.resting  # listed from its stored line only


async def test_retried_request_ids_are_answered_from_a_resting_table(durable: Harness) -> None:
    stub = durable.stub
    game_id, tokens, answers = await finished_war(stub)
    assert rest(durable) == 1
    again = await stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=person_seats(2), request_id="c1"))
    assert again.game.game_id == game_id
    assert rest(durable) == 1
    joined = await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=1,
                                                    display_name="p1", request_id="j1"))
    assert joined.seat_token == tokens[1]
    assert rest(durable) == 1
    seat, first = answers[0]
    retried = await stub.SubmitAction(pb.SubmitActionRequest(
        game_id=game_id, action=REVEAL, request_id="r1"), metadata=auth(tokens[seat]))
    assert retried.SerializeToString() == first


async def test_stream_events_resumes_from_a_resting_table(durable: Harness) -> None:
    game_id, tokens, _ = await finished_war(durable.stub)
    last = (await durable.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game.last_sequence
    before = [await all_events(durable.stub, game_id, 3, last, token)
              for token in (None, *tokens)]
    await streams_closed(durable, game_id)
    assert rest(durable) == 1
    assert [await all_events(durable.stub, game_id, 3, last, token)
            for token in (None, *tokens)] == before
    assert game_id in durable.host.sessions


async def test_a_table_with_an_open_stream_stays(durable: Harness) -> None:
    game_id, _, _ = await finished_war(durable.stub)
    stream = durable.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id))
    await stream.read()
    assert rest(durable) == 0
    stream.cancel()


async def test_start_next_game_wakes_a_table_and_a_restart_loads_it(tmp_path: Path) -> None:
    server = Restartable(tmp_path)
    stub = await server.start(ManualClock())
    try:
        game_id, tokens, _ = await finished_war(stub)
        assert server.running is not None
        assert rest(Harness(server.running, server.channel, stub,  # type: ignore[arg-type]
                            server.running.host.clock)) == 1
    finally:
        await server.stop()
    stub = await server.start(ManualClock())
    try:
        host = server.running.host  # type: ignore[union-attr]
        assert game_id in host.resting and game_id not in host.sessions  # only listed
        before = await views(stub, game_id, tokens)
        assert game_id in host.sessions
        await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=NEXT),
                                metadata=auth(tokens[0]))
        view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert view.status == pb.GAME_STATUS_IN_PROGRESS and view.game_number == 2
        assert before
    finally:
        await server.stop()
    stub = await server.start(ManualClock())
    try:
        host = server.running.host  # type: ignore[union-attr]
        assert game_id in host.sessions and game_id not in host.resting  # it must run
        view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert view.game_number == 2
    finally:
        await server.stop()


async def test_retention_counts_resting_tables(make_server: ServerFactory,
                                               tmp_path: Path) -> None:
    h = await make_server(clock=ManualClock(), store=SqliteStore(tmp_path),
                          finished_retention=1)
    older, _, _ = await finished_war(h.stub, "a")
    assert rest(h) == 1
    newer, _, _ = await finished_war(h.stub, "b")
    assert older not in h.host.resting and newer in h.host.sessions
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await h.stub.GetGame(pb.GetGameRequest(game_id=older))
    assert reason_of(refused.value) == "GAME_NOT_FOUND"


async def test_the_memory_store_keeps_finished_tables_in_memory(server: Harness) -> None:
    game_id, _, _ = await finished_war(server.stub)
    assert rest(server) == 0
    assert game_id in server.host.sessions


async def test_the_sweep_rests_finished_tables(durable: Harness) -> None:
    game_id, _, _ = await finished_war(durable.stub)
    clock = durable.clock
    assert isinstance(clock, ManualClock)
    for _ in range(2):
        clock.advance(60_000)
    assert game_id in durable.host.resting


async def test_a_damaged_resting_table_is_quarantined_when_it_comes_back(
        durable: Harness, tmp_path: Path) -> None:
    game_id, _, _ = await finished_war(durable.stub)
    assert rest(durable) == 1
    with sqlite3.connect(tmp_path / FILE_NAME) as connection:
        connection.execute("UPDATE journal SET entry = '{' WHERE game_id = ? AND idx = 3",
                           (game_id,))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await durable.stub.GetGame(pb.GetGameRequest(game_id=game_id))
    assert reason_of(refused.value) == "GAME_QUARANTINED"
    assert [(g.game_id, g.status) for g in await listed(durable.stub, True)] == [
        (game_id, pb.GAME_STATUS_QUARANTINED)]
