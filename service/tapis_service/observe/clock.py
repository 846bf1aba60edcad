"""Time for the service: milliseconds and timers, injectable for tests.

Every duration the service measures (idle expiry, abandonment, turn timers, rate limits,
stream stalls) is a difference of ``now_ms`` values or a timer at one. ``SystemClock`` reads the
wall clock once, at start, and from then on advances by the monotonic clock: a step of the wall
clock (NTP, a resumed virtual machine, an operator) changes no duration and fires no timer. Its
values are still close to wall time (they are journaled, and shown to people as timestamps).
After a restart the clock is anchored again, to the wall clock of then.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Protocol

from tapis_service.observe.system_clock import SystemClock as SystemClock  # compiled (mypyc)


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Milliseconds since the epoch, and callbacks at a given time."""

    def now_ms(self) -> int: ...

    def call_at(self, at_ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class _ManualTimer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when told to (tests): ``advance`` fires the due timers in order."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._timers: list[tuple[int, int, _ManualTimer, Callable[[], None]]] = []
        self._order = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_at(self, at_ms: int, callback: Callable[[], None]) -> TimerHandle:
        handle = _ManualTimer()
        heapq.heappush(self._timers, (at_ms, next(self._order), handle, callback))
        return handle

    def pending(self) -> int:
        """Timers not yet fired nor cancelled."""
        return sum(1 for _, _, h, _ in self._timers if not h.cancelled)

    def armed(self) -> list[tuple[int, Callable[[], None]]]:
        """(time, callback) of each timer not yet fired nor cancelled (tests' invariants)."""
        return [(at, callback) for at, _, handle, callback in self._timers
                if not handle.cancelled]

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms`` and run every timer due by then, earliest first."""
        target = self._now + ms
        while self._timers and self._timers[0][0] <= target:
            at, _, handle, callback = heapq.heappop(self._timers)
            self._now = max(self._now, at)
            if not handle.cancelled:
                callback()
        self._now = target
