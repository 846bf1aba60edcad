"""Headless Chromium for the browser tests: whether it can run here, and where screenshots go.

``make test-browser`` installs Debian's chromium and Playwright for Python and sets
TAPIS_BROWSER_TESTS=1: then a missing browser is an error, not a skip.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

from tests.support.server import Harness
from tests.support.websocket import Client

CHROMIUM = shutil.which("chromium")
REQUIRED = os.environ.get("TAPIS_BROWSER_TESTS") == "1"
MISSING = None if CHROMIUM and importlib.util.find_spec("playwright") else (
    "needs Debian's chromium and Playwright for Python (make test-browser installs both)")
"""Why the browser tests cannot run here (None: they can)."""
SCREENS = os.environ.get("TAPIS_WEB_SCREENS")
"""A folder to write screenshots of each game into (the README's: docs/screens/)."""


def screenshot_path(name: str) -> str | None:
    """Where to save the screenshot ``name`` (None: screenshots are not asked for)."""
    if not SCREENS:
        return None
    Path(SCREENS).mkdir(parents=True, exist_ok=True)
    return str(Path(SCREENS) / f"web-{name}.png")


def address(served: Harness | int | None) -> str:
    """The web client's address on ``served``'s WebSocket port (or on that port)."""
    port = served if isinstance(served, int) else served.running.ws_port  # type: ignore[union-attr]
    return f"http://127.0.0.1:{port}/"


async def socket_to(harness: Harness) -> Client:
    return await Client.open(f"ws://127.0.0.1:{harness.running.ws_port}/ws")


async def open_page(browser: Any, harness: Harness | int | None, path: str = "",
                    locale: str = "en-GB", size: tuple[int, int] = (1100, 820)) -> Any:
    """A new page at ``path`` of the web client, in ``locale``, on a screen of ``size``
    (width, height); its uncaught errors gathered in ``page.errors``."""
    context = await browser.new_context(locale=locale,
                                        viewport={"width": size[0], "height": size[1]})
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors
    await page.goto(address(harness) + path)
    return page
