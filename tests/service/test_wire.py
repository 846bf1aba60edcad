"""The fan-out's serialized answers: byte-built messages parse to exactly what the converters
give, public events are serialized once for everyone, private ones once per seat."""

from __future__ import annotations

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine.registry import rules_for
from tapis_service import convert
from tapis_service.clock import ManualClock
from tapis_service.host import GameHost
from tapis_service.session import Session
from tests.conftest import TEST_SETTINGS


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
            convert.ANSWER_VERSION_TAG + convert.varint(value)).version == value


async def test_answers_and_stream_messages_parse_to_the_converted_events() -> None:
    session = await _table("basra", 2, 7)
    events = session.events_after(0)
    assert any(convert.view_key(session, e, 0) == 0 for e in events)  # a private hand
    for seat in (None, 0, 1):
        expected = [convert.event(session, e, seat) for e in events]
        stream = pb.StreamEventsResponse.FromString(convert.events_wire(session, events, seat))
        assert list(stream.events) == expected
        answer = pb.SubmitActionResponse.FromString(
            convert.answer_wire(session, session.table.version, events, seat))
        assert answer == pb.SubmitActionResponse(version=session.table.version, events=expected)
    assert pb.SubmitActionResponse.FromString(convert.answer_wire(session, 0, [], 0)) == \
        pb.SubmitActionResponse()


async def test_public_events_are_serialized_once_for_every_view() -> None:
    session = await _table("war", 2, 3)
    session.apply(tbl.Act(0, session.rules.legal_actions(session.table.state, 0)[0]), 0)
    for logged in session.events_after(0):
        assert convert.view_key(session, logged, None) == convert.PUBLIC
        shared = convert.framed_event(session, logged, 0)
        assert convert.framed_event(session, logged, 1) is shared
        assert convert.framed_event(session, logged, None) is shared
