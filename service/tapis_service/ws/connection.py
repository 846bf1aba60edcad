"""One player socket: its frames dispatched as gRPC calls are, its limits, its open streams.

Each frame becomes a ``Caller`` (its seat token and API key, the socket's address:
``door.socket_caller``; built once per socket and credentials, with the seat token's
verification remembered until a revocation: ``tokens``) and the request message, handed
through the door every transport passes (``door``: the server's bound on calls in flight, the
RPC metrics with ``transport="websocket"``, the log context) to the method's route — the
same a gRPC call of it takes (``rpcs.local_routes`` on a single node; on a cluster node the
gateway's, which relays a table's calls to its owner): credentials, limits and refusals are
those of gRPC, and every refusal is told to the door as gRPC's are (``Door.refused``: the
refusal budget of the socket's address).

Transport-free: the endpoint hands it each message received and a ``Sink`` to send on, so the
same code is what the unit tests drive. Each request is served at once, in the callback of the
message that carries it, up to its first wait (``_serve_now``): one that never waits (a
SubmitAction for a table with nothing in flight, on the memory store) is answered there,
without a task or a step of the loop, and what it writes to its own socket goes out in one
write; one that waits goes on as a task would, resumed by what it waits on without one
(``_Resumed``; answers may overtake one another). Each open stream is a task that copies the
GameApi's event batches into ``events`` frames, waiting while the socket cannot take more;
while it is idle, a change is written at commit instead (``fanout.LiveFeed``, through
``_StreamWriter``). The module is compiled by mypyc (``tools/compiled.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

import grpc
import structlog
from google.protobuf.message import Message

from tapis.v1 import websocket_pb2 as ws_pb
from tapis_engine.errors import RuleError
from tapis_service.door import logcontext, stopping
from tapis_service.door.caller import Caller
from tapis_service.door.door import Door, Meter, Transport, refused, socket_caller
from tapis_service.door.limits import MAX_METADATA_BYTES, too_long
from tapis_service.door.rpcs import Route, Routing, Rpc, local_routes
from tapis_service.game_api import account
from tapis_service.observe import tracing
from tapis_service.observe.errors import ServiceError
from tapis_service.ws import frames
from tapis_service.ws.frames import Format
from tapis_service.ws.resuming import Resumed as _Resumed
from tapis_service.ws.stepping import ENDED, step

log = structlog.get_logger("tapis.ws")

WEBSOCKET: Final = "WebSocket"
"""The ``rpc`` of the logs and metrics for a refusal the socket decides (a frame it cannot
read, a limit of the socket); the GameApi names the RPC of the others."""
CLOSE_TOO_BIG: Final = 1009
"""The WebSocket close code for a message over the size limit (RFC 6455)."""
_NO_SPAN: Final = contextlib.nullcontext()
"""A stream's span when tracing is off (``tracing.socket_call`` when on)."""
MAX_CALLERS: Final = 16
"""The callers a socket keeps (one per seat token and API key it sends); beyond, it forgets
them all and starts again (a socket trying token after token gains nothing from them)."""


class Sink(Protocol):
    """Where a connection's frames go: the socket."""

    def send(self, message: bytes | str) -> None: ...

    def send_all(self, messages: list[bytes | str]) -> None:
        """Several messages in one write to the socket, in order."""

    def close(self, code: int, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class SocketLimits:
    """Per-connection limits (docs/websocket.md)."""

    max_in_flight: int = 64
    """Requests (other than streams) being served at once; beyond: OVERLOADED."""
    max_streams: int = 64
    """Event streams open at once (tables followed); beyond: TOO_MANY_STREAMS."""


class SocketCall(NamedTuple):
    """How a request field of a ClientFrame is served: its RPC, its route, its metrics."""

    rpc: Rpc
    serve: Any
    raw: bool
    """The route takes the request's bytes (a cluster node's)."""
    meter: Meter
    answer_field: str
    """The ServerFrame field of its answers."""
    now: bool
    """Served at once, in the frame's callback, up to its first wait (``_serve_now``): a table's
    call served by this node's GameApi (its table actor awaits futures and tasks only: a journal
    write runs shielded, as an input of its own, a resting table is woken in a task; nothing
    after a wait needs to be in a task either); not a relayed call nor the others, which may
    need to run in a task (``asyncio.timeout`` around a database call)."""


def socket_calls(routes: dict[str, Route], door: Door) -> dict[str, SocketCall]:
    """Each ClientFrame request field's ``SocketCall``, derived once (at the endpoint's start)
    from the routes every transport shares."""
    calls = {}
    for field, rpc in frames.RPC_OF_FIELD.items():
        route = routes[rpc.name]
        calls[field] = SocketCall(rpc, route.serve, route.raw,
                                  door.meter(rpc.path, Transport.WEBSOCKET, rpc.streams),
                                  frames.RESPONSE_FIELD[field],
                                  rpc.routing is Routing.TABLE and not route.raw)
    return calls


def _overloaded() -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED",
                        "too many requests in flight on this socket; wait for answers")


