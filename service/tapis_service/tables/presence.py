"""Presence: whether each person seat's holder is connected, that is, has an event stream
(``StreamEvents``, over gRPC or WebSocket) open on the table now.

- Every view says it per seat (``Seat.connected``, from ``SeatsPresence.streams``).
- The table's streams that ask (``StreamEventsRequest.with_presence``) are told, in responses of
  their own (``StreamEventsResponse.presence``, no events): a seat *went away* when its last
  stream ended and none opened within ``--presence-debounce`` (a reconnect is not noise), and
  *came back* when a stream of a seat announced gone opens. These are not events of the table's
  log: no sequence, no journal, nothing replayed on resume (the view says the state now).
- A backend's table files a ``seat_idle`` record in the backend's results feed when a person
  seat it awaits (not played by a bot) has had no stream for ``--seat-idle-after`` (0: never),
  once per absence, so the backend may replace the seat. The absence counts from the seat's
  last stream's end, or, for a seat never streamed here, from when this server first looked at
  the table.

A service concern only: the engine knows nothing of it. Every timer is at the injected clock's
time (``ManualClock`` in the tests); a timer that fires for a table no longer served here does
nothing.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import structlog
from google.protobuf.timestamp_pb2 import Timestamp

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import TimerHandle
from tapis_service.settings import whole_ms
from tapis_service.tables.session import SeatsPresence, Session

if TYPE_CHECKING:
    from tapis_service.tables.host import GameHost

log = structlog.get_logger("tapis.presence")


def _cancel(timers: dict[int, TimerHandle], seat: int) -> None:
    handle = timers.pop(seat, None)
    if handle is not None:
        handle.cancel()


class Presence:
    """The presence of every table a host serves."""

    def __init__(self, host: GameHost) -> None:
        self.host = host
        self.clock = host.clock
        self.debounce_ms = int(host.settings.presence_debounce_ms)
        self.idle_ms = whole_ms(host.settings.seat_idle_after_s)

    def _state(self, session: Session) -> SeatsPresence:
        state = session.presence
        if state is None:
            state = session.presence = SeatsPresence(loaded_ms=self.clock.now_ms())
        return state

    def _served(self, game_id: str, state: SeatsPresence) -> Session | None:
        """The table served here now whose presence is ``state`` (a rebuilt session keeps
        it: healing.py), or None."""
        session = self.host.tables.session(game_id)
        return session if session is not None and session.presence is state else None

    def _person(self, session: Session, seat: int | None) -> bool:
        seats = session.table.seats
        return seat is not None and seat < len(seats) and seats[seat].bot is None

    def opened(self, session: Session, seat: int | None) -> None:
        """A stream of ``seat`` (None: a spectator's) opened."""
        if not self._person(session, seat):
            return
        assert seat is not None
        state = self._state(session)
        count = state.streams.get(seat, 0) + 1
        state.streams[seat] = count
        if count > 1:
            return
        _cancel(state.debounce, seat)
        _cancel(state.idle, seat)
        state.absent_since.pop(seat, None)
        state.reported.discard(seat)
        if seat in state.announced_gone:
            state.announced_gone.discard(seat)
            self._tell(session, seat, True, self.clock.now_ms())

    def closed(self, session: Session, seat: int | None) -> None:
        """A stream of ``seat`` ended: its last one starts the debounce (and the idle count)."""
        state = session.presence
        if state is None or seat is None or seat not in state.streams:
            return
        left = state.streams[seat] - 1
        if left > 0:
            state.streams[seat] = left
            return
        del state.streams[seat]
        now = self.clock.now_ms()
        state.absent_since[seat] = now
        if seat not in state.announced_gone:
            _cancel(state.debounce, seat)
            state.debounce[seat] = self.clock.call_at(
                now + self.debounce_ms,
                functools.partial(self._gone, session.game_id, state, seat, now))
        self.changed(session)

    def _gone(self, game_id: str, state: SeatsPresence, seat: int, since_ms: int) -> None:
        state.debounce.pop(seat, None)
        session = self._served(game_id, state)
        if seat in state.streams or session is None:
            return
        state.announced_gone.add(seat)
        self._tell(session, seat, False, since_ms)

    def _tell(self, session: Session, seat: int, connected: bool, at_ms: int) -> None:
        """Every stream of the table that asked for presence hears of it."""
        stamp = Timestamp()
        stamp.FromMilliseconds(at_ms)
        wire = pb.StreamEventsResponse(presence=[pb.PresenceChanged(
            seat=seat, connected=connected, time=stamp)]).SerializeToString()
        for subscriber in session.subscribers:
            if subscriber.presence:
                subscriber.offer((), wire)
        log.info("seat_presence", game=session.game_id, seat=seat, connected=connected)

    def changed(self, session: Session) -> None:
        """After a committed change of a table (and a seat's last stream's end): arm the idle
        timer of each awaited person seat without a stream (a backend's tables only)."""
        if not self.idle_ms or session.ownership.backend is None:
            return
        awaited = session.awaiting()
        if not awaited:
            return
        state = self._state(session)
        seats = session.table.seats
        for seat in awaited:
            slot = seats[seat]
            if seat in state.idle or seat in state.reported or seat in state.streams \
                    or slot.bot is not None or slot.bot_controlled:
                continue
            since = state.absent_since.get(seat, state.loaded_ms)
            state.idle[seat] = self.clock.call_at(
                since + self.idle_ms, functools.partial(self._idle, session.game_id, state, seat))

    def _idle(self, game_id: str, state: SeatsPresence, seat: int) -> None:
        state.idle.pop(seat, None)
        session = self._served(game_id, state)
        if session is None or seat in state.streams or seat in state.reported:
            return
        if seat not in session.awaiting() or session.table.seats[seat].bot_controlled:
            return  # not awaited now: the next change looks again
        since = state.absent_since.get(seat, state.loaded_ms)
        state.reported.add(seat)
        log.info("seat_idle", game=session.game_id, seat=seat,
                 absent_s=(self.clock.now_ms() - since) // 1000)
        self.host.clerk.seat_idle(session, seat, since, self.clock.now_ms())
