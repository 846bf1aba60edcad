"""The node-to-node tunnel: unary calls relayed to a table's owner as messages of one long-lived
stream per pair of nodes, instead of one gRPC call each.

A relayed call used to cost the relaying node a whole second call (a new HTTP/2 stream, its
headers, its status) and the owner a whole incoming one. Through the tunnel it costs a frame
each way on a stream opened once, and under load less than a message each: a message carries
every frame queued while the previous one was being sent. The relaying node (``TunnelClient``)
numbers each call and sends ``(call id, method, headers, request bytes)``; the owner
(``TunnelServer``) serves each frame as it would serve the call itself, concurrently, and sends
back ``(call id, status, answer bytes)`` or ``(call id, status, details, ErrorInfo bytes)``: a
refusal reaches the client exactly as the owner gave it. The tunnel is opened with the
cluster's relay key (the owner refuses it otherwise) and carries nothing the call did not: the
client's headers and peer.

When the tunnel breaks (the owner died or stopped), every call waiting on it fails as an
unreachable owner does (``TunnelBroken``: UNAVAILABLE, no ErrorInfo): the relaying node looks
the table up again and retries once, as it did for a failed call. A graceful stop first serves
the calls already received, then closes the tunnel.

A message is frames, each after its length (u32), big-endian. A request frame is ``call id u32
| method u8 | header count u16 | (key length u16 | value length u32 | key | value)* |
request``; an answer frame is ``call id u32 | code u8 | answer`` for OK, else ``call id u32 |
code u8 | details length u16 | details | grpc-status-details-bin``.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc
import structlog

from tapis_service.errors import ServiceError, to_status
from tapis_service.limits import MAX_RECEIVE_MESSAGE_BYTES

log = structlog.get_logger("tapis.cluster")

SERVICE = "tapis.cluster.Tunnel"
PATH = f"/{SERVICE}/Open"
METHODS = ("JoinGame", "GetGame", "SubmitAction")
"""The unary methods a tunnel carries, by their index in a request frame."""
STREAM = len(METHODS)
"""The method of a request frame that opens a relayed StreamEvents call."""
CANCEL = STREAM + 1
"""The method of a frame that ends a relayed stream (its client went away)."""
MESSAGE = 0xFF
"""The code of an answer frame that is one message of a relayed stream (not its end)."""
MAX_QUEUED = 100_000
"""Frames an owner holds for a tunnel the relaying node does not read: beyond, it closes it."""
MAX_FRAME = MAX_RECEIVE_MESSAGE_BYTES
"""The owner's receive limit: no message of a tunnel is longer (but a single answer frame)."""
DETAILS_BIN = "grpc-status-details-bin"

_REQUEST = struct.Struct(">IBH")
_HEADER = struct.Struct(">HI")
_ANSWER = struct.Struct(">IB")
_DETAILS = struct.Struct(">H")
_LENGTH = struct.Struct(">I")
_CODES = {code.value[0]: code for code in grpc.StatusCode}

Headers = Sequence[tuple[str, str | bytes]]
Serve = Callable[[bytes, Any], Awaitable[bytes]]
StreamServe = Callable[[bytes, Any], AsyncIterator[bytes]]


# --- frames -----------------------------------------------------------------------------------


def fits(request: bytes) -> bool:
    """Whether a request goes in a frame: with the client's headers (at most grpc's hard
    metadata limit) it stays under ``MAX_FRAME``; a bigger one goes as a call of its own."""
    return len(request) < MAX_FRAME // 2


def encode_request(call_id: int, method: int, headers: Headers, request: bytes) -> bytes:
    parts = [_REQUEST.pack(call_id, method, len(headers))]
    for key, value in headers:
        raw_key = key.encode()
        raw_value = value if isinstance(value, bytes) else value.encode()
        parts += (_HEADER.pack(len(raw_key), len(raw_value)), raw_key, raw_value)
    parts.append(request)
    return b"".join(parts)


def decode_request(frame: bytes) -> tuple[int, int, tuple[tuple[str, str | bytes], ...], bytes]:
    """(call id, method, headers, request); ``ValueError`` for bytes that are not a frame."""
    try:
        call_id, method, count = _REQUEST.unpack_from(frame)
        at = _REQUEST.size
        headers: list[tuple[str, str | bytes]] = []
        for _ in range(count):
            key_length, value_length = _HEADER.unpack_from(frame, at)
            at += _HEADER.size
            key = frame[at:at + key_length].decode()
            at += key_length
            value = frame[at:at + value_length]
            at += value_length
            if len(value) != value_length:
                raise ValueError("truncated header")
            headers.append((key, value if key.endswith("-bin") else value.decode()))
    except (struct.error, UnicodeDecodeError) as error:
        raise ValueError(f"not a tunnel frame: {error}") from error
    if method > CANCEL:
        raise ValueError(f"unknown method {method}")
    return call_id, method, tuple(headers), frame[at:]


