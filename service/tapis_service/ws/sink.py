"""A socket's frames onto its picows transport (``TransportSink``, a ``connection.Sink``) and
the bytes of a frame as a server writes it (``ws_frame``).

Apart from ``endpoint.py`` so that they are compiled by mypyc (``tools/compiled.py``): every
frame sent goes through them, while ``endpoint.py``'s classes subclass picows's Cython ones,
which a compiled class cannot (compiled, they crashed the interpreter).
"""

from __future__ import annotations

from typing import Final

from picows import WSCloseCode, WSMsgType, WSTransport


class TransportSink:
    """A connection's frames onto its picows transport."""

    def __init__(self, transport: WSTransport) -> None:
        self.transport = transport

    def send(self, message: bytes | str) -> None:
        if isinstance(message, bytes):
            self.transport.send(WSMsgType.BINARY, message)
        else:
            self.transport.send(WSMsgType.TEXT, message.encode())

    def send_all(self, messages: list[bytes | str]) -> None:
        """The messages' frames in one write (one system call, not one each): each as
        picows's ``send`` would frame it (``ws_frame``), written behind anything picows holds
        (it writes to the same transport); nothing once the socket is closing, as picows."""
        transport = self.transport
        if transport.is_close_frame_sent or transport.is_disconnected:
            return
        transport.underlying_transport.write(b"".join(map(ws_frame, messages)))

    def close(self, code: int, reason: str) -> None:
        self.transport.send_close(WSCloseCode(code), reason.encode())
        self.transport.disconnect()


_FINAL_TEXT = 0x80 | WSMsgType.TEXT.value
_FINAL_BINARY = 0x80 | WSMsgType.BINARY.value
"""A frame's first byte: final (FIN), then its opcode (an enum's ``value`` is a Python
property: read once)."""
_TEXT_HEADS: Final = tuple(bytes((_FINAL_TEXT, size)) for size in range(126))
_BINARY_HEADS: Final = tuple(bytes((_FINAL_BINARY, size)) for size in range(126))
"""The two bytes heading a frame of each size under 126, for text and binary messages."""


def ws_frame(message: bytes | str) -> bytes:
    """One final, unmasked frame of ``message`` (binary; text for a ``str``), as a server
    frames it (RFC 6455, 5.2) and picows's ``send`` writes it (``tests/websocket/
    test_shortcuts.py`` compares the two)."""
    if isinstance(message, str):
        payload, first = message.encode(), _FINAL_TEXT
    else:
        payload, first = message, _FINAL_BINARY
    size = len(payload)
    if size < 126:  # the head made once per size (``bytes((first, size))`` per frame before)
        return (_TEXT_HEADS if first == _FINAL_TEXT else _BINARY_HEADS)[size] + payload
    if size < 1 << 16:
        return bytes((first, 126)) + size.to_bytes(2, "big") + payload
    return bytes((first, 127)) + size.to_bytes(8, "big") + payload
