"""The messages built on every action, written as protobuf bytes by hand: the one place that
does it.

Why by hand: building each event's message object, copying it into its parent and serializing
it costs several times what writing its bytes does — measured side by side, protobuf's own way
(``convert.event(...)`` then ``SerializeToString``) added 20-30 µs of our code's CPU per War
action in-process (``tapis_bench.inprocess``), a few per cent of the server's. What is written:

* each event (``event_wire``): the ``Event`` envelope here; the game's body by its adapter's
  ``event_to_proto`` and protobuf, unless the adapter writes it itself (War's does,
  ``WarAdapter.event_wire``, with the primitives below);
* each event as one entry of ``StreamEventsResponse.events`` (``framed_event``), once per
  recipient view (once for everyone when nothing of it is hidden), kept on the session while
  the event is in the live log and shared by every stream of that view, the answer and the
  compaction; a stream message is such entries end to end (``events_wire``);
* the ``SubmitActionResponse`` (``answer_wire``): the same entries under the answer's own tag.

The bytes are exactly what ``SerializeToString`` gives: fields in field-number order, proto3
defaults (0, False, empty) left out, ``optional`` fields whenever set, repeated scalars packed,
sub-messages whenever set (even empty). Tags come from the generated descriptors, so a
renumbered field follows. ``tests/service/test_wire.py`` checks every event of seeded random
games of every kind, for every view, against protobuf's own serialization.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.timestamp_pb2 import Timestamp

from tapis.v1 import game_service_pb2 as pb
from tapis_service.codec.table_messages import TABLE_EVENT_TYPES, table_body

if TYPE_CHECKING:  # the codec reads a table's session; it runs nothing of tables/
    from tapis_service.tables.session import Applied, CompactedEvents, LoggedEvent, Session

_ONE_BYTE: Final = tuple(bytes((i,)) for i in range(0x80))
_BYTE: Final = tuple(bytes((i,)) for i in range(0x100))
"""Each byte, made once: a two-byte varint is two of them joined (``bytes((a, b))`` built a
tuple and called ``bytes`` on it, several times the work)."""
_UINT64: Final = (1 << 64) - 1

_LENGTH_DELIMITED = 2
_VARINT = 0
_VARINT_TYPES = frozenset({
    FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_ENUM})


def varint(value: int) -> bytes:
    """``value`` (≥ 0) as a protobuf varint."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if value < 0:
        raise ValueError(f"varint of a negative value: {value}")
    if value < 0x4000:
        return _BYTE[value & 0x7F | 0x80] + _BYTE[value >> 7]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def int64(value: int) -> bytes:
    """A signed ``int64`` field's varint (a negative value takes ten bytes)."""
    return varint(value & _UINT64 if value < 0 else value)


def tag(message: Descriptor, name: str) -> bytes:
    """The key of field ``name`` of ``message``: a varint for a single integer, bool or enum;
    length-delimited for a string, bytes, a sub-message or a (packed) repeated scalar."""
    field = message.fields_by_name[name]
    if field.type in _VARINT_TYPES and not field.is_repeated:
        wire_type = _VARINT
    elif field.type in _VARINT_TYPES or field.type in (
            FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_STRING,
            FieldDescriptor.TYPE_BYTES):
        wire_type = _LENGTH_DELIMITED
    else:  # pragma: no cover - no fixed-width field is hand-encoded
        raise ValueError(f"{message.full_name}.{name}: not a hand-encoded field type")
    return varint(field.number << 3 | wire_type)


def uint(key: bytes, value: int) -> bytes:
    """An unsigned integer (or enum) field: nothing for 0."""
    return key + varint(value) if value else b""


def flag(key: bytes, value: bool) -> bytes:
    """A bool field: nothing for False."""
    return key + b"\x01" if value else b""


def optional_uint(key: bytes, value: int | None) -> bytes:
    """An ``optional`` unsigned field: written whenever set, 0 included."""
    return b"" if value is None else key + varint(value)


def packed(key: bytes, values: Sequence[int]) -> bytes:
    """A repeated unsigned field (packed): nothing when empty."""
    if not values:
        return b""
    if len(values) == 2:  # two seats' counts (every War event): each its own byte when small
        first, second = values[0], values[1]
        if 0 <= first < 0x80 and 0 <= second < 0x80:
            return key + _ONE_BYTE[2] + _ONE_BYTE[first] + _ONE_BYTE[second]
    try:
        body = bytes(values)  # each value below 0x80 is its own varint
    except ValueError:  # beyond a byte, or negative (varint refuses it)
        body = b""
    if not body.isascii() or not body:
        body = b"".join([varint(v) for v in values])
    size = len(body)
    return key + (_ONE_BYTE[size] if size < 0x80 else varint(size)) + body


