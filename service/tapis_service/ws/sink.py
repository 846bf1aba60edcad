"""A socket's frames onto its picows transport (``TransportSink``, a ``connection.Sink``), the
bytes of a frame as a server writes it (``ws_frame``), and each frame picows hands a socket
(``on_frame``).

Apart from ``endpoint.py`` so that they are compiled by mypyc (``tools/compiled.py``): every
frame sent goes through them, while ``endpoint.py``'s classes subclass picows's Cython ones,
which a compiled class cannot (compiled, they crashed the interpreter).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from picows import WSCloseCode, WSMsgType, WSTransport

from tapis_service.ws.frames import Format

if TYPE_CHECKING:
    from tapis_service.ws.connection import Connection


class TransportSink:
    """A connection's frames onto its picows transport."""

    def __init__(self, transport: WSTransport) -> None:
        self.transport = transport
        self._write = transport.underlying_transport.write
        """The socket's own ``write``, looked up once (``send_all``'s every call)."""

    def send(self, message: bytes | str) -> None:
        if isinstance(message, bytes):
            self.transport.send(_BINARY, message)
        else:
            self.transport.send(_TEXT, message.encode())

    def send_all(self, messages: list[bytes | str]) -> None:
        """The messages' frames in one write (one system call, not one each): each as
        picows's ``send`` would frame it (``ws_frame``'s bytes, its head and payload joined
        with the others' in one copy), written behind anything picows holds
        (it writes to the same transport); nothing once the socket is closing, as picows."""
        transport = self.transport
        if transport.is_close_frame_sent or transport.is_disconnected:
            return
        parts: list[bytes] = []  # each frame's head, then its payload: joined once, not twice
        for message in messages:
            payload = message.encode() if isinstance(message, str) else message
            parts.append(_head(payload, _FINAL_TEXT if isinstance(message, str) else _FINAL_BINARY))
            parts.append(payload)
        self._write(b"".join(parts))

    def close(self, code: int, reason: str) -> None:
        self.transport.send_close(WSCloseCode(code), reason.encode())
        self.transport.disconnect()


_FINAL_TEXT: Final = 0x80 | WSMsgType.TEXT.value
_FINAL_BINARY: Final = 0x80 | WSMsgType.BINARY.value
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
        payload = message.encode()
        return _head(payload, _FINAL_TEXT) + payload
    return _head(message, _FINAL_BINARY) + message


def _head(payload: bytes, first: int) -> bytes:
    """The bytes heading ``payload``'s frame whose first byte is ``first`` (RFC 6455, 5.2)."""
    size = len(payload)
    if size < 126:  # the head made once per size (``bytes((first, size))`` per frame before)
        return (_TEXT_HEADS if first == _FINAL_TEXT else _BINARY_HEADS)[size]
    if size < 1 << 16:
        return bytes((first, 126)) + size.to_bytes(2, "big")
    return bytes((first, 127)) + size.to_bytes(8, "big")


_BINARY: Final = WSMsgType.BINARY
_TEXT: Final = WSMsgType.TEXT
_CLOSE: Final = WSMsgType.CLOSE
_CONTINUATION: Final = WSMsgType.CONTINUATION
_UNSUPPORTED: Final = WSCloseCode.UNSUPPORTED_DATA.value


def on_frame(connection: Connection, transport: WSTransport, frame: Any) -> None:
    """A frame picows received on ``connection``'s socket (the endpoint's ``on_ws_frame``,
    compiled here: every request): a whole message served, a close answered, a fragmented
    message refused (the socket closed, 1003). ``frame`` is a ``WSFrame`` typed ``Any``: its
    ``fin`` is an int where its stub says bool, which a compiled annotation would refuse."""
    kind = frame.msg_type
    if kind is _BINARY or kind is _TEXT:
        if not frame.fin:
            connection.sink.close(_UNSUPPORTED, "fragmented messages are not accepted")
            return
        connection.received(frame.get_payload_as_bytes(),
                            Format.BINARY if kind is _BINARY else Format.JSON)
    elif kind is _CLOSE:
        transport.send_close(frame.get_close_code())
        transport.disconnect()
    elif kind is _CONTINUATION:
        connection.sink.close(_UNSUPPORTED, "fragmented messages are not accepted")
