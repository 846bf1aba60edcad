"""The node-to-node tunnel: calls relayed to a table's owner as frames of one long-lived stream
per pair of nodes, instead of one gRPC call each.

The relaying node (``TunnelClient``) numbers each call and sends ``(call id, method, Caller,
request bytes)``; the owner (``TunnelServer``) serves each frame concurrently with the ``Caller``
it carries (marked forwarded: it is never relayed again) and sends back ``(call id, answer
bytes)`` or ``(call id, refusal)``, a ``ServiceError`` the relaying node raises as the owner
raised it. A relayed ``StreamEvents`` is a call whose answer is many message frames, then its
end. A message carries every frame queued while the previous one was being sent. The tunnel is
opened with the cluster's relay key (the owner refuses it otherwise); it carries nothing of the
call but its request and its ``Caller``.

When the tunnel breaks (the owner died or stopped), every call waiting on it fails with
``OwnerUnreachable``: the relaying node looks the table up again. A graceful stop first serves
the calls already received, then closes the tunnel.

A tunnel opens with its protocol version (``frames.VERSION``) and each call carries its
method's fixed code (``rpcs``), so nodes of two versions side by side (a rolling restart) serve
each other every method both know. An owner that does not speak the version refuses the tunnel,
and one that meets a method code it does not know refuses that call: both answer UNAVAILABLE /
``NODE_VERSION_MISMATCH``, nothing applied, and the client retries (with the same request id).

The frames are ``cluster.frames``', its refusals ``cluster.tunnel_refusals``'.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import structlog

from tapis_service.cluster.frames import (
    ANSWER,
    CANCEL,
    MESSAGE,
    NO_DEADLINE,
    REQUEST,
    VERSION,
    VERSION_HEADER,
    VERSIONS,
    Outbox,
    decode_answer,
    decode_request,
    encode_answer,
    encode_message,
    encode_refusal,
    encode_request,
    frames_of,
)
from tapis_service.cluster.tunnel_refusals import (
    OVERLOADED,
    not_a_node,
    reason_of,
    stopping,
    unknown_version,
    version_mismatch,
)
from tapis_service.door import logcontext
from tapis_service.door.caller import Caller
from tapis_service.door.door import Door, Transport
from tapis_service.door.rpcs import BY_NAME, RPCS, Rpc
from tapis_service.observe import tracing
from tapis_service.observe.errors import ServiceError, end_call
from tapis_service.tables.streams import EndStream

log = structlog.get_logger("tapis.cluster")

SERVICE = "tapis.cluster.Tunnel"
PATH = f"/{SERVICE}/Open"
RELAY_KEY = "tapis-relay-key"
"""The header a tunnel is opened with: the cluster's relay key."""
STREAM_EVENTS = BY_NAME["StreamEvents"].code
"""The code of the one stream a tunnel relays."""
MAX_QUEUED = 100_000
"""Frames an owner holds for a tunnel the relaying node does not read: beyond, it closes it."""

Serve = Callable[[str, bytes, Caller], Awaitable[bytes]]
"""The owner serving a relayed unary call: (method name, request bytes, caller) -> answer."""
StreamServe = Callable[[bytes, Caller, EndStream], AsyncIterator[bytes]]
"""The owner serving a relayed StreamEvents call."""


class OwnerUnreachable(Exception):
    """The tunnel closed before the owner answered: the owner died, stopped or cannot be
    reached (the relaying node looks the table up again). ``sent``: the call had been handed
    to the tunnel, so the owner may have served it (a write may have been applied)."""

    def __init__(self, why: str, sent: bool = True) -> None:
        super().__init__(why)
        self.sent = sent


# --- the relaying side ----------------------------------------------------------------------------


