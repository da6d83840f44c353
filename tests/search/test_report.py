"""The run report names the parsimony pick when it differs from the lowest-NMSE formula."""

from __future__ import annotations

import time

import pytest

import sr_dist.search.report as report
from sr_dist.candidate import Candidate
from sr_dist.search.report import best_candidate, parsimony_lines, pool_lines


def _row(cid: str, expression: str, complexity: int, val: float) -> dict[str, object]:
    return {"candidate_id": cid, "expression": expression, "complexity": complexity,
            "val_nmse": val, "status": "ok", "constants": '{"c0": 0.5}'}


FRONT = [_row("r:0:0:0", "c0", 1, 1.0), _row("r:0:1:0", "c0*x**2", 5, 1.0e-4),
         _row("r:0:2:0", "c0*x**2 + c1*sin(c2*x)", 12, 9.5e-5)]


def _best(row: dict[str, object]) -> Candidate:
    return Candidate.from_fit(row)


def test_the_report_names_a_different_parsimony_pick() -> None:
    lines = parsimony_lines(FRONT, _best(FRONT[-1]))
    text = "\n".join(lines)
    assert "parsimony pick: c0*x**2  (val NMSE 0.0001, complexity 5" in text
    assert "c0=0.5" in text


def test_nothing_is_added_when_the_pick_is_the_best_or_there_is_no_front() -> None:
    assert parsimony_lines(FRONT[:2], _best(FRONT[1])) == []
    assert parsimony_lines([], None) == []


class _Problem:
    feature_names = ("x",)
    ground_truth = "0.5*x**2"


def test_the_best_candidate_is_checked_against_the_ground_truth_only_when_nearly_exact() -> None:
    exact = {**_row("r:0:1:0", "c0*x**2", 5, 1e-14), "constants": '{"c0": 0.5}'}
    wrong = {**_row("r:0:1:1", "c0*x**3", 5, 1e-14), "constants": '{"c0": 0.5}'}
    assert best_candidate(exact, _Problem()).recovered is True  # type: ignore[union-attr]
    assert best_candidate(wrong, _Problem()).recovered is False  # type: ignore[union-attr]
    assert best_candidate(FRONT[1], _Problem()).recovered is False  # type: ignore[union-attr]
    assert best_candidate(None, _Problem()) is None


class _Interference:
    feature_names = ("Int_0", "theta", "n")
    ground_truth = "Int_0*sin(n*theta/2)**2/sin(theta/2)**2"


def test_a_ground_truth_check_that_runs_out_of_time_says_not_checked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The law plus a junk term of about 1e-244 (found by a run, fitted to NMSE 4e-31): sympy's
    simplify ran for minutes on it, and the run's wrap-up never ended."""
    monkeypatch.setattr(report, "RECOVERY_CHECK_S", 1.0)
    row = {**_row("r:0:9:0", "(Int_0*(exp(sin(cos(theta)) + c0) + c1) + c2*sin(theta*n + c3)"
                  " + c4)*Int_0/(c5*cos(theta) + c6)", 30, 4e-31),
           "constants": '{"c0": -561.1590576171875, "c1": 1.3997543240262246e-16, '
                        '"c2": 13.385328787878397, "c3": 1.5707963267948966, '
                        '"c4": -13.385328787878397, "c5": 13.385328787878397, '
                        '"c6": -13.385328787878397}'}
    start = time.monotonic()
    assert best_candidate(row, _Interference()).recovered is None  # type: ignore[union-attr]
    assert time.monotonic() - start < 30  # one second of sympy, then its unwinding
    # The same law without the junk term is decided, and proved, inside the deadline.
    clean = {**_row("r:0:9:1", "Int_0*(c0*cos(n*theta) + c1)/(c2*cos(theta) + c3)", 14, 1e-30),
             "constants": '{"c0": -1.0, "c1": 1.0, "c2": -1.0, "c3": 1.0}'}
    assert best_candidate(clean, _Interference()).recovered is True  # type: ignore[union-attr]


def _pool_stats(replicas: int, held: int = 0) -> dict[str, object]:
    rows = [{"replica": i, "node_id": f"{i}abcdef0123456789", "search_fits": 1200 + i,
             "cache_hits": 30, "batches": 40, "queue_wait": {"count": 9, "p99_s": 0.05 * (i + 1)},
             "fits_per_s": 12.34} for i in range(replicas)]
    return {"queue_wait": {"count": 20, "p50_s": 0.0012, "p95_s": 0.0199, "p99_s": 0.25},
            "held_back": {"requests": held}, "per_replica": rows}