def encode_answer(call_id: int, answer: bytes) -> bytes:
    return _ANSWER.pack(call_id, 0) + answer


def encode_message(call_id: int, message: bytes) -> bytes:
    return _ANSWER.pack(call_id, MESSAGE) + message


def encode_refusal(call_id: int, status: Any) -> bytes:
    """A refusal frame from a ``grpc.Status`` (its code, details and ErrorInfo trailer)."""
    details = (status.details or "").encode()[:0xFFFF]
    trailer = b""
    for key, value in status.trailing_metadata or ():
        if key == DETAILS_BIN:
            trailer = value if isinstance(value, bytes) else value.encode()
    return b"".join((_ANSWER.pack(call_id, status.code.value[0]), _DETAILS.pack(len(details)),
                     details, trailer))


class RelayError(Exception):
    """A relayed call that did not answer OK, read as a ``grpc.aio.AioRpcError`` is."""

    def __init__(self, code: grpc.StatusCode, details: str,
                 trailing: tuple[tuple[str, bytes], ...] = ()) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details
        self._trailing = trailing

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        return self._trailing


class TunnelBroken(RelayError):
    """The tunnel closed before the owner answered: as an owner that cannot be reached."""

    def __init__(self, why: str = "the tunnel to the table's owner closed") -> None:
        super().__init__(grpc.StatusCode.UNAVAILABLE, why)


def decode_answer(frame: bytes) -> tuple[int, bytes | RelayError]:
    """(call id, the answer's bytes or the refusal)."""
    call_id, code = _ANSWER.unpack_from(frame)
    if code == 0:
        return call_id, frame[_ANSWER.size:]
    (length,) = _DETAILS.unpack_from(frame, _ANSWER.size)
    at = _ANSWER.size + _DETAILS.size
    details = frame[at:at + length].decode("utf-8", "replace")
    trailer = frame[at + length:]
    status = _CODES.get(code, grpc.StatusCode.UNKNOWN)
    return call_id, RelayError(status, details, ((DETAILS_BIN, trailer),) if trailer else ())


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


# --- the relaying side ----------------------------------------------------------------------------


class TunnelClient:
    """This node's tunnel to one owner: calls out, answers back by call id."""

    def __init__(self, channel: grpc.aio.Channel, relay_key: str, forwarded: str) -> None:
        self._outbox = Outbox()
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._streams: dict[int, RelayedStream] = {}
        self._ids = itertools.count(1)
        self._loop = asyncio.get_running_loop()
        self._call = channel.stream_stream(PATH)(self._outbox.messages(),
                                                 metadata=((forwarded, relay_key),))
        self._reader = asyncio.ensure_future(self._read())
        self.broken = False

    async def _read(self) -> None:
        why = "the tunnel to the table's owner closed"
        try:
            while (message := await self._call.read()) is not grpc.aio.EOF:
                assert isinstance(message, bytes)
                for frame in frames_of(message):
                    call_id, code = _ANSWER.unpack_from(frame)
                    stream = self._streams.get(call_id)
                    if stream is not None:
                        if code == MESSAGE:
                            stream.push(frame[_ANSWER.size:])
                        else:
                            del self._streams[call_id]
                            _, end = decode_answer(frame)
                            stream.end(end if isinstance(end, RelayError) else None)
                        continue
                    waiting = self._pending.pop(call_id, None)
                    if waiting is not None and not waiting.done():
                        waiting.set_result(frame)
        except grpc.aio.AioRpcError as error:
            why = f"the tunnel to the table's owner failed: {error.code().name}"
        except (ValueError, struct.error) as error:  # not our frames: drop this tunnel
            why = f"the tunnel to the table's owner sent bad frames: {error}"
            self._call.cancel()
        except asyncio.CancelledError:
            pass
        finally:
            self.broken = True
            self._outbox.close()  # grpc's task that sends our messages ends with them
            pending, self._pending = self._pending, {}
            for waiting in pending.values():
                if not waiting.done():
                    waiting.set_exception(TunnelBroken(why))
            streams, self._streams = self._streams, {}
            for stream in streams.values():
                stream.end(TunnelBroken(why))

    async def call(self, method: int, headers: Headers, request: bytes) -> bytes:
        """The owner's answer to one call; ``RelayError`` when it refused (``TunnelBroken``
        when the tunnel closed first)."""
        if self.broken:
            raise TunnelBroken()
        call_id = next(self._ids) & 0xFFFFFFFF
        waiting: asyncio.Future[bytes] = self._loop.create_future()
        self._pending[call_id] = waiting
        self._outbox.put(encode_request(call_id, method, headers, request))
        try:
            frame = await waiting
        finally:
            self._pending.pop(call_id, None)
        _, answer = decode_answer(frame)
        if isinstance(answer, RelayError):
            raise answer
        return answer

    def stream(self, headers: Headers, request: bytes, limit: int,
               on_overflow: Callable[[], None]) -> RelayedStream:
        """A StreamEvents call relayed to the owner: at most ``limit`` messages wait for the
        client; one more and the stream is ended at the owner and ``on_overflow`` is called."""
        call_id = next(self._ids) & 0xFFFFFFFF
        stream = RelayedStream(self, call_id, limit, on_overflow)
        if self.broken:
            stream.end(TunnelBroken())
            return stream
        self._streams[call_id] = stream
        self._outbox.put(encode_request(call_id, STREAM, headers, request))
        return stream

    def _cancel(self, call_id: int) -> None:
        if self._streams.pop(call_id, None) is not None and not self.broken:
            self._outbox.put(encode_request(call_id, CANCEL, (), b""))

    def close(self) -> None:
        """Stop writing (the owner then ends the stream) and stop reading."""
        self._outbox.close()
        self._reader.cancel()
        self._call.cancel()


