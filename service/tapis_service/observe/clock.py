"""Time for the service: milliseconds and timers, injectable for tests.

Every duration the service measures (idle expiry, abandonment, turn timers, rate limits,
stream stalls) is a difference of ``now_ms`` values or a timer at one. ``SystemClock`` reads the
wall clock once, at start, and from then on advances by the monotonic clock: a step of the wall
clock (NTP, a resumed virtual machine, an operator) changes no duration and fires no timer. Its
values are still close to wall time (they are journaled, and shown to people as timestamps).
After a restart the clock is anchored again, to the wall clock of then.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Milliseconds since the epoch, and callbacks at a given time."""

    def now_ms(self) -> int: ...

    def call_at(self, at_ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class SystemClock:
    """Wall time at start advanced by monotonic time, with timers on the running asyncio loop
    (whose clock is monotonic too).

    A timer at ``at_ms`` runs its callback only once ``now_ms()`` has reached ``at_ms``: the
    loop's clock is not this one (uvloop counts whole milliseconds of libuv's clock, floored at
    another phase than ``now_ms``), so a loop timer may wake up to a millisecond early; the
    timer then waits again for the rest (``_SystemTimer``). A callback run before its time
    would see a deadline not yet passed (a turn timer's ``Timeout`` refused by the engine)."""

    def __init__(self, wall_ns: Callable[[], int] = time.time_ns,
                 monotonic_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self._monotonic_ns = monotonic_ns
        self._anchor_ns = wall_ns() - monotonic_ns()

    def now_ms(self) -> int:
        return (self._anchor_ns + self._monotonic_ns()) // 1_000_000

    _loop: asyncio.AbstractEventLoop | None = None

    def call_at(self, at_ms: int, callback: Callable[[], None]) -> TimerHandle:
        left_ns = at_ms * 1_000_000 - (self._anchor_ns + self._monotonic_ns())
        if left_ns <= 0:  # due already: no need to look again when it runs
            return self._running_loop().call_soon(callback)
        return _SystemTimer(self, at_ms, callback, left_ns)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None or not loop.is_running():  # once per loop (a getpid call on 3.11)
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def _later(self, left_ns: int, callback: Callable[[], None]) -> asyncio.TimerHandle:
        """A loop timer ``left_ns`` from now, in whole milliseconds rounded up (uvloop's
        unit: a shorter delay rounded down would wake it before its time)."""
        return self._running_loop().call_later(-(-left_ns // 1_000_000) / 1000, callback)


class _SystemTimer:
    """A ``SystemClock`` timer: its loop timer, armed again for the rest when it woke before
    ``at_ms`` by the clock's own reading."""

    __slots__ = ("_at_ms", "_callback", "_clock", "_handle")

    def __init__(self, clock: SystemClock, at_ms: int, callback: Callable[[], None],
                 left_ns: int) -> None:
        self._clock = clock
        self._at_ms = at_ms
        self._callback = callback
        self._handle = clock._later(left_ns, self._run)

    def _run(self) -> None:
        clock = self._clock
        left_ns = self._at_ms * 1_000_000 - (clock._anchor_ns + clock._monotonic_ns())
        if left_ns > 0:  # woke early (the loop's clock rounds otherwise): wait for the rest
            self._handle = clock._later(left_ns, self._run)
            return
        self._callback()

    def cancel(self) -> None:
        self._handle.cancel()


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
