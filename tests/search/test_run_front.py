"""The run's Pareto front (what the result writer shares between agents) equals the front of
every row it was given, whatever the order and the chunks the rows arrive in."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sr_dist.candidate import Candidate, candidate_front
from sr_dist.search.run_front import RunFront


def _rows(rng: np.random.Generator, n: int, units: bool) -> list[dict]:
    """Rows of ``n // 2`` structures (a structure's complexity and units verdict are its own;
    one fitted again may score otherwise), some failed or not finite."""
    rows = []
    for i in range(n):
        k = int(rng.integers(0, n // 2))
        status = "ok" if rng.random() > 0.1 else "nonfinite"
        nmse = float(10.0 ** rng.uniform(-14, 0)) if rng.random() > 0.05 else math.nan
        rows.append({
            "expression": f"c0*x{i}", "canonical": f"f{k}", "status": status,
            "complexity": 1 + (k * 7) % 29, "val_nmse": nmse, "train_nmse": nmse,
            "constants": {"c0": 1.0}, "dimensionally_consistent": k % 3 != 0 if units else None,
        })
    return rows


@pytest.mark.parametrize("seed", range(12))
def test_front_of_the_rows_whatever_their_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = _rows(rng, 300, units=seed % 2 == 1)
    expected = candidate_front([Candidate.from_fit(r) for r in rows])
    front = RunFront()
    at = 0
    while at < len(rows):
        size = int(rng.integers(1, 40))
        front.add(rows[at:at + size])
        at += size
    got = front.front()
    assert [(c.key, c.complexity, c.val_nmse) for c in got] == [
        (c.key, c.complexity, c.val_nmse) for c in expected]
    assert front.offered == len(rows)
    # simplest first, each strictly better than every simpler one
    losses = [c.val_nmse for c in got]
    assert [c.complexity for c in got] == sorted(c.complexity for c in got)
    assert all(b < a for a, b in zip(losses, losses[1:]))


def test_rows_that_cannot_join_are_dropped_and_counted() -> None:
    front = RunFront()
    assert front.add([{"status": "ok", "complexity": 3, "val_nmse": 0.5, "expression": "c0*x0",
                       "canonical": "mul(c0,vx0)"}]) == 1
    dominated = {"status": "ok", "complexity": 5, "val_nmse": 0.9, "expression": "c0*x0 + c1",
                 "canonical": "add(mul(c0,vx0),c1)"}
    failed = {"status": "invalid", "complexity": 1, "val_nmse": None, "expression": "x0 +"}
    assert front.add([dominated, failed, {"status": "ok", "complexity": "junk"}]) == 0
    assert [c.expression for c in front.front()] == ["c0*x0"] and front.offered == 4
