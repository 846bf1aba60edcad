"""Start-up: the first instant to SERVING.

- Signals from the first instant: ``tapis_service.process.entry``.
- The probe port (``--health-port``): the health service alone in plaintext, for Kubernetes'
  native gRPC probes, from before the store opens to the end.
- The waiting room: while the store opens (and, for PostgreSQL, waits for the database) and
  recovery runs, a gRPC server with the health service alone holds the port: ``liveness``
  SERVING, readiness NOT_SERVING. Recovery yields to the event loop every ``YIELD_EVERY``
  tables (store.py), so the room answers throughout; at the hand-over its calls in flight are
  answered, not cancelled (``HANDOVER_GRACE_S``). A database that cannot be reached is
  retried with backoff (one log line per attempt at most every ``LOG_EVERY_S``) for
  ``--db-wait`` seconds (0: for ever); damaged or incompatible data still refuses the start
  (exit 2).
"""

from __future__ import annotations

import asyncio
import subprocess
from contextlib import suppress
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tapis_service.grpc import corecalls
from tapis_service.observe.errors import ServiceError, end_call
from tapis_service.observe.logrepeat import RepeatLimiter
from tapis_service.process.health import new_health

if TYPE_CHECKING:
    from tapis_service.door.security import Security
    from tapis_service.settings import Settings
    from tapis_service.stores.store import Store

log = structlog.get_logger("tapis.server")

FIRST_RETRY_S = 0.5
MAX_RETRY_S = 5.0
"""Between two attempts to reach the database (so it is found within seconds of its
return)."""
LOG_EVERY_S = 10.0
HANDOVER_GRACE_S = 1.0
"""How long the waiting room's calls in flight may take to be answered when the real server
takes the port: each is answered at once (health, or ``SERVER_STARTING``), none cancelled."""


class StartupFailed(Exception):
    """The server cannot start, for a reason said in one line (exit 2)."""


@cache
def version() -> str:
    """The installed package's version."""
    try:
        return metadata.version("tapis")
    except metadata.PackageNotFoundError:
        return "unknown"


@cache
def revision() -> str:
    """The source revision: the image's (``/etc/tapis-revision``, written at build), else the
    checkout's (git), else ``unknown``."""
    with suppress(OSError):
        return Path("/etc/tapis-revision").read_text(encoding="ascii").strip() or "unknown"
    try:
        found = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                               text=True, timeout=5, check=False,
                               cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else "unknown"


def listen_address(host: str, port: int) -> str:
    """host:port for grpc, an IPv6 host in brackets (``--host ::`` -> ``[::]:50051``)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


async def _refuse_starting(request: bytes, context: grpc.aio.ServicerContext) -> None:
    await end_call(context, ServiceError(grpc.StatusCode.UNAVAILABLE, "SERVER_STARTING",
                                         "the server is starting: retry with backoff"))


class _Starting(grpc.GenericRpcHandler):
    """Every method but the health service's, while the server starts: ``UNAVAILABLE`` /
    ``SERVER_STARTING`` (a client retries), not grpc's bare ``UNIMPLEMENTED`` for a method the
    room does not serve. The request is read as raw bytes and never parsed; a streaming call
    reads the same status after its first message."""

    def __init__(self) -> None:
        self._handler = grpc.unary_unary_rpc_method_handler(_refuse_starting)

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        return self._handler


class WaitingRoom:
    """A gRPC server with the health service alone (liveness SERVING, readiness NOT_SERVING),
    on the server's port until the real one takes it; every other call is told the server is
    starting (``SERVER_STARTING``)."""

    def __init__(self, server: grpc.aio.Server, core_id: int | None = None) -> None:
        self.server: grpc.aio.Server | None = server
        self.core_id = core_id
        """The room's channelz id: the calls its grpc core holds (``corecalls``)."""
        self.watching = 0
        """Its open health ``Watch`` streams: the only calls it does not answer at once."""

    @classmethod
    async def open(cls, settings: Settings, security: Security | None = None
                   ) -> WaitingRoom | None:
        """The room on ``--host``/``--port`` (None on port 0: nothing to probe). Raises
        ``CannotListen`` when the port is taken."""
        from tapis_service.process.server import CannotListen, can_bind

        if not settings.port:
            return None
        address = listen_address(settings.host, settings.port)
        if not can_bind(settings.host, settings.port):
            raise CannotListen(f"cannot listen on {address} (is another server there?)")
        servers = corecalls.server_ids()
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        room = cls(server, corecalls.created(servers))
        servicer = await new_health(ready=False)
        watch = servicer.Watch

        async def watched(request: Any, context: grpc.aio.ServicerContext) -> Any:
            room.watching += 1
            try:
                return await watch(request, context)
            finally:
                room.watching -= 1

        servicer.Watch = watched
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        server.add_generic_rpc_handlers((_Starting(),))  # after health's: asked last
        try:
            if security is None:
                server.add_insecure_port(address)
            else:  # the port's own TLS: a probe over TLS reaches it as it will the server
                security.add_port(server, address)
        except RuntimeError as error:
            raise CannotListen(f"cannot listen on {address} (is another server there?)") \
                from error
        await server.start()
        return room

    async def close(self) -> None:
        """Give the port up: new calls are refused by the transport (``UNAVAILABLE``: a
        client retries, and reaches the real server); the calls in flight are answered
        first (``SERVER_STARTING``, or their health status), never cancelled, and so are
        those waiting in grpc's core, taken before its shutdown (``corecalls``: it would
        kill them ``CANCELLED``, with no reason)."""
        if self.server is not None:
            server, self.server = self.server, None
            await corecalls.caught_up(self.core_id, lambda: self.watching)
            await server.stop(HANDOVER_GRACE_S)


