"""The run report names the parsimony pick when it differs from the lowest-NMSE formula."""

from __future__ import annotations

from sr_dist.search.run import BestFormula, _parsimony_lines


def _row(cid: str, expression: str, complexity: int, val: float) -> dict[str, object]:
    return {"candidate_id": cid, "expression": expression, "complexity": complexity,
            "val_nmse": val, "status": "ok", "constants": '{"c0": 0.5}'}


FRONT = [_row("r:0:0:0", "c0", 1, 1.0), _row("r:0:1:0", "c0*x**2", 5, 1.0e-4),
         _row("r:0:2:0", "c0*x**2 + c1*sin(c2*x)", 12, 9.5e-5)]


def _best(row: dict[str, object]) -> BestFormula:
    return BestFormula(expression=str(row["expression"]), constants={}, complexity=12,
                       val_nmse=float(row["val_nmse"]), test_nmse=None,  # type: ignore[arg-type]
                       candidate_id=str(row["candidate_id"]))


def test_the_report_names_a_different_parsimony_pick() -> None:
    lines = _parsimony_lines(FRONT, _best(FRONT[-1]))
    text = "\n".join(lines)
    assert "parsimony pick: c0*x**2  (val NMSE 0.0001, complexity 5" in text
    assert "c0=0.5" in text


def test_nothing_is_added_when_the_pick_is_the_best_or_there_is_no_front() -> None:
    assert _parsimony_lines(FRONT[:2], _best(FRONT[1])) == []
    assert _parsimony_lines([], None) == []
