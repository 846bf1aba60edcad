"""The GameApi's two server streams, as async generators: a table's events (``StreamEvents``)
and a backend's results (``WatchResults``).

They live apart from ``game_api.py`` because mypyc compiles no async generator: this module
stays Python, ``game_api.py`` is compiled (``tools/compiled.py``). The GameApi opens each stream
(its checks and counted refusals: ``GameApi.open_stream``, ``GameApi.results_backend``),
called from here at the stream's first step, as when these generators were its methods.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from tapis.v1 import game_service_pb2 as pb
from tapis_service.codec import wire
from tapis_service.observe import metrics
from tapis_service.tables import compaction
from tapis_service.tables.fanout import LiveFeed, StreamWriter
from tapis_service.tables.streams import EndStream, revoked, stopping, too_slow

if TYPE_CHECKING:
    from tapis_service.door.caller import Caller
    from tapis_service.game_api import GameApi

BACKLOG_CHUNK = 64
"""Missed events sent per stream message when a stream catches up."""


async def events(api: GameApi, request: pb.StreamEventsRequest, caller: Caller,
                 end: EndStream, writer: StreamWriter | None = None) -> AsyncIterator[bytes]:
    """``GameApi.stream_events``: each message a serialized ``StreamEventsResponse``, the
    missed events, then each change as it is published; a stream cut for falling behind, or
    ended because the server stops, ends with a refusal saying where to resume."""
    session, seat, stream = await api.open_stream(request, caller, end)
    host = api.host
    clock = host.clock
    subscriber, compacted, backlog = host.subscribe(session, seat, request.after_sequence)
    subscriber.spectator_token = seat is None and caller.seat_token is not None
    subscriber.presence = request.with_presence
    host.presence.opened(session, seat)
    metrics.STREAMS.inc()
    try:
        last = request.after_sequence
        for message, sent in compaction.replay(compacted, seat, last, BACKLOG_CHUNK):
            last = sent
            stream.writing_since, stream.last = clock.now_ms(), last
            yield message
            stream.writing_since = None
        for start in range(0, len(backlog), BACKLOG_CHUNK):
            chunk = backlog[start:start + BACKLOG_CHUNK]
            last = chunk[-1].sequence
            stream.writing_since, stream.last = clock.now_ms(), last
            yield wire.events_wire(session, chunk, seat)
            stream.writing_since = None
        feed = LiveFeed(session, seat, stream, last, subscriber, writer)
        pending = subscriber.pending
        while True:
            while not pending:  # wait for the next change (None: the stream must end)
                await subscriber.arrival()
            queued = pending.popleft()
            if queued is None:
                break
            to_send = feed.outgoing(*queued)
            if to_send is not None:
                stream.writing_since = clock.now_ms()
                yield to_send
                stream.writing_since = None
        if subscriber.revoked:
            raise revoked(subscriber.spectator_token)
        if subscriber.overflowed:
            raise too_slow(feed.last)
        if host.stopping:
            raise stopping(feed.last)
    finally:
        subscriber.direct = None
        metrics.STREAMS.dec()
        api.streams.close_stream(stream)
        host.unsubscribe(session, subscriber)
        host.presence.closed(session, seat)


async def results(api: GameApi, request: pb.WatchResultsRequest,
                  caller: Caller) -> AsyncIterator[pb.WatchResultsResponse]:
    """``GameApi.watch_results``: the calling backend's results after ``after_cursor``, the
    missed ones, then each as it is filed."""
    backend = api.results_backend(caller)
    async for batch in api.host.clerk.feed.watch(backend.name, request.after_cursor):
        records = []
        for filed in batch:
            record = pb.ResultRecord.FromString(filed.payload)
            record.cursor = filed.cursor
            records.append(record)
        yield pb.WatchResultsResponse(records=records)
