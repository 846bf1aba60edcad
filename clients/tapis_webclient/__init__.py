"""The web client, built: the page, script and style that ``make web`` bundles from ``web/``
(TypeScript) into ``static/``, committed so that serving it needs no Node.js. The server's
WebSocket port serves these files at ``/`` (``tapis_service.ws.endpoint``)."""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
"""The built files, served by name (``/`` is ``index.html``)."""