class RelayedStream:
    """A StreamEvents call relayed through a tunnel, read as a ``grpc.aio`` call is: ``read()``
    gives the next message or ``grpc.aio.EOF``, raises ``RelayError`` for the owner's refusal
    (``TunnelBroken`` when the tunnel closed) and ``CancelledError`` once ``cancel()``-ed."""

    def __init__(self, client: TunnelClient, call_id: int, limit: int,
                 on_overflow: Callable[[], None]) -> None:
        self._client = client
        self._call_id = call_id
        self._limit = limit
        self._on_overflow = on_overflow
        self._messages: deque[bytes] = deque()
        self._end: BaseException | None = None
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None

    def push(self, message: bytes) -> None:
        if self._ended:
            return
        if len(self._messages) >= self._limit:  # the client reads too slowly
            self.cancel()
            self._on_overflow()
            return
        self._messages.append(message)
        self._wake()

    def end(self, error: BaseException | None) -> None:
        if not self._ended:
            self._ended, self._end = True, error
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def read(self) -> bytes | Any:
        while not self._messages:
            if self._ended:
                if self._end is not None:
                    raise self._end
                return grpc.aio.EOF
            self._waiter = self._client._loop.create_future()
            await self._waiter
        return self._messages.popleft()

    def cancel(self) -> None:
        """End the call here and at the owner; a ``read()`` then raises ``CancelledError``."""
        if not self._ended:
            self._client._cancel(self._call_id)
            self._messages.clear()
            self.end(asyncio.CancelledError())


# --- the owner's side ---------------------------------------------------------------------------


def not_a_node() -> ServiceError:
    return ServiceError(grpc.StatusCode.PERMISSION_DENIED, "NOT_A_CLUSTER_NODE",
                        "the tunnel is opened by a node of this cluster only")


class Refused(Exception):
    """``abort_with_status`` on a tunneled call: the status to send back."""

    def __init__(self, status: Any) -> None:
        super().__init__(status.details)
        self.status = status


class TunneledCall:
    """What the servicer reads of a tunneled call: the client's headers (with the relay key,
    which the tunnel was opened with), the relaying node's peer, and a refusal as an
    exception."""

    def __init__(self, headers: tuple[tuple[str, str | bytes], ...], peer: str) -> None:
        self._headers = headers
        self._peer = peer
        self.aborted: Any = None
        """The status this call was ended with, from any task (a stream's watchdog)."""

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._headers

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> None:
        return None

    async def abort_with_status(self, status: Any) -> None:
        self.aborted = status
        raise Refused(status)


OVERLOADED = to_status(ServiceError(
    grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED",
    "the table's owner has too many relayed calls in flight; retry with backoff"))


