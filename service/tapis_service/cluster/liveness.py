"""Who in the cluster is alive, judged on this node's own monotonic clock: never by comparing
timestamps, the database's or another machine's.

Every renewal of a membership gives its row a new heartbeat (``members.beat``, drawn from a
sequence by a trigger, so a number never comes back); a member whose heartbeat this node has
seen unchanged for a TTL is dead. Its lease had run out by then: the lease runs 0.9 TTL from
the sending of the renewal that set that heartbeat, which was committed before this node first
read it. A takeover then checks, under a lock on the member's row, that the heartbeat is still
the one judged dead (``Directory.take_over``), and a trigger counts it on that row
(``members.taken``), which the member's next renewal reads: a count it has not seen means a
table was taken from it, and it rechecks what it holds (``Locator``). A step of any wall clock
changes none of this.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable


def lease_clock() -> float:
    """Seconds on a monotonic clock that counts a suspended machine's time too (Linux's
    ``CLOCK_BOOTTIME``; elsewhere ``time.monotonic``): never the wall clock."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    return time.monotonic() if boottime is None else time.clock_gettime(boottime)


class Liveness:
    """Each member's heartbeat as this node last read it, and since when (``clock``)."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = lease_clock) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._seen: dict[str, tuple[int, float]] = {}
        """node id -> (its heartbeat, when this node first read that heartbeat)."""
        self._moved: set[str] = set()
        """The members whose heartbeat this node has read move on at least once."""

    def observe(self, node_id: str, beat: int) -> bool:
        """Record ``node_id``'s heartbeat as read now; whether it is alive: its heartbeat moved
        on within a TTL (a member first read now counts as alive for a TTL)."""
        now = self.clock()
        seen = self._seen.get(node_id)
        if seen is None or seen[0] != beat:
            if seen is not None:
                self._moved.add(node_id)
            self._seen[node_id] = (beat, now)
            return True
        return now - seen[1] < self.ttl_s

    def keep_only(self, node_ids: Iterable[str]) -> None:
        """Forget the members no longer in the directory."""
        kept = set(node_ids)
        for node_id in [n for n in self._seen if n not in kept]:
            del self._seen[node_id]
        self._moved &= kept

    def confirmed(self, alive: Iterable[str]) -> set[str]:
        """Those of ``alive`` (as ``observe`` judged them) whose heartbeat this node has read
        move on: alive for certain, not merely first read (a member that died before this
        node started counts as alive for a TTL, for the takeover's safety, never here)."""
        return {node_id for node_id in alive if node_id in self._moved}

    def dead(self) -> dict[str, int]:
        """node id -> the heartbeat of every member seen unchanged for a TTL."""
        now = self.clock()
        return {node_id: beat for node_id, (beat, since) in self._seen.items()
                if now - since >= self.ttl_s}
