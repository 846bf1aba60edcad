"""Server bootstrap: the servicer, health, reflection, limits, graceful shutdown."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from typing import Any

import grpc
import structlog
from google.protobuf import descriptor, descriptor_pool
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from tapis.v1 import errors_pb2
from tapis_service.door.capacity import Capacity
from tapis_service.door.connections import ConnectionLimits, RefusalBudget
from tapis_service.door.door import Door
from tapis_service.door.limits import MAX_METADATA_BYTES, MAX_RECEIVE_MESSAGE_BYTES
from tapis_service.door.proxies import TrustedProxies
from tapis_service.door.security import Security
from tapis_service.game_api import GameApi
from tapis_service.grpc import corecalls, stopcalls
from tapis_service.grpc.callguard import CallGuard
from tapis_service.grpc.servicer import GameServicer, add_to_server
from tapis_service.observe import metrics, tracing
from tapis_service.observe.clock import Clock, SystemClock
from tapis_service.observe.errors import CannotListen
from tapis_service.process.health import PROBE_EVERY_S, SERVICE_NAME, Readiness, new_health
from tapis_service.process.startup import WaitingRoom, listen_address, revision, version
from tapis_service.settings import Settings, whole_ms
from tapis_service.stores import joinkey
from tapis_service.stores.results import MemoryResults, ResultsFeed, ResultsStore
from tapis_service.stores.results_postgres import PostgresResults
from tapis_service.stores.results_sqlite import SqliteResults
from tapis_service.stores.store import MemoryStore, Store
from tapis_service.tables.host import GameHost
from tapis_service.tables.housekeeping import Housekeeping
from tapis_service.tables.lifecycle import TableState
from tapis_service.tables.results_clerk import ResultsClerk
from tapis_service.ws.endpoint import EndpointLimits, WebClient, WebSocketEndpoint

log = structlog.get_logger("tapis.server")
# Files reflection serves beyond those of the services: what a refusal carries (google.rpc.Status
# in the `grpc-status-details-bin` trailer, google.rpc.ErrorInfo in its details) and the closed
# list of reasons (tapis.v1.ErrorReason). Every message a response holds is in the services'
# files or their imports.
CUT_MARGIN_S = 1.0
"""How long the answers of the calls a stop cuts have to go out before grpc cancels them."""
CLOSE_MARGIN_S = 2.0
"""How long a stop waits, after the grace, for the store to commit what is queued and close
(a database that does not answer is not waited for longer: its connections are dropped)."""
EXTRA_FILES: tuple[descriptor.FileDescriptor, ...] = (
    status_pb2.DESCRIPTOR, error_details_pb2.DESCRIPTOR, errors_pb2.DESCRIPTOR)


def reflection_pool() -> descriptor_pool.DescriptorPool:
    """The pool reflection serves: the default one, which holds every generated file imported,
    checked to hold the extra files above."""
    pool = descriptor_pool.Default()
    for file in EXTRA_FILES:
        pool.FindFileByName(file.name)  # raises KeyError if one were missing
    return pool


def can_bind(host: str, port: int) -> bool:
    """Whether the address is free (checked before grpc, whose core logs its own failure)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return True  # let grpc give its own answer
    for family, kind, proto, _, address in infos[:1]:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError:
                return False
    return True