class TunnelClient:
    """This node's tunnel to one owner: calls out, answers back by call id."""

    def __init__(self, channel: grpc.aio.Channel, relay_key: str,
                 version: int = VERSION) -> None:
        self._outbox = Outbox()
        self._pending: dict[int, asyncio.Future[bytes | ServiceError]] = {}
        self._streams: dict[int, RelayedStream] = {}
        self._ids = itertools.count(1)
        self._loop = asyncio.get_running_loop()
        self._call = channel.stream_stream(PATH)(
            self._outbox.messages(),
            metadata=((RELAY_KEY, relay_key), (VERSION_HEADER, str(version))))
        self._reader = asyncio.ensure_future(self._read())
        self.broken = False
        self.refusal: Exception | None = None
        """Once broken: the owner's refusal of the tunnel itself when it said why (nothing of it
        was served: an unknown version, a stopping node), which later calls get too."""

    async def _read(self) -> None:
        why = "the tunnel to the table's owner closed"
        failure: Exception | None = None
        try:
            while (message := await self._call.read()) is not grpc.aio.EOF:
                assert isinstance(message, bytes)
                for frame in frames_of(message):
                    call_id, code = ANSWER.unpack_from(frame)
                    stream = self._streams.get(call_id)
                    if stream is not None:
                        if code == MESSAGE:
                            stream.push(frame[ANSWER.size:])
                        else:
                            del self._streams[call_id]
                            _, end = decode_answer(frame)
                            stream.end(end if isinstance(end, ServiceError) else None)
                        continue
                    waiting = self._pending.pop(call_id, None)
                    if waiting is not None and not waiting.done():
                        waiting.set_result(decode_answer(frame)[1])
        except grpc.aio.AioRpcError as error:
            why = f"the tunnel to the table's owner failed: {error.code().name}"
            reason = reason_of(error)
            if reason == "NODE_VERSION_MISMATCH":  # no call of it was served
                failure = version_mismatch(error.details() or "")
            elif reason == "SERVER_STOPPING":  # refused as it opened: no call of it was served
                failure = OwnerUnreachable(why, sent=False)
        except (ValueError, struct.error) as error:  # not our frames: drop this tunnel
            why = f"the tunnel to the table's owner sent bad frames: {error}"
            self._call.cancel()
        except asyncio.CancelledError:
            pass
        finally:
            self.broken, self.refusal = True, failure
            self._outbox.close()  # grpc's task that sends our messages ends with them
            pending, self._pending = self._pending, {}
            for waiting in pending.values():
                if not waiting.done():
                    waiting.set_exception(failure or OwnerUnreachable(why))
            streams, self._streams = self._streams, {}
            for stream in streams.values():
                stream.end(failure or OwnerUnreachable(why))

    async def call(self, method: int, caller: Caller, request: bytes) -> bytes:
        """The owner's answer to one call of ``method`` (its RPC's code); its refusal is
        raised (``OwnerUnreachable`` when the tunnel closed first)."""
        if self.broken:
            raise self.refusal or OwnerUnreachable("the tunnel to the table's owner is closed",
                                                   sent=False)
        call_id = next(self._ids) & 0xFFFFFFFF
        waiting: asyncio.Future[bytes | ServiceError] = self._loop.create_future()
        self._pending[call_id] = waiting
        self._outbox.put(encode_request(call_id, method, caller, request))
        try:
            answer = await waiting
        finally:
            self._pending.pop(call_id, None)
        if isinstance(answer, ServiceError):
            raise answer
        return answer

    def stream(self, caller: Caller, request: bytes, limit: int,
               on_overflow: Callable[[], None]) -> RelayedStream:
        """A StreamEvents call relayed to the owner: at most ``limit`` messages wait for the
        client; one more and the stream is ended at the owner and ``on_overflow`` is called."""
        call_id = next(self._ids) & 0xFFFFFFFF
        stream = RelayedStream(self, call_id, limit, on_overflow)
        if self.broken:
            stream.end(self.refusal
                       or OwnerUnreachable("the tunnel to the table's owner is closed"))
            return stream
        self._streams[call_id] = stream
        self._outbox.put(encode_request(call_id, STREAM_EVENTS, caller, request))
        return stream

    def _cancel(self, call_id: int) -> None:
        if self._streams.pop(call_id, None) is not None and not self.broken:
            self._outbox.put(REQUEST.pack(call_id, CANCEL, 0, NO_DEADLINE, 0, 0, 0))

    def close(self) -> None:
        """Stop writing (the owner then ends the stream) and stop reading."""
        self._outbox.close()
        self._reader.cancel()
        self._call.cancel()


