"""The garbage collector tuned for a server holding many long-lived tables.

Almost everything the server allocates is either freed at once by reference counting (a call's
messages) or lives as long as its table (sessions, streams). The collector only has to find
short-lived reference cycles, so: a larger young generation (fewer collections), and whatever
survives start-up, recovery and then each middle-generation collection is moved out of the
collector's sight (``gc.freeze()``, which costs no walk). So no collection ever walks the heap
of 20,000 tables: every collection is a young one over at most ``GEN0_THRESHOLD`` objects, and
the older generations stay empty. Measured at 20,000 tables: a young object costs the collector
about 1-3 µs (its referents are cold in a 1 GiB heap), so the young generation is kept small;
freezing only after middle collections left those at 20-80 ms.

The price: a reference cycle among objects already frozen is never collected (reference
counting still frees everything else). The server's long-lived objects do not form such
garbage (a dropped table's timers are cancelled and its streams closed), and what is in flight
when a freeze happens is a few calls' worth; ``rss_growth_ratio`` in ``make bench`` watches it.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from tapis_service.observe import metrics

GEN0_THRESHOLD = 2_000
"""Allocations (net) between young collections (CPython's default: 700): bigger means fewer
collections but longer ones (50,000 gave 20-80 ms young ones at 5,000 tables)."""
GEN1_THRESHOLD = 3
"""Young collections between middle ones (none happen: survivors are frozen)."""
GEN2_THRESHOLD = 1000
FREEZE_EVERY_S = 60.0


def tune(given: str = "") -> None:
    """Collect once, freeze what exists now (call after start-up and recovery), set the
    thresholds, and from then on freeze the survivors of every collection; every pause is
    timed into the metrics (``tapis_gc_pause_seconds``, and what they found:
    ``tapis_gc_collected_total``)."""
    gc.collect()
    gc.freeze()
    metrics.watch_gc_pauses()  # timed from here: the full collection above precedes serving
    gc.set_threshold(*thresholds(given))
    if _freeze_survivors not in gc.callbacks:
        gc.callbacks.append(_freeze_survivors)


def thresholds(given: str = "") -> tuple[int, int, int]:
    """The collector thresholds: ours, or ``given`` as ``gen0,gen1`` (``--gc-thresholds``,
    ``TAPIS_GC_THRESHOLDS``: measuring)."""
    if given:
        gen0, gen1 = (int(part) for part in given.split(","))
        return gen0, gen1, GEN2_THRESHOLD
    return GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD


def _freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    """After a collection, what survived it is long-lived: out of sight."""
    if phase == "stop":
        gc.freeze()


async def freeze_periodically(every_s: float = FREEZE_EVERY_S) -> None:
    """Freeze what has survived since the last time, every ``every_s`` (until cancelled)."""
    while True:
        await asyncio.sleep(every_s)
        gc.freeze()
