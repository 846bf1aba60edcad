"""Moves the server makes itself: server bots, after a short human-looking delay, and turn
timers, when a seat's deadline passes. Each is armed on the injected clock after every change
and plays through the table actor like any input (``TableActor.play``)."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable

from tapis_engine import table as tbl
from tapis_service.clock import Clock
from tapis_service.session import Session
from tapis_service.settings import Settings

Play = Callable[[Session, tbl.Input], None]
"""Plays a server move at a table (the table actor's ``play``)."""


class Autoplay:
    """Arms each table's bot moves and turn timers."""

    def __init__(self, settings: Settings, clock: Clock, play: Play) -> None:
        self.bot_delay_ms = settings.bot_delay_ms
        self.clock = clock
        self.play = play
        self._jitter = random.Random()

    def rearm(self, session: Session, over: bool) -> None:
        """After a change: the timers and bot moves the table's state calls for, no others
        (``over``: its game is over, or it was abandoned)."""
        table = session.table
        if not table.started or over:
            session.cancel_timers()
            return
        if table.deadlines or session.deadline_timers:
            self._schedule_deadlines(session)
        if session.bot_timers or table.seats is not session.seats_without_bots:
            self._schedule_bots(session)

    def _schedule_deadlines(self, session: Session) -> None:
        """Exactly one armed timer per deadline of the table: a timer no longer wanted is
        cancelled, a deadline without one gets one (a fired timer has left the map: see
        ``_deadline_due``)."""
        wanted = set(session.table.deadlines)
        timers = session.deadline_timers
        for key in list(timers):
            if key not in wanted:
                timers.pop(key).cancel()
        for seat, at in wanted:
            if (seat, at) not in timers:
                self._arm_deadline(session, seat, at)

    def _arm_deadline(self, session: Session, seat: int, at: int) -> None:
        session.deadline_timers[(seat, at)] = self.clock.call_at(
            at, functools.partial(self._deadline_due, session, seat, at))

    def _deadline_due(self, session: Session, seat: int, at: int) -> None:
        """A turn timer fired: it is armed no more, whatever becomes of its ``Timeout`` (one
        refused because the table moved on meanwhile leaves no spent timer behind for the
        next ``rearm`` to mistake for an armed one); one that woke before its time (a clock
        may round) waits for the rest instead of playing a ``Timeout`` the engine refuses."""
        session.deadline_timers.pop((seat, at), None)
        if self.clock.now_ms() < at:
            self._arm_deadline(session, seat, at)
            return
        self.play(session, tbl.Timeout(seat))

    def _schedule_bots(self, session: Session) -> None:
        for handle in session.bot_timers.values():
            handle.cancel()
        session.bot_timers.clear()
        seats = session.table.seats
        if not any(slot.bot_controlled for slot in seats):
            session.seats_without_bots = seats  # nothing to schedule until the seats change
            return
        delay = self.bot_delay_ms
        for seat in tbl.pending_bot_seats(session.rules, session.table):
            jitter = int(delay * self._jitter.uniform(-0.2, 0.2)) if delay else 0
            at = self.clock.now_ms() + delay + jitter
            session.bot_timers[seat] = self.clock.call_at(
                at, functools.partial(self.play, session, tbl.BotMove(seat)))