def _too_many_streams(limit: int) -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_STREAMS",
                        f"at most {limit} event streams on one socket: stop one first")


class Connection:
    """The state of one socket: requests in flight, streams open, whether it can write."""

    def __init__(self, api: Any, peer: str, sink: Sink, limits: SocketLimits | None = None,
                 door: Door | None = None, calls: dict[str, SocketCall] | None = None,
                 plain: bool = False, direct: str = "") -> None:
        self.api = api  # a GameApi or a stand-in (Any: compiled, an annotation is checked)
        self.door = door or Door(max_in_flight=1 << 30)
        """The server's (a connection alone, in a unit test: a door of its own)."""
        self.calls = calls if calls is not None else socket_calls(
            local_routes(api, frames.CARRIED), self.door)
        self.peer = peer
        self.direct = direct or peer
        """The socket's own peer (behind a trusted proxy, the proxy's; ``peer`` is the client
        it names): the connection a refusal counts against (``Door.refused``)."""
        self.sink = sink
        self.limits = limits or SocketLimits()
        self.in_flight: dict[int, asyncio.Task[None] | _Resumed] = {}
        self.streams: dict[int, asyncio.Task[None]] = {}
        self.writable = asyncio.Event()
        self.writable.set()
        self.can_write = True
        """``writable.is_set()``, kept beside it: read at every change written at commit,
        without a call into asyncio's Python."""
        self.closed = False
        self.cutting = False
        """The stop's grace is over: a request cancelled now was cut by it (``cut``)."""
        self._corked: list[bytes | str] | None = None
        """While a request is served in its message's callback: what it writes to this
        socket, sent in one write at the end (``_serve_now``)."""
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self.plain = plain
        """Without the shortcuts: every request in a task of its own, every change through its
        stream's task, a write per frame, a ``Caller`` built and its token verified per frame
        (the path ``tests/websocket/test_shortcuts.py`` checks the shortcuts against)."""
        self._callers: dict[tuple[str, str], Caller] = {}
        """By (seat token, API key): the socket's callers, each with its token's remembered
        verification (``_caller``)."""
        self._last: tuple[str, str, Caller] | None = None
        """The seat token, API key and caller of the socket's last frame (found by comparing
        the two, without a tuple and its hash)."""

    # --- what the endpoint calls ------------------------------------------------------------

    def received(self, payload: bytes, fmt: Format) -> None:
        """One message from the client: answered at once if refused, else served in a task."""
        try:
            frame = frames.decode(payload, fmt)
        except ServiceError as error:
            self._refused(Caller(peer=self.peer), error)
            self._send(frames.refusal(0, account(WEBSOCKET, None, error)), fmt)
            if error.reason == "VALUE_TOO_LONG":
                self.sink.close(CLOSE_TOO_BIG, "message too big")
            return
        frame_id = frame.id
        if len(frame.seat_token) + len(frame.api_key) > MAX_METADATA_BYTES:
            long = too_long("a frame's seat_token and api_key", MAX_METADATA_BYTES,
                            "characters (gRPC's bound on a call's headers)")
            self._refused(Caller(peer=self.peer), long)  # no caller kept for them
            self._send(frames.refusal(frame_id, account(WEBSOCKET, None, long)), fmt)
            return
        field: str | None = None
        try:
            field = frames.request_field(frame)
            if frame_id in self.in_flight or frame_id in self.streams:
                raise frames.invalid_request(f"id {frame_id} is in use on this socket")
            if field == frames.STOP:
                self._stop(frame, fmt)
                return
            call = self.calls[field]
            if call.rpc.streams:
                if len(self.streams) >= self.limits.max_streams:
                    raise _too_many_streams(self.limits.max_streams)
                task = self._loop().create_task(self._follow(frame, frame_id, field, call, fmt))
                self.streams[frame_id] = task
            else:
                if len(self.in_flight) >= self.limits.max_in_flight:
                    raise _overloaded()
                serving = self._serve(frame, frame_id, field, call, fmt)
                if call.now and not self.plain:
                    self._serve_now(frame_id, serving)
                else:
                    self.in_flight[frame_id] = self._loop().create_task(serving)
        except ServiceError as error:
            if field is not None and field != frames.STOP:  # counted under its method, as
                meter = self.calls[field].meter  # gRPC counts a call its door refuses
                meter.started[0] += 1
                meter.ended(error.code.name, 0.0)
            self._refused(self._caller(frame), error)
            self._send(frames.refusal(frame_id, account(WEBSOCKET, None, error)), fmt)

    def pause_writing(self) -> None:
        """The socket's buffer is full: streams wait (the GameApi cuts one that falls too far
        behind)."""
        self.can_write = False
        self.writable.clear()

    def resume_writing(self) -> None:
        self.can_write = True
        self.writable.set()

    def running(self) -> list[asyncio.Future[Any]]:
        """What a stop waits for: each request and stream of the socket, until it ends."""
        return _ends([*self.in_flight.values(), *self.streams.values()])

    def cut(self) -> list[asyncio.Future[Any]]:
        """The server's stop ends its grace: each request still in flight is cancelled and
        answered as gRPC's call guard answers its own (``stopping.cut``: ``COMMIT_UNKNOWN`` for
        a write, else ``SERVER_STOPPING``). What to wait for before the socket closes."""
        self.cutting = True
        requests = list(self.in_flight.values())
        for request in requests:
            request.cancel()
        return _ends(requests)

    def disconnected(self) -> None:
        """The socket is gone: every request and stream of it is cancelled."""
        self.closed = True
        for task in (*self.in_flight.values(), *self.streams.values()):
            task.cancel()

    # --- serving ----------------------------------------------------------------------------

    def _loop(self) -> asyncio.AbstractEventLoop:
        """The socket's loop, looked up once (on Python 3.11 each lookup is a ``getpid``)."""
        loop = self._event_loop
        if loop is None:
            loop = self._event_loop = asyncio.get_running_loop()
        return loop

    def _serve_now(self, frame_id: int, serving: Coroutine[Any, Any, None]) -> None:
        """Run a request's coroutine at once, up to its first wait, as a task's first step
        would (in a context of its own): one that never waits is served whole here, and what
        it writes to this socket meanwhile (the answer, its own stream's events) goes out in
        one write. One that waits goes on as a task would run it, resumed by what it waits on
        (``_Resumed``, in the same context), counted in flight and cancelled with the socket
        as every request is. What Python 3.12's eager tasks do, without a task;
        ``tests/websocket/test_shortcuts.py`` checks the frames are the
        plain path's (a task per request, a write per frame)."""
        context = contextvars.copy_context()
        corked: list[bytes | str] = []
        self._corked = corked
        try:
            waiting = context.run(step, serving)
        finally:
            self._uncork(corked)
        if waiting is ENDED:
            return
        self.in_flight[frame_id] = _Resumed(self._loop(), serving, waiting, context, self)

    def _uncork(self, corked: list[bytes | str]) -> None:
        """Send what was written while corked, in one write."""
        self._corked = None
        if len(corked) == 1:
            self.sink.send(corked[0])
        elif corked:
            self.sink.send_all(corked)

    def _refused(self, caller: Caller, error: ServiceError) -> None:
        """Tell the door of a refusal (counted against the socket's own address)."""
        self.door.refused(caller, error, Transport.WEBSOCKET, self.direct)

    def _caller(self, frame: frames.Frame) -> Caller:
        """The frame's caller, as the gRPC adapter builds one from a call's headers: one per
        socket and credentials, whose seat token's verification is remembered
        (``caller.Remembered``) until the server revokes any token."""
        if self.plain:
            return socket_caller(frame.seat_token, frame.api_key, self.peer, remember=False)
        last = self._last
        if last is not None and frame.seat_token == last[0] and frame.api_key == last[1]:
            return last[2]  # the socket's credentials of its previous frame (nearly every one)
        credentials = (frame.seat_token, frame.api_key)
        caller = self._callers.get(credentials)
        if caller is None:
            if len(self._callers) >= MAX_CALLERS:
                self._callers.clear()
            caller = self._callers[credentials] = socket_caller(*credentials, self.peer)
        self._last = (*credentials, caller)
        return caller

    def _traced(self, frame: frames.Frame) -> Caller:
        """The frame's caller, with the current span's trace context when tracing is on (a
        call relayed to another node continues the trace there)."""
        caller = self._caller(frame)
        return caller._replace(traceparent=tracing.traceparent()) if tracing.ENABLED else caller

    def _request(self, frame: frames.Frame, call: SocketCall) -> Any:
        return frame.wire if call.raw else frame.request

    async def _serve(self, frame: frames.Frame, frame_id: int, field: str,
                     call: SocketCall, fmt: Format) -> None:
        """One unary request, through the door: the server's bound on calls in flight (taken
        here, in the task: a task cancelled before it runs never holds a place), its metrics
        and its log context."""
        meter = call.meter
        began = time.perf_counter()
        meter.started[0] += 1
        request = frame.request
        door = self.door
        bound = door.bind(Transport.WEBSOCKET, self.peer, request)
        code = "OK"
        try:
            if door.closing:  # the server is stopping: nothing is applied
                raise refused(stopping.stopping())
            door.enter()
            try:
                if tracing.ENABLED:  # a span as gRPC's, its context carried on (a relay)
                    with tracing.socket_call(call.rpc.path):
                        response: Message | bytes = await call.serve(
                            frame.wire if call.raw else request, self._traced(frame))
                else:
                    response = await call.serve(frame.wire if call.raw else request,
                                                self._caller(frame))
            finally:
                door.in_flight -= 1  # door.leave, inlined: every request
            self._answer(frame_id, call.answer_field, response, fmt)
        except (ServiceError, RuleError) as error:
            if isinstance(error, ServiceError):
                self._refused(self._caller(frame), error)
            refusal = frames.as_refusal(error)
            code = refusal.code.name
            self._send(frames.refusal(frame_id, refusal), fmt)
        except asyncio.CancelledError:
            if not self.cutting:  # the socket is gone
                code = "CANCELLED"
                raise
            cut = stopping.cut(call.rpc.path)  # the server's stop: a precise status
            code = cut.code.name
            self._send(frames.refusal(frame_id, cut), fmt)
        except Exception:
            code = "INTERNAL"
            log.exception("ws_request_failed", request=field)
            self._send(frames.internal(frame_id), fmt)
        finally:
            self.in_flight.pop(frame_id, None)
            meter.ended(code, time.perf_counter() - began)
            logcontext.reset(bound)

    async def _follow(self, frame: frames.Frame, frame_id: int, field: str,
                      call: SocketCall, fmt: Format) -> None:
        """Copy one stream's event batches to the socket until it ends or is stopped (counted
        and timed as a gRPC server stream is)."""
        meter = call.meter
        began = time.perf_counter()
        meter.started[0] += 1
        sent = meter.sent
        code = "OK"
        try:
            with tracing.socket_call(call.rpc.path) if tracing.ENABLED else _NO_SPAN:
                end = functools.partial(self._end_stream, frame_id, fmt=fmt)
                request, caller = self._request(frame, call), self._traced(frame)
                batches = call.serve(request, caller, end) if call.raw or self.plain else \
                    call.serve(request, caller, end, _StreamWriter(self, frame_id, call, fmt))
                failure: BaseException | None = None
                try:
                    async for batch in batches:
                        if not self.can_write:
                            await self.writable.wait()
                        self._answer(frame_id, call.answer_field, batch, fmt)
                        sent[0] += 1
                except BaseException as error:  # raised again once the stream is closed
                    failure = error
                await _close(batches)
                if failure is not None:
                    raise failure
            self._send(frames.answer(frame_id, frames.RESPONSE_FIELD[frames.STOP],
                                     ws_pb.EventsStopped()), fmt)
        except (ServiceError, RuleError) as error:
            if isinstance(error, ServiceError):
                self._refused(self._caller(frame), error)
            refusal = frames.as_refusal(error)
            code = refusal.code.name
            self._send(frames.refusal(frame_id, refusal), fmt)
        except asyncio.CancelledError:
            code = "CANCELLED"
            raise
        except Exception:
            code = "INTERNAL"
            log.exception("ws_stream_failed")
            self._send(frames.internal(frame_id), fmt)
        finally:
            self.streams.pop(frame_id, None)
            meter.ended(code, time.perf_counter() - began)

    def _end_stream(self, stream_id: int, error: ServiceError, fmt: Format) -> None:
        """The API ends a stream from outside: its refusal, then nothing more."""
        task = self.streams.pop(stream_id, None)
        if task is not None:
            task.cancel()
            self._send(frames.refusal(stream_id, error), fmt)

    def _stop(self, frame: frames.Frame, fmt: Format) -> None:
        stream_id = frame.request.stream_id
        task = self.streams.pop(stream_id, None)
        if task is None:
            raise frames.invalid_request(f"no event stream of id {stream_id} on this socket")
        task.cancel()
        self._send(frames.answer(frame.id, frames.RESPONSE_FIELD[frames.STOP],
                                 ws_pb.EventsStopped()), fmt)

    def _answer(self, frame_id: int, field: str, response: Message | bytes,
                fmt: Format) -> None:
        if self.closed:
            return
        if fmt is Format.BINARY and isinstance(response, bytes):  # as the GameApi made them
            self._write(frames.answer_wire(frame_id, field, response))
        else:
            self._write(frames.encode(frames.answer(frame_id, field, response), fmt))

    def _send(self, frame: ws_pb.ServerFrame, fmt: Format) -> None:
        if not self.closed:
            self._write(frames.encode(frame, fmt))

    def _write(self, message: bytes | str) -> None:
        corked = self._corked
        if corked is None:
            self.sink.send(message)
        else:
            corked.append(message)


