"""The tunnel's frames (``cluster.tunnel``): a message is frames, each after its length (u32),
big-endian. A request frame is ``call id u32 | method code u8 | flags u8 | deadline ms u32 |
token, API key, peer lengths u16 × 3 | token | API key | peer | [trace length u8 |
traceparent] | request``: the method's fixed code (``rpcs``), the call's ``Caller``, with the
time left before its deadline (not the deadline: two machines' clocks differ), and its W3C
trace context when it has one (flag 8: ``--otel``). An answer frame is ``call id u32 | 0 |
answer`` (0xFF: one message of a stream), or ``call id u32 | code u8 | message length u16 |
message | ErrorInfo``: the owner's refusal. A refusal that answers another (a ``RATE_LIMITED``
answering a wrong token: its ``__cause__``) carries that one's code and ErrorInfo in its own
ErrorInfo's metadata (``CAUSE``), taken out again on the relaying node, whose door counts a
stranger's refusals by them (``connections.counts_against_address``); never sent to a client.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections.abc import AsyncIterator

import grpc
from google.rpc import error_details_pb2

from tapis_service.door.caller import Caller
from tapis_service.door.limits import MAX_RECEIVE_MESSAGE_BYTES
from tapis_service.observe.errors import ServiceError, error_info, from_error_info

VERSION = 1
"""The tunnel's protocol version, sent when a tunnel opens (``VERSION_HEADER``); an owner
refuses a version it does not speak (``cluster.tunnel``)."""
VERSIONS = frozenset({1})
"""The versions an owner accepts."""
VERSION_HEADER = "tapis-tunnel-version"
CANCEL = 0xF0
"""The method of a frame that ends a relayed stream (its client went away); a call's method is
its RPC's fixed code (``rpcs.Rpc.code``, 1 to ``rpcs.MAX_CODE``)."""
MESSAGE = 0xFF
"""The code of an answer frame that is one message of a relayed stream (not its end)."""
MAX_FRAME = MAX_RECEIVE_MESSAGE_BYTES - 4
"""The longest frame: a message of one frame stays within the owner's receive limit."""
MAX_CREDENTIAL = 1024
"""No seat token or API key is longer: a longer one is relayed as a bad credential."""
CAUSE = "tapis-relay-cause"
"""The ErrorInfo metadata key a refusal's cause crosses the tunnel in (its code's number, ``/``,
its ErrorInfo's bytes in hex)."""
NO_DEADLINE = 0xFFFFFFFF

REQUEST = struct.Struct(">IBBIHHH")
ANSWER = struct.Struct(">IB")
_MESSAGE_LENGTH = struct.Struct(">H")
_LENGTH = struct.Struct(">I")
_CODES = {code.value[0]: code for code in grpc.StatusCode}
_BAD_AUTHORIZATION, _TOKEN, _API_KEY, _TRACE = 1, 2, 4, 8
MAX_TRACEPARENT = 0xFF


def encode_request(call_id: int, method: int, caller: Caller, request: bytes) -> bytes:
    """A request frame: the call, its ``Caller`` (the time left, not the deadline: clocks of
    two machines differ) and its request."""
    flags = _BAD_AUTHORIZATION if caller.bad_authorization else 0
    token = (caller.seat_token or "").encode()
    if len(token) > MAX_CREDENTIAL:
        token, flags = b"", _BAD_AUTHORIZATION
    elif caller.seat_token is not None:
        flags |= _TOKEN
    key = (caller.api_key or "").encode()
    if caller.api_key is not None and len(key) <= MAX_CREDENTIAL:
        flags |= _API_KEY
    else:
        key = b""
    peer = caller.peer.encode()[:0xFFFF]
    trace = (caller.traceparent or "").encode()
    if trace and len(trace) <= MAX_TRACEPARENT:
        flags |= _TRACE
        trace = bytes((len(trace),)) + trace
    else:
        trace = b""
    left = caller.time_remaining()
    budget = NO_DEADLINE if left is None else min(int(left * 1000), NO_DEADLINE - 1)
    return b"".join((REQUEST.pack(call_id, method, flags, budget, len(token), len(key),
                                   len(peer)), token, key, peer, trace, request))


def decode_request(frame: bytes) -> tuple[int, int, Caller, bytes]:
    """(call id, method, the relayed ``Caller``, request); ``ValueError`` for bytes that are
    not a request frame."""
    try:
        call_id, method, flags, budget, token_length, key_length, peer_length = \
            REQUEST.unpack_from(frame)
        at = REQUEST.size
        token = frame[at:at + token_length].decode()
        at += token_length
        key = frame[at:at + key_length].decode()
        at += key_length
        peer = frame[at:at + peer_length].decode()
        at += peer_length
        traceparent = None
        if flags & _TRACE:
            trace_length = frame[at]
            traceparent = frame[at + 1:at + 1 + trace_length].decode()
            at += 1 + trace_length
    except (IndexError, struct.error, UnicodeDecodeError) as error:
        raise ValueError(f"not a tunnel frame: {error}") from error
    if at > len(frame):
        raise ValueError("not a tunnel frame: truncated")
    caller = Caller(seat_token=token if flags & _TOKEN else None,
                    bad_authorization=bool(flags & _BAD_AUTHORIZATION),
                    api_key=key if flags & _API_KEY else None, peer=peer,
                    deadline=None if budget == NO_DEADLINE else time.monotonic() + budget / 1000,
                    forwarded=True, traceparent=traceparent)
    return call_id, method, caller, frame[at:]


