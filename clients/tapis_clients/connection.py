"""A small client over the generated stubs: where the server is, seat tokens, retries through
restarts, overload and dead cluster nodes, resumable event streams."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_clients.i18n import _

T = TypeVar("T")

DEFAULT_PORT = 50051
DEFAULT_TARGET = f"127.0.0.1:{DEFAULT_PORT}"
REACH_TIMEOUT_S = 3.0
"""How long a client waits for a server it never reached before saying so."""
PROBE_TIMEOUT_S = 1.0
"""How long a client that reached no server waits for a bare TCP connection to the target,
to tell a closed port from one that answers in another way (TLS)."""

RETRIED_EXHAUSTION = frozenset({"RATE_LIMITED", "OVERLOADED", "TOO_MANY_STREAMS", ""})
"""RESOURCE_EXHAUSTED reasons worth the same request again after a pause (no reason: a
grpc-level limit such as too many calls in flight)."""
RESUMED_EXHAUSTION = RETRIED_EXHAUSTION | {"STREAM_TOO_SLOW"}
"""...and, for an event stream, a stream cut for reading too slowly: resume it."""

RATE_LIMITED_CAP_S = 0.4
"""The longest pause before retrying a RATE_LIMITED call when the server names none: a rate
limiter's tokens come back steadily (CreateGame's default: 5 per second), so waiting longer
only idles."""

CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    # Reconnect soon after a server restart (gRPC's default backoff grows to 120 s).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Spread calls over every address of the target and skip the dead ones (a cluster).
    ("grpc.service_config", json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})),
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
]

RECONNECT_OPTIONS = CHANNEL_OPTIONS
"""The former name of CHANNEL_OPTIONS (tests and tools open channels like the clients')."""


class Unreachable(Exception):
    """No server answered at the target within the start-up wait. ``accepts``: the target's
    port took a TCP connection all the same, while the client spoke plaintext gRPC (the
    server may want TLS) or, with ``tls``, TLS (the server may run without it, or with a
    certificate the client does not trust)."""

    def __init__(self, target: str, seconds: float, accepts: bool = False,
                 tls: bool = False) -> None:
        if accepts and tls:
            text = _("no Tapis server answers over TLS at {target} (waited {seconds} s), "
                     "though its port accepts connections: if the server runs without TLS "
                     "(as `make serve` does), leave out --tls and --tls-ca; otherwise give "
                     "--tls-ca FILE, the CA that signed its certificate")
        elif accepts:
            text = _("no Tapis server answers in plaintext at {target} (waited {seconds} s), "
                     "though its port accepts connections: if the server uses TLS, add "
                     "--tls-ca FILE (its CA certificate) or --tls (the system's roots)")
        else:
            text = _("no Tapis server answers at {target} (waited {seconds} s); start one "
                     "with `make serve`, or point the client elsewhere with --target "
                     "HOST:PORT or TAPIS_TARGET=HOST:PORT")
        super().__init__(text.format(target=target, seconds=f"{seconds:g}"))
        self.target = target
        self.accepts = accepts


MAX_PORT = 65535
"""The largest TCP port: a target naming a larger one has no TCP address."""


def first_address(target: str) -> tuple[str, int] | None:
    """The host and port of a target's first address (``ipv4:``/``ipv6:`` lists, ``dns:``,
    ``[::1]:50051``, ``host:port``); None for what names no TCP port (``unix:``, a port
    beyond 65535)."""
    scheme, colon, rest = target.partition(":")
    if colon and scheme in ("ipv4", "ipv6"):
        target = rest.split(",")[0]
    elif colon and scheme == "dns":
        target = rest.removeprefix("//").partition("/")[2] if rest.startswith("//") else rest
    elif colon and scheme == "unix":
        return None
    if target.startswith("["):
        host, _bracket, port = target[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _colon, port = target.rpartition(":")
    if not host or not port.isdigit() or int(port) > MAX_PORT:
        return None
    return host, int(port)


async def accepts_tcp(target: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the target's first address takes a TCP connection within ``timeout_s``."""
    address = first_address(target)
    if address is None:
        return False
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(*address), timeout_s)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def resolve_target(target: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The gRPC target to use: ``--target``, else ``TAPIS_TARGET``, else 127.0.0.1 at
    ``TAPIS_PORT`` (the port the server reads), else 127.0.0.1:50051.

    Any gRPC target works (``dns:///tapis.example:50051``, ``ipv4:10.0.0.1:50051,10.0.0.2:50051``);
    a bare comma-separated list of ``HOST:PORT`` addresses gets the ``ipv4:`` scheme."""
    env = os.environ if environ is None else environ
    chosen = target or env.get("TAPIS_TARGET") or ""
    if not chosen:
        port = env.get("TAPIS_PORT")
        chosen = f"127.0.0.1:{port}" if port else DEFAULT_TARGET
    if "," in chosen and ":" in chosen.split(",")[0] and not chosen.startswith(
            ("ipv4:", "ipv6:", "dns:", "unix:")):
        chosen = "ipv4:" + chosen
    return chosen


def _details(error: grpc.RpcError) -> list[Any]:
    """The ``google.protobuf.Any`` details of a refusal's rich status (none if it has none)."""
    try:
        status = rpc_status.from_call(error)
    except ValueError:
        return []
    return [] if status is None else list(status.details)


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo carried by a refusal, if any."""
    for detail in _details(error):
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info
    return None


def error_reason(error: grpc.RpcError) -> str:
    """The ErrorInfo reason carried by a refusal ("" if none)."""
    info = error_info(error)
    return info.reason if info is not None else ""


def retry_delay_s(error: grpc.RpcError) -> float | None:
    """The pause the server asks for before a retry: a ``google.rpc.RetryInfo`` detail, or
    ErrorInfo metadata ``retry_delay_ms``/``retry_after_ms``; None when it names none."""
    for detail in _details(error):
        retry = error_details_pb2.RetryInfo()
        if detail.Unpack(retry):
            return retry.retry_delay.seconds + retry.retry_delay.nanos / 1e9
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            for key in ("retry_delay_ms", "retry_after_ms"):
                if key in info.metadata:
                    try:
                        return max(0.0, float(info.metadata[key]) / 1000)
                    except ValueError:
                        pass
    return None


def is_retryable(error: grpc.RpcError, stream: bool = False) -> bool:
    """Whether the same request may be sent again: the server (or a cluster node) is away or
    restarting, or asks the client to slow down. A ``CANCELLED`` without an ErrorInfo is
    grpc's core's, never the server's code: a call that waited in a stopping server's core
    (or beyond its backlog) and was dropped before the server saw it; this client's own
    cancellation raises ``asyncio.CancelledError`` instead (docs/api.md, "Statuses without a
    reason")."""
    code = error.code()
    if code == grpc.StatusCode.UNAVAILABLE:
        return True
    if code == grpc.StatusCode.CANCELLED:
        return not error_reason(error)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        reasons = RESUMED_EXHAUSTION if stream else RETRIED_EXHAUSTION
        return error_reason(error) in reasons
    return False


IN_DOUBT_ATTEMPTS = 3
"""Attempts in all at a write (a request with a ``request_id``) whose failure leaves it in
doubt (``in_doubt``), each with the same request: the server never applies a request_id twice,
and answers a retry of an applied write with its first answer."""


def in_doubt(error: grpc.RpcError) -> bool:
    """Whether a write that failed so may have been applied or not: ``INTERNAL`` (a fault of
    the server's own, ERROR_REASON_INTERNAL, or grpc's on a dropped connection) or
    ``DEADLINE_EXCEEDED`` (no answer in time). (``COMMIT_UNKNOWN``, in doubt too, is
    ``UNAVAILABLE``: ``is_retryable``.)"""
    return error.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.DEADLINE_EXCEEDED)


class Backoff:
    """Exponential backoff with jitter, 50 ms to 2 s; a delay the server asks for wins."""

    def __init__(self, first_s: float = 0.05, cap_s: float = 2.0) -> None:
        self.first_s = first_s
        self.cap_s = cap_s
        self.next_s = first_s

    def reset(self) -> None:
        self.next_s = self.first_s

    def pause(self, error: grpc.RpcError | None = None) -> float:
        asked = retry_delay_s(error) if error is not None else None
        if asked is not None:
            return asked * (1 + 0.2 * random.random())
        delay = self.next_s * (0.5 + random.random())
        cap = self.cap_s
        if error is not None and error_reason(error) == "RATE_LIMITED":
            cap = min(cap, RATE_LIMITED_CAP_S)  # a token bucket refills steadily: keep asking
        self.next_s = min(self.next_s * 2, cap)
        return delay


TRUE = ("1", "true", "yes", "on")


class _WithApiKey(grpc.aio.UnaryUnaryClientInterceptor,
                  grpc.aio.UnaryStreamClientInterceptor):
    """Adds a backend's ``x-api-key`` to every call."""

    def __init__(self, key: str) -> None:
        self.key = key

    def _with_key(self, details: Any) -> Any:
        metadata = [*(details.metadata or ()), ("x-api-key", self.key)]
        return details._replace(metadata=metadata)

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with_key(details), request)

    async def intercept_unary_stream(self, continuation: Any, details: Any,
                                     request: Any) -> Any:
        return await continuation(self._with_key(details), request)


@dataclass(frozen=True)
class Credentials:
    """How a client reaches the server: over TLS (trusting ``ca``, else the system's roots)
    or in clear, and with a backend's API key or none."""

    tls: bool = False
    ca: bytes | None = None
    api_key: str | None = None

    @classmethod
    def from_options(cls, options: Any, environ: Mapping[str, str] | None = None
                     ) -> Credentials:
        """From ``--tls-ca``, ``--tls`` and ``--api-key`` (tapis_clients.options), else
        ``TAPIS_TLS_CA``, ``TAPIS_TLS`` and ``TAPIS_API_KEY``."""
        environ = os.environ if environ is None else environ
        ca_path = getattr(options, "tls_ca", None) or environ.get("TAPIS_TLS_CA") or None
        tls = bool(getattr(options, "tls", False)) \
            or environ.get("TAPIS_TLS", "").lower() in TRUE or ca_path is not None
        api_key = getattr(options, "api_key", None) or environ.get("TAPIS_API_KEY") or None
        return cls(tls, Path(ca_path).read_bytes() if ca_path else None, api_key)

    def channel(self, target: str) -> grpc.aio.Channel:
        interceptors = [_WithApiKey(self.api_key)] if self.api_key else None
        if not self.tls:
            return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS,
                                             interceptors=interceptors)
        return grpc.aio.secure_channel(
            target, grpc.ssl_channel_credentials(root_certificates=self.ca),
            options=CHANNEL_OPTIONS, interceptors=interceptors)


class Connection:
    """A channel to a Tapis server (or a cluster: every address of the target, round robin);
    calls are retried with backoff while the server is away or asks to slow down."""

    def __init__(self, target: str | None = None, retry_for_s: float | None = 60.0,
                 credentials: Credentials | None = None) -> None:
        """``retry_for_s``: give up retrying after this long without an answer (None: never).
        ``credentials``: TLS and an API key (default: from the environment)."""
        self.target = resolve_target(target)
        self.retry_for_s = retry_for_s
        self.credentials = credentials or Credentials.from_options(None)
        self.channel = self.credentials.channel(self.target)
        self.stub = pb_grpc.GameServiceStub(self.channel)
        self.on_retry: Callable[[grpc.RpcError], None] | None = None
        """Called before each retry of a server away or asking to slow down (a client may
        say "reconnecting…"); not before a write resent in doubt."""

    async def close(self) -> None:
        await self.channel.close()

    async def reach(self, timeout_s: float | None = None) -> None:
        """Wait until the channel is connected; raise Unreachable after ``timeout_s``
        (default REACH_TIMEOUT_S), saying whether the port took a plaintext client's TCP
        connection all the same (it may serve TLS)."""
        timeout_s = REACH_TIMEOUT_S if timeout_s is None else timeout_s
        try:
            await asyncio.wait_for(self.channel.channel_ready(), timeout_s)
        except TimeoutError:
            accepts = await accepts_tcp(self.target)
            raise Unreachable(self.target, timeout_s, accepts, self.credentials.tls) from None

    def _give_up_at(self) -> float:
        loop = asyncio.get_running_loop()
        return float("inf") if self.retry_for_s is None else loop.time() + self.retry_for_s

    async def call(self, method: Callable[..., Awaitable[T]], request: Any,
                   token: str | None = None, timeout: float = 10.0,
                   retry_exhausted: bool = True) -> T:
        """Call ``method``; on UNAVAILABLE (and, with ``retry_exhausted``, on a
        RESOURCE_EXHAUSTED that asks to slow down) retry the *same* request (same request_id);
        a write (a request with a request_id) left in doubt is sent again too, up to
        IN_DOUBT_ATTEMPTS in all, then its error is raised (``in_doubt`` says what it means)."""
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        backoff = Backoff()
        loop = asyncio.get_running_loop()
        give_up = self._give_up_at()
        doubts_left = IN_DOUBT_ATTEMPTS - 1 if getattr(request, "request_id", "") else 0
        while True:
            try:
                return await method(request, metadata=metadata, timeout=timeout)
            except grpc.aio.AioRpcError as error:
                doubted = in_doubt(error) and doubts_left > 0
                retry = doubted or (is_retryable(error) and (
                    retry_exhausted or error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED))
                if not retry or loop.time() > give_up:
                    raise
                if doubted:
                    doubts_left -= 1  # not a server away: no "reconnecting" (on_retry)
                elif self.on_retry is not None:
                    self.on_retry(error)
                await asyncio.sleep(backoff.pause(error))

    async def events(self, game_id: str, after: int = 0, token: str | None = None,
                     on_presence: Callable[[pb.PresenceChanged], None] | None = None,
                     ) -> AsyncIterator[pb.Event]:
        """Every event after ``after``, resuming by sequence after a dropped stream (a restart,
        a dead cluster node, a stream cut as too slow): no gap, no duplicate. With
        ``on_presence``, the table's presence changes (a seat went away or came back) are
        handed to it as they come."""
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        last = after
        backoff = Backoff()
        loop = asyncio.get_running_loop()
        give_up = self._give_up_at()
        while True:
            try:
                stream = self.stub.StreamEvents(
                    pb.StreamEventsRequest(game_id=game_id, after_sequence=last,
                                           with_presence=on_presence is not None),
                    metadata=metadata)
                async for response in stream:
                    if on_presence is not None:
                        for change in response.presence:
                            on_presence(change)
                    for event in response.events:
                        if event.sequence <= last:
                            continue
                        last = event.sequence
                        backoff.reset()
                        give_up = self._give_up_at()
                        yield event
                return
            except grpc.aio.AioRpcError as error:
                if not is_retryable(error, stream=True) or loop.time() > give_up:
                    raise
                if self.on_retry is not None:
                    self.on_retry(error)
                delay = backoff.pause(error)
            await asyncio.sleep(delay)
