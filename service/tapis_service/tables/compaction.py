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

from tapis_service.codec import wire
from tapis_service.tables.session import CompactedEvents, LoggedEvent, Session

LEVEL = 1
"""zlib's fastest level: a finished War game's 11 KB of frames in ~100 µs instead of ~300-440
at the default (6), for a blob 8% larger (3.1 KB against 2.9 KB). Compaction runs on the
event loop, in the commit of the input that starts the next game (docs/performance.md, "The
gRPC gap at the C level")."""
WINDOW_BITS = 13
MEMORY_LEVEL = 5
"""An 8 KB window and a 4,096-entry hash table, not zlib's 32 KB and 32,768 (``wbits`` 15,
``memLevel`` 8): a game's frames are a few KB, so the blob is as small (544 bytes either way
for 60 War events, 2,370 against 2,399 for 300), while the compressor's state is ~40 KB
instead of ~256 KB to allocate and clear at each call: 20 % fewer instructions for a short
game, 5 % for a long one (docs/performance.md, "A compaction's zlib state"). ``zlib.decompress``
reads any window up to 32 KB."""


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
    if not session.rules.hides_events:  # one view: every recipient sees what all see
        blob = _blob([wire.framed_event(session, logged, None) for logged in finished])
        views: dict[int | None, int] = dict.fromkeys(
            (None, *range(len(session.table.seats))), 0)
        return CompactedEvents(finished[0].sequence, finished[-1].sequence, (blob,), views)
    blobs: list[tuple[bytes, array[int]]] = []
    index_of: dict[bytes, int] = {}
    views = {}
    for recipient in (None, *range(len(session.table.seats))):
        frames = [wire.framed_event(session, logged, recipient) for logged in finished]
        raw = b"".join(frames)
        if raw not in index_of:
            index_of[raw] = len(blobs)
            blobs.append(_blob(frames, raw))
        views[recipient] = index_of[raw]
    return CompactedEvents(finished[0].sequence, finished[-1].sequence, tuple(blobs), views)


def _blob(frames: list[bytes], raw: bytes | None = None) -> tuple[bytes, array[int]]:
    """The frames one after the other, compressed, and where each starts (one offset more
    than the frames): the offsets summed as native integers into one list, then one array."""
    ends = [0]
    end = 0
    for frame in frames:
        end += len(frame)
        ends.append(end)
    joined = b"".join(frames) if raw is None else raw
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, WINDOW_BITS, MEMORY_LEVEL)
    return compressor.compress(joined) + compressor.flush(), array("I", ends)


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
