"""Tables nobody joined expire; tables nobody plays end as abandoned, durably."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine import table_codec
from tapis_engine.errors import RuleError
from tapis_engine.protocol import GameSetup
from tapis_engine.war import RULES as WAR
from tapis_engine.war import Reveal
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.stores.store import StoreUnavailable
from tapis_service.tables.host import GameHost
from tapis_service.tables.housekeeping import Housekeeping
from tests.support.calls import (
    REVEAL,
    STREAM_DEADLINE_S,
    auth,
    person_seats,
    refusal,
    view_of,
    war_for_two,
)
from tests.support.server import TEST_SETTINGS, Harness, Restartable, ServerFactory
from tests.support.tables import live_of

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


async def act_once(h: Harness, game_id: str, tokens: list[str]) -> None:
    """The seat awaited reveals (a person acted)."""
    seat = (await view_of(h, game_id)).awaiting_seats[0]
    await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                              metadata=auth(tokens[seat]))


async def test_a_table_rebuilt_after_an_outage_starts_its_idle_period_again(
        make_server: ServerFactory, tmp_path: Path) -> None:
    """A sweep during an outage no longer holds the table (it is UNAVAILABLE) and forgets when a
    person last acted; rebuilt, the table's idle period starts again then, never from its
    creation (it was ended as abandoned two minutes after a person acted)."""
    clock = ManualClock()
    h = await make_server(clock=clock, store=SqliteStore(tmp_path, synchronous="OFF"),
                          store_retry_ms=600_000, abandon_after_s=1800)
    game_id, tokens = await war_for_two(h, target=500)
    clock.advance(20 * MINUTE)
    await act_once(h, game_id, tokens)
    host, housekeeping = h.host, h.running.api.housekeeping
    assert housekeeping is not None
    host.healing.store_failed(live_of(host)[game_id], StoreUnavailable("outage"))
    clock.advance(MINUTE + 1)  # a sweep during the outage
    assert game_id not in housekeeping.last_person_ms
    host.healing.stop()
    await host.healing._rebuild(game_id)  # the store commits again, at 21 minutes
    clock.advance(24 * MINUTE)  # 45 minutes from the creation, 24 from the rebuild
    await housekeeping.drain()
    assert (await view_of(h, game_id)).status == pb.GAME_STATUS_IN_PROGRESS
    clock.advance(7 * MINUTE)  # 31 from the rebuild
    await housekeeping.drain()
    assert (await view_of(h, game_id)).status == pb.GAME_STATUS_ABANDONED


async def test_a_table_adopted_from_another_node_starts_its_idle_period_again(
        tmp_path: Path) -> None:
    """Two hosts on one store, as two nodes on one database: a table its persons played on B
    until B died is not ended by A's next sweep after A adopts it; A counts its idle period
    from the adoption."""
    clock = ManualClock()
    settings = replace(TEST_SETTINGS, abandon_after_s=1800, unjoined_ttl_s=0)
    store = SqliteStore(tmp_path, synchronous="OFF")
    a, b = GameHost(settings, clock, store), GameHost(settings, clock, store)
    on_a = Housekeeping(a)
    on_a.start()  # A is up from the start, holding nothing of it
    session = await b.create(kind="war", seats=2, seed=1, turn_time_ms=0, bots=[None, None],
                             options=replace(WAR.default_options(), target_points=500),
                             stacked_deck=None, stacked_first=None)
    game_id = session.game_id
    for seat in (0, 1):
        await b.join(game_id, seat, f"p{seat}")
    for minute in range(0, 41, 10):  # its persons play on B for 40 minutes
        clock.advance(10 * MINUTE if minute else 0)
        session = b.get(game_id)
        seat = next(iter(WAR.to_act(session.table.state)))
        await b.actor.submit(session, seat, tbl.Act(seat, Reveal()), f"r{minute}", None)
    b.tables.stop()  # B dies; A takes the table over
    clock.advance(MINUTE // 2)
    assert not (await a.adopt(game_id, 2)).table.abandoned
    clock.advance(MINUTE)  # A's next sweep
    await on_a.drain()
    assert not a.get(game_id).table.abandoned
    clock.advance(30 * MINUTE)
    await on_a.drain()
    assert (await a.find(game_id)).table.abandoned  # idle its time since the adoption
    on_a.stop()
    await a.close()
    store.close()


async def test_a_commit_landing_as_the_host_closes_arms_no_timer(tmp_path: Path) -> None:
    """``GameHost.close`` cancels the timers, then waits for the writes in flight: a bot's
    move committed then armed its table's turn timer again, which fired on the closed host."""
    clock = ManualClock()
    store = SqliteStore(tmp_path, synchronous="OFF")
    host = GameHost(TEST_SETTINGS, clock, store)
    session = await host.create(kind="war", seats=2, seed=3, turn_time_ms=3000,
                                bots=[None, "basic"], options=WAR.default_options(),
                                stacked_deck=None, stacked_first=None)
    await host.join(session.game_id, 0, "p0")
    session = host.get(session.game_id)
    while 0 not in WAR.to_act(session.table.state):  # the bot's moves first, if it leads
        clock.advance(0)
        await host.actor.settle()
    await host.actor.submit(session, 0, tbl.Act(0, Reveal()), "r1", None)
    clock.advance(0)  # the bot answers: its write is in flight
    await host.close()
    await host.actor.settle()
    assert clock.pending() == 0
    version = session.table.version
    clock.advance(10_000)
    await host.actor.settle()
    assert session.table.version == version


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