_TWO_THEN: Final = tuple(b"\x02" + bytes((i,)) for i in range(0x80))
"""A packed field's length 2 and its first one-byte value, for each value (a constant table)."""


def pair(key: bytes, first: int, second: int) -> bytes:
    """``packed(key, (first, second))`` for two values (a two-seat game's counts, on every War
    event), without the tuple: two concatenations when both are below 0x80."""
    if 0 <= first < 0x80 and 0 <= second < 0x80:
        return key + _TWO_THEN[first] + _ONE_BYTE[second]
    return packed(key, (first, second))


def nested(key: bytes, body: bytes) -> bytes:
    """A sub-message (or string, or bytes) field that is set, with its serialized ``body``."""
    size = len(body)
    return key + (_ONE_BYTE[size] if size < 0x80 else varint(size)) + body


# --- the messages of every action ------------------------------------------------------------

_EVENT = pb.Event.DESCRIPTOR
_K_SEQUENCE: Final = tag(_EVENT, "sequence")
_K_GAME_NUMBER: Final = tag(_EVENT, "game_number")
_K_VERSION: Final = tag(_EVENT, "version")
_K_AWAITING: Final = tag(_EVENT, "awaiting_seats")
_K_TIME: Final = tag(_EVENT, "time")
_K_SECONDS: Final = tag(Timestamp.DESCRIPTOR, "seconds")
_K_NANOS: Final = tag(Timestamp.DESCRIPTOR, "nanos")
_K_BODY: Final = {field.name: tag(_EVENT, field.name)
           for field in _EVENT.oneofs_by_name["body"].fields}
_NANOS: Final = tuple(uint(_K_NANOS, millis * 1_000_000) for millis in range(1000))
"""``Timestamp.nanos`` of each whole millisecond, encoded (a constant table)."""


class _LastTime:
    """The last ``Event.time`` encoded, and its whole second's ``Timestamp.seconds``: an
    action's events share their time, and a second's events their seconds (whose varint takes
    five bytes to write). A native object's two fields, read where a ``functools.lru_cache``
    built a key and called through its wrapper for every event."""

    __slots__ = ("seconds", "seconds_wire", "time_ms", "time_wire")

    def __init__(self) -> None:
        self.time_ms = -1
        self.time_wire = b""
        self.seconds = 0
        self.seconds_wire = b""


_LAST_TIME: Final = _LastTime()


def _time_wire(time_ms: int) -> bytes:
    """``Event.time``: a ``Timestamp`` of ``time_ms``."""
    last = _LAST_TIME
    if time_ms == last.time_ms:
        return last.time_wire
    seconds = time_ms // 1000
    millis = time_ms - seconds * 1000  # divmod's, in native integers
    if seconds != last.seconds or not last.seconds_wire:
        last.seconds_wire = _K_SECONDS + int64(seconds) if seconds else b""
        last.seconds = seconds
    framed = nested(_K_TIME, last.seconds_wire + _NANOS[millis])
    last.time_ms, last.time_wire = time_ms, framed
    return framed


_AWAITING: Final[dict[tuple[int, ...], bytes]] = {}
"""``Event.awaiting_seats`` encoded, by the seats (a table awaits one of a few sets)."""
_MAX_AWAITING = 256


def _awaiting_wire(awaiting: tuple[int, ...]) -> bytes:
    """``Event.awaiting_seats``, encoded (remembered: a dict's lookup, where an
    ``lru_cache``'s wrapper cost five times as much)."""
    found = _AWAITING.get(awaiting)
    if found is None:
        if len(_AWAITING) >= _MAX_AWAITING:
            _AWAITING.clear()
        found = _AWAITING[awaiting] = packed(_K_AWAITING, awaiting)
    return found


def event_wire(session: Session, logged: LoggedEvent, seat: int | None) -> bytes:
    """``convert.event(session, logged, seat).SerializeToString()``, written by hand (the
    envelope, and the game's body when its adapter writes it by hand)."""
    e = logged.event
    body = e.body
    table_level = table_body(session, e) if type(body) in TABLE_EVENT_TYPES else None
    if table_level is None:
        adapter = session.adapter
        rules = session.rules
        framed = nested(_K_BODY[adapter.field], adapter.event_wire(
            rules.redact(body, seat) if session.hides_events else body))
    else:
        name, message = table_level
        framed = nested(_K_BODY[name], message.SerializeToString())
    number, version = e.game_number, logged.version
    return b"".join((
        _K_SEQUENCE, varint(e.sequence),  # every event has a sequence (from 1)
        _K_GAME_NUMBER + varint(number) if number else b"",
        _K_VERSION + varint(version) if version else b"",
        _awaiting_wire(logged.awaiting), _time_wire(logged.time_ms), framed))


