"""Shared fixtures: an in-process server on a free port, reached over a real channel."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.clock import Clock, ManualClock
from tapis_service.server import RunningServer, create_server
from tapis_service.settings import Settings
from tapis_service.sqlite_store import SqliteStore
from tests.postgres import database_url, postgres  # noqa: F401  (fixtures: PostgreSQL)

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


@pytest.fixture
async def make_server() -> AsyncIterator[ServerFactory]:
    """Start servers on demand (``await make_server(clock=..., **settings)``); stop them all."""
    started: list[Harness] = []

    async def start(clock: Clock | None = None, store=None, **overrides) -> Harness:  # type: ignore[no-untyped-def]
        settings = replace(TEST_SETTINGS, **overrides)
        running = await create_server(settings, clock=clock, store=store)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
        harness = Harness(running, channel, pb_grpc.GameServiceStub(channel),
                          clock or running.host.clock)
        started.append(harness)
        return harness

    yield start
    for harness in started:
        await harness.channel.close()
        await harness.running.stop(0)


@pytest.fixture
async def server(make_server: ServerFactory) -> Harness:
    """A server with a manual clock: timers and bots move only when the test advances it."""
    return await make_server(clock=ManualClock())


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


def auth(token: str) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying a seat token."""
    return (("authorization", f"Bearer {token}"),)


def person_seats(n: int) -> list[pb.SeatConfig]:
    return [pb.SeatConfig(type=pb.SEAT_TYPE_PERSON) for _ in range(n)]