@dataclass
class RunningServer:
    """A started server and what it holds."""

    server: grpc.aio.Server
    port: int
    host: GameHost
    health: health.aio.HealthServicer
    api: GameApi | None = None
    guard: CallGuard | None = None
    cluster: Any = None
    """The ClusterNode of a cluster node (``--advertise``), else None."""
    readiness: Readiness | None = None
    ws: WebSocketEndpoint | None = None
    """The player WebSocket and the web client (``--ws-port``), else None."""
    ws_port: int | None = None
    security: Security | None = None
    """Its TLS and API keys (``reload()`` on SIGHUP)."""
    connection_limits: ConnectionLimits | None = None
    """Its connection limits on both ports (tapis_service/door/connections.py)."""
    probes: Any = None
    """The plaintext health port (``--health-port``: ``startup.ProbePort``), else None."""
    core_id: int | None = None
    """The server's channelz id: how many calls grpc's core holds (``corecalls``)."""

    async def stop(self, grace_s: float | None = None) -> None:
        """Graceful shutdown: report NOT_SERVING, (a cluster node: hand its tables off),
        end the open event streams (SERVER_STOPPING), drain in-flight calls, then close the
        host. Whatever the database does, it returns within ``grace_s`` (a cluster node's at
        least ``HAND_OFF_MIN_S``) + ``CUT_MARGIN_S`` + ``CLOSE_MARGIN_S`` (None: no bound):
        the hand-off and the drains share the grace, and what is left of the store is closed
        at once past ``CLOSE_MARGIN_S``."""
        loop = asyncio.get_running_loop()
        ends = None if grace_s is None else loop.time() + grace_s

        def left() -> float | None:
            return None if ends is None else max(0.0, ends - loop.time())

        await self.health.enter_graceful_shutdown()
        if self.readiness is not None:
            self.readiness.stop()
        if self.api is not None:
            self.api.housekeeping.stop()
        if self.cluster is not None:
            await self.cluster.leave(left())
        if self.connection_limits is not None:
            await self.connection_limits.stop()
        self.host.end_streams()  # unary calls in flight drain within the grace; streams end now
        self._close_door()
        # grpc takes no new call at once; those in flight when the grace ends are cut by the
        # guard with a precise status (stopcalls.cut) before grpc cancels what is left
        # (UNAVAILABLE with no reason) once their answers had CUT_MARGIN_S to go out
        grace = left()
        stopping = [self._shut_down(None if grace is None else grace + CUT_MARGIN_S)]
        if self.ws is not None:
            stopping.append(self.ws.stop(grace))
        stopped = asyncio.gather(*stopping)
        if self.guard is not None:
            cut = await stopcalls.drain(self.guard, grace)
            if cut:
                log.warning("calls_cut_at_stop", calls=cut)
        await stopped
        if self.api is not None:
            await self.api.housekeeping.drain()
        closed, _ = await stopcalls.within(self._close_store(), None if grace_s is None
                                           else CLOSE_MARGIN_S, "close_store")
        if not closed:  # the database does not answer: its connections are dropped
            terminate = getattr(self.host.store, "terminate", None)
            if terminate is not None:
                terminate()
        if self.cluster is not None:
            await self.cluster.close()
        if self.probes is not None:  # NOT_SERVING from the start of the stop, closed last
            await self.probes.close()

    def _close_door(self) -> None:
        """From now on a unary call taken over either port is refused ``SERVER_STOPPING``,
        nothing applied (``Door.closing``: the two ports share the door)."""
        for transport in (self.guard, self.ws):
            if transport is not None:
                transport.door.closing = True

    async def _shut_down(self, grace_s: float | None) -> None:
        """grpc's shutdown, once the calls its core holds are in Python's hands: the shutdown
        kills those still queued there with no reason (``CANCELLED``), while the guard refuses
        each call it takes from now ``SERVER_STOPPING`` (``Door.closing``, ``corecalls``). The
        shutdown begins in the same step as the reading that says nothing is queued."""
        guard = self.guard
        if guard is not None and not await corecalls.caught_up(self.core_id, guard.serving):
            log.warning("core_calls_not_taken", core=corecalls.in_core(self.core_id or 0),
                        serving=guard.serving())
        await self.server.stop(grace_s)

    async def _close_store(self) -> None:
        """The host, the results clerk and the store closed: what was queued committed."""
        await self.host.close()
        await self.host.clerk.settle()
        await self.host.clerk.feed.store.close()
        aclose = getattr(self.host.store, "aclose", None)
        if aclose is not None:  # a store with connections to close (PostgreSQL)
            await aclose()


