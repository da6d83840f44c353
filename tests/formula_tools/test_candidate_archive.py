"""The per-episode candidate archive: ordering, Pareto front, thread safety (pure Python)."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest

from sr_dist.agent.state import Candidate, CandidateArchive, candidate_from_fit, fitness, pareto_front
from sr_dist.evaluator import FitResult


def fit(expr: str, nmse: float | None, complexity: int, status: str = "ok", canonical: str | None = None) -> FitResult:
    return FitResult(
        expression=expr,
        canonical=canonical or expr,
        status=status,  # type: ignore[arg-type]
        complexity=complexity,
        train_nmse=nmse,
        val_nmse=nmse,
        test_nmse=nmse,
    )


# (candidates as (expression, val_nmse, complexity, status), expected front expressions, best)
FRONT_CASES: list[dict[str, Any]] = [
    {"id": "empty", "fits": [], "front": [], "best": None},
    {"id": "failures never count", "fits": [("a", None, 3, "invalid"), ("b", math.inf, 3, "nonfinite")], "front": [], "best": None},
    {
        "id": "dominated dropped",
        "fits": [("x", 0.5, 1, "ok"), ("c*x", 0.1, 3, "ok"), ("c*x+d", 0.2, 5, "ok"), ("c*x*y", 0.01, 5, "ok")],
        "front": ["x", "c*x", "c*x*y"],
        "best": "c*x*y",
    },
    {
        "id": "equal nmse keeps the simpler",
        "fits": [("big", 0.1, 9, "ok"), ("small", 0.1, 3, "ok")],
        "front": ["small"],
        "best": "small",
    },
    {
        "id": "below the resolution the simpler wins",
        "fits": [("c*x*y+d", 5e-14, 7, "ok"), ("c*x*y", 3e-13, 5, "ok")],
        "front": ["c*x*y"],
        "best": "c*x*y",
    },
    {"id": "nan is unusable", "fits": [("n", math.nan, 2, "ok"), ("m", 0.3, 4, "ok")], "front": ["m"], "best": "m"},
]


@pytest.mark.parametrize("case", FRONT_CASES, ids=[c["id"] for c in FRONT_CASES])
def test_front_and_best_follow_the_table(case: dict[str, Any]) -> None:
    archive = CandidateArchive()
    archive.add([fit(e, n, k, s) for e, n, k, s in case["fits"]])
    assert [c.expression for c in archive.front()] == case["front"]
    best = archive.best()
    assert (best.expression if best else None) == case["best"]
    assert len(archive) == len(case["fits"])


def test_one_canonical_form_keeps_its_best_fit() -> None:
    archive = CandidateArchive()
    archive.add([fit("a*x", 0.3, 3, canonical="c0*x"), fit("b*x", 0.2, 3, canonical="c0*x")], step=4, tool_call_id="t")
    assert archive.fitted == 1
    [only] = archive.front()
    assert only.expression == "b*x" and only.step == 4 and only.tool_call_id == "t"


def test_candidate_from_fit_reads_mappings_and_objects() -> None:
    as_dict = candidate_from_fit({"expression": "x", "status": "ok", "val_nmse": 0.5, "constants": {"c": 1}})
    assert as_dict.val_nmse == 0.5 and as_dict.constants == {"c": 1.0}
    missing = candidate_from_fit({})
    assert missing.status == "error" and fitness(missing) == math.inf
    no_val = Candidate("x", "x", "ok", train_nmse=0.25)
    assert fitness(no_val) == 0.25
    assert pareto_front([no_val]) == (no_val,)


def test_concurrent_adds_lose_nothing() -> None:
    archive = CandidateArchive()

    def work(worker: int) -> None:
        for i in range(200):
            archive.add([fit(f"w{worker}_{i}", 1.0 / (i + 1), i % 7 + 1)])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(archive) == 800 and archive.fitted == 800
    best = archive.best()
    assert best is not None and fitness(best) == pytest.approx(1 / 200)
