"""The browser tests' fixtures: Debian's Chromium driven by Playwright, and a server with its
WebSocket port. Without the browser they are skipped (``make test-browser`` installs it, and
there a missing browser stops the run)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.browser import CHROMIUM, MISSING, REQUIRED
from tests.support.server import Harness, ServerFactory

if MISSING and REQUIRED:
    raise pytest.UsageError(MISSING)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each browser test starts a browser process: slow."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if MISSING:
        pytest.skip(MISSING)
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM,
                                                    args=["--no-sandbox"])
        yield launched
        await launched.close()


@pytest.fixture
async def served(make_server: ServerFactory) -> Harness:
    return await make_server(ws_port=0)
