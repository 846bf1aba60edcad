"""The fan-out's serialized answers: byte-built messages parse to exactly what the converters
give, public events are serialized once for everyone, private ones once per seat, and the
hand-encoded events are byte for byte what protobuf serializes."""

from __future__ import annotations

import contextlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine import war
from tapis_engine.cards import standard_deck
from tapis_engine.errors import RuleError
from tapis_engine.protocol import GameSetup, Outcome
from tapis_engine.registry import DESCRIPTORS, rules_for
from tapis_service.codec import convert, wire
from tapis_service.codec.adapters import ADAPTERS
from tapis_service.codec.adapters.war import WarAdapter
from tapis_service.observe.clock import ManualClock
from tapis_service.tables.host import GameHost
from tapis_service.tables.session import Applied, LoggedEvent, Session
from tests.support.server import TEST_SETTINGS


async def _table(kind: str, seats: int, seed: int) -> Session:
    host = GameHost(TEST_SETTINGS, ManualClock())
    rules = rules_for(kind)
    assert rules is not None
    session = await host.create(kind=kind, seats=seats, seed=seed, turn_time_ms=0,
                                bots=[None] * seats, options=rules.default_options(),
                                stacked_deck=None, stacked_first=None)
    for seat in range(seats):
        await host.join(session.game_id, seat, f"p{seat}")
    return session


def test_varint() -> None:
    for value in (0, 1, 127, 128, 300, 2**32 + 5):
        assert pb.SubmitActionResponse.FromString(
            wire.ANSWER_VERSION_TAG + wire.varint(value)).version == value


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1) | st.integers(0, 0x90), st.integers(0, 2**32 - 1)
       | st.integers(0, 0x90))
def test_a_pair_is_packed_as_its_tuple(first: int, second: int) -> None:
    key = wire.tag(pb.Event.DESCRIPTOR, "awaiting_seats")
    assert wire.pair(key, first, second) == wire.packed(key, (first, second))
    assert pb.Event.FromString(wire.pair(key, first, second)).awaiting_seats == [first, second]


async def test_answers_and_stream_messages_parse_to_the_converted_events() -> None:
    session = await _table("basra", 2, 7)
    events = session.events_after(0)
    assert any(wire.view_key(session, e, 0) == 0 for e in events)  # a private hand
    for seat in (None, 0, 1):
        expected = [convert.event(session, e, seat) for e in events]
        stream = pb.StreamEventsResponse.FromString(wire.events_wire(session, events, seat))
        assert list(stream.events) == expected
        answer = pb.SubmitActionResponse.FromString(
            wire.answer_wire(session, Applied(session.table.version, tuple(events)), seat))
        assert answer == pb.SubmitActionResponse(version=session.table.version, events=expected)
    assert pb.SubmitActionResponse.FromString(wire.answer_wire(session, Applied(0, ()), 0)) == \
        pb.SubmitActionResponse()


def test_wire_keys_order_events_and_tell_every_view_apart() -> None:
    widest = max(rules.max_seats for rules in map(rules_for, ADAPTERS) if rules is not None)
    views: list[int | None] = [wire.PUBLIC, None, *range(widest)]
    keys = [wire.wire_key(sequence, view) for sequence in (1, 2, 300) for view in views]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


async def test_frames_are_kept_under_their_view_key() -> None:
    session = await _table("basra", 2, 7)
    for logged in session.events_after(0):
        for seat in (None, 0, 1):
            framed = wire.framed_event(session, logged, seat)
            key = wire.wire_key(logged.sequence, wire.view_key(session, logged, seat))
            assert session.wire[key] is framed


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
async def test_a_frame_s_key_is_its_sequence_s_key_for_its_view(kind: str) -> None:
    session = await _table(kind, 2, 11)
    rules = session.rules
    for _ in range(30):  # some play, so that hidden and public events both come
        seat = next((s for s in range(2) if rules.legal_actions(session.table.state, s)), None)
        if seat is None or rules.outcome(session.table.state) is not None:
            break
        session.apply(tbl.Act(seat, rules.legal_actions(session.table.state, seat)[0]), 0)
    views = set()
    for logged in session.events_after(0):
        for seat in (None, 0, 1):
            key = wire.frame_key(session, logged, seat)
            assert key == wire.wire_key(logged.sequence, wire.view_key(session, logged, seat))
            views.add(key & 0b1111)
    assert (views != {0}) == rules.hides_events  # private views were keyed apart too


