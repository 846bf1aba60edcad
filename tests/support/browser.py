"""Headless Chromium for the browser tests: whether it can run here, and where screenshots go.

``make test-browser`` installs Debian's chromium and Playwright for Python and sets
TAPIS_BROWSER_TESTS=1: then a missing browser is an error, not a skip.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

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
