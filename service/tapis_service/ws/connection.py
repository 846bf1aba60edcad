"""One player socket: its frames dispatched as gRPC calls are, its limits, its open streams.

Each frame becomes a ``Caller`` (its seat token and API key, the socket's address:
``door.socket_caller``) and the request message, handed through the door every transport
passes (``door``: the server's bound on calls in flight, the RPC metrics with
``transport="websocket"``, the log context) to the method's route — the same a gRPC call of it
takes (``rpcs.local_routes`` on a single node; on a cluster node the gateway's, which relays a
table's calls to its owner): credentials, limits and refusals are those of gRPC.

Transport-free: the endpoint hands it each message received and a ``Sink`` to send on, so the
same code is what the unit tests drive. Each request runs in a task of its own (answers may
overtake one another); each open stream is a task that copies the GameApi's event batches into
``events`` frames, waiting while the socket cannot take more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import grpc
import structlog
from google.protobuf.message import Message

from tapis.v1 import websocket_pb2 as ws_pb
from tapis_engine.errors import RuleError
from tapis_service import logcontext
from tapis_service.caller import Caller
from tapis_service.door import Door, Meter, Transport, socket_caller
from tapis_service.errors import ServiceError
from tapis_service.game_api import GameApi, account
from tapis_service.rpcs import Route, Rpc, local_routes
from tapis_service.ws import frames
from tapis_service.ws.frames import Format

log = structlog.get_logger("tapis.ws")

WEBSOCKET = "WebSocket"
"""The ``rpc`` of the logs and metrics for a refusal the socket decides (a frame it cannot
read, a limit of the socket); the GameApi names the RPC of the others."""
CLOSE_TOO_BIG = 1009
"""The WebSocket close code for a message over the size limit (RFC 6455)."""


class Sink(Protocol):
    """Where a connection's frames go: the socket."""

    def send(self, message: bytes | str) -> None: ...

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


def socket_calls(routes: dict[str, Route], door: Door) -> dict[str, SocketCall]:
    """Each ClientFrame request field's ``SocketCall``, derived once (at the endpoint's start)
    from the routes every transport shares."""
    calls = {}
    for field, rpc in frames.RPC_OF_FIELD.items():
        route = routes[rpc.name]
        calls[field] = SocketCall(rpc, route.serve, route.raw,
                                  door.meter(rpc.path, Transport.WEBSOCKET, rpc.streams),
                                  frames.RESPONSE_FIELD[field])
    return calls


def _overloaded() -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED",
                        "too many requests in flight on this socket; wait for answers")


def _too_many_streams(limit: int) -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_STREAMS",
                        f"at most {limit} event streams on one socket: stop one first")


