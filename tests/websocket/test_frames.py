"""The envelope's encoding: the spliced binary answer equals protobuf's own bytes."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_service.codec.requests import ActionRequest
from tapis_service.observe.errors import ServiceError
from tapis_service.ws import frames
from tapis_service.ws.frames import Format
from tests.support.reading import REQUESTS, frame_values

EVENTS = st.lists(st.builds(pb.Event, sequence=st.integers(0, 2**64 - 1),
                            version=st.integers(0, 2**64 - 1),
                            awaiting_seats=st.lists(st.integers(0, 5), max_size=6)),
                  max_size=70)


@given(frame_id=st.integers(0, 2**64 - 1), events=EVENTS)
def test_a_spliced_events_frame_is_protobufs_own_bytes(frame_id: int,
                                                       events: list[pb.Event]) -> None:
    payload = pb.StreamEventsResponse(events=events).SerializeToString()
    plain = frames.answer(frame_id, "events", payload).SerializeToString()
    assert frames.answer_wire(frame_id, "events", payload) == plain


@given(frame_id=st.integers(1, 2**64 - 1), version=st.integers(0, 2**64 - 1), events=EVENTS)
def test_a_spliced_answer_is_protobufs_own_bytes(frame_id: int, version: int,
                                                 events: list[pb.Event]) -> None:
    payload = pb.SubmitActionResponse(version=version, events=events).SerializeToString()
    plain = frames.answer(frame_id, "submit_action", payload).SerializeToString()
    assert frames.answer_wire(frame_id, "submit_action", payload) == plain
    parsed = ws_pb.ServerFrame.FromString(frames.answer_wire(frame_id, "submit_action", payload))
    assert parsed.submit_action.version == version


def test_an_empty_answer_still_names_its_field() -> None:
    wire = frames.answer_wire(7, "events_stopped", b"")
    assert ws_pb.ServerFrame.FromString(wire).HasField("events_stopped")
    assert wire == frames.answer(7, "events_stopped", b"").SerializeToString()


def test_json_frames_read_as_their_binary_twins() -> None:
    frame = ws_pb.ClientFrame(id=12, seat_token="t", get_game=pb.GetGameRequest(game_id="g"))
    text = frames.encode(frames.answer(12, "get_game", pb.GetGameResponse()), Format.JSON)
    assert isinstance(text, str) and '"id": "12"' in text
    read = frames.decode(json_format.MessageToJson(frame).encode(), Format.JSON)
    assert frame_values(read) == frame_values(
        frames.decode(frame.SerializeToString(), Format.BINARY)) == (
        12, "t", "", "get_game", pb.GetGameRequest(game_id="g"))


@pytest.mark.parametrize("frame_id", [0, 1, 127, 128, 20_000])
@pytest.mark.parametrize("size", [0, 1, 127, 128, 16_384])
def test_a_stream_s_head_made_once_gives_the_answer_s_bytes(frame_id: int, size: int) -> None:
    """A stream written at commit makes its frames' head once (``answer_head``): each frame
    is ``answer_wire``'s bytes."""
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    for field in ("events", "submit_action"):
        assert frames.headed(frames.answer_head(frame_id, field), payload) == \
            frames.answer_wire(frame_id, field, payload)


def _hand(data: bytes) -> Any:
    try:
        return frame_values(frames.decode(data, Format.BINARY))
    except ServiceError as refused:
        assert refused.reason == "INVALID_REQUEST"
        return "refused"


def _plain(data: bytes) -> Any:
    """The plain way: protobuf parses the frame, its fields are read off the message."""
    try:
        return frame_values(frames.Frame.of(ws_pb.ClientFrame.FromString(data)))
    except DecodeError:
        return "refused"


CLIENT_FRAMES = st.builds(
    lambda frame_id, token, key, request: ws_pb.ClientFrame(
        id=frame_id, seat_token=token, api_key=key, **request),
    st.integers(0, 2**64 - 1), st.text(max_size=40), st.text(max_size=40), st.one_of(
        st.just({}),
        REQUESTS.map(lambda request: {"submit_action": request}),
        st.text(max_size=30).map(lambda g: {"get_game": pb.GetGameRequest(game_id=g)}),
        st.integers(0, 2**64 - 1).map(
            lambda n: {"stream_events": pb.StreamEventsRequest(game_id="g", after_sequence=n)}),
        st.integers(0, 2**64 - 1).map(
            lambda n: {"stop_events": ws_pb.StopEvents(stream_id=n)})))


@settings(max_examples=400)
@given(frame=CLIENT_FRAMES, other=CLIENT_FRAMES, cut=st.integers(0, 600),
       spoil=st.none() | st.tuples(st.integers(0, 600), st.integers(0, 255)))
def test_a_frame_reads_as_protobuf_reads_it(frame: ws_pb.ClientFrame,
                                            other: ws_pb.ClientFrame, cut: int,
                                            spoil: tuple[int, int] | None) -> None:
    """A frame read by hand (``frames.decode``) is what protobuf reads of it, or refused as
    protobuf refuses it: as written, merged with another, cut short, a byte changed."""
    data = frame.SerializeToString()
    assert _hand(data) == _plain(data) != "refused"
    merged = data + other.SerializeToString()
    assert _hand(merged) == _plain(merged)
    for changed in (merged[:cut % (len(merged) + 1)],
                    merged if spoil is None or not merged else
                    merged[:spoil[0] % len(merged)] + bytes((spoil[1],))
                    + merged[spoil[0] % len(merged) + 1:]):
        assert _hand(changed) == _plain(changed)


def test_a_submit_action_frame_is_read_by_hand() -> None:
    frame = ws_pb.ClientFrame(id=9, seat_token="s" * 40, submit_action=pb.SubmitActionRequest(
        game_id="g", request_id="r", action=pb.Action(war=war_pb2.WarAction(
            reveal=war_pb2.WarReveal()))))
    read = frames._by_hand(frame.SerializeToString())
    assert read is not None and isinstance(read.request, ActionRequest)
    assert read.wire == frame.submit_action.SerializeToString()