class RelayedStream:
    """A StreamEvents call relayed through a tunnel: ``read()`` gives the next message, or None
    once the owner ended it; the owner's refusal, ``OwnerUnreachable`` or the error it was
    ``end``-ed with here are raised."""

    def __init__(self, client: TunnelClient, call_id: int, limit: int,
                 on_overflow: Callable[[], None]) -> None:
        self._client = client
        self._call_id = call_id
        self._limit = limit
        self._on_overflow = on_overflow
        self._messages: deque[bytes] = deque()
        self._end: Exception | None = None
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None

    def push(self, message: bytes) -> None:
        if self._ended:
            return
        if len(self._messages) >= self._limit:  # the client reads too slowly
            self.stop()
            self._on_overflow()
            return
        self._messages.append(message)
        self._wake()

    def end(self, error: Exception | None) -> None:
        """No more messages after those queued: the stream ends (with ``error``, if any)."""
        if not self._ended:
            self._ended, self._end = True, error
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def read(self) -> bytes | None:
        while not self._messages:
            if self._ended:
                if self._end is not None:
                    raise self._end
                return None
            self._waiter = self._client._loop.create_future()
            await self._waiter
        return self._messages.popleft()

    def stop(self, error: Exception | None = None) -> None:
        """End the call here and at the owner; a ``read()`` then raises ``error`` (or gives
        None)."""
        if not self._ended:
            self._client._cancel(self._call_id)
            self._messages.clear()
            self.end(error)


# --- the owner's side ---------------------------------------------------------------------------


def _owner_failed(error: BaseException, rpc: Rpc | None = None) -> ServiceError:
    """What a relayed call is answered when serving it failed unexpectedly (a bug, logged):
    the client retries (with the same request id: a write may have been applied)."""
    log.error("tunneled_call_failed", error=repr(error)[:200])
    if rpc is not None and rpc.writes:
        return ServiceError(grpc.StatusCode.UNAVAILABLE, "COMMIT_UNKNOWN",
                            "the table's owner failed to answer: the request may have been "
                            "applied; retry with the same request_id")
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED",
                        "the table's owner failed to answer; retry")