def fits(caller: Caller, request: bytes) -> bool:
    """Whether a request frame of this call stays within ``MAX_FRAME``."""
    credentials = min(len(caller.seat_token or ""), MAX_CREDENTIAL + 1) \
        + min(len(caller.api_key or ""), MAX_CREDENTIAL + 1)
    trace = 1 + len(caller.traceparent or "")
    return REQUEST.size + credentials + len(caller.peer) + trace + len(request) <= MAX_FRAME


def encode_answer(call_id: int, answer: bytes) -> bytes:
    return ANSWER.pack(call_id, 0) + answer


def encode_message(call_id: int, message: bytes) -> bytes:
    return ANSWER.pack(call_id, MESSAGE) + message


def encode_refusal(call_id: int, error: ServiceError) -> bytes:
    """A refusal frame: the ``ServiceError``'s code, message and ErrorInfo."""
    message = error.message.encode()[:0xFFFF]
    details = error_info(error)
    cause = error.__cause__
    if isinstance(cause, ServiceError):
        details.metadata[CAUSE] = f"{cause.code.value[0]}/" \
            f"{error_info(cause).SerializeToString().hex()}"
    info = details.SerializeToString()
    return b"".join((ANSWER.pack(call_id, error.code.value[0]),
                     _MESSAGE_LENGTH.pack(len(message)), message, info))


def decode_answer(frame: bytes) -> tuple[int, bytes | ServiceError]:
    """(call id, the answer's bytes or the owner's refusal); ``ValueError`` when it is not an
    answer frame."""
    try:
        call_id, code = ANSWER.unpack_from(frame)
        if code in (0, MESSAGE):
            return call_id, frame[ANSWER.size:]
        (length,) = _MESSAGE_LENGTH.unpack_from(frame, ANSWER.size)
        at = ANSWER.size + _MESSAGE_LENGTH.size
        info = error_details_pb2.ErrorInfo.FromString(frame[at + length:])
    except (struct.error, ValueError) as error:  # DecodeError is a ValueError
        raise ValueError(f"not an answer frame: {error}") from error
    cause = info.metadata.pop(CAUSE, "")
    refusal = from_error_info(_CODES.get(code, grpc.StatusCode.UNKNOWN),
                              frame[at:at + length].decode("utf-8", "replace"), info)
    if cause:
        number, _, hexed = cause.partition("/")
        with contextlib.suppress(ValueError):  # not ours: the refusal alone
            refusal.__cause__ = from_error_info(
                _CODES.get(int(number), grpc.StatusCode.UNKNOWN), "",
                error_details_pb2.ErrorInfo.FromString(bytes.fromhex(hexed)))
    return call_id, refusal


class Outbox:
    """Frames waiting to be sent; each message takes every frame queued meanwhile (up to
    ``MAX_FRAME`` bytes, and at least one frame)."""

    def __init__(self) -> None:
        self._frames: list[bytes] = []
        self._ready = asyncio.Event()
        self._closed = False

    def put(self, frame: bytes) -> None:
        self._frames.append(frame)
        self._ready.set()

    def __len__(self) -> int:
        return len(self._frames)

    def close(self) -> None:
        """Send what is queued, then end."""
        self._closed = True
        self._ready.set()

    async def messages(self) -> AsyncIterator[bytes]:
        while True:
            await self._ready.wait()
            while self._frames:
                size = count = 0
                for frame in self._frames:
                    if count and size + len(frame) + _LENGTH.size > MAX_FRAME:
                        break
                    size += len(frame) + _LENGTH.size
                    count += 1
                batch, self._frames = self._frames[:count], self._frames[count:]
                yield b"".join([part for frame in batch
                                for part in (_LENGTH.pack(len(frame)), frame)])
            self._ready.clear()
            if self._closed:
                return


def frames_of(message: bytes) -> list[bytes]:
    """The frames of one message; ``ValueError`` when it is not frames."""
    out = []
    at = 0
    try:
        while at < len(message):
            (length,) = _LENGTH.unpack_from(message, at)
            at += _LENGTH.size
            if at + length > len(message):
                raise ValueError("truncated frame")
            out.append(message[at:at + length])
            at += length
    except struct.error as error:
        raise ValueError(f"not tunnel frames: {error}") from error
    return out
