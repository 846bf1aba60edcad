"""Finished games' event logs kept as serialized bytes per recipient view, not live objects.

A long series would otherwise keep every ``LoggedEvent`` (and its engine event, tuples, cards)
forever: tens of objects per event for the collector to walk. Once every event of the games
before the current one is published, they are framed exactly as the streams send them (one
serialization per view, shared by the seats that see them alike), zlib-compressed, and dropped
from the live log. ``StreamEvents`` from an old sequence replays those bytes, then the live log:
the same events, byte for byte.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Iterator
from itertools import accumulate

from tapis_service.codec import wire
from tapis_service.tables.session import CompactedEvents, LoggedEvent, Session

LEVEL = 1
"""zlib's fastest level: a finished War game's 11 KB of frames in ~100 µs instead of ~300-440
at the default (6), for a blob 8% larger (3.1 KB against 2.9 KB). Compaction runs on the
event loop, in the commit of the input that starts the next game (docs/performance.md, "The
gRPC gap at the C level")."""


def compact_finished(session: Session) -> None:
    """Move the published events of the games before the current one out of the live log."""
    events = session.events
    current = session.table.game_number
    if not events or events[0].event.game_number >= current:
        return
    published = session.published_sequence
    count = 0
    for logged in events:
        if logged.event.game_number >= current or logged.sequence > published:
            break
        count += 1
    if count:
        session.compacted.append(_compact(session, events[:count]))
        upto = events[count - 1].sequence
        del events[:count]
        first_kept = wire.wire_key(upto + 1, wire.PUBLIC)
        session.wire = {key: frame for key, frame in session.wire.items() if key >= first_kept}


def _compact(session: Session, finished: list[LoggedEvent]) -> CompactedEvents:
    blobs: list[tuple[bytes, array[int]]] = []
    index_of: dict[bytes, int] = {}
    views: dict[int | None, int] = {}
    for recipient in (None, *range(len(session.table.seats))):
        if recipient is not None and not session.rules.hides_events:
            views[recipient] = views[None]  # nothing hidden: every seat sees what all see
            continue
        frames = [wire.framed_event(session, logged, recipient) for logged in finished]
        raw = b"".join(frames)
        if raw not in index_of:
            offsets = array("I", accumulate(map(len, frames), initial=0))  # in C, not per frame
            index_of[raw] = len(blobs)
            blobs.append((zlib.compress(raw, LEVEL), offsets))
        views[recipient] = index_of[raw]
    return CompactedEvents(finished[0].sequence, finished[-1].sequence, tuple(blobs), views)


def replay(compacted: list[CompactedEvents], seat: int | None, after: int,
           chunk: int) -> Iterator[tuple[bytes, int]]:
    """Stream messages (serialized ``StreamEventsResponse``, at most ``chunk`` events each) of
    the compacted events after ``after`` as ``seat`` sees them, with each one's last sequence."""
    for games in compacted:
        if games.last <= after:
            continue
        blob, offsets = games.blobs[games.views[seat]]
        raw = zlib.decompress(blob)
        start = max(0, after + 1 - games.first)
        count = games.last - games.first + 1
        for begin in range(start, count, chunk):
            end = min(begin + chunk, count)
            yield raw[offsets[begin]:offsets[end]], games.first + end - 1