class HealthRelay(health_pb2_grpc.HealthServicer):
    """The probe port's health service: it answers what the server's current health service
    says (the starting server's own, then the running server's)."""

    def __init__(self, current: health.aio.HealthServicer) -> None:
        self.current = current

    async def Check(self, request: health_pb2.HealthCheckRequest,
                    context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:
        return await self.current.Check(request, context)

    async def Watch(self, request: health_pb2.HealthCheckRequest,
                    context: grpc.aio.ServicerContext) -> None:
        await self.current.Watch(request, context)


class ProbePort:
    """``--health-port``: the health service alone, in plaintext (Kubernetes' ``grpc`` probes
    speak no TLS), from before the store opens (liveness SERVING, readiness NOT_SERVING) to
    the end; ``follow`` hands it the running server's health."""

    def __init__(self, server: grpc.aio.Server, relay: HealthRelay) -> None:
        self.server: grpc.aio.Server | None = server
        self.relay = relay

    @classmethod
    async def open(cls, settings: Settings) -> ProbePort | None:
        """The probe port (None when ``--health-port`` is 0); ``CannotListen`` when taken."""
        from tapis_service.process.server import CannotListen, can_bind

        if not settings.health_port:
            return None
        address = listen_address(settings.host, settings.health_port)
        if not can_bind(settings.host, settings.health_port):
            raise CannotListen(f"cannot serve health on {address} (is another server there?)")
        relay = HealthRelay(await new_health(ready=False))
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        health_pb2_grpc.add_HealthServicer_to_server(relay, server)
        try:
            server.add_insecure_port(address)
        except RuntimeError as error:
            raise CannotListen(f"cannot serve health on {address}") from error
        await server.start()
        return cls(server, relay)

    def follow(self, servicer: health.aio.HealthServicer) -> None:
        self.relay.current = servicer

    async def close(self) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            await server.stop(None)


async def open_store(settings: Settings) -> Store:
    """The settings' store; an unreachable database is waited for (``--db-wait``)."""
    from tapis_service.stores.postgres_store import DatabaseUnreachable

    loop = asyncio.get_running_loop()
    give_up = loop.time() + settings.db_wait_s if settings.db_wait_s > 0 else None
    delay = FIRST_RETRY_S
    attempts = 0
    limiter = RepeatLimiter(LOG_EVERY_S, loop.time)
    while True:
        attempts += 1
        try:
            return await _open(settings)
        except DatabaseUnreachable as error:
            if give_up is not None and loop.time() + delay > give_up:
                raise DatabaseUnreachable(f"{error} (waited {settings.db_wait_s:g} s, "
                                          f"--db-wait)") from None
            limiter.log("database", log.warning, "waiting_for_database", attempt=attempts,
                        error=str(error), retry_in_s=delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, MAX_RETRY_S)


async def _open(settings: Settings) -> Store:
    if settings.advertise:
        from tapis_service.cluster.node import open_store as open_node_store

        return await open_node_store(settings)
    from tapis_service.process.server import open_store as open_local_store

    return await open_local_store(settings)
