"""Just enough of the protobuf wire format to route a call: the table id of a request is its
field 1 (``game_id``), read from the bytes without decoding the message."""

from __future__ import annotations


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def game_id_of(request: bytes) -> str:
    """Field 1 (a string) of a serialised request; "" when absent (proto3's default) or when
    the bytes are not a message."""
    at = 0
    found = ""
    try:
        while at < len(request):
            key, at = _varint(request, at)
            field, wire_type = key >> 3, key & 7
            if wire_type == 0:
                _, at = _varint(request, at)
            elif wire_type == 1:
                at += 8
            elif wire_type == 2:
                length, at = _varint(request, at)
                if field == 1:
                    found = request[at:at + length].decode("utf-8", "replace")
                at += length
            elif wire_type == 5:
                at += 4
            else:
                return found
    except ValueError:
        return found
    return found