async def test_public_events_are_serialized_once_for_every_view() -> None:
    session = await _table("war", 2, 3)
    session.apply(tbl.Act(0, session.rules.legal_actions(session.table.state, 0)[0]), 0)
    for logged in session.events_after(0):
        assert wire.view_key(session, logged, None) == wire.PUBLIC
        shared = wire.framed_event(session, logged, 0)
        assert wire.framed_event(session, logged, 1) is shared
        assert wire.framed_event(session, logged, None) is shared


# --- hand-encoded events: byte for byte what protobuf serializes ----------------------------

_SIZES = st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
_SMALL = st.integers(0, 2**32 - 1)
_CARDS = st.sampled_from(standard_deck())
_WAR_EVENTS = st.one_of(
    st.builds(war.CardRevealed, _SMALL, _CARDS, st.booleans(), _SIZES),
    st.builds(war.TrickWon, _SMALL, _SMALL, _SIZES, _SIZES),
    st.builds(war.BatailleAnnounced, _SMALL),
    st.builds(war.Dealt, _SIZES, _SMALL),
    st.builds(war.ShortBataille, st.none() | _SMALL, _SIZES),
    st.builds(war.WarEnded, st.none() | _SMALL,
              st.sampled_from(["target", "all_cards", "short_bataille", "draw"]), _SIZES,
              _SIZES),
)


@settings(max_examples=500, deadline=None)
@given(_WAR_EVENTS)
def test_war_events_are_hand_encoded_as_protobuf_serializes_them(event: object) -> None:
    adapter = WarAdapter()
    assert adapter.event_wire(event) == adapter.event_to_proto(event).SerializeToString()


def _session(kind: str, seats: int, seed: int, turn_time_ms: int = 0) -> Session:
    rules = rules_for(kind)
    assert rules is not None
    setup = GameSetup(seats=seats, seed=seed, options=rules.default_options(), salt="s")
    table, events = tbl.new_table(rules, setup, [None] * seats, turn_time_ms, 1_000)
    session = Session(game_id="g", rules=rules, adapter=ADAPTERS[kind], table=table,
                      created_ms=1_000, names=[f"p{seat} ✓" for seat in range(seats)])
    session.record(events)
    return session


def _assert_hand_encoded(session: Session, logged: LoggedEvent) -> None:
    for seat in (None, *range(len(session.table.seats))):
        expected = convert.event(session, logged, seat).SerializeToString()
        assert wire.event_wire(session, logged, seat) == expected, (logged, seat)


_TABLE_BODIES = st.one_of(
    st.builds(tbl.SeatClaimed, st.integers(0, 1)),
    st.builds(tbl.GameStarted, _SMALL, _SMALL, st.text(max_size=70)),
    st.builds(tbl.GameAbandoned, _SMALL),
    st.builds(tbl.SeatTakenOver, st.integers(0, 1), st.booleans()),
    st.builds(tbl.SeatReclaimed, st.integers(0, 1)),
    st.builds(tbl.SeatReplaced, st.integers(0, 1)),
    st.builds(tbl.TurnTimersResumed, st.lists(st.tuples(st.integers(0, 1), st.integers(
        0, 253_402_300_799_999)), max_size=2).map(tuple)),  # to 9999-12-31, Timestamp's last
    st.builds(tbl.GameEnded, _SMALL,
              st.builds(Outcome, st.tuples(st.integers(0, 1)),
                        st.tuples(st.integers(-2**63, 2**63 - 1)), st.text(max_size=30)),
              st.tuples(st.builds(tbl.GameRecord, _SMALL, st.integers(0, 2**64 - 1),
                                  st.tuples(st.integers(0, 1)), st.tuples(st.integers(-9, 9)),
                                  st.text(max_size=20)))),
)


