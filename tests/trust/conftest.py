"""The trust tests' fixtures."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import grpc
import pytest

from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.door.tls import channel_credentials
from tapis_service.observe.clock import ManualClock
from tapis_service.process.server import create_server
from tests.support.server import TEST_SETTINGS
from tests.trust.door import OWN_CONNECTION, Door, Secured, StartSecured


@pytest.fixture
async def start_secured() -> AsyncIterator[StartSecured]:
    """``await start_secured(door, tls=..., keys=..., **settings)``: a server on loopback and
    a channel to it (TLS trusting the door's CA when TLS is on)."""
    started: list[Secured] = []

    async def start(files: Door, tls: bool = True, keys: bool = True,
                    **overrides: object) -> Secured:
        settings = replace(TEST_SETTINGS, **files.settings(tls, keys, **overrides))
        running = await create_server(settings, clock=ManualClock())
        target = f"localhost:{running.port}"
        channel = (grpc.aio.secure_channel(target, channel_credentials(files.server.ca_bytes()),
                                           options=OWN_CONNECTION) if tls
                   else grpc.aio.insecure_channel(target, options=OWN_CONNECTION))
        secured = Secured(running, channel, pb_grpc.GameServiceStub(channel), target)
        started.append(secured)
        return secured

    yield start
    for secured in started:
        await secured.channel.close()
        await secured.running.stop(0)
