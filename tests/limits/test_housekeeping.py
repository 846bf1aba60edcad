"""Tables nobody joined expire; tables nobody plays end as abandoned, durably."""

from __future__ import annotations

from pathlib import Path

import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine import table_codec
from tapis_engine.errors import RuleError
from tapis_engine.protocol import GameSetup
from tapis_engine.war import RULES as WAR
from tapis_service.observe.clock import ManualClock
from tests.support.calls import (
    REVEAL,
    STREAM_DEADLINE_S,
    auth,
    person_seats,
    refusal,
    view_of,
    war_for_two,
)
from tests.support.server import Restartable, ServerFactory

MINUTE = 60_000


async def test_a_table_nobody_joined_is_dropped_after_the_ttl(tmp_path: Path) -> None:
    servers = Restartable(tmp_path)
    clock = ManualClock()
    try:
        stub = await servers.start(clock, unjoined_ttl_s=600)
        lonely = (await stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))).game.game_id
        half = (await stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))).game.game_id
        await stub.JoinGame(pb.JoinGameRequest(game_id=half))
        clock.advance(9 * MINUTE)
        assert (await stub.GetGame(pb.GetGameRequest(game_id=lonely))).game.game_id
        clock.advance(2 * MINUTE)
        code, reason, _ = await refusal(stub.GetGame(pb.GetGameRequest(game_id=lonely)))
        assert (code, reason) == ("NOT_FOUND", "GAME_NOT_FOUND")
        assert (await stub.GetGame(pb.GetGameRequest(game_id=half))).game.game_id  # joined
        await servers.stop()
        stub = await servers.start(ManualClock(clock.now_ms()), unjoined_ttl_s=600)
        code, _, _ = await refusal(stub.GetGame(pb.GetGameRequest(game_id=lonely)))
        assert code == "NOT_FOUND"  # dropped from the store too
    finally:
        await servers.stop()


async def test_a_table_where_nobody_acts_ends_as_abandoned_and_stays_so(
        tmp_path: Path) -> None:
    servers = Restartable(tmp_path)
    clock = ManualClock()
    try:
        stub = await servers.start(clock, abandon_after_s=1800)
        created = await stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))
        game_id = created.game.game_id
        tokens = [(await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=s))).seat_token
                  for s in (0, 1)]
        clock.advance(20 * MINUTE)
        view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        seat = view.awaiting_seats[0]
        await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                metadata=auth(tokens[seat]))  # a person acted: time restarts
        clock.advance(20 * MINUTE)
        assert (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game.status \
            == pb.GAME_STATUS_IN_PROGRESS
        stream = stub.StreamEvents(pb.StreamEventsRequest(
            game_id=game_id, after_sequence=view.last_sequence + 1), timeout=STREAM_DEADLINE_S)
        clock.advance(11 * MINUTE)
        assert servers.running is not None
        await servers.running.api.housekeeping.drain()  # type: ignore[union-attr]
        abandoned = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert abandoned.status == pb.GAME_STATUS_ABANDONED
        assert not abandoned.legal_actions and not abandoned.awaiting_seats
        events = []
        while not any(e.HasField("game_abandoned") for e in events):
            events.extend((await stream.read()).events)
        stream.cancel()
        for token in tokens:
            code, reason, _ = await refusal(stub.SubmitAction(pb.SubmitActionRequest(
                game_id=game_id, action=REVEAL), metadata=auth(token)))
            assert (code, reason) in {("FAILED_PRECONDITION", "GAME_ABANDONED")}
        listed = await stub.ListGames(pb.ListGamesRequest(include_finished=True))
        assert [g.status for g in listed.games] == [pb.GAME_STATUS_ABANDONED]
        await servers.stop()
        stub = await servers.start(ManualClock(clock.now_ms()), abandon_after_s=1800)
        again = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
        assert (again.status, again.version) == (pb.GAME_STATUS_ABANDONED, abandoned.version)
    finally:
        await servers.stop()


async def test_an_idle_table_is_abandoned_once(
        make_server: ServerFactory) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock, abandon_after_s=60, bot_delay_ms=10_000)
    game_id, _ = await war_for_two(h, target=3)
    clock.advance(2 * MINUTE)
    await h.running.api.housekeeping.drain()  # type: ignore[union-attr]
    assert (await view_of(h, game_id)).status == pb.GAME_STATUS_ABANDONED
    assert h.running.api.housekeeping.abandoned == 1  # type: ignore[union-attr]
    clock.advance(5 * MINUTE)
    assert h.running.api.housekeeping.abandoned == 1  # type: ignore[union-attr]


