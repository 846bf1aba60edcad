"""The door: what every call passes, whatever carries it — a gRPC call (``callguard``), a
WebSocket frame (``ws.connection``) or a call relayed from another node (``cluster.tunnel``).

Here and nowhere else: who the caller is (its seat token, API key and address, behind a
trusted proxy the client's: ``caller_of``, ``socket_caller``), the bound on calls in flight
the whole server shares (``Door.enter``: beyond it ``RESOURCE_EXHAUSTED`` / ``OVERLOADED``),
the refusals the door decides itself (counted and logged), the refusal budget of strangers'
addresses (``Door.refused``: every transport tells the door of every call it refused; past an
address's budget its connections are cut: ``connections.ConnectionLimits``), the RPC metrics
(grpc-prometheus' series, one per method and ``transport``: ``grpc``, ``websocket``, ``relay``:
``Meter``) and the call's log context. What the transports keep is their own: decoding their
bytes and writing answers and refusals in their own form. The per-address and per-key limits
and the credentials are checked by ``GameApi`` (``ratelimit``, ``quotas``, ``api_keys``), which
every transport reaches through the same ``Caller``.

Everything is derived once, at start (a ``Meter`` per method and transport, its metric cells
looked up then): a call adds no layer, only the counts.
"""

from __future__ import annotations

import asyncio
import bisect
import enum
import time
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

import grpc
import structlog

from tapis_service.door import logcontext
from tapis_service.door.caller import Caller, Remembered, credential
from tapis_service.door.connections import ConnectionLimits, counts_against_address
from tapis_service.door.proxies import FORWARDED_FOR, TrustedProxies
from tapis_service.observe import metrics, tracing
from tapis_service.observe.errors import ServiceError

log = structlog.get_logger("tapis.rpc")

AUTHORIZATION = "authorization"
API_KEY = "x-api-key"


class Transport(enum.Enum):
    """What carried a call to this node (the ``transport`` label of the RPC metrics)."""

    GRPC = "grpc"
    WEBSOCKET = "websocket"
    RELAY = "relay"
    """Relayed by another node of the cluster (counted there under its own transport too)."""


# --- who calls --------------------------------------------------------------------------------


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


_LOOKED_UP: ContextVar[tuple[object, tuple[Any, ...]] | None] = ContextVar(
    "tapis_looked_up", default=None)
"""The headers grpc decoded to look the call's handler up, with the task that looked it up."""


_CURRENT_TASKS: dict[Any, Any] | None = getattr(asyncio.tasks, "_current_tasks", None)
"""The running task by loop: what ``asyncio.current_task`` reads (Python 3.11), read here
without its Python frame (two calls per action); None where asyncio keeps it otherwise."""