def _ends(running: list[asyncio.Task[None] | _Resumed]) -> list[asyncio.Future[Any]]:
    """What to await for each to end: a task itself, a ``_Resumed``'s ``finished``."""
    return [task if isinstance(task, asyncio.Future) else task.finished() for task in running]


async def _close(batches: object) -> None:
    """End a stream's subscription now, not at its generator's collection; awaited after the
    ``try`` statement, not in it (compiled, it would re-raise a stale exception: mypyc#1114)."""
    aclose = getattr(batches, "aclose", None)
    if aclose is not None:
        await aclose()


class _StreamWriter:
    """One stream's changes written at commit (``fanout.StreamWriter``), as its task writes
    them: an ``events`` frame with the stream's id, counted as a message sent."""

    __slots__ = ("connection", "field", "fmt", "frame_id", "head", "sent")

    def __init__(self, connection: Connection, frame_id: int, call: SocketCall,
                 fmt: Format) -> None:
        self.connection = connection
        self.frame_id = frame_id
        self.field = call.answer_field
        self.fmt = fmt
        self.sent = call.meter.sent
        self.head = frames.answer_head(frame_id, self.field) if fmt is Format.BINARY else None
        """The bytes every ``events`` frame of this stream starts with (binary frames)."""

    def ready(self) -> bool:
        return self.connection.can_write

    def write(self, message: bytes) -> None:
        connection = self.connection
        try:
            head = self.head
            if head is None:
                connection._answer(self.frame_id, self.field, message, self.fmt)
            elif not connection.closed:  # _answer's, with the stream's head made once
                connection._write(frames.headed(head, message))
        except Exception:  # the stream ends as its task's failure ends it, not the commit
            log.exception("ws_stream_failed")
            task = connection.streams.pop(self.frame_id, None)
            if task is not None:
                task.cancel()
                with contextlib.suppress(Exception):
                    connection._send(frames.internal(self.frame_id), self.fmt)
            return
        self.sent[0] += 1