def server_options(settings: Settings) -> list[tuple[str, int]]:
    """The grpc core's options: message size, keepalive (docs/limits.md)."""
    return [
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES),
        # ping an idle connection, and drop it when the ping is not answered in time
        ("grpc.keepalive_time_ms", settings.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", settings.keepalive_timeout_ms),
        # what the core waits for any ping's ack (its default, a minute, kept a silent peer's
        # connection and streams open long after keepalive_timeout_ms)
        ("grpc.http2.ping_timeout_ms", settings.keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", 1),
        # idle and old connections (0: grpc's default, never); a file descriptor each
        *([("grpc.max_connection_idle_ms", settings.max_connection_idle_ms)]
          if settings.max_connection_idle_ms else []),
        *([("grpc.max_connection_age_ms", settings.max_connection_age_ms),
           ("grpc.max_connection_age_grace_ms", settings.max_connection_age_grace_ms)]
          if settings.max_connection_age_ms else []),
        # let clients ping (every 10 s at most, with or without calls) without a GOAWAY
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.http2.max_ping_strikes", 2),
        ("grpc.http2.max_pings_without_data", 0),
        # request headers (metadata): a seat token is ~40 bytes; beyond the soft size some
        # calls are refused, beyond the hard size all of them (RESOURCE_EXHAUSTED, by grpc)
        ("grpc.max_metadata_size", MAX_METADATA_BYTES),
        ("grpc.absolute_max_metadata_size", 2 * MAX_METADATA_BYTES),
        # calls the core holds before the server takes them: beyond the soft limit it cancels
        # arrivals at random (CANCELLED, more of them up to the hard limit, then all of them)
        ("grpc.server.max_pending_requests", settings.max_pending_calls),
        ("grpc.server.max_pending_requests_hard_limit", 2 * settings.max_pending_calls),
        # connections in all, every address together: beyond, the core closes a new one as
        # soon as it is accepted (its file descriptor is freed at once)
        ("grpc.max_allowed_incoming_connections", Capacity.of(settings).connections),
        # a new connection's TLS handshake and its HTTP/2 preface and settings: a silent one
        # is closed after this (grpc's default kept it 120 s)
        ("grpc.server_handshake_timeout_ms", settings.handshake_timeout_ms),
    ]


async def open_store(settings: Settings) -> Store:
    """The store named by the settings."""
    if settings.store == "postgres":
        from tapis_service.stores.postgres_store import PostgresStore  # the shared store (issue 11)

        assert settings.database_url is not None
        return await PostgresStore.open(settings.database_url)
    if settings.store == "memory":
        return MemoryStore()
    from tapis_service.stores.sqlite_store import SqliteStore  # durable store (issue 6)

    assert settings.data_dir is not None
    joinkey.prepare(settings.data_dir)
    store = SqliteStore(settings.data_dir)
    metrics.store_opened("sqlite")  # its failures at 0 from the start (PostgreSQL's writer too)
    return store


async def open_results(settings: Settings, store: Store) -> ResultsStore:
    """The backends' results ledger, beside the store (tapis_service/stores/results.py)."""
    pool = getattr(store, "pool", None)
    if pool is not None:  # PostgreSQL: shared by the cluster's nodes
        return await PostgresResults.open(pool)
    if settings.store == "sqlite" and settings.data_dir is not None:
        return SqliteResults(settings.data_dir)
    return MemoryResults()


async def create_server(settings: Settings, clock: Clock | None = None,
                        store: Store | None = None, room: WaitingRoom | None = None,
                        probe_every_s: float = PROBE_EVERY_S,
                        security: Security | None = None) -> RunningServer:
    """Build and start the server; returns it with the port it listens on. ``room``: the
    health-only server that held the port while the store opened (closed before listening).
    Refuses to start (``security.CannotSecure``, ``exposure.Exposed``) before anything else
    when its TLS or keys cannot be used, or when it would listen beyond loopback without
    both."""
    security = security or Security.from_settings(settings)
    cluster_tls = security.cluster_tls(settings) if settings.advertise else None
    if store is None and settings.advertise:
        from tapis_service.cluster.node import open_store as open_node_store

        store = await open_node_store(settings)
    host = GameHost(settings, clock or SystemClock(), store or await open_store(settings))
    shared_key = getattr(host.store, "join_key", None)
    if shared_key:  # a shared store keeps the join key (every node derives the same tokens)
        host.tokens.key = shared_key
    feed = ResultsFeed(await open_results(settings, host.store))
    host.clerk = ResultsClerk(feed, host.clock.now_ms)
    await host.clerk.start()
    if isinstance(feed.store, PostgresResults):  # records other nodes file wake this one's
        await feed.store.listen(feed.wake)
    await host.recover()
    proxies = TrustedProxies.parse(settings.trusted_proxies)
    capacity = Capacity.of(settings)
    connection_limits = ConnectionLimits(
        RefusalBudget(settings.refusal_rate_per_s, settings.refusal_burst,
                      whole_ms(settings.refusal_cooldown_s), host.clock.now_ms),
        proxies, grpc_per_address=capacity.connections_per_address,
        keys_valid=security.holds_key)
    door = Door(settings.max_in_flight, proxies, connection_limits)  # every transport's refusals
    guard = CallGuard(door)
    servers = corecalls.server_ids()
    server = grpc.aio.server(options=server_options(settings),
                             interceptors=tracing.interceptors(settings.otel))
    core_id = corecalls.created(servers)
    registry = guard.registering(server)  # every handler below is added guarded
    api = GameApi(host, housekeeping=Housekeeping(host), security=security)
    servicer = GameServicer(api)
    cluster = None
    if settings.advertise:  # a cluster node routes every call (tapis_service/cluster/)
        from tapis_service.cluster.node import ClusterNode

        cluster = ClusterNode(settings, host, api, host.store,  # type: ignore[arg-type]
                              tls=cluster_tls, door=door)
        await cluster.start()
        registry.add_generic_rpc_handlers(cluster.handlers())
    else:
        add_to_server(servicer, registry)
    health_servicer = await new_health(ready=False)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, registry)
    # what reflection.enable_server_reflection does for a grpc.aio.Server (it tells one apart
    # by its class, which the guarded registry does not have)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(reflection.aio.ReflectionServicer(
        (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
         reflection.SERVICE_NAME), pool=reflection_pool()), registry)
    address = listen_address(settings.host, settings.port)
    if room is not None:
        await room.close()
    if settings.port and not can_bind(settings.host, settings.port):
        raise CannotListen(f"cannot listen on {address} (is another server there?)")
    try:
        port = security.add_port(server, address)
    except RuntimeError as error:  # grpc: "Failed to bind to address ..."
        raise CannotListen(f"cannot listen on {address} (is another server there?)") from error
    if port == 0:
        raise CannotListen(f"cannot listen on {address} (is another server there?)")
    connection_limits.grpc_port = port
    ws, ws_port = None, None
    if settings.ws_port is not None:  # players over WebSocket, and the web client
        ws = WebSocketEndpoint(api, EndpointLimits.of(settings),
                               WebClient(api_keys=not security.open_mode), proxies=api.proxies,
                               door=door, routes=None if cluster is None else cluster.routes())
        try:
            # with TLS, the gRPC port's certificate serves wss and https: no token in clear
            tls = None if security.tls is None else security.tls.ssl_context()
            ws_port = await ws.start(settings.host, settings.ws_port, ssl_context=tls,
                                     connection_limits=connection_limits)
        except OSError as error:
            raise CannotListen(f"cannot listen on {settings.host}:{settings.ws_port} for "
                               f"WebSocket ({error.strerror or error})") from error
    await server.start()
    connection_limits.start()
    api.housekeeping.start()
    readiness = Readiness(health_servicer, host.store, probe_every_s)
    host.health_listeners.append(readiness.writes)
    readiness.start()
    metrics.set_build_info(version(), revision())
    metrics.TABLES.source = api.housekeeping.statuses
    log.info("serving", address=listen_address(settings.host, port), store=settings.store,
             games=host.tables.count(TableState.LIVE), version=version(), revision=revision(),
             tls=security.tls is not None,
             mutual_tls=security.tls is not None and security.tls.mutual,
             api_keys=not security.open_mode, max_connections=capacity.connections,
             max_connections_per_address=capacity.connections_per_address,
             max_spectator_streams=api.streams.max_spectators,
             max_seat_streams=api.streams.max_seated)
    if ws_port is not None:
        scheme = "http" if security.tls is None else "https"
        log.info("serving_web", address=f"{scheme}://{listen_address(settings.host, ws_port)}/",
                 max_connections=capacity.ws_connections,
                 max_connections_per_address=capacity.ws_connections_per_address)
    return RunningServer(server, port, host, health_servicer, api, guard, cluster,
                         readiness, ws, ws_port, security, connection_limits, core_id=core_id)
