"""Token buckets: a steady rate with a burst, per key, on an injected clock (milliseconds)."""

from __future__ import annotations


class TokenBuckets:
    """``allow(key, now_ms)`` is True while the key stays within ``rate`` per second."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate_per_ms = rate_per_s / 1000
        self.burst = float(burst)
        self._buckets: dict[object, tuple[float, int]] = {}

    def allow(self, key: object, now_ms: int) -> bool:
        tokens, last = self._buckets.get(key, (self.burst, now_ms))
        tokens = min(self.burst, tokens + (now_ms - last) * self.rate_per_ms)
        if tokens < 1:
            self._buckets[key] = (tokens, now_ms)
            return False
        self._buckets[key] = (tokens - 1, now_ms)
        return True

    def forget(self, key: object) -> None:
        self._buckets.pop(key, None)