@settings(max_examples=500, deadline=None)
@given(sequence=st.integers(1, 2**64 - 1), game_number=_SMALL,
       version=st.integers(0, 2**64 - 1),
       awaiting=st.lists(st.integers(0, 300), max_size=6).map(tuple),
       time_ms=st.integers(-2**40, 2**45), body=_WAR_EVENTS | _TABLE_BODIES)
def test_the_event_envelope_is_hand_encoded_as_protobuf_serializes_it(
        sequence: int, game_number: int, version: int, awaiting: tuple[int, ...],
        time_ms: int, body: object) -> None:
    session = _session("war", 2, 1)
    logged = LoggedEvent(tbl.TableEvent(sequence, game_number, body), version, awaiting,
                         time_ms)
    _assert_hand_encoded(session, logged)


_KINDS = [(game.kind, seats) for game in DESCRIPTORS
          for seats in sorted({game.rules.min_seats, min(game.rules.max_seats, 4)})]
"""Every game, with its fewest seats and with four (or its most, when fewer)."""


@settings(max_examples=60, deadline=None)
@given(game=st.sampled_from(_KINDS), seed=st.integers(0, 2**64 - 1), chooser=st.randoms(),
       timed=st.booleans())
def test_every_event_of_played_games_is_hand_encoded_as_protobuf_serializes_it(
        game: tuple[str, int], seed: int, chooser: random.Random, timed: bool) -> None:
    """Whole series (every game kind, seat and spectator views, timers, take-overs,
    reclaims, next games, abandonment): each event's bytes are protobuf's."""
    kind, seats = game
    session = _session(kind, seats, seed, turn_time_ms=500 if timed else 0)
    rules, now = session.rules, 2_000
    for seat in range(seats):
        session.apply(tbl.Claim(seat), now)
    for _ in range(400):
        now += chooser.randrange(0, 700)
        table = session.table
        if table.game_over(rules):
            if table.game_number >= 3:
                break
            session.apply(tbl.NextGame(0), now)
            continue
        if chooser.random() < 0.002:
            session.apply(tbl.Abandon(), now)
            break
        moves: list[tbl.Input] = [tbl.Act(s, a) for s in range(seats)
                                  for a in rules.legal_actions(table.state, s)]
        moves += [tbl.Timeout(s) for s, at in table.deadlines if at <= now]
        moves += [tbl.Reclaim(s) for s, slot in enumerate(table.seats) if slot.taken_over]
        moves += [tbl.BotMove(s) for s, slot in enumerate(table.seats) if slot.taken_over]
        if not moves:
            now += 1_000
            continue
        with contextlib.suppress(RuleError):  # a take-over's bot may have no move now
            session.apply(chooser.choice(moves), now)
    for logged in session.events:
        _assert_hand_encoded(session, logged)


def test_the_table_events_exact_types_are_what_isinstance_tells() -> None:
    """``wire`` tells a table's own event by ``type(body) in TABLE_EVENT_TYPES``: the same as
    ``isinstance(body, TABLE_EVENTS)`` only while none of them has a subclass."""
    from tapis_service.codec.table_messages import TABLE_EVENT_TYPES, TABLE_EVENTS

    assert frozenset(TABLE_EVENTS) == TABLE_EVENT_TYPES
    for kind in TABLE_EVENTS:
        assert kind.__subclasses__() == []


@settings(max_examples=200, deadline=None)
@given(times=st.lists(st.integers(-2**40, 2**45) | st.sampled_from([0, 999, 1000, 1001]),
                      min_size=1, max_size=8))
def test_an_event_time_encoded_again_is_protobufs_whatever_came_before(
        times: list[int]) -> None:
    """``_time_wire`` remembers the last time and second it encoded: each time, in any order
    (the same twice, the same second, zero), is still protobuf's bytes."""
    session = _session("war", 2, 1)
    for time_ms in [*times, *reversed(times)]:
        logged = LoggedEvent(tbl.TableEvent(1, 1, war.BatailleAnnounced(2)), 1, (0,), time_ms)
        _assert_hand_encoded(session, logged)
