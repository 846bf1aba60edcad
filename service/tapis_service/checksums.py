"""What both durable stores write a row as: canonical JSON text, and the checksum a snapshot
is stored with (so that a damaged snapshot is recognised when it is read back)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(data: dict[str, Any]) -> str:
    """``data`` as compact JSON with sorted keys: the same data always gives the same text."""
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def checksum(text: str) -> str:
    """The SHA-256 of ``text`` (UTF-8), in hex."""
    return hashlib.sha256(text.encode()).hexdigest()
