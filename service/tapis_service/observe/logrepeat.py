"""Repeats of the same warning, rate-limited: the first line at once, then at most one line
per ``every_s`` for the same key, saying how many were left out (a database outage would
otherwise log every failed probe and write)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

EVERY_S = 10.0


class RepeatLimiter:
    """``log(key, logger_method, event, **fields)`` writes at most one line per key per
    ``every_s`` (monotonic time), with ``repeated`` = the lines left out since the last. Safe
    from any thread (the results store's writer thread logs through it too)."""

    def __init__(self, every_s: float = EVERY_S,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self.now = now
        self._last: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def log(self, key: str, write: Callable[..., Any], event: str, **fields: Any) -> bool:
        """Write the line unless the key wrote one less than ``every_s`` ago; True if
        written."""
        with self._lock:
            now = self.now()
            last = self._last.get(key)
            if last is not None and now - last[0] < self.every_s:
                self._last[key] = (last[0], last[1] + 1)
                return False
            if last is not None and last[1]:
                fields["repeated"] = last[1]
            self._last[key] = (now, 0)
        write(event, **fields)
        return True


WARNINGS = RepeatLimiter()
"""The process's limiter for warnings that repeat while something stays broken."""


def limited(write: Callable[..., Any], event: str, **fields: Any) -> bool:
    """``event`` through ``WARNINGS``, keyed by the event itself (one line per kind per
    period); True if written."""
    return WARNINGS.log(event, write, event, **fields)
