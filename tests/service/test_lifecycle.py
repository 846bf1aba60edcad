"""A table's lifecycle (lifecycle.py): each transition does what ``TRANSITIONS`` declares —
timers, listing, streams — and one it does not declare is refused and changes nothing."""

from __future__ import annotations

import pytest

from tapis_engine.registry import rules_for
from tapis_service.clock import ManualClock
from tapis_service.host import GameHost
from tapis_service.lifecycle import TRANSITIONS, TableState, TransitionError
from tapis_service.resting import RestingTable, listing_of
from tapis_service.session import Session
from tests.support.server import TEST_SETTINGS
from tests.support.tables import live_of, unavailable_of


async def live_table(host: GameHost) -> Session:
    """A War table with both seats taken and a turn limit: its turn timers are armed."""
    rules = rules_for("war")
    assert rules is not None
    session = await host.create(kind="war", seats=2, seed=5, turn_time_ms=30_000,
                                bots=[None, None], options=rules.default_options(),
                                stacked_deck=None, stacked_first=None)
    for seat in (0, 1):
        await host.join(session.game_id, seat, f"p{seat}")
    assert session.deadline_timers  # armed by the commit (after_change)
    return session


async def test_a_failed_write_stops_the_timers_unlists_the_table_and_keeps_its_streams() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session = await live_table(host)
    stream, _, _ = host.subscribe(session, 0, 0)
    effects = TRANSITIONS[TableState.LIVE, TableState.UNAVAILABLE]
    assert (effects.timers, effects.listing, effects.streams) == ("cancel", "remove", "keep")
    host.tables.failed(session)
    assert host.tables.state_of(session.game_id) is TableState.UNAVAILABLE
    assert unavailable_of(host)[session.game_id] is session and session.game_id not in live_of(host)
    assert not session.deadline_timers and session.game_id not in host.lobby
    assert not stream.closed  # it waits for the rebuild
    host.tables.give_up(session)  # another node owns it: its streams end
    assert host.tables.state_of(session.game_id) is TableState.GONE and stream.closed


async def test_a_discarded_table_ends_its_streams_and_stops_its_timers() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session = await live_table(host)
    stream, _, _ = host.subscribe(session, None, 0)
    assert host.tables.discard(session.game_id) is session
    assert host.tables.state_of(session.game_id) is TableState.GONE
    assert stream.closed and not session.deadline_timers and session.game_id not in host.lobby
    assert host.tables.held("") == 0


async def test_a_transition_not_declared_is_refused_and_changes_nothing() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session = await live_table(host)
    assert (TableState.LIVE, TableState.LIVE) not in TRANSITIONS
    with pytest.raises(TransitionError):  # a table in memory is not listed at rest as well
        host.tables.listed_at_rest(session.game_id,
                                   RestingTable.of(session.game_id, listing_of(session), 0))
    assert host.tables.state_of(session.game_id) is TableState.LIVE
    assert live_of(host)[session.game_id] is session and session.deadline_timers
    host.tables.failed(session)
    with pytest.raises(TransitionError):  # failed twice
        host.tables.failed(session)
    assert unavailable_of(host)[session.game_id] is session
