"""The garbage collector tuned for a server holding many long-lived tables.

Almost everything the server allocates is either freed at once by reference counting (a call's
messages) or lives as long as its table (sessions, streams). The collector only has to find
short-lived reference cycles, so: a larger young generation (fewer collections), and what has
survived start-up, recovery and then every ``FREEZE_EVERY_S`` moved out of the collector's
sight (``gc.freeze()``), so that no collection ever walks the whole heap of 20,000 tables.
The price: a cycle among objects already frozen is never collected (reference counting still
frees everything else); the server's long-lived objects do not form such garbage (a dropped
table's timers are cancelled, its streams closed).
"""

from __future__ import annotations

import asyncio
import gc

from tapis_service import metrics

GEN0_THRESHOLD = 50_000
"""Allocations (net) between young collections (CPython's default: 700)."""
GEN1_THRESHOLD = 20
GEN2_THRESHOLD = 100
FREEZE_EVERY_S = 60.0


def tune() -> None:
    """Raise the thresholds and freeze what exists now (call after start-up and recovery);
    from then on every pause is timed into the metrics (``tapis_gc_pause_seconds``)."""
    metrics.watch_gc_pauses()
    gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)
    freeze()


def freeze() -> None:
    """Collect the young generations, then move every surviving object to the permanent one."""
    gc.collect(1)
    gc.freeze()


async def freeze_periodically(every_s: float = FREEZE_EVERY_S) -> None:
    """Freeze what has survived since the last time, every ``every_s`` (until cancelled)."""
    while True:
        await asyncio.sleep(every_s)
        freeze()
