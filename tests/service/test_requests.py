"""The request read by hand (``codec.requests``) is the request protobuf reads: the same values,
or the same refusal, for every request and for bytes that are none."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from tapis.v1 import basra_pb2, cards_pb2, war_pb2
from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis_service.codec import moves, requests
from tapis_service.codec.requests import ActionRequest, read_submit_action
from tapis_service.door.limits import MAX_TEXT_BYTES, check_sizes
from tapis_service.door.rpcs import BY_NAME
from tapis_service.observe.errors import ServiceError
from tests.support.reading import REQUESTS, request_values


def plain(data: bytes) -> Any:
    """The plain way: protobuf parses, the values are read off the message."""
    try:
        return request_values(ActionRequest.of(pb.SubmitActionRequest.FromString(data), data))
    except DecodeError:
        return "refused"


def by_hand(data: bytes) -> Any:
    try:
        return request_values(read_submit_action(data))
    except DecodeError:
        return "refused"


@settings(max_examples=400)
@given(request=REQUESTS)
def test_a_request_reads_as_protobuf_reads_it(request: pb.SubmitActionRequest) -> None:
    data = request.SerializeToString()
    assert by_hand(data) == plain(data) != "refused"


def test_what_protobuf_writes_of_an_action_is_read_by_hand() -> None:
    """The plain way is for bytes protobuf does not write: what a client's protobuf sends,
    below 2**56, is read by hand (the shortcut is taken, not only correct)."""
    request = pb.SubmitActionRequest(
        game_id="g" * 26, request_id="r-12", expected_version=2**55, seat=1,
        action=pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal())))
    read = requests._by_hand(request.SerializeToString())
    assert read is not None
    assert request_values(read) == plain(request.SerializeToString())
    assert requests._by_hand(pb.SubmitActionRequest(expected_version=2**56)
                             .SerializeToString()) is None  # beyond 2**56: the plain way


SPOILERS = st.one_of(
    st.tuples(st.just("cut"), st.integers(0, 400)),
    st.tuples(st.just("byte"), st.integers(0, 400), st.integers(0, 255)),
    st.tuples(st.just("append"), st.binary(max_size=12)),
    st.tuples(st.just("twice"), st.integers(0, 400)),
)


def spoiled(data: bytes, spoiler: tuple[Any, ...]) -> bytes:
    kind = spoiler[0]
    if kind == "cut":
        return data[:spoiler[1] % (len(data) + 1)]
    if kind == "byte" and data:
        at = spoiler[1] % len(data)
        return data[:at] + bytes((spoiler[2],)) + data[at + 1:]
    if kind == "append":
        return data + spoiler[1]
    if kind == "twice":  # a field again (protobuf: the last wins, sub-messages merge)
        return data + data[spoiler[1] % (len(data) + 1):]
    return data


@settings(max_examples=800)
@given(request=REQUESTS, spoilers=st.lists(SPOILERS, min_size=1, max_size=3))
def test_spoiled_bytes_read_as_protobuf_reads_them(request: pb.SubmitActionRequest,
                                                   spoilers: list[tuple[Any, ...]]) -> None:
    """Cut, changed, lengthened, a field repeated: read by hand or the plain way, the same
    values or the same refusal."""
    data = request.SerializeToString()
    for spoiler in spoilers:
        data = spoiled(data, spoiler)
    assert by_hand(data) == plain(data)


@settings(max_examples=400)
@given(first=REQUESTS, second=REQUESTS)
def test_two_requests_end_to_end_read_as_protobuf_merges_them(
        first: pb.SubmitActionRequest, second: pb.SubmitActionRequest) -> None:
    """Each field given twice: protobuf keeps the last value and merges the actions."""
    data = first.SerializeToString() + second.SerializeToString()
    assert by_hand(data) == plain(data)


@settings(max_examples=400)
@given(data=st.binary(max_size=80))
def test_any_bytes_read_as_protobuf_reads_them(data: bytes) -> None:
    assert by_hand(data) == plain(data)


@pytest.mark.parametrize("data", [
    b"\x0a\x02\xc3\x28",  # game_id: not UTF-8
    b"\x28\x80\x80\x80\x80\x10",  # seat: 2**32, beyond a uint32 (protobuf keeps its low bits)
    b"\x20\x80\x00",  # expected_version 0, a byte too many
    b"\x8a\x00\x00",  # field 1's key, a byte too many
    b"\x12\x02\x52\x00\x12\x02\x52\x00",  # the action twice (merged)
    b"\x12\x03\x52\x01\x0a",  # an action that is none (cut inside)
    b"\x30\x01",  # field 6: unknown
    b"\x0d\x00\x00\x00\x00",  # game_id as a fixed32
])
def test_the_bytes_protobuf_does_not_write_go_the_plain_way(data: bytes) -> None:
    assert requests._by_hand(data) is None
    assert by_hand(data) == plain(data)


def test_the_hand_readers_fields_are_the_contracts() -> None:
    """``_ACTION_KINDS`` says each field's wire type by its number, as the descriptor does."""
    kinds = requests._ACTION_KINDS
    fields = {field.number: field for field in pb.SubmitActionRequest.DESCRIPTOR.fields}
    for number in range(len(kinds)):
        field = fields.get(number)
        if field is None:
            assert kinds[number] == requests.NONE
        elif field.type in (field.TYPE_STRING, field.TYPE_MESSAGE):
            assert kinds[number] == requests.LENGTH_DELIMITED
        else:
            assert field.type in (field.TYPE_UINT32, field.TYPE_UINT64)
            assert kinds[number] == requests.VARINT
    assert max(fields) < len(kinds)
    assert requests.reader(BY_NAME["SubmitAction"]) is read_submit_action
    assert requests.reader(BY_NAME["GetGame"]) == pb.GetGameRequest.FromString


