"""The server's collector tuning: survivors of every collection are frozen out of sight."""

from __future__ import annotations

import gc

from tapis_service.process import gctune


def test_survivors_of_a_collection_are_frozen() -> None:
    thresholds = gc.get_threshold()
    try:
        gctune.tune()
        assert gc.get_threshold()[:2] == (gctune.GEN0_THRESHOLD, gctune.GEN1_THRESHOLD)
        frozen = gc.get_freeze_count()
        survivors = [[] for _ in range(100)]
        gc.collect(0)
        assert gc.get_freeze_count() >= frozen + len(survivors)
        assert gc.get_objects(generation=1) == []  # nothing left for an older collection
    finally:
        gc.callbacks.remove(gctune._freeze_survivors)
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_thresholds_can_be_set_for_a_measurement() -> None:
    assert gctune.thresholds("5000,1") == (5000, 1, gctune.GEN2_THRESHOLD)
    assert gctune.thresholds() == (gctune.GEN0_THRESHOLD, gctune.GEN1_THRESHOLD,
                                   gctune.GEN2_THRESHOLD)