class TunnelServer:
    """The owner's end of every tunnel opened to it."""

    def __init__(self, serve: dict[str, Serve], stream: StreamServe, relay_key: str,
                 forwarded: str, max_in_flight: int) -> None:
        self._serve = [serve[name] for name in METHODS]
        self._stream = stream
        self._relay_key = relay_key
        self._forwarded = forwarded
        self._max_in_flight = max_in_flight
        self._open: set[_Tunnel] = set()

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            SERVICE, {"Open": grpc.stream_stream_rpc_method_handler(self._open_tunnel)})

    async def _open_tunnel(self, frames: AsyncIterator[bytes],
                           context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        key = next((v for k, v in context.invocation_metadata() or () if k == self._forwarded), "")
        if (key if isinstance(key, str) else key.decode("utf-8", "replace")) != self._relay_key:
            await context.abort_with_status(to_status(not_a_node()))
        tunnel = _Tunnel(self, frames, str(context.peer()))
        self._open.add(tunnel)
        try:
            async for answer in tunnel.answers():
                yield answer
        finally:
            self._open.discard(tunnel)
            tunnel.cancel()

    async def drain(self, within_s: float) -> None:
        """Graceful stop: take no more calls, answer those received, close every tunnel."""
        tunnels = list(self._open)
        for tunnel in tunnels:
            tunnel.stop_reading()
        if tunnels:
            await asyncio.wait([asyncio.ensure_future(t.finished.wait()) for t in tunnels],
                               timeout=within_s)


class _Tunnel:
    """One open tunnel: reads calls, serves each in a task of its own, queues the answers."""

    def __init__(self, server: TunnelServer, frames: AsyncIterator[bytes], peer: str) -> None:
        self._server = server
        self._frames = frames
        self._peer = peer
        self._answers = Outbox()
        self._calls: set[asyncio.Task[None]] = set()
        self._streams: dict[int, asyncio.Task[None]] = {}
        self._reading = True
        self.finished = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read())

    async def answers(self) -> AsyncIterator[bytes]:
        async for message in self._answers.messages():
            yield message
        self.finished.set()

    async def _read(self) -> None:
        try:
            async for message in self._frames:
                if not self._reading:
                    break
                try:
                    frames = frames_of(message)
                except ValueError as error:
                    log.warning("tunnel_message_refused", error=str(error)[:200])
                    continue
                for frame in frames:
                    self._take(frame)
        except (grpc.aio.AioRpcError, asyncio.CancelledError):
            pass
        finally:
            self._reading = False
            if self._calls:
                await asyncio.wait(list(self._calls))
            for task in list(self._streams.values()):  # their clients resume elsewhere
                task.cancel()
            self._answers.close()

    def _take(self, frame: bytes) -> None:
        try:
            call_id, method, headers, request = decode_request(frame)
        except ValueError as error:
            log.warning("tunnel_frame_refused", error=str(error)[:200])
            return
        if method == CANCEL:
            stream = self._streams.pop(call_id, None)
            if stream is not None:
                stream.cancel()
            return
        headers += ((self._server._forwarded, self._server._relay_key),)
        call = TunneledCall(headers, self._peer)
        if method == STREAM:
            self._streams[call_id] = asyncio.ensure_future(
                self._relay_stream(call_id, call, request))
            return
        if len(self._calls) >= self._server._max_in_flight:
            self._send(encode_refusal(call_id, OVERLOADED))
            return
        task = asyncio.ensure_future(self._call(call_id, self._server._serve[method], call,
                                                request))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    def _send(self, frame: bytes) -> None:
        self._answers.put(frame)
        if len(self._answers) > MAX_QUEUED:  # the relaying node does not read: let it go
            log.warning("tunnel_not_read", peer=self._peer, frames=len(self._answers))
            self.cancel()
            self._answers.close()

    async def _relay_stream(self, call_id: int, call: TunneledCall, request: bytes) -> None:
        try:
            async for message in self._server._stream(request, call):
                self._send(encode_message(call_id, message))
            end = encode_answer(call_id, b"")
        except Refused as refused:
            end = encode_refusal(call_id, refused.status)
        except asyncio.CancelledError:
            if call.aborted is None:
                return  # the relaying node ended it, or the tunnel is closing
            end = encode_refusal(call_id, call.aborted)  # cut by this node's watchdog
        except Exception as error:  # a bug: answered as grpc answers an unexpected error
            log.exception("tunneled_stream_failed", error=str(error)[:200])
            end = encode_refusal(call_id, _Failed(repr(error)[:200]))
        finally:
            self._streams.pop(call_id, None)
        self._send(end)

    async def _call(self, call_id: int, serve: Serve, call: TunneledCall,
                    request: bytes) -> None:
        try:
            answer = encode_answer(call_id, await serve(request, call))
        except Refused as refused:
            answer = encode_refusal(call_id, refused.status)
        except Exception as error:  # a bug: answered as grpc answers an unexpected error
            log.exception("tunneled_call_failed", error=str(error)[:200])
            answer = encode_refusal(call_id, _Failed(repr(error)[:200]))
        self._send(answer)

    def stop_reading(self) -> None:
        self._reading = False
        self._reader.cancel()

    def cancel(self) -> None:
        self._reader.cancel()
        for task in [*self._calls, *self._streams.values()]:
            task.cancel()


class _Failed:
    code = grpc.StatusCode.UNKNOWN
    trailing_metadata: tuple[tuple[str, bytes], ...] = ()

    def __init__(self, details: str) -> None:
        self.details = f"Unexpected error: {details}"
