"""The request read on every action, from its protobuf bytes by hand: the one place that does
it (``wire`` writes the answers' bytes the same way), for every transport and every node
(``reader``: gRPC's deserializer, the WebSocket's frames, a relayed call's owner).

Why by hand: a parsed ``SubmitActionRequest`` is read field by field, each read a lookup by
name that makes a new Python object, and its oneofs asked which field they hold; on a War
action over the WebSocket that was about a fifth of the server's instructions in our code
(docs/performance.md, "The request read by hand"). Read here, its fields are plain values
(``ActionRequest``) and its action is read once per kind of action (``moves.read_action``).

The rule that keeps it exact: the hand reader takes only bytes as protobuf writes them (each
field at most once, of its own wire type, nothing unknown, varints below 2**56, strings valid
UTF-8); anything else goes the plain way, protobuf parsing the message and the values read off
it (``ActionRequest.of``), so a request reads the same, or is refused the same (protobuf's
``DecodeError``), whichever way it goes. ``tests/service/test_requests.py`` checks both ways
against each other on generated requests, their bytes cut, repeated and spoiled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from tapis.v1 import game_service_pb2 as pb
from tapis_service.codec.moves import ReadAction, read_action
from tapis_service.door.limits import SURELY_SHORT, check_sizes, check_text
from tapis_service.door.rpcs import Rpc

VARINT: Final = 0
LENGTH_DELIMITED: Final = 2
NONE: Final = 0xFF
"""In a ``scan``'s kinds: no field of that number."""
_MAX_VARINT_BYTES: Final = 8
"""Longer varints (2**56 and beyond: no id, version or seat is) go the plain way."""


def varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at ``data[at]`` and where the next field starts; (-1, at) if there is none
    (cut short, of more than ``_MAX_VARINT_BYTES`` bytes, or longer than it needs to be)."""
    value = 0
    shift = 0
    end = len(data)
    start = at
    while at < end and at - start < _MAX_VARINT_BYTES:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if byte == 0 and at - start > 1:  # a byte too many (protobuf writes none)
                return -1, start
            return value, at
        shift += 7
    return -1, start


def scan(data: bytes, kinds: bytes) -> list[Any] | None:
    """Each field of the message in ``data`` by its number (None: absent): a varint's value, a
    length-delimited field's bytes. ``kinds[number]`` is the wire type of each field known
    (``NONE``: no such field). None when the bytes are not as protobuf writes them: a field
    unknown, of another wire type or given twice, a varint too long, the message cut short."""
    found: list[Any] = [None] * len(kinds)
    end = len(data)
    at = 0
    while at < end:
        key = data[at]
        if key < 0x80:  # a one-byte varint (most keys and lengths), read here
            at += 1
        else:
            key, at = varint(data, at)
            if key < 0:
                return None
        number = key >> 3
        if number >= len(kinds) or kinds[number] != key & 7 or found[number] is not None:
            return None
        if at < end and data[at] < 0x80:
            value = data[at]
            at += 1
        else:
            value, at = varint(data, at)
            if value < 0:
                return None
        if key & 7 == LENGTH_DELIMITED:
            if at + value > end:
                return None
            found[number] = data[at:at + value]
            at += value
        else:
            found[number] = value
    return found


def text(value: bytes | None) -> str | None:
    """A scanned string field's text ("" when absent); None if it is not valid UTF-8."""
    if value is None:
        return ""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


class ActionRequest:
    """A ``SubmitActionRequest``, read: ``None`` where an ``optional`` field or the action is
    not set; ``action_size``, the action's bytes (0: none); ``wire``, the request's bytes (a
    relayed call sends them on, and a long action's sizes are checked on them)."""

    __slots__ = ("action", "action_size", "expected_version", "game_id", "request_id", "seat",
                 "wire")

    def __init__(self, game_id: str, action: ReadAction | None, request_id: str,
                 expected_version: int | None, seat: int | None, wire: bytes,
                 action_size: int = 0) -> None:
        self.game_id = game_id
        self.action = action
        self.request_id = request_id
        self.expected_version = expected_version
        self.seat = seat
        self.wire = wire
        self.action_size = action_size

    @staticmethod
    def of(message: pb.SubmitActionRequest, wire: bytes | None = None) -> ActionRequest:
        """The plain way: ``message``'s fields read (``wire``: the bytes it was parsed from)."""
        acts = message.HasField("action")
        return ActionRequest(
            message.game_id,
            ReadAction.of(message.action) if acts else None,
            message.request_id,
            message.expected_version if message.HasField("expected_version") else None,
            message.seat if message.HasField("seat") else None,
            message.SerializeToString() if wire is None else wire,
            message.action.ByteSize() if acts else 0)

    def check_sizes(self) -> None:
        """``limits.check_sizes`` of the request's message (VALUE_TOO_LONG, the same refusal
        for the same field first): nothing in a request of ``SURELY_SHORT`` bytes or fewer;
        its two strings, in field order, when its action is that short too (nothing in such
        an action can be over a limit); else the message's own check."""
        if len(self.wire) <= SURELY_SHORT:
            return
        if self.action_size > SURELY_SHORT:
            check_sizes(pb.SubmitActionRequest.FromString(self.wire))
            return
        check_text(self.game_id, "game_id")
        check_text(self.request_id, "request_id")


_ACTION_KINDS: Final = bytes((NONE, LENGTH_DELIMITED, LENGTH_DELIMITED, LENGTH_DELIMITED,
                              VARINT, VARINT))
"""``SubmitActionRequest``: game_id 1, action 2, request_id 3, expected_version 4, seat 5
(``test_requests`` checks these against the contract's descriptor)."""
_UINT32: Final = 0xFFFF_FFFF


def _by_hand(data: bytes) -> ActionRequest | None:
    found = scan(data, _ACTION_KINDS)
    if found is None:
        return None
    game_id = text(found[1])
    request_id = text(found[3])
    seat = found[5]
    if game_id is None or request_id is None or (seat is not None and seat > _UINT32):
        return None
    action: ReadAction | None = None
    wire: bytes | None = found[2]
    if wire is not None:
        try:
            action = read_action(wire)
        except Exception:  # not an Action: protobuf refuses the whole request (the plain way)
            return None
    return ActionRequest(game_id, action, request_id, found[4], seat, data,
                         0 if wire is None else len(wire))


def read_submit_action(data: bytes) -> ActionRequest:
    """The ``SubmitActionRequest`` serialized in ``data``: by hand, or the plain way (whose
    ``DecodeError`` says it is none)."""
    read = _by_hand(data)
    if read is None:
        read = ActionRequest.of(pb.SubmitActionRequest.FromString(data), data)
    return read


READERS: Final[dict[str, Callable[[bytes], Any]]] = {"SubmitAction": read_submit_action}
"""The requests read by hand, by RPC name; the others are their messages, parsed."""


def reader(rpc: Rpc) -> Callable[[bytes], Any]:
    """How ``rpc``'s request is read from its bytes (what its ``GameApi`` method takes)."""
    return READERS.get(rpc.name, rpc.request.FromString)
