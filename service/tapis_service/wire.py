"""Protobuf wire encoding by hand, for the messages built on every action (the events).

Building a message object, copying it into its parent and serializing it costs several times
what writing its bytes does. The hand encoders write exactly what ``SerializeToString`` gives:
fields in field-number order, proto3 defaults (0, False, empty) left out, ``optional`` fields
whenever set, repeated scalars packed, sub-messages whenever set (even empty). Tags come from
the generated descriptors, so a renumbered field follows; ``tests/service/test_wire.py`` checks
every hand encoder against protobuf over many games.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf.descriptor import Descriptor, FieldDescriptor

_ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))
_UINT64 = (1 << 64) - 1

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
        return bytes((value & 0x7F | 0x80, value >> 7))
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
    try:
        body = bytes(values)  # each value below 0x80 is its own varint
    except ValueError:  # beyond a byte, or negative (varint refuses it)
        body = b""
    if not body.isascii() or not body:
        body = b"".join([varint(v) for v in values])
    size = len(body)
    return key + (_ONE_BYTE[size] if size < 0x80 else varint(size)) + body


def nested(key: bytes, body: bytes) -> bytes:
    """A sub-message (or string, or bytes) field that is set, with its serialized ``body``."""
    size = len(body)
    return key + (_ONE_BYTE[size] if size < 0x80 else varint(size)) + body
