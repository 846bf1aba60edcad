"""What both durable stores write a row as: canonical JSON text, and the checksum a snapshot
is stored with (so that a damaged snapshot is recognised when it is read back)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson


def canonical_json(data: dict[str, Any]) -> str:
    """``data`` as compact JSON with sorted keys: the same data always gives the same text.

    The text is the standard library's ``json.dumps(data, separators=(",", ":"),
    sort_keys=True)``, written by orjson (an eighth of the instructions: a journal entry is
    written per action) whenever orjson writes that same text: when it accepts the data and
    its text is printable ASCII (``json.dumps`` escapes every other character, DEL included;
    orjson writes them as they are). Otherwise (text beyond ASCII, an integer beyond 64 bits,
    a key that is not text) the standard library writes it. ``tests/stores/
    test_canonical_json.py`` proves the two equal on JSON data (NaN and the infinities, which
    are not JSON, aside: no record holds a float)."""
    try:
        text = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError: what orjson refuses
        text = b"\xff"  # not ASCII: written by the standard library
    # DEL looked for as an integer: a bytes operand is first tried as one (a TypeError made
    # and dropped, a few thousand instructions a call)
    if text.isascii() and 0x7F not in text:  # below 0x20 orjson escapes as json does
        return text.decode("ascii")
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def checksum(text: str) -> str:
    """The SHA-256 of ``text`` (UTF-8), in hex."""
    return hashlib.sha256(text.encode()).hexdigest()
