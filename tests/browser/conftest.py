"""The browser tests' fixtures: Debian's Chromium driven by Playwright, and a server with its
WebSocket port. ``make test-browser`` installs both and runs these tests with
TAPIS_BROWSER_TESTS=1, where a missing browser fails instead of skipping."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Harness, ServerFactory

CHROMIUM = shutil.which("chromium")
SCREENS = os.environ.get("TAPIS_WEB_SCREENS")
"""A folder to write screenshots of each game into (the README's, docs/screens/)."""

try:
    from playwright.async_api import async_playwright
except ImportError:  # installed by `make test-browser`
    async_playwright = None  # type: ignore[assignment]


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if async_playwright is None or CHROMIUM is None:
        why = "needs Debian's chromium and Playwright for Python (make test-browser installs both)"
        if os.environ.get("TAPIS_BROWSER_TESTS") == "1":
            pytest.fail(why)
        pytest.skip(why)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM,
                                                    args=["--no-sandbox"])
        yield launched
        await launched.close()


@pytest.fixture
async def served(make_server: ServerFactory) -> Harness:
    return await make_server(ws_port=0)


def screenshot_path(name: str) -> str | None:
    """Where to save the screenshot ``name`` (None: screenshots are not asked for)."""
    if not SCREENS:
        return None
    Path(SCREENS).mkdir(parents=True, exist_ok=True)
    return str(Path(SCREENS) / f"web-{name}.png")
