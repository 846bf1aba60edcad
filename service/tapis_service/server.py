"""Server bootstrap: the servicer, health, reflection, graceful shutdown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.clock import Clock, SystemClock
from tapis_service.host import GameHost
from tapis_service.servicer import GameServicer
from tapis_service.settings import Settings
from tapis_service.store import MemoryStore, Store

log = structlog.get_logger("tapis.server")
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["GameService"].full_name


@dataclass
class RunningServer:
    """A started server and what it holds."""

    server: grpc.aio.Server
    port: int
    host: GameHost
    health: health.aio.HealthServicer
    cluster: Any = None
    """The ClusterNode of a cluster node (``--advertise``), else None."""

    async def stop(self, grace_s: float | None = None) -> None:
        """Graceful shutdown: report NOT_SERVING, (a cluster node: hand its tables off),
        drain in-flight calls, then close the host."""
        await self.health.enter_graceful_shutdown()
        if self.cluster is not None:
            await self.cluster.leave()
        await self.server.stop(grace_s)
        await self.host.close()
        if self.cluster is not None:
            await self.cluster.close()
        aclose = getattr(self.host.store, "aclose", None)
        if aclose is not None:  # a store with connections to close (PostgreSQL)
            await aclose()


async def open_store(settings: Settings) -> Store:
    """The store named by the settings."""
    if settings.store == "postgres":
        from tapis_service.postgres_store import PostgresStore  # the shared store (issue 11)

        assert settings.database_url is not None
        return await PostgresStore.open(settings.database_url)
    if settings.store == "memory":
        return MemoryStore()
    from tapis_service.sqlite_store import SqliteStore  # durable store (issue 6)

    assert settings.data_dir is not None
    return SqliteStore(settings.data_dir)


async def create_server(settings: Settings, clock: Clock | None = None,
                        store: Store | None = None) -> RunningServer:
    """Build and start the server; returns it with the port it listens on."""
    if store is None and settings.advertise:
        from tapis_service.cluster.node import open_store as open_node_store

        store = await open_node_store(settings)
    host = GameHost(settings, clock or SystemClock(), store or await open_store(settings))
    shared_key = getattr(host.store, "join_key", None)
    if shared_key:  # a shared store keeps the join key (every node derives the same tokens)
        host.join_key = shared_key
    recover = getattr(host, "recover", None)
    if recover is not None:
        await recover()
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    servicer = GameServicer(host)
    cluster = None
    if settings.advertise:  # a cluster node routes every call (tapis_service/cluster/)
        from tapis_service.cluster.node import ClusterNode

        cluster = ClusterNode(settings, host, host.store)  # type: ignore[arg-type]
        await cluster.start()
        server.add_generic_rpc_handlers((cluster.handler(servicer),))
    else:
        pb_grpc.add_GameServiceServicer_to_server(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
         reflection.SERVICE_NAME), server)
    port = server.add_insecure_port(f"{settings.host}:{settings.port}")
    if port == 0:
        raise OSError(f"cannot listen on {settings.host}:{settings.port}")
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("serving", address=f"{settings.host}:{port}", store=settings.store,
             games=len(host.sessions))
    return RunningServer(server, port, host, health_servicer, cluster)