def _task() -> object:
    """``asyncio.current_task()``, or None outside a running loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    if _CURRENT_TASKS is not None:
        return _CURRENT_TASKS.get(loop)
    return asyncio.current_task(loop)


def looked_up(metadata: Any) -> None:
    """The headers grpc.aio decoded to look a call's handler up (``HandlerCallDetails``: the
    call guard's generic handlers hand them here), kept for ``caller_of``: grpc.aio looks a
    call's handler up and serves the call in one task of its own, so in that task they are the
    call's, and ``caller_of`` need not have grpc decode them a second time
    (``context.invocation_metadata()``). Anywhere else (another task, which a task started
    from this one would be) they are not used."""
    task = _task()
    if task is not None and type(metadata) is tuple:  # grpc.aio's always is
        _LOOKED_UP.set((task, metadata))


def caller_of(context: grpc.aio.ServicerContext,
              proxies: TrustedProxies | None = None) -> Caller:
    """The ``Caller`` of a gRPC call: its seat token, API key, peer (behind one of
    ``proxies``, the client's from ``x-forwarded-for``) and deadline. What its headers say
    is read once per connection and headers (``_CREDENTIALS``, with a ``Remembered`` for the
    seat token they carry): the calls of a channel send the same ones again and again. The
    headers are those its handler was looked up with when this task looked it up
    (``looked_up``), else the context's."""
    looked = _LOOKED_UP.get()
    if looked is not None and looked[0] is _task():
        metadata = looked[1]
    else:
        metadata = tuple(context.invocation_metadata() or ())  # grpc's is one already
    peer = context.peer()
    known = _CREDENTIALS.get((peer, metadata))
    if known is None or known[0] is not proxies:
        if len(_CREDENTIALS) >= MAX_CREDENTIALS:
            _CREDENTIALS.clear()
        read = read_caller(context, proxies, metadata)._replace(deadline=None,
                                                                 traceparent=None)
        known = _CREDENTIALS[peer, metadata] = (proxies, read._replace(
            remembered=None if read.seat_token is None else Remembered(read.seat_token)))
    caller = known[1]
    remaining = context.time_remaining()
    if remaining is None and not tracing.ENABLED:
        return caller  # no deadline, no trace: the connection's caller as it is
    return Caller(caller[0], caller[1], caller[2], caller[3],
                  None if remaining is None else time.monotonic() + remaining, False,
                  tracing.traceparent() if tracing.ENABLED else None, caller[7])


MAX_CREDENTIALS = 4096
"""The (connection, headers) whose reading ``caller_of`` keeps; beyond, it forgets them all
and starts again (headers that change on every call gain nothing from it)."""
_CREDENTIALS: dict[tuple[Any, tuple[Any, ...]], tuple[TrustedProxies | None, Caller]] = {}
"""By the call's peer and headers: the proxies they were read behind, and the ``Caller``
they make without a deadline or a trace (with a ``Remembered`` for its seat token)."""


def read_caller(context: grpc.aio.ServicerContext, proxies: TrustedProxies | None = None,
                metadata: tuple[Any, ...] | None = None) -> Caller:
    """``caller_of`` read from scratch (``tests/service/test_caller.py``: the same); the
    call's headers are ``metadata`` when given (as grpc decoded them), else the context's.
    Of each credential header the first value counts; an empty one is no value
    (``caller.credential``, as a WebSocket frame's empty fields)."""
    token: str | None = None
    bad = False
    api_key: str | None = None
    forwarded: list[str] = []
    if metadata is None:
        metadata = tuple(context.invocation_metadata() or ())
    for key, value in metadata:
        if key == AUTHORIZATION:
            header = credential(_text(value))  # empty: as if not sent
            if header is not None and token is None and not bad:
                scheme, _, rest = header.partition(" ")
                rest = rest.strip()
                if rest and scheme.lower() == "bearer":
                    token = rest
                else:
                    bad = True
        elif key == API_KEY:
            if api_key is None:  # the first one not empty (empty: as if not sent)
                api_key = credential(_text(value))
        elif key == FORWARDED_FOR:
            forwarded.append(_text(value))
    peer = str(context.peer())
    if proxies is not None and proxies.networks:
        peer = proxies.client_peer(peer, forwarded)
    remaining = context.time_remaining()
    return Caller(token, bad, api_key, peer,
                  None if remaining is None else time.monotonic() + remaining, False,
                  tracing.traceparent() if tracing.ENABLED else None)


def socket_peer(peer: str, forwarded: Iterable[str], proxies: TrustedProxies) -> str:
    """A WebSocket's client address: its peer's, or behind one of ``proxies`` the one its
    upgrade request's ``x-forwarded-for`` names (as ``caller_of`` reads a gRPC call's)."""
    return proxies.client_peer(peer, list(forwarded))


def socket_caller(seat_token: str, api_key: str, peer: str, remember: bool = True) -> Caller:
    """The ``Caller`` of a WebSocket frame: its seat token and API key (as gRPC's headers
    carry them; empty: none, ``caller.credential``, as for gRPC's), the socket's client
    address; ``remember``: with a place for its token's verification (``caller.Remembered``:
    the socket keeps this caller)."""
    token = credential(seat_token)
    return Caller(seat_token=token, api_key=credential(api_key), peer=peer,
                  remembered=Remembered(token) if token is not None and remember else None)


# --- what a call costs -------------------------------------------------------------------------


def overloaded() -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED",
                        "the server has too many calls in flight; retry with backoff")


def refused(error: ServiceError) -> ServiceError:
    """``error``, a refusal the door (or a transport) decides itself, counted and logged."""
    metrics.REFUSALS.labels(error.code.name, error.reason).inc()
    log.info("refused", code=error.code.name, reason=error.reason)
    error.logged = True
    return error


class Meter:
    """One method's RPC metrics over one transport: grpc-prometheus' series (started,
    handled by code, messages sent, seconds), with a ``transport`` label; the cells are looked
    up once, here."""

    __slots__ = ("answered", "bounds", "labels", "sent", "started", "timing", "transport")

    def __init__(self, path: str, transport: Transport, streams: bool = False) -> None:
        self.transport = transport.value
        self.labels = ("server_stream" if streams else "unary",
                       *path.lstrip("/").split("/", 1))
        self.started = metrics.RPC_STARTED.cell(*self.labels, self.transport)
        self.answered = metrics.RPC_HANDLED.cell(*self.labels, "OK", self.transport)
        self.sent = metrics.RPC_SENT.cell(*self.labels, self.transport)
        self.timing = metrics.RPC_SECONDS.child(*self.labels, self.transport)
        self.bounds: list[float] = metrics.RPC_SECONDS.bounds

    def ended(self, code: str, seconds: float) -> None:
        """A call that did not answer OK (a unary one), or any stream's end."""
        if code == "OK":
            self.answered[0] += 1
        else:
            metrics.RPC_HANDLED.inc(*self.labels, code, self.transport)
        timing = self.timing  # RPC_SECONDS.observe_child, inlined (compiled: every call)
        timing[bisect.bisect_left(self.bounds, seconds)] += 1
        timing[-1] += seconds


