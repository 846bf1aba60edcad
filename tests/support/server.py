"""An in-process server on a free port, reached over a real channel (the fixtures' parts)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import grpc

from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.observe.clock import Clock, ManualClock
from tapis_service.process.health import PROBE_EVERY_S
from tapis_service.process.server import RunningServer, create_server
from tapis_service.settings import Settings
from tapis_service.stores.sqlite_store import SqliteStore

TEST_SETTINGS = Settings(port=0, allow_stacked_decks=True, bot_delay_ms=0)


@dataclass
class Harness:
    """A running server, a channel to it, and its stub."""

    running: RunningServer
    channel: grpc.aio.Channel
    stub: pb_grpc.GameServiceStub
    clock: Clock

    @property
    def host(self):  # type: ignore[no-untyped-def]
        return self.running.host


ServerFactory = Callable[..., Awaitable[Harness]]


async def start_harness(clock: Clock | None = None, store=None,  # type: ignore[no-untyped-def]
                        probe_every_s: float = PROBE_EVERY_S, **overrides) -> Harness:
    """A server with ``TEST_SETTINGS`` and ``overrides``, and a channel to it
    (``probe_every_s``: how often readiness probes the store after its first probe)."""
    settings = replace(TEST_SETTINGS, **overrides)
    running = await create_server(settings, clock=clock, store=store,
                                  probe_every_s=probe_every_s)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    return Harness(running, channel, pb_grpc.GameServiceStub(channel),
                   clock or running.host.clock)


class Restartable:
    """One durable server at a time on the same data directory (stop, start again)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.running: RunningServer | None = None
        self.channel: grpc.aio.Channel | None = None

    async def start(self, clock: ManualClock, **settings: object) -> pb_grpc.GameServiceStub:
        config = replace(TEST_SETTINGS, store="sqlite", data_dir=self.data_dir,
                         **settings)  # type: ignore[arg-type]
        self.running = await create_server(config, clock=clock,
                                           store=SqliteStore(self.data_dir))
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.running.port}")
        return pb_grpc.GameServiceStub(self.channel)

    async def stop(self) -> None:
        if self.channel is not None:
            await self.channel.close()
        if self.running is not None:
            await self.running.stop(0)
        self.running = self.channel = None
