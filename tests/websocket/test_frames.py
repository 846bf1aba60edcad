"""The envelope's encoding: the spliced binary answer equals protobuf's own bytes."""

from __future__ import annotations

import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_service.ws import frames
from tapis_service.ws.frames import Format

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
    assert frames.decode(json_format.MessageToJson(frame).encode(), Format.JSON) == frame


@pytest.mark.parametrize("frame_id", [0, 1, 127, 128, 20_000])
@pytest.mark.parametrize("size", [0, 1, 127, 128, 16_384])
def test_a_stream_s_head_made_once_gives_the_answer_s_bytes(frame_id: int, size: int) -> None:
    """A stream written at commit makes its frames' head once (``answer_head``): each frame
    is ``answer_wire``'s bytes."""
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    for field in ("events", "submit_action"):
        assert frames.headed(frames.answer_head(frame_id, field), payload) == \
            frames.answer_wire(frame_id, field, payload)