SLOW_CALL_S = 1.0
"""A unary call that takes longer is logged at info (every call at debug)."""


def call_line(seconds: float, code: str = "OK") -> None:
    """A unary call's own log line: debug, or info when slow."""
    if seconds >= SLOW_CALL_S:
        log.info("slow_call", code=code)
    elif logcontext.debug_lines:
        log.debug("call", code=code)


class Door:
    """What the whole server shares among its transports: the calls in flight (at most
    ``max_in_flight`` unary calls, every transport together), the trusted proxies and the
    refusal budget (``limits``)."""

    def __init__(self, max_in_flight: int, proxies: TrustedProxies | None = None,
                 limits: ConnectionLimits | None = None) -> None:
        self.max_in_flight = max_in_flight
        self.proxies = proxies or TrustedProxies()
        self.limits = limits
        """The connection limits whose refusal budget strangers' refused calls spend (None:
        no budget)."""
        self.in_flight = 0
        self.closing = False
        """The server is stopping: a unary call a client's transport takes from now is refused
        ``SERVER_STOPPING`` before any of it runs (``stopping.stopping``; set once, by the
        stop). A call relayed by another node is not: the node that relays it is not stopping,
        and answers it from where the table went."""
        self._meters: dict[tuple[str, Transport], Meter] = {}

    def refused(self, caller: Caller, error: ServiceError, transport: Transport,
                connection: str | None = None) -> None:
        """A call of ``caller`` that came over ``transport`` was refused with ``error`` (every
        transport tells of every refusal, here and nowhere else): a stranger's (no key, a
        wrong key, a bad token: ``connections.counts_against_address``) is counted against
        the address of the connection that carried it — ``connection``, its direct peer (a
        trusted proxy's behind one: never cut), by default the caller's — and past that
        address's budget its connections are cut.

        A relayed call (``Transport.RELAY``) counts where its client is connected, never at
        the owner: the node that relayed it holds the connection (the only one that can cut
        it) and tells its own door of the refusal, come back through the tunnel, as its
        transport answers it. Counted at the owner too, it would be counted twice, under the
        client's address on a node it never connected to."""
        limits = self.limits
        if limits is None or transport is Transport.RELAY:
            return
        limits.refused(connection or caller.peer, error, caller.api_key)

    def refused_call(self, context: grpc.aio.ServicerContext, error: ServiceError) -> None:
        """A gRPC call refused (the call guard tells of each): ``refused`` with the caller read
        from its headers, counted against its connection's peer; the headers are read only
        for a refusal that may count."""
        if self.limits is None or not counts_against_address(error):
            return
        self.refused(caller_of(context), error, Transport.GRPC, str(context.peer()))

    def enter(self) -> None:
        """One more unary call in flight, or ``OVERLOADED`` (counted) beyond the bound; each
        ``enter`` that returns is followed by one ``leave``."""
        if self.in_flight >= self.max_in_flight:
            raise refused(overloaded())
        self.in_flight += 1

    def leave(self) -> None:
        self.in_flight -= 1

    def meter(self, path: str, transport: Transport, streams: bool = False) -> Meter:
        """The metrics of method ``path`` over ``transport`` (one ``Meter`` each)."""
        meter = self._meters.get((path, transport))
        if meter is None:
            meter = self._meters[(path, transport)] = Meter(path, transport, streams)
        return meter

    @staticmethod
    def bind(transport: Transport, peer: str, request: Any) -> Any:
        """The log context of a call that has no gRPC context to read it from (a WebSocket
        frame, a relayed call): its transport, client and request id, in a context made for
        this call alone (``call``: the method adds its own into it, ``logcontext.enter``);
        ``logcontext.reset`` with what this returns ends it."""
        request_id = getattr(request, "request_id", "")
        name = transport._value_  # its value, without the Python property ``value`` runs
        if request_id:
            return logcontext.bind(transport=name, peer=peer, request_id=request_id[:40],
                                   call=None)
        return logcontext.bind(transport=name, peer=peer, call=None)
