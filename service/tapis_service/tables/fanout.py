"""Publication: a table's durable events handed to every open stream, as each seat sees them.

Only events of committed inputs are published (no stream ever sees an event a crash could take
back), in sequence order, each change once. Each change's message is serialized once per
recipient view (once for everyone when the game hides nothing) and shared by every stream of
that view; then the finished games' events leave the live log (``compaction``).

A stream receives each change in one of two ways, the same bytes either way (``LiveFeed``): its
subscriber's queue, which the stream's task empties (``GameApi.stream_events``); or, when the
stream's transport can write at once (a ``StreamWriter``: the WebSocket's) and the stream is
idle (its task waiting for the next change, nothing queued), written by the transport at
commit, here, without the queue or a step of the stream's task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from tapis_service.codec import wire
from tapis_service.tables import compaction, realtime
from tapis_service.tables.session import LoggedEvent, Session, Subscriber
from tapis_service.tables.streams import OpenStream


def publish(session: Session) -> None:
    """Hand the streams every event not yet published whose input is committed."""
    events = session.events
    if not events:
        return
    start = session.published_sequence + 1 - events[0].event.sequence
    fresh = events[start:] if start > 0 else events  # ``events_after``, inlined (every action)
    if not fresh:
        return
    durable = session.durable_sequence
    if fresh[-1].event.sequence > durable:  # the log is in sequence order: a durable prefix
        fresh = [e for e in fresh if e.event.sequence <= durable]
        if not fresh:
            return
    session.published_sequence = fresh[-1].event.sequence
    fan_out(session, tuple(fresh))
    if events and events[0].event.game_number < session.table.game_number:
        compaction.compact_finished(session)  # the log holds a finished game's events


def fan_out(session: Session, batch: tuple[LoggedEvent, ...]) -> None:
    """Hand every stream of the table the change's events with their message as its seat
    sees them, built once per view (once for all when the game hides nothing)."""
    subscribers = session.subscribers
    if not subscribers:
        return
    if not session.hides_events:
        message = wire.events_wire(session, batch, None)
        for subscriber in tuple(subscribers):  # a copy: a failed write ends its stream
            subscriber.offer(batch, message)
        return
    messages: dict[int | None, bytes] = {}
    for subscriber in tuple(subscribers):
        view = subscriber.seat
        seen = messages.get(view)
        if seen is None:
            seen = messages[view] = wire.events_wire(session, batch, view)
        subscriber.offer(batch, seen)


class StreamWriter(Protocol):
    """How a transport writes one stream's messages (the WebSocket's: ``ws.connection``)."""

    def ready(self) -> bool:
        """A message written now goes out without waiting (the socket takes more)."""

    def write(self, message: bytes) -> None:
        """Send one serialized ``StreamEventsResponse`` of the stream (never raises: a
        transport that fails ends the stream itself, as its task would)."""


class LiveFeed:
    """What one stream sends of each change after its backlog, and where its position is
    kept (``last``): the one step both ways of delivery take, the queue's (the stream's task
    calls ``outgoing``) and the transport's at commit (``at_commit``, its subscriber's
    ``direct``)."""

    __slots__ = ("_ready", "_write", "last", "seat", "session", "stream")

    def __init__(self, session: Session, seat: int | None, stream: OpenStream, last: int,
                 subscriber: Subscriber, writer: StreamWriter | None = None) -> None:
        self.session = session
        self.seat = seat
        self.stream = stream
        self.last = last
        """The sequence of the last event sent (where a cut stream resumes)."""
        self._ready: Callable[[], bool] | None = None
        self._write: Callable[[bytes], None] | None = None
        """The writer's two methods, bound once (every change: a protocol's methods are
        looked up by name on each call)."""
        if writer is not None:
            self._ready, self._write = writer.ready, writer.write
            subscriber.direct = self.at_commit

    def outgoing(self, batch: tuple[LoggedEvent, ...], message: bytes) -> bytes | None:
        """The message the stream sends for one change (None: nothing, its events went out in
        the backlog already); an empty ``batch`` is a presence change, sent as it is."""
        if not batch:
            return message
        last = self.last
        if batch[0].event.sequence <= last:  # sent already in the backlog
            batch = tuple(e for e in batch if e.sequence > last)
            if not batch:
                return None
            message = wire.events_wire(self.session, batch, self.seat)
        self.last = self.stream.last = batch[-1].event.sequence
        probes = self.session.probes
        if probes:
            for logged in batch:
                realtime.observe_sent(probes, logged.sequence)
        return message

    def at_commit(self, batch: tuple[LoggedEvent, ...], message: bytes) -> bool:
        """Write one change at once if the transport can take it (True: done), else leave it
        to the queue (False: nothing done)."""
        ready, write = self._ready, self._write
        assert ready is not None and write is not None
        if not ready():
            return False
        sent = self.outgoing(batch, message)
        if sent is not None:
            write(sent)
        return True