async def test_a_table_nobody_joined_is_the_unjoined_rules_even_with_a_shorter_abandon(
        make_server: ServerFactory) -> None:
    """``--abandon-after`` below ``--unjoined-ttl``: a table no person joined is never ended as
    abandoned (it would then be kept as finished, and the TTL never drop it); it is dropped
    at the TTL. A table a person joined is abandoned at its time, as before."""
    clock = ManualClock()
    h = await make_server(clock=clock, abandon_after_s=2, unjoined_ttl_s=600)
    lonely = (await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))).game.game_id
    joined = (await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))).game.game_id
    await h.stub.JoinGame(pb.JoinGameRequest(game_id=joined))
    housekeeping = h.running.api.housekeeping
    assert housekeeping is not None
    clock.advance(MINUTE)
    await housekeeping.drain()
    assert (await view_of(h, lonely)).status == pb.GAME_STATUS_WAITING_FOR_PLAYERS
    assert (await view_of(h, joined)).status == pb.GAME_STATUS_ABANDONED
    clock.advance(10 * MINUTE)
    await housekeeping.drain()
    code, reason, _ = await refusal(h.stub.GetGame(pb.GetGameRequest(game_id=lonely)))
    assert (code, reason) == ("NOT_FOUND", "GAME_NOT_FOUND")
    assert housekeeping.abandoned == 1 and housekeeping.expired == 1


async def test_a_duration_under_a_millisecond_is_one_not_never(
        make_server: ServerFactory) -> None:
    """Durations in seconds become whole milliseconds rounded up: 0.0004 s is 1 ms, never the
    0 that reads as "never"."""
    clock = ManualClock()
    h = await make_server(clock=clock, unjoined_ttl_s=0.0004, abandon_after_s=0)
    housekeeping = h.running.api.housekeeping
    assert housekeeping is not None and housekeeping.unjoined_ms == 1
    created = await h.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))
    clock.advance(MINUTE)
    await housekeeping.drain()
    code, _, _ = await refusal(h.stub.GetGame(pb.GetGameRequest(game_id=created.game.game_id)))
    assert code == "NOT_FOUND"


async def test_zero_turns_housekeeping_off(make_server: ServerFactory) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock, unjoined_ttl_s=0, abandon_after_s=0,
                          results_max_age_s=0)
    created = await h.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR))
    assert clock.pending() == 0
    clock.advance(10_000 * MINUTE)
    assert (await view_of(h, created.game.game_id)).status == pb.GAME_STATUS_WAITING_FOR_PLAYERS


def test_the_engine_abandons_a_table_and_refuses_everything_after() -> None:
    table, _ = tbl.new_table(WAR, GameSetup(2, 5, WAR.default_options()), [None, None], 0, 0)
    table, _ = tbl.step(WAR, table, tbl.Claim(0), 1)
    table, events = tbl.step(WAR, table, tbl.Abandon(), 2)
    assert table.abandoned and table.game_over(WAR)
    assert [type(e.body).__name__ for e in events] == ["GameAbandoned"]
    for move in (tbl.Claim(1), tbl.Abandon(), tbl.NextGame(0)):
        with pytest.raises(RuleError) as refused:
            tbl.step(WAR, table, move, 3)
        assert refused.value.reason.value == "GAME_ABANDONED"
    decoded = table_codec.decode_table(WAR, table_codec.encode_table(WAR, table))
    assert decoded == table
    abandon = table_codec.encode_input(WAR, tbl.Abandon())
    assert table_codec.decode_input(WAR, abandon) == tbl.Abandon()
