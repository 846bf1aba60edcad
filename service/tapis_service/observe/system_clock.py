"""``SystemClock``: the service's clock (``clock.py`` says what it is), in a module of its own so
that mypyc compiles it (``tools/compiled.py``): every action reads it (``now_ms``), from
compiled code. ``clock.py`` stays Python (a test subclasses its ``ManualClock``) and names it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


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

    _loop: Any = None
    """The running loop, looked up once per loop (``Any``: a test hands it a stand-in, which a
    compiled annotation would refuse)."""

    def call_at(self, at_ms: int, callback: Callable[[], None]) -> Any:
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
