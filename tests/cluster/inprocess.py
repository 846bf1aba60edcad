"""Cluster nodes in the test's own process (``create_server``) over a fresh database of the
run's embedded PostgreSQL: what a test reaches into (a node's host, locator, directory)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

import grpc

from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.process.server import RunningServer, create_server
from tests.support.postgres import Postgres
from tests.support.process import free_port
from tests.support.server import TEST_SETTINGS


@dataclass
class Running:
    """A node and a stub on a channel to it."""

    node: RunningServer
    stub: pb_grpc.GameServiceStub

    @property
    def node_id(self) -> str:
        """Its id in the directory."""
        return str(self.node.cluster.node_id)


@asynccontextmanager
async def two_nodes(postgres: Postgres, store_retry_ms: int
                    ) -> AsyncIterator[tuple[str, Running, Running]]:
    """(database url, node A, node B), each with a channel."""
    database = await postgres.create_database()
    url = postgres.url(database)
    nodes: list[RunningServer] = []
    channels: list[grpc.aio.Channel] = []
    try:
        for _ in range(2):
            port = free_port()
            nodes.append(await create_server(replace(
                TEST_SETTINGS, port=port, store="postgres", database_url=url,
                advertise=f"127.0.0.1:{port}", node_ttl_s=3.0,
                store_retry_ms=store_retry_ms)))
            channels.append(grpc.aio.insecure_channel(f"127.0.0.1:{port}"))
        first, second = (Running(n, pb_grpc.GameServiceStub(c))
                         for n, c in zip(nodes, channels, strict=True))
        yield url, first, second
    finally:
        for channel in channels:
            await channel.close()
        for node in reversed(nodes):
            await node.stop(0)
        await postgres.drop_database(database)


async def judged_dead(observer: Running, node: Running) -> None:
    """``observer`` judges ``node`` dead, as a TTL after its heartbeat stopped: ``node`` stops
    renewing, and the observer's liveness clock (``cluster.liveness``) stands a TTL past its
    reading of ``node``'s last heartbeat from then on."""
    await node.node.cluster.membership.stopped()  # no renewal of its lands after the reading
    directory = observer.node.cluster.directory
    await directory.live_members()
    judged_at = directory.liveness.clock() + directory.ttl_s
    directory.liveness.clock = lambda: judged_at
