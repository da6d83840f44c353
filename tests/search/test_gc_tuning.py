"""The worker processes' collector settings (sr_dist/search/gc_tuning.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from sr_dist.search.gc_tuning import WORKER_GC_THRESHOLDS, tune_worker_gc


@pytest.fixture()
def restored_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_start_up_objects_are_frozen_and_young_collections_come_less_often(restored_gc: None) -> None:
    kept = [object() for _ in range(10)]  # alive at "start-up"
    tune_worker_gc()
    assert gc.get_threshold() == WORKER_GC_THRESHOLDS
    assert gc.get_threshold()[0] > 700  # CPython's default
    assert gc.get_freeze_count() >= len(kept)
    # Cyclic garbage made afterwards is still collected.
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1
