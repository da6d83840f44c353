"""The candidate value, its fitness and rank rules, the Pareto front, and the per-episode archive."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest

from sr_dist.candidate import Candidate, candidate_front, fitness, pareto_front
from sr_dist.evaluator import FitResult
from sr_dist.sr.state import CandidateArchive


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
    as_dict = Candidate.from_fit({"expression": "x", "status": "ok", "val_nmse": 0.5, "constants": {"c": 1}})
    assert as_dict.val_nmse == 0.5 and as_dict.constants == {"c": 1.0}
    missing = Candidate.from_fit({})
    assert missing.status == "error" and fitness(missing) == math.inf
    no_val = Candidate("x", "x", "ok", train_nmse=0.25)
    assert fitness(no_val) == 0.25
    assert candidate_front([no_val]) == (no_val,)


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


# The generic front: any items, given their loss and complexity.
GENERIC_FRONT_CASES: list[dict[str, Any]] = [
    {"id": "empty", "items": [], "front": []},
    {"id": "one", "items": [("a", 1.0, 1)], "front": ["a"]},
    {"id": "dominated dropped", "items": [("a", 0.5, 1), ("b", 0.6, 2), ("c", 0.1, 3)], "front": ["a", "c"]},
    {"id": "equal loss keeps the simpler", "items": [("big", 0.1, 9), ("small", 0.1, 3)], "front": ["small"]},
    {"id": "equal everything keeps the first", "items": [("first", 0.1, 3), ("second", 0.1, 3)], "front": ["first"]},
    {"id": "non-finite losses take no part", "items": [("nan", math.nan, 1), ("inf", math.inf, 1), ("ok", 2.0, 5)], "front": ["ok"]},
    {"id": "loss must strictly fall", "items": [("a", 0.2, 1), ("b", 0.2, 2), ("c", 0.19, 4)], "front": ["a", "c"]},
]


@pytest.mark.parametrize("case", GENERIC_FRONT_CASES, ids=[c["id"] for c in GENERIC_FRONT_CASES])
def test_generic_pareto_front(case: dict[str, Any]) -> None:
    front = pareto_front(case["items"], loss=lambda item: item[1], complexity=lambda item: item[2])
    assert [item[0] for item in front] == case["front"]


def test_generic_pareto_front_tie_key_decides_among_equals() -> None:
    items = [("zeta", 0.1, 3), ("alpha", 0.1, 3)]
    front = pareto_front(items, loss=lambda i: i[1], complexity=lambda i: i[2], key=lambda i: i[0])
    assert [i[0] for i in front] == ["alpha"]


def test_candidate_reads_results_rows_with_json_constants() -> None:
    row = {"expression": "a*x", "status": "ok", "constants": '{"a": 2.0, "b": null}', "complexity": 3,
           "val_nmse": 0.25, "agent_id": 4, "candidate_id": "r-4-1-0", "step": 1}
    cand = Candidate.from_fit(row)
    assert cand.constants == {"a": 2.0, "b": pytest.approx(math.nan, nan_ok=True)}
    assert (cand.agent_id, cand.candidate_id, cand.step, cand.complexity) == (4, "r-4-1-0", 1, 3)
    assert fitness(cand) == 0.25


def checked(expr: str, nmse: float, complexity: int, consistent: bool | None) -> FitResult:
    return FitResult(expression=expr, canonical=expr, status="ok", complexity=complexity,
                     train_nmse=nmse, val_nmse=nmse, dimensionally_consistent=consistent,
                     units_mismatch=None if consistent is not False else f"{expr} is off")


# (fits as (expression, nmse, complexity, consistent), expected front, expected best)
UNIT_CASES: list[dict[str, Any]] = [
    {"id": "a consistent fit beats a better inconsistent one",
     "fits": [("x+t", 1e-9, 3, False), ("x/t", 1e-3, 3, True), ("c*x/t", 1e-4, 5, True)],
     "front": ["x/t", "c*x/t"], "best": "c*x/t"},
    {"id": "all inconsistent: the usual order",
     "fits": [("x+t", 1e-9, 3, False), ("x-t", 1e-3, 3, False)], "front": ["x+t"], "best": "x+t"},
    {"id": "unchecked ranks with consistent",
     "fits": [("a", 1e-2, 3, None), ("b", 1e-3, 5, True), ("c", 1e-9, 2, False)],
     "front": ["a", "b"], "best": "b"},
]


@pytest.mark.parametrize("case", UNIT_CASES, ids=[c["id"] for c in UNIT_CASES])
def test_inconsistent_candidates_rank_last(case: dict[str, Any]) -> None:
    archive = CandidateArchive()
    archive.add([checked(*f) for f in case["fits"]])
    assert [c.expression for c in archive.front()] == case["front"]
    best = archive.best()
    assert best is not None and best.expression == case["best"]


def test_the_check_reaches_records_only_where_units_are_known() -> None:
    flagged = Candidate.from_fit(checked("x+t", 1e-9, 3, False))
    assert flagged.record()["units_mismatch"] == "x+t is off"
    assert flagged.brief()["dimensionally_consistent"] is False
    plain = Candidate.from_fit(fit("x", 0.1, 1))
    assert "dimensionally_consistent" not in plain.record()
    assert "units_mismatch" not in plain.brief()

