"""Server bootstrap: the servicer, health, reflection, graceful shutdown."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from tapis.v1 import game_service_pb2 as pb
from tapis_service.clock import Clock, SystemClock
from tapis_service.host import GameHost
from tapis_service.servicer import GameServicer, add_to_server
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

    async def stop(self, grace_s: float | None = None) -> None:
        """Graceful shutdown: report NOT_SERVING, drain in-flight calls, then close the host."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace_s)
        await self.host.close()


def open_store(settings: Settings) -> Store:
    """The store named by the settings."""
    if settings.store == "memory":
        return MemoryStore()
    from tapis_service.sqlite_store import SqliteStore  # durable store (issue 6)

    assert settings.data_dir is not None
    return SqliteStore(settings.data_dir)


async def create_server(settings: Settings, clock: Clock | None = None,
                        store: Store | None = None) -> RunningServer:
    """Build and start the server; returns it with the port it listens on."""
    host = GameHost(settings, clock or SystemClock(), store or open_store(settings))
    recover = getattr(host, "recover", None)
    if recover is not None:
        await recover()
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    add_to_server(GameServicer(host), server)
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
    return RunningServer(server, port, host, health_servicer)
