"""Moves the server makes itself: server bots, after a person's reaction time, and turn
timers, when a seat's deadline passes. Each is armed on the injected clock after every change
and plays through the table actor like any input (``TableActor.play``).

A bot's reaction time is drawn for each move, log-normal around a median (``--bot-delay-ms``,
1 s, or the table's ``bot_reaction_ms``) with the spread ``--bot-delay-spread`` (0.2), kept
within half to twice the median: people's reaction times are skewed that way (a log-normal
is the usual model of them), and a second is what a person takes to see a slap combination and
hit, so a person has a fair chance at a game of reflexes (docs/rulings.md). The draw is the
service's, never the engine's; its ``random.Random`` may be seeded (``Autoplay.rng``)."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable

from tapis_engine import table as tbl
from tapis_service.observe.clock import Clock
from tapis_service.settings import Settings
from tapis_service.tables.session import Session

Play = Callable[[Session, tbl.Input], None]
"""Plays a server move at a table (the table actor's ``play``)."""

FASTEST, SLOWEST = 0.5, 2.0
"""A reaction time is kept within these multiples of its median."""


def reaction_ms(median_ms: int, spread: float, rng: random.Random) -> int:
    """One reaction time: log-normal around ``median_ms`` (``spread``: the standard deviation
    of its logarithm), within ``FASTEST`` to ``SLOWEST`` times the median."""
    if median_ms <= 0 or spread <= 0:
        return max(median_ms, 0)
    factor = min(max(math.exp(rng.gauss(0.0, spread)), FASTEST), SLOWEST)
    return round(median_ms * factor)


class Autoplay:
    """Arms each table's bot moves and turn timers."""

    def __init__(self, settings: Settings, clock: Clock, play: Play,
                 rng: random.Random | None = None) -> None:
        self.bot_delay_ms = settings.bot_delay_ms
        self.spread = settings.bot_delay_spread
        self.clock = clock
        self.play = play
        self.rng = rng or random.Random()
        """Draws the bots' reaction times (seed it for a repeatable test)."""
        self.stopped = False
        """The host is closed (``GameHost.close``): a change that commits now arms nothing."""

    def rearm(self, session: Session, over: bool) -> None:
        """After a change: the timers and bot moves the table's state calls for, no others
        (``over``: its game is over, or it was abandoned)."""
        table = session.table
        if not table.started or over or self.stopped:
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
        for seat in tbl.pending_bot_seats(session.rules, session.table):
            self.arm_bot(session, seat)

    def arm_bot(self, session: Session, seat: int, at_least_ms: int = 0) -> None:
        """Arm ``seat``'s bot move after a reaction time drawn from now, ``at_least_ms`` at
        least (replacing a timer it had; none once the host is closed)."""
        if self.stopped:
            return
        median = session.ownership.bot_reaction_ms
        if median is None:
            median = self.bot_delay_ms
        at = self.clock.now_ms() + max(reaction_ms(median, self.spread, self.rng), at_least_ms)
        former = session.bot_timers.get(seat)
        if former is not None:
            former.cancel()
        session.bot_timers[seat] = self.clock.call_at(
            at, functools.partial(self.play, session, tbl.BotMove(seat)))
