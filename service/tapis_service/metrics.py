"""Prometheus metrics (served on ``--metrics-port``): what an operator watches."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily


class CachedCounter(Counter):
    """A labelled counter whose children are looked up once per label values (``labels`` takes
    a lock and builds a key on every call otherwise: this is on every action's path)."""

    def labels(self, *values: Any, **keyed: Any) -> Any:
        if keyed:
            return super().labels(*values, **keyed)
        children: dict[tuple[Any, ...], Any] = self.__dict__.setdefault("_tapis_children", {})
        child = children.get(values)
        if child is None:
            child = children[values] = super().labels(*values)
        return child


class LoopCounter:
    """A labelled counter incremented only from the event loop's thread: a plain integer per
    label values (no lock, no child lookup: once per action), exported like a ``Counter``
    (``<name>_total``) by the registry's collection, which reads a copy (``dict.copy`` is
    atomic under the GIL, so the exporter's thread never sees the dict change under it)."""

    def __init__(self, name: str, documentation: str, labelnames: list[str],
                 registry: CollectorRegistry = REGISTRY) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.counts: dict[tuple[str, ...], int] = {}
        registry.register(self)

    def inc(self, *values: str) -> None:
        counts = self.counts
        counts[values] = counts.get(values, 0) + 1

    def value(self, *values: str) -> int:
        return self.counts.get(values, 0)

    def collect(self) -> list[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, count in sorted(self.counts.copy().items()):
            family.add_metric(values, count)
        return [family]


ACTIONS = LoopCounter("tapis_actions", "Inputs applied to tables", ["kind", "source"])
REFUSALS = CachedCounter("tapis_refusals_total", "Requests refused, by gRPC code and reason",
                         ["code", "reason"])
GAMES = Gauge("tapis_games", "Tables held in memory")
STREAMS = Gauge("tapis_streams", "Open event streams")
SLAP_TO_PILE_WON = Histogram(
    "tapis_slap_to_pile_won_seconds",
    "From a winning real-time action's arrival (a slap) to the event it won (a pile) being "
    "sent (first stream)",
    buckets=(0.0001, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005,
             0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0))
GC_PAUSES = Histogram(
    "tapis_gc_pause_seconds", "Garbage collector pauses (the whole process stops), by generation",
    ["generation"],
    buckets=(0.0001, 0.0003, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))
GC_PAUSE_MAX = Gauge("tapis_gc_pause_max_seconds", "The longest collector pause so far")
GC_COLLECTED = Counter("tapis_gc_collected_total",
                       "Objects the collector found unreachable (reference cycles)")


class _PauseWatch:
    """A ``gc.callbacks`` entry timing every collection into ``GC_PAUSES``."""

    def __init__(self) -> None:
        self.started = 0.0
        self.longest = 0.0
        self.children = [GC_PAUSES.labels(str(generation)) for generation in range(3)]

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
            return
        pause = time.perf_counter() - self.started
        self.children[info["generation"]].observe(pause)
        if info["collected"]:
            GC_COLLECTED.inc(info["collected"])
        if pause > self.longest:
            self.longest = pause
            GC_PAUSE_MAX.set(pause)


def watch_gc_pauses() -> None:
    """Time every collection from now on (once per process; idempotent)."""
    if not any(isinstance(callback, _PauseWatch) for callback in gc.callbacks):
        gc.callbacks.append(_PauseWatch())
LOOP_LAG_MAX = Gauge("tapis_loop_lag_max_seconds",
                     "The longest the event loop was late to a timer so far (a stall of the "
                     "whole server: collector, a long callback, or the machine)")


async def watch_loop_lag(every_s: float = 0.05) -> None:
    """Measure how late the event loop wakes a timer, every ``every_s`` (until cancelled)."""
    longest = 0.0
    while True:
        ticked = time.perf_counter()
        await asyncio.sleep(every_s)
        late = time.perf_counter() - ticked - every_s
        if late > longest:
            longest = late
            LOOP_LAG_MAX.set(late)
