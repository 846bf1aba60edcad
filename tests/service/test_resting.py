"""Tables at rest: a finished table leaves memory, the store keeps it, and every kind of call
that needs it brings it back unchanged (resting.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import grpc
import pytest
import structlog.testing

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.sqlite_store import FILE_NAME, SqliteStore
from tapis_service.tables.resting import RestingTable
from tests.support.calls import auth, person_seats, reason_of
from tests.support.damage import FAILED_INSTALL, FailingInstall, fail_restoring
from tests.support.driver import all_events
from tests.support.resting import REVEAL, finished_war, views
from tests.support.server import Harness, Restartable, ServerFactory
from tests.support.tables import live_of, quarantined_of, resting_of

NEXT = pb.Action(start_next_game=pb.StartNextGame())


async def listed(stub: pb_grpc.GameServiceStub, include_finished: bool) -> list[pb.GameListing]:
    answer = await stub.ListGames(pb.ListGamesRequest(include_finished=include_finished))
    return list(answer.games)


async def streams_closed(h: Harness, game_id: str) -> None:
    """Wait (bounded) until the server has seen the table's cancelled streams end (a
    finished table then rests at once)."""
    for _ in range(500):
        session = h.host.tables.session(game_id)
        if session is None or not session.subscribers:
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
    assert game_id not in live_of(durable.host) and game_id in resting_of(durable.host)
    assert await views(durable.stub, game_id, tokens) == before
    assert game_id in live_of(durable.host) and game_id not in resting_of(durable.host)


async def test_list_games_lists_a_resting_table_without_loading_it(durable: Harness) -> None:
    game_id, _, _ = await finished_war(durable.stub)
    assert isinstance(durable.clock, ManualClock)
    durable.clock.advance(1)  # listed oldest first
    live = await durable.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=person_seats(2)))
    before = await listed(durable.stub, include_finished=True)
    assert [list(g.seat_types) for g in before] == [[pb.SEAT_TYPE_PERSON] * 2] * 2
    assert rest(durable) == 1
    assert await listed(durable.stub, include_finished=True) == before  # its seats' types too
    assert [g.game_id for g in await listed(durable.stub, include_finished=False)] == [
        live.game.game_id]
    assert game_id in resting_of(durable.host)  # listed from its stored line only


def test_a_stored_listing_types_its_bot_seats_and_one_stored_before_types_none() -> None:
    """A table at rest lists which seats are bots from its stored line (``bots``); a line
    stored before it held them types no seat (``seat_types`` empty: GetGame says them)."""
    stored = {"kind": "war", "status": "GAME_STATUS_GAME_OVER", "seats": 3, "open_seats": [],
              "game_number": 1, "created_ms": 0, "names": ["ana", "", ""], "bots": [2]}
    line = RestingTable.of("g", stored).to_proto()
    assert list(line.seat_types) == [pb.SEAT_TYPE_PERSON, pb.SEAT_TYPE_PERSON, pb.SEAT_TYPE_BOT]
    older = {key: value for key, value in stored.items() if key != "bots"}
    assert list(RestingTable.of("g", older).to_proto().seat_types) == []
    with pytest.raises(TypeError):  # a damaged line: the host loads the table instead
        RestingTable.of("g", {**stored, "bots": 2})


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
    assert game_id in resting_of(durable.host)  # its last stream ended: it rested at once
    assert [await all_events(durable.stub, game_id, 3, last, token)
            for token in (None, *tokens)] == before
    assert game_id in live_of(durable.host)


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
        assert game_id in resting_of(host) and game_id not in live_of(host)  # only listed
        before = await views(stub, game_id, tokens)
        assert game_id in live_of(host)
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
        assert game_id in live_of(host) and game_id not in resting_of(host)  # it must run
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
    assert older not in resting_of(h.host) and newer in live_of(h.host)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await h.stub.GetGame(pb.GetGameRequest(game_id=older))
    assert reason_of(refused.value) == "GAME_NOT_FOUND"


async def test_the_memory_store_keeps_finished_tables_in_memory(server: Harness) -> None:
    game_id, _, _ = await finished_war(server.stub)
    assert rest(server) == 0
    assert game_id in live_of(server.host)


async def test_the_sweep_rests_finished_tables(durable: Harness) -> None:
    game_id, _, _ = await finished_war(durable.stub)
    clock = durable.clock
    assert isinstance(clock, ManualClock)
    for _ in range(2):
        clock.advance(60_000)
    assert game_id in resting_of(durable.host)


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


async def test_a_resting_table_restore_fails_on_unexpectedly_is_quarantined_when_it_comes_back(
        durable: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Waking it raises something that is no ``RecoveryError`` (a bug met on this table):
    refused GAME_QUARANTINED and listed so, not an internal error on every call."""
    game_id, _, _ = await finished_war(durable.stub)
    assert rest(durable) == 1
    fail_restoring(monkeypatch, game_id)
    for _ in range(2):  # quarantined at the first call; the second is told so too
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await durable.stub.GetGame(pb.GetGameRequest(game_id=game_id))
        assert reason_of(refused.value) == "GAME_QUARANTINED"
    assert "RuntimeError" in quarantined_of(durable.host)[game_id].why
    assert [(g.game_id, g.status) for g in await listed(durable.stub, True)] == [
        (game_id, pb.GAME_STATUS_QUARANTINED)]


