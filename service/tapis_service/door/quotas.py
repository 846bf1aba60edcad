"""Limits that do not multiply with addresses (issue 24.7), shared fairly (issue 36.5).

Everything done without a backend key shares server-wide buckets — creates, joins, listings —
whatever address it comes from, and a cap on the tables it holds; each backend has buckets and a
cap of its own, so a flood from strangers never takes a backend's share (nor one backend
another's). Within each keyless budget, one client address may take a share only
(``keyless_address_share`` of its rate and of its burst; ``allow_address``, checked first, so an
address refused its share spends nothing of the others'): one address flooding a budget leaves
the rest to the other addresses. Per-address limits (``ratelimit.PeerLimits``) still apply on
top of these.
"""

from __future__ import annotations

from dataclasses import dataclass

from tapis_service.door.ratelimit import TokenBuckets
from tapis_service.settings import Settings

KEYLESS = ""
"""The bucket of everything done without a key."""
CREATES = "create"
JOINS = "join"
LISTS = "list"
"""The keyless budgets an address takes a share of (``Quotas.allow_address``)."""


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """Rates per second (0: no limit) with their bursts, and caps on tables held (0: none)."""

    keyless_create_rate: float = 50.0
    keyless_create_burst: int = 200
    keyless_max_tables: int = 20_000
    join_rate: float = 500.0
    join_burst: int = 1000
    list_rate: float = 50.0
    list_burst: int = 100
    backend_create_rate: float = 200.0
    backend_create_burst: int = 1000
    backend_max_tables: int = 50_000
    keyless_address_share: float = 0.25
    """The part of each keyless budget (rate and burst) one address may take (0: no share,
    an address may take all of it)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> QuotaLimits:
        return cls(keyless_create_rate=settings.keyless_create_rate_per_s,
                   keyless_create_burst=settings.keyless_create_burst,
                   join_rate=settings.join_rate_per_s, join_burst=settings.join_burst,
                   list_rate=settings.list_rate_per_s, list_burst=settings.list_burst,
                   backend_create_rate=settings.backend_create_rate_per_s,
                   backend_create_burst=settings.backend_create_burst,
                   keyless_max_tables=settings.keyless_max_tables,
                   backend_max_tables=settings.backend_max_tables,
                   keyless_address_share=settings.keyless_address_share)


def _buckets(rate: float, burst: int) -> TokenBuckets | None:
    return TokenBuckets(rate, burst) if rate > 0 else None


def _share(share: float, rate: float, burst: int) -> TokenBuckets | None:
    """One address's buckets of a keyless budget: ``share`` of its rate and of its burst (at
    least one call); None when either is unlimited."""
    if share <= 0 or rate <= 0:
        return None
    return TokenBuckets(rate * share, max(1, int(burst * share)))


class Quotas:
    """The server-wide and per-backend limits; ``backend`` None means no key."""

    def __init__(self, limits: QuotaLimits) -> None:
        self.limits = limits
        self._keyless_creates = _buckets(limits.keyless_create_rate, limits.keyless_create_burst)
        self._backend_creates = _buckets(limits.backend_create_rate, limits.backend_create_burst)
        self._joins = _buckets(limits.join_rate, limits.join_burst)
        self._lists = _buckets(limits.list_rate, limits.list_burst)
        share = limits.keyless_address_share
        self._shares = {
            CREATES: _share(share, limits.keyless_create_rate, limits.keyless_create_burst),
            JOINS: _share(share, limits.join_rate, limits.join_burst),
            LISTS: _share(share, limits.list_rate, limits.list_burst)}

    def allow_address(self, budget: str, address: str, now_ms: int) -> bool:
        """One more keyless call (``budget``: CREATES, JOINS or LISTS) within the share of
        that budget one client ``address`` may take; checked before the budget itself."""
        buckets = self._shares[budget]
        return buckets is None or buckets.allow(address, now_ms)

    def allow_create(self, backend: str | None, now_ms: int) -> bool:
        """One more create within the caller's rate (the keyless share or its backend's)."""
        buckets = self._keyless_creates if backend is None else self._backend_creates
        return buckets is None or buckets.allow(backend or KEYLESS, now_ms)

    def may_hold_another(self, backend: str | None, held: int) -> bool:
        """Whether the caller, holding ``held`` tables, may hold one more."""
        cap = self.limits.keyless_max_tables if backend is None \
            else self.limits.backend_max_tables
        return cap <= 0 or held < cap

    def allow_join(self, backend: str | None, now_ms: int) -> bool:
        """JoinGame without a key shares one server-wide rate; a backend's calls are not
        counted here."""
        return backend is not None or self._joins is None or self._joins.allow(KEYLESS, now_ms)

    def allow_list(self, backend: str | None, now_ms: int) -> bool:
        """ListGames: the keyless share, or the backend's own."""
        return self._lists is None or self._lists.allow(backend or KEYLESS, now_ms)