def test_an_action_is_read_once_by_its_bytes_and_only_a_short_one() -> None:
    reveal = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal())).SerializeToString()
    assert moves.read_action(reveal) is moves.read_action(reveal)
    five = cards_pb2.Card.FromString(b"\x08\x05\x10\x01")
    long = pb.Action(basra=basra_pb2.BasraAction(play_card=basra_pb2.BasraPlayCard(
        capture=basra_pb2.BasraCapture(cards=[five] * 20))))
    data = long.SerializeToString()
    assert len(data) > moves.REMEMBERED_BYTES
    assert moves.read_action(data) is not moves.read_action(data)


def test_the_actions_remembered_are_bounded() -> None:
    for n in range(moves.MAX_REMEMBERED + 5):
        moves.read_action(pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
            slap=corse_pb2.BatailleCorseSlap(pile_sequence=n + 1))).SerializeToString())
    assert len(moves._REMEMBERED) <= moves.MAX_REMEMBERED


def _refusal(check: Any) -> tuple[str, str] | None:
    try:
        check()
    except ServiceError as refused:
        return refused.reason, str(refused)
    return None


LONG_CAPTURES = st.builds(
    lambda game_id, request_id, cards: pb.SubmitActionRequest(
        game_id=game_id, request_id=request_id, action=pb.Action(basra=basra_pb2.BasraAction(
            play_card=basra_pb2.BasraPlayCard(capture=basra_pb2.BasraCapture(cards=cards))))),
    st.text(max_size=60), st.text(max_size=60),
    st.lists(st.just(cards_pb2.Card.FromString(b"\x08\x05\x10\x01")), max_size=80))


@settings(max_examples=400)
@given(request=st.one_of(REQUESTS, LONG_CAPTURES))
def test_a_requests_sizes_are_refused_as_the_plain_check_refuses_them(
        request: pb.SubmitActionRequest) -> None:
    """``ActionRequest.check_sizes`` refuses what ``limits.check_sizes`` refuses of the
    message, with the same reason and message (the same field first), and passes the rest."""
    data = request.SerializeToString()
    assert _refusal(read_submit_action(data).check_sizes) == _refusal(
        lambda: check_sizes(pb.SubmitActionRequest.FromString(data)))


def test_a_long_requests_sizes_are_checked_as_the_plain_way_checks_them() -> None:
    """Over ``SURELY_SHORT`` bytes, the message's own check runs (VALUE_TOO_LONG)."""
    long = read_submit_action(pb.SubmitActionRequest(
        game_id="g", request_id="r" * (MAX_TEXT_BYTES + 1)).SerializeToString())
    with pytest.raises(ServiceError) as refused:
        long.check_sizes()
    assert refused.value.reason == "VALUE_TOO_LONG" and "request_id" in str(refused.value)
    read_submit_action(pb.SubmitActionRequest(
        game_id="g", request_id="r" * MAX_TEXT_BYTES).SerializeToString()).check_sizes()
