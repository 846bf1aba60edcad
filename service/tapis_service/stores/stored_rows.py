"""A table's stored rows read back as a ``StoredGame``: the decoding both durable stores share
(SQLite's rows and PostgreSQL's are the same canonical JSON).

A table whose rows cannot be decoded comes back as ``({"damaged": why, ...}, None, [])``:
recovery quarantines that table alone, and every other serves. That is a record or a journal
input that is not valid JSON (nested deeper than the decoder follows included), not a JSON
object, or a journal input missing or there twice. A snapshot is only checked against its
checksum here; recovery decodes it. Messages never quote the stored text (it holds request ids
and cards).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tapis_service.stores.checksums import checksum
from tapis_service.stores.store import StoredGame

JSON = dict[str, Any]
UNDECODABLE = (ValueError, TypeError, RecursionError)
"""What ``json.loads`` raises for a stored row it cannot read (RecursionError: valid JSON nested
deeper than the decoder follows, no record Tapis writes)."""


def row_text(value: bytes | str) -> str:
    """A stored text column as text (SQLite may hand bytes: undecodable UTF-8 replaced)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def short(error: BaseException) -> str:
    """An error's text cut short: a database may quote a whole stored row in it."""
    text = str(error)
    return text if len(text) <= 80 else text[:80] + "…"


def _undecoded(error: Exception) -> str:
    """Why a stored row is not JSON the store can read: the decoder's words, or that it nests
    deeper than the decoder follows (valid JSON still, but no record Tapis writes)."""
    return "nested too deep" if isinstance(error, RecursionError) else short(error)


def listing(text: bytes | str | None) -> JSON | None:
    """A table's stored rest listing, or None: none stored, or one that cannot be read (the host
    loads that table instead of listing it)."""
    try:
        read = json.loads(text) if text is not None else None
    except UNDECODABLE:
        return None
    return read if isinstance(read, dict) else None


def decoded(record: bytes | str, snapshot_row: Sequence[Any] | None,
            journal: Sequence[tuple[int, bytes | str]]) -> StoredGame:
    """One table's rows decoded: its creation record, its snapshot row (index, format,
    checksum, data; None: none) and its journal's (index, entry) rows in index order. A table
    that cannot be decoded is marked damaged."""
    snap: JSON | None = None
    if snapshot_row is not None:
        index, fmt, digest, data = snapshot_row
        try:
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            valid = checksum(text) == row_text(digest)
        except UnicodeDecodeError:
            text, valid = "", False
        snap = {"index": index, "format": fmt, "checksum_ok": valid, "text": text}
    try:
        decoded_record = json.loads(record)
    except UNDECODABLE as error:
        return {"damaged": f"the creation record is not valid JSON ({_undecoded(error)})"}, None, []
    if not isinstance(decoded_record, dict):
        return {"damaged": "the creation record is not a JSON object"}, None, []

    def damaged(why: str) -> StoredGame:
        return {"damaged": why, "kind": decoded_record.get("kind"),
                "ownership": decoded_record.get("ownership"),
                "request_id": decoded_record.get("request_id")}, None, []

    entries = []
    for expected, (index, entry) in enumerate(journal, start=1):
        if index != expected:
            return damaged(f"journal input {index} is there twice" if index == expected - 1
                           else f"journal input {expected} is missing")
        try:
            decoded_entry = json.loads(entry)
        except UNDECODABLE as error:
            return damaged(f"journal input {index} is not valid JSON ({_undecoded(error)})")
        if not isinstance(decoded_entry, dict):
            return damaged(f"journal input {index} is not a JSON object")
        entries.append(decoded_entry)
    return decoded_record, snap, entries