def test_pool_lines_show_the_queue_wait_and_a_line_per_replica() -> None:
    assert pool_lines(_pool_stats(1)) == ["evaluator queue wait: p50 1 ms, p95 20 ms, p99 250 ms"]
    lines = pool_lines(_pool_stats(2, held=1500))
    assert lines[0] == ("evaluator queue wait: p50 1 ms, p95 20 ms, p99 250 ms; 1,500 requests "
                        "waited for room")
    assert lines[1:] == [
        "  replica 0 (node 0abcdef0): 1,200 fits, 12.3 fits/s, 30 cache hits, 40 batches, "
        "queue p99 50 ms",
        "  replica 1 (node 1abcdef0): 1,201 fits, 12.3 fits/s, 30 cache hits, 40 batches, "
        "queue p99 100 ms",
    ]


def test_pool_lines_without_waits_or_stats() -> None:
    assert pool_lines({}) == []
    assert pool_lines({"queue_wait": {"count": 0}}) == []
    stats = _pool_stats(2)
    for row in stats["per_replica"]:  # type: ignore[attr-defined]
        del row["fits_per_s"]
        row["node_id"] = None
        row["queue_wait"] = {}
    assert pool_lines(stats)[1] == ("  replica 0 (node ?): 1,200 fits, 30 cache hits, 40 batches, "
                                    "queue p99 -")


# --- simplified forms beside the fitted ones -------------------------------------------------

def _feynman_front() -> tuple[list[dict[str, object]], object]:
    from sr_dist.data import load_dataset

    dataset = load_dataset("feynman:I.12.11", n=300, seed=0)
    f = dataset.X_train[:, 0] * dataset.X_train[:, 1]  # q*Ef, least squares on the train split
    c0 = float(f @ dataset.y_train / (f @ f))
    raw = {"candidate_id": "r:0:2:0", "expression": "q*(c0*Ef + c1*B*v*sin(theta) + c2)",
           "complexity": 13, "val_nmse": 1e-15, "test_nmse": 1e-15, "status": "ok",
           "constants": '{"c0": 1.0000000003, "c1": 0.9999999996, "c2": 6.2e-08}'}
    rough = {"candidate_id": "r:0:1:0", "expression": "c0*q*Ef", "complexity": 5,
             "val_nmse": 0.5, "test_nmse": 0.5, "status": "ok", "constants": f'{{"c0": {c0!r}}}'}
    return [rough, raw], dataset


def test_the_front_and_the_best_formula_show_the_simplified_form() -> None:
    from sr_dist.search.progress import format_pareto
    from sr_dist.search.report import _with_simplified, simplified_line

    rows, dataset = _feynman_front()
    shown, forms = _with_simplified(rows, dataset)
    table = format_pareto(shown).splitlines()
    assert table[0].split() == ["complexity", "val_nmse", "test_nmse", "simplified", "formula"]
    assert table[3].split()[3:6] == ["q*(Ef", "+", "B*v*sin(theta))"]
    assert "q*(c0*Ef + c1*B*v*sin(theta) + c2)" in table[3]  # the fitted form beside it
    best = _best(rows[1])
    (line,) = simplified_line(forms[str(best.candidate_id)])
    assert line.startswith("   simplified: q*(Ef + B*v*sin(theta))  (val NMSE 0; ")
    assert "dropped c2=6.2e-08" in line
    # a rough fit keeps its term; its constant becomes the shortest number that fits as well
    rough = forms["r:0:1:0"]
    assert rough.changed and shown[0]["simplified"] == rough.expression
    assert rough.expression.endswith("q*Ef") and len(rough.expression) < 10, rough
    assert rough.nmse <= rough.raw_nmse * 1.01 + 1e-12


def test_without_a_dataset_the_table_is_as_before() -> None:
    from sr_dist.search.progress import format_pareto
    from sr_dist.search.report import _with_simplified

    rows, _ = _feynman_front()
    shown, forms = _with_simplified(rows, None)
    assert forms == {} and "simplified" not in format_pareto(shown)


def test_the_reports_imports_load_in_the_background() -> None:
    """A fresh process: the preload thread imports what only the report needs."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from sr_dist.search.report import REPORT_IMPORTS, preload_report_imports\n"
            "assert not any(name in sys.modules for name in REPORT_IMPORTS)\n"
            "preload_report_imports().join(60)\n"
            "print(all(name in sys.modules for name in REPORT_IMPORTS))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
