"""Collector pauses are timed into the Prometheus metrics."""

from __future__ import annotations

import gc

from prometheus_client import REGISTRY

from tapis_service.observe import metrics


def _count(generation: str) -> float:
    value = REGISTRY.get_sample_value("tapis_gc_pause_seconds_count",
                                      {"generation": generation})
    return value or 0.0


def test_every_collection_is_a_timed_pause() -> None:
    metrics.watch_gc_pauses()
    metrics.watch_gc_pauses()  # idempotent: one callback
    assert sum(isinstance(c, metrics._PauseWatch) for c in gc.callbacks) == 1
    # only the collections below: reading the registry allocates, and a young collection it
    # set off would count too
    gc.disable()
    try:
        before = _count("2"), _count("0")
        gc.collect()
        gc.collect(0)
        after = _count("2"), _count("0")
    finally:
        gc.enable()
    assert after == (before[0] + 1, before[1] + 1)
    longest = REGISTRY.get_sample_value("tapis_gc_pause_max_seconds")
    assert longest is not None and longest > 0
