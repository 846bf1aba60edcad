"""Shared fixtures: an in-process server on a free port, reached over a real channel.

The helpers behind them live in ``tests/support/`` (tests import from there, never from here).
"""

from __future__ import annotations

import os

# before anything imports grpc: its fork handlers crash a forked child (SIGSEGV, ~20-45 % of
# forks while calls are in flight), and the tests fork with gRPC running (embedded PostgreSQL's
# pg_ctl, run as its own user, is forked, not spawned); tests/test_fork_safety.py holds it
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from collections.abc import AsyncIterator

import pytest

from tapis_service.observe.clock import Clock, ManualClock
from tests.support.postgres import database_url, postgres  # noqa: F401  (fixtures)
from tests.support.server import Harness, ServerFactory, start_harness

collect_ignore = [] if os.environ.get("TAPIS_BROWSER_TESTS") == "1" else ["browser"]
"""The browser tests run in their own stage (``make test-browser``, which sets
TAPIS_BROWSER_TESTS=1 and installs Chromium and Playwright), not in ``make test``."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the embedded PostgreSQL (the ``postgres`` fixture, directly or
    through another fixture) is ``slow``; tests that start or kill server processes say so
    themselves (``pytestmark``). ``make test-fast`` skips them all."""
    for item in items:
        if "postgres" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
async def make_server() -> AsyncIterator[ServerFactory]:
    """Start servers on demand (``await make_server(clock=..., **settings)``); stop them all."""
    started: list[Harness] = []

    async def start(clock: Clock | None = None, store=None, **overrides) -> Harness:  # type: ignore[no-untyped-def]
        harness = await start_harness(clock, store, **overrides)
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
