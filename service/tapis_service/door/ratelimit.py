"""Token buckets: a steady rate with a burst, per key, on an injected clock (milliseconds)."""

from __future__ import annotations

MAX_KEYS = 100_000
"""Buckets kept before the full (idle) ones are forgotten."""


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
        if len(self._buckets) >= MAX_KEYS and key not in self._buckets:
            self.prune(now_ms)
        self._buckets[key] = (tokens - 1, now_ms)
        return True

    def forget(self, key: object) -> None:
        self._buckets.pop(key, None)

    def prune(self, now_ms: int) -> None:
        """Forget the buckets that have refilled (a fresh one would be the same)."""
        for key, (tokens, last) in list(self._buckets.items()):
            if tokens + (now_ms - last) * self.rate_per_ms >= self.burst:
                del self._buckets[key]

    def __len__(self) -> int:
        return len(self._buckets)


class PeerLimits:
    """Per client address: creates, and calls with a wrong seat token (a rate of 0: no
    limit)."""

    def __init__(self, create_rate_per_s: float, create_burst: int,
                 bad_token_rate_per_s: float, bad_token_burst: int) -> None:
        self.creates = (TokenBuckets(create_rate_per_s, create_burst)
                        if create_rate_per_s > 0 else None)
        self.bad_tokens = (TokenBuckets(bad_token_rate_per_s, bad_token_burst)
                           if bad_token_rate_per_s > 0 else None)

    def allow_create(self, peer: str, now_ms: int) -> bool:
        return self.creates is None or self.creates.allow(peer, now_ms)

    def allow_bad_token(self, peer: str, now_ms: int) -> bool:
        """Count one call with a wrong token; False once the address is over its rate."""
        return self.bad_tokens is None or self.bad_tokens.allow(peer, now_ms)
