"""Publication: a table's durable events handed to every open stream, as each seat sees them.

Only events of committed inputs are published (no stream ever sees an event a crash could take
back), in sequence order, each change once. Each change's message is serialized once per
recipient view (once for everyone when the game hides nothing) and shared by every stream of
that view; then the finished games' events leave the live log (``compaction``).
"""

from __future__ import annotations

from tapis_service import compaction, wire
from tapis_service.session import LoggedEvent, Session


def publish(session: Session) -> None:
    """Hand the streams every event not yet published whose input is committed."""
    fresh = session.events_after(session.published_sequence)
    if not fresh:
        return
    durable = session.durable_sequence
    if fresh[-1].event.sequence > durable:  # the log is in sequence order: a durable prefix
        fresh = [e for e in fresh if e.sequence <= durable]
        if not fresh:
            return
    session.published_sequence = fresh[-1].event.sequence
    fan_out(session, tuple(fresh))
    compaction.compact_finished(session)


def fan_out(session: Session, batch: tuple[LoggedEvent, ...]) -> None:
    """Hand every stream of the table the change's events with their message as its seat
    sees them, built once per view."""
    public = not session.rules.hides_events
    messages: dict[int | None, bytes] = {}
    for subscriber in list(session.subscribers):
        view = None if public else subscriber.seat
        message = messages.get(view)
        if message is None:
            message = messages[view] = wire.events_wire(session, batch, view)
        subscriber.offer(batch, message)