class TunnelServer:
    """The owner's end of every tunnel opened to it."""

    def __init__(self, serve: Serve, stream: StreamServe, relay_key: str,
                 max_in_flight: int, rpcs: tuple[Rpc, ...] = RPCS,
                 door: Door | None = None) -> None:
        self._by_code = {rpc.code: rpc for rpc in rpcs}
        """The methods this node serves, by tunnel code (another node's may have more)."""
        self._door = door or Door(max_in_flight=1 << 30)
        """What every call to this node passes (the server's): its bound on calls in flight,
        each method's metrics with ``transport="relay"``, and every refusal (``Door.refused``
        counts none here: the relaying node, which holds the client's connection, does)."""
        self._meters = {rpc.code: self._door.meter(rpc.path, Transport.RELAY, rpc.streams)
                        for rpc in rpcs}
        self._serve = serve
        self._stream = stream
        self._relay_key = relay_key
        self._max_in_flight = max_in_flight
        self._open: set[_Tunnel] = set()
        self._closed = False
        """Drained (the node is stopping): a new tunnel is refused at once."""

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            SERVICE, {"Open": grpc.stream_stream_rpc_method_handler(self._open_tunnel)})

    async def _open_tunnel(self, frames: AsyncIterator[bytes],
                           context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        headers = {k: v if isinstance(v, str) else v.decode("utf-8", "replace")
                   for k, v in context.invocation_metadata() or ()}
        if headers.get(RELAY_KEY, "") != self._relay_key:
            await end_call(context, not_a_node())
        version = headers.get(VERSION_HEADER, "")
        if not version.isdigit() or int(version) not in VERSIONS:
            log.warning("tunnel_version_refused", version=version[:20], peer=context.peer())
            await end_call(context, unknown_version(version[:20]))
        if self._closed:  # held open, it would hold the node's stop to the end of its grace
            await end_call(context, stopping())
        tunnel = _Tunnel(self, frames, str(context.peer()))
        self._open.add(tunnel)
        try:
            async for answer in tunnel.answers():
                yield answer
        finally:
            self._open.discard(tunnel)
            tunnel.cancel()

    async def drain(self, within_s: float | None) -> None:
        """Graceful stop: take no more calls nor tunnels, answer the calls received, close
        every tunnel."""
        self._closed = True
        tunnels = list(self._open)
        for tunnel in tunnels:
            tunnel.stop_reading()
        if tunnels:
            await asyncio.wait([asyncio.ensure_future(t.finished.wait()) for t in tunnels],
                               timeout=within_s)

    @property
    def calls_in_flight(self) -> int:
        return sum(len(tunnel.calls) for tunnel in self._open)


class _Tunnel:
    """One open tunnel: reads calls, serves each in a task of its own, queues the answers."""

    def __init__(self, server: TunnelServer, frames: AsyncIterator[bytes], peer: str) -> None:
        self._server = server
        self._frames = frames
        self._peer = peer
        self._answers = Outbox()
        self.calls: set[asyncio.Task[None]] = set()
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
            if self.calls:
                await asyncio.wait(list(self.calls))
            for task in list(self._streams.values()):  # their clients resume elsewhere
                task.cancel()
            self._answers.close()

    def _take(self, frame: bytes) -> None:
        try:
            call_id, method, caller, request = decode_request(frame)
        except ValueError as error:
            log.warning("tunnel_frame_refused", error=str(error)[:200])
            return
        if method == CANCEL:
            stream = self._streams.pop(call_id, None)
            if stream is not None:
                stream.cancel()
            return
        rpc = self._server._by_code.get(method)
        if rpc is None:  # a newer node's method: refused, never dropped (the caller waits)
            self._send(encode_refusal(call_id, version_mismatch(
                f"it does not serve method {method}")))
            return
        if rpc.streams:
            self._streams[call_id] = asyncio.ensure_future(
                self._relay_stream(call_id, rpc, caller, request))
            return
        if len(self.calls) >= self._server._max_in_flight:
            self._send(encode_refusal(call_id, OVERLOADED))
            return
        task = asyncio.ensure_future(self._call(call_id, rpc, caller, request))
        self.calls.add(task)
        task.add_done_callback(self.calls.discard)

    def _send(self, frame: bytes) -> None:
        self._answers.put(frame)
        if len(self._answers) > MAX_QUEUED:  # the relaying node does not read: let it go
            log.warning("tunnel_not_read", peer=self._peer, frames=len(self._answers))
            self.cancel()
            self._answers.close()

    async def _relay_stream(self, call_id: int, rpc: Rpc, caller: Caller,
                            request: bytes) -> None:
        ended: list[ServiceError] = []
        meter = self._server._meters[rpc.code]
        began = time.perf_counter()
        meter.started[0] += 1
        code = "OK"
        try:
            with tracing.relayed(rpc.name, caller.traceparent):
                async for message in self._server._stream(request, caller, ended.append):
                    self._send(encode_message(call_id, message))
                    meter.sent[0] += 1
            end = encode_answer(call_id, b"")
        except ServiceError as refused:
            code = refused.code.name
            self._server._door.refused(caller, refused, Transport.RELAY)
            end = encode_refusal(call_id, refused)
        except asyncio.CancelledError:
            code = "CANCELLED"
            if not ended:
                return  # the relaying node ended it, or the tunnel is closing
            end = encode_refusal(call_id, ended[0])  # cut by this node's watchdog
        except Exception as error:  # a bug: logged, and the client retries elsewhere
            code = "UNAVAILABLE"
            end = encode_refusal(call_id, _owner_failed(error))
        finally:
            self._streams.pop(call_id, None)
            meter.ended(code, time.perf_counter() - began)
        self._send(end)

    async def _call(self, call_id: int, rpc: Rpc, caller: Caller, request: bytes) -> None:
        """One relayed unary call, through the door (the bound on calls in flight is taken
        here, in the call's task: one cancelled before it runs never holds a place)."""
        door = self._server._door
        meter = self._server._meters[rpc.code]
        began = time.perf_counter()
        meter.started[0] += 1
        bound = door.bind(Transport.RELAY, caller.peer, None)
        code = "OK"
        try:
            door.enter()
            try:
                with tracing.relayed(rpc.name, caller.traceparent):
                    answer = encode_answer(call_id,
                                           await self._server._serve(rpc.name, request, caller))
            finally:
                door.leave()
        except ServiceError as refused:
            code = refused.code.name
            door.refused(caller, refused, Transport.RELAY)
            answer = encode_refusal(call_id, refused)
        except Exception as error:  # a bug: logged, and the client retries elsewhere
            code = "UNAVAILABLE"
            answer = encode_refusal(call_id, _owner_failed(error, rpc))
        except asyncio.CancelledError:
            code = "CANCELLED"
            raise
        finally:
            meter.ended(code, time.perf_counter() - began)
            logcontext.reset(bound)
        self._send(answer)

    def stop_reading(self) -> None:
        self._reading = False
        self._reader.cancel()

    def cancel(self) -> None:
        self._reader.cancel()
        for task in [*self.calls, *self._streams.values()]:
            task.cancel()