class Connection:
    """The state of one socket: requests in flight, streams open, whether it can write."""

    def __init__(self, api: GameApi, peer: str, sink: Sink,
                 limits: SocketLimits | None = None, door: Door | None = None,
                 calls: dict[str, SocketCall] | None = None) -> None:
        self.api = api
        self.door = door or Door(max_in_flight=1 << 30)
        """The server's (a connection alone, in a unit test: a door of its own)."""
        self.calls = calls if calls is not None else socket_calls(
            local_routes(api, frames.CARRIED), self.door)
        self.peer = peer
        self.sink = sink
        self.limits = limits or SocketLimits()
        self.in_flight: dict[int, asyncio.Task[None]] = {}
        self.streams: dict[int, asyncio.Task[None]] = {}
        self.writable = asyncio.Event()
        self.writable.set()
        self.closed = False
        self.refused: Callable[[ServiceError, Caller], None] | None = None
        """Told of each request the API refused (the connection limits count strangers'
        refusals: ``connections.ConnectionLimits.refused``)."""

    # --- what the endpoint calls ------------------------------------------------------------

    def received(self, payload: bytes, fmt: Format) -> None:
        """One message from the client: answered at once if refused, else served in a task."""
        try:
            frame = frames.decode(payload, fmt)
        except ServiceError as error:
            self._send(frames.refusal(0, account(WEBSOCKET, None, error)), fmt)
            if error.reason == "VALUE_TOO_LONG":
                self.sink.close(CLOSE_TOO_BIG, "message too big")
            return
        try:
            field = frames.request_field(frame)
            if frame.id in self.in_flight or frame.id in self.streams:
                raise frames.invalid_request(f"id {frame.id} is in use on this socket")
            if field == frames.STOP:
                self._stop(frame, fmt)
                return
            call = self.calls[field]
            if call.rpc.streams:
                if len(self.streams) >= self.limits.max_streams:
                    raise _too_many_streams(self.limits.max_streams)
                task = asyncio.ensure_future(self._follow(frame, field, call, fmt))
                self.streams[frame.id] = task
            else:
                if len(self.in_flight) >= self.limits.max_in_flight:
                    raise _overloaded()
                task = asyncio.ensure_future(self._serve(frame, field, call, fmt))
                self.in_flight[frame.id] = task
        except ServiceError as error:
            self._send(frames.refusal(frame.id, account(WEBSOCKET, None, error)), fmt)

    def pause_writing(self) -> None:
        """The socket's buffer is full: streams wait (the GameApi cuts one that falls too far
        behind)."""
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def disconnected(self) -> None:
        """The socket is gone: every request and stream of it is cancelled."""
        self.closed = True
        for task in (*self.in_flight.values(), *self.streams.values()):
            task.cancel()

    # --- serving ----------------------------------------------------------------------------

    def _caller(self, frame: ws_pb.ClientFrame) -> Caller:
        """The frame's caller, as the gRPC adapter builds one from a call's headers."""
        return socket_caller(frame.seat_token, frame.api_key, self.peer)

    def _request(self, frame: ws_pb.ClientFrame, field: str, call: SocketCall) -> Any:
        request = getattr(frame, field)
        return request.SerializeToString() if call.raw else request

    async def _serve(self, frame: ws_pb.ClientFrame, field: str, call: SocketCall,
                     fmt: Format) -> None:
        """One unary request, through the door: the server's bound on calls in flight (taken
        here, in the task: a task cancelled before it runs never holds a place), its metrics
        and its log context."""
        meter = call.meter
        began = time.perf_counter()
        meter.started[0] += 1
        bound = self.door.bind(Transport.WEBSOCKET, self.peer, getattr(frame, field))
        code = "OK"
        try:
            self.door.enter()
            try:
                response: Message | bytes = await call.serve(self._request(frame, field, call),
                                                             self._caller(frame))
            finally:
                self.door.leave()
            self._answer(frame.id, call.answer_field, response, fmt)
        except (ServiceError, RuleError) as error:
            if self.refused is not None and isinstance(error, ServiceError):
                self.refused(error, self._caller(frame))
            refusal = frames.as_refusal(error)
            code = refusal.code.name
            self._send(frames.refusal(frame.id, refusal), fmt)
        except asyncio.CancelledError:
            code = "CANCELLED"
            raise
        except Exception:
            code = "INTERNAL"
            log.exception("ws_request_failed", request=field)
            self._send(frames.internal(frame.id), fmt)
        finally:
            self.in_flight.pop(frame.id, None)
            meter.ended(code, time.perf_counter() - began)
            logcontext.reset(bound)

    async def _follow(self, frame: ws_pb.ClientFrame, field: str, call: SocketCall,
                      fmt: Format) -> None:
        """Copy one stream's event batches to the socket until it ends or is stopped (counted
        and timed as a gRPC server stream is)."""
        meter = call.meter
        began = time.perf_counter()
        meter.started[0] += 1
        sent = meter.sent
        code = "OK"
        try:
            batches = call.serve(self._request(frame, field, call), self._caller(frame),
                                 lambda error: self._end_stream(frame.id, error, fmt))
            try:
                async for batch in batches:
                    if not self.writable.is_set():
                        await self.writable.wait()
                    self._answer(frame.id, call.answer_field, batch, fmt)
                    sent[0] += 1
            finally:  # the stream's subscription ends now, not when the generator is collected
                aclose = getattr(batches, "aclose", None)
                if aclose is not None:
                    await aclose()
            self._send(frames.answer(frame.id, frames.RESPONSE_FIELD[frames.STOP],
                                     ws_pb.EventsStopped()), fmt)
        except (ServiceError, RuleError) as error:
            refusal = frames.as_refusal(error)
            code = refusal.code.name
            self._send(frames.refusal(frame.id, refusal), fmt)
        except asyncio.CancelledError:
            code = "CANCELLED"
            raise
        except Exception:
            code = "INTERNAL"
            log.exception("ws_stream_failed")
            self._send(frames.internal(frame.id), fmt)
        finally:
            self.streams.pop(frame.id, None)
            meter.ended(code, time.perf_counter() - began)

    def _end_stream(self, stream_id: int, error: ServiceError, fmt: Format) -> None:
        """The API ends a stream from outside: its refusal, then nothing more."""
        task = self.streams.pop(stream_id, None)
        if task is not None:
            task.cancel()
            self._send(frames.refusal(stream_id, error), fmt)

    def _stop(self, frame: ws_pb.ClientFrame, fmt: Format) -> None:
        stream_id = frame.stop_events.stream_id
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
            self.sink.send(frames.answer_wire(frame_id, field, response))
        else:
            self.sink.send(frames.encode(frames.answer(frame_id, field, response), fmt))

    def _send(self, frame: ws_pb.ServerFrame, fmt: Format) -> None:
        if not self.closed:
            self.sink.send(frames.encode(frame, fmt))