PUBLIC: Final = -1
"""The view key of an event every recipient sees alike (seat events, and game events that
``redact`` gives back unchanged): converted and serialized once for everyone."""
STREAM_EVENTS_TAG: Final = tag(pb.StreamEventsResponse.DESCRIPTOR, "events")
"""``StreamEventsResponse.events``: a serialized response is these framed events end to end."""
_STREAM_TAG_SIZE: Final = len(STREAM_EVENTS_TAG)
ANSWER_VERSION_TAG: Final = tag(pb.SubmitActionResponse.DESCRIPTOR, "version")
ANSWER_EVENTS_TAG: Final = tag(pb.SubmitActionResponse.DESCRIPTOR, "events")


def view_key(session: Session, logged: LoggedEvent, seat: int | None) -> int | None:
    """Whose view of the event ``seat`` gets: ``PUBLIC`` when everyone sees it alike (nothing
    of it is hidden from anyone)."""
    if not session.hides_events:
        return PUBLIC
    rules = session.rules
    body = logged.event.body
    return PUBLIC if type(body) in TABLE_EVENT_TYPES or rules.redact(body, seat) is body \
        else seat


_VIEW_BITS: Final = 4
"""Low bits of a ``wire_key`` for the view: public, a spectator, or one of up to 14 seats."""


def wire_key(sequence: int, view: int | None) -> int:
    """The ``Session.wire`` key of an event's frame for a view (``PUBLIC``, a spectator, a
    seat): ordered by sequence, public first."""
    return sequence << _VIEW_BITS | (0 if view == PUBLIC else 1 if view is None else view + 2)


def frame_key(session: Session, logged: LoggedEvent, seat: int | None) -> int:
    """``wire_key(sequence, view_key(session, logged, seat))`` in one call: every frame sent is
    looked up by it, and a public event's key is simply its sequence's (a test checks it is
    the same for every event of every game)."""
    sequence = logged.event.sequence
    if not session.hides_events:
        return sequence << _VIEW_BITS
    rules = session.rules
    body = logged.event.body
    if type(body) in TABLE_EVENT_TYPES or rules.redact(body, seat) is body:
        return sequence << _VIEW_BITS
    return sequence << _VIEW_BITS | (1 if seat is None else seat + 2)


def framed_event(session: Session, logged: LoggedEvent, seat: int | None) -> bytes:
    """``event`` as ``seat`` sees it, serialized and framed as one entry of
    ``StreamEventsResponse.events``: converted once per recipient view (once for everyone
    when public) and shared by every stream of that view, the SubmitAction answer and the
    compaction (``Session.wire``, emptied as the events leave the live log)."""
    e = logged.event
    key = frame_key(session, logged, seat)
    framed = session.wire.get(key)
    if framed is None:
        raw = event_wire(session, logged, seat)
        framed = STREAM_EVENTS_TAG + varint(len(raw)) + raw
        events = session.events
        if events and e.sequence >= events[0].event.sequence:  # live log only
            session.wire[key] = framed
    return framed


def events_wire(session: Session, batch: Sequence[LoggedEvent], seat: int | None) -> bytes:
    """One serialized ``StreamEventsResponse`` for a run of events, as ``seat`` sees them."""
    if len(batch) == 1:
        return framed_event(session, batch[0], seat)
    return b"".join([framed_event(session, logged, seat) for logged in batch])


def answer_wire(session: Session, applied: Applied, seat: int | None) -> bytes:
    """The serialized ``SubmitActionResponse`` for ``applied`` as ``seat`` sees it: its events
    as the fan-out framed them, whose first ones may have been compacted since (a retry of an
    action of a finished game)."""
    frames = [framed_event(session, logged, seat) for logged in applied.events]
    if applied.compacted:
        frames[:0] = compacted_frames(session.compacted, seat, *applied.compacted)
    version = applied.version
    # each StreamEventsResponse.events entry (field 1) becomes a SubmitActionResponse.events
    # entry (field 2): the same length-delimited event under the answer's tag
    return b"".join([ANSWER_VERSION_TAG + varint(version) if version else b"",
                     *[ANSWER_EVENTS_TAG + frame[_STREAM_TAG_SIZE:] for frame in frames]])


def compacted_frames(compacted: list[CompactedEvents], seat: int | None, first: int,
                     last: int) -> list[bytes]:
    """Each compacted event from ``first`` to ``last`` as ``seat`` sees it: one framed
    ``StreamEventsResponse.events`` entry each (a retried SubmitAction's answer)."""
    out: list[bytes] = []
    for games in compacted:
        if games.last < first or games.first > last:
            continue
        blob, offsets = games.blobs[games.views[seat]]
        raw = zlib.decompress(blob)
        begin, end = max(first, games.first) - games.first, min(last, games.last) - games.first
        out.extend(raw[offsets[i]:offsets[i + 1]] for i in range(begin, end + 1))
    return out