@pytest.mark.parametrize("after_arming", [False, True], ids=["told", "armed"])
async def test_a_resting_table_whose_install_fails_is_quarantined_when_it_comes_back(
        durable: Harness, after_arming: bool) -> None:
    """Restored faithfully, its install raises part way (a hook run on a table read back, or
    its arming): refused GAME_QUARANTINED and listed so, not left live half-installed; another
    resting table still comes back."""
    game_id, _, _ = await finished_war(durable.stub, create_id="c1")
    other, _, _ = await finished_war(durable.stub, create_id="c2")
    assert rest(durable) == 2
    failing = FailingInstall(game_id, after_arming)
    failing.on(durable.host)
    with structlog.testing.capture_logs() as logs:
        for _ in range(2):  # quarantined at the first call; the second is told so too
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await durable.stub.GetGame(pb.GetGameRequest(game_id=game_id))
            assert reason_of(refused.value) == "GAME_QUARANTINED"
    failing.assert_nothing_left(logs)
    assert FAILED_INSTALL in quarantined_of(durable.host)[game_id].why
    assert {g.game_id: g.status for g in await listed(durable.stub, True)} == {
        game_id: pb.GAME_STATUS_QUARANTINED, other: pb.GAME_STATUS_GAME_OVER}
    view = (await durable.stub.GetGame(pb.GetGameRequest(game_id=other))).game
    assert view.status == pb.GAME_STATUS_GAME_OVER
    assert set(live_of(durable.host)) == {other}


async def _played_to_its_end(h: Harness) -> str:
    """A War to 1 point between two people, played to its end with no stream open, the table
    looked up by nothing but the actions: its id."""
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=7, seat_configs=person_seats(2),
        war=war_pb2.WarOptions(target_points=1)))
    game_id = created.game.game_id
    tokens = [(await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat))).seat_token
              for seat in (0, 1)]
    for _ in range(200):
        session = live_of(h.host)[game_id]  # in memory while the game runs
        seat = next(iter(session.rules.to_act(session.table.state)))
        await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                  metadata=auth(tokens[seat]))
        if game_id not in live_of(h.host):
            return game_id
    raise AssertionError("the game did not end, or its table did not rest")


async def test_a_finished_table_rests_as_its_last_input_commits(tmp_path: Path) -> None:
    server = Restartable(tmp_path)
    stub = await server.start(ManualClock())
    try:
        assert server.running is not None
        h = Harness(server.running, server.channel, stub,  # type: ignore[arg-type]
                    server.running.host.clock)
        game_id = await _played_to_its_end(h)
        assert game_id in resting_of(h.host)  # no sweep ran: its last answer's commit rested it
        view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert view.status == pb.GAME_STATUS_GAME_OVER  # loaded back for the call
    finally:
        await server.stop()
    await server.start(ManualClock())
    try:
        host = server.running.host  # type: ignore[union-attr]
        assert not live_of(host) and game_id in resting_of(host)  # a restart loads none
    finally:
        await server.stop()


async def test_a_finished_table_with_an_open_stream_rests_when_its_stream_ends(
        durable: Harness) -> None:
    game_id, _, _ = await finished_war(durable.stub)
    stream = durable.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id))
    await stream.read()
    assert rest(durable) == 0  # watched: it stays
    stream.cancel()
    await streams_closed(durable, game_id)
    assert game_id in resting_of(durable.host) and game_id not in live_of(durable.host)


async def test_recovery_rests_at_once_a_table_that_finished_while_watched(
        tmp_path: Path) -> None:
    server = Restartable(tmp_path)
    stub = await server.start(ManualClock())
    try:
        game_id, tokens, _ = await finished_war(stub)
        stream = stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id))
        await stream.read()  # watched when the server stops: it is not at rest
        assert game_id in live_of(server.running.host)  # type: ignore[union-attr]
    finally:
        await server.stop()
    stub = await server.start(ManualClock())
    try:
        host = server.running.host  # type: ignore[union-attr]
        assert game_id in resting_of(host) and game_id not in live_of(host)  # over: rested
        assert (await stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                   metadata=auth(tokens[0]))).game.status == \
            pb.GAME_STATUS_GAME_OVER
    finally:
        await server.stop()
    await server.start(ManualClock())
    try:
        host = server.running.host  # type: ignore[union-attr]
        assert not live_of(host) and game_id in resting_of(host)  # only its listing is read
    finally:
        await server.stop()


@pytest.mark.parametrize("used_after_ms", [1, 59_999])
async def test_a_table_loaded_back_rests_one_to_two_periods_after_its_last_use(
        durable: Harness, used_after_ms: int) -> None:
    """The period documented (docs/operations.md: 60 s by default) and what it means: a table
    a call loaded back rests at the second sweep after that call."""
    clock = durable.clock
    assert isinstance(clock, ManualClock)
    period = durable.running.api.housekeeping.period_ms  # type: ignore[union-attr]
    assert period == 60_000
    game_id, _, _ = await finished_war(durable.stub)  # its last GetGame loaded it back
    clock.advance(period)  # a sweep: it was used since the last one
    clock.advance(used_after_ms)
    await durable.stub.GetGame(pb.GetGameRequest(game_id=game_id))  # used again
    clock.advance(period - used_after_ms)  # the next sweep: used since the last one
    assert game_id in live_of(durable.host)
    clock.advance(period)
    assert game_id in resting_of(durable.host)  # 2 periods - used_after_ms after its last use
