"""Shared builders for the results tests: FitResult-like values and candidate rows."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from sr_dist.results import candidate_row

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


@dataclasses.dataclass(frozen=True)
class FakeFit:
    """Has the evaluator's FitResult fields (the real one lives in sr_dist.evaluator)."""

    expression: str
    canonical: str | None = None
    status: str = "ok"
    error: str | None = None
    constants: dict[str, float] = dataclasses.field(default_factory=dict)
    complexity: int | None = 3
    train_mse: float | None = 0.5
    train_nmse: float | None = 0.1
    val_nmse: float | None = 0.2
    test_nmse: float | None = 0.3
    r2: float | None = 0.9
    fit_s: float | None = 0.01
    dimensionally_consistent: bool | None = None
    units_mismatch: str | None = None


def rows_for(
    run_id: str,
    n: int,
    *,
    dataset: str = "feynman:I.6.2",
    model: str = "evolve",
    agent_id: int = 0,
    step0: int = 0,
    **fit: Any,
) -> list[dict[str, Any]]:
    """``n`` candidate rows of one agent, one per step, with distinct expressions."""
    out = []
    for i in range(n):
        values = {"expression": f"c0*x{i}", "canonical": f"c0*x{i}", "constants": {"c0": 1.0 + i}}
        values.update(fit)
        out.append(candidate_row(
            FakeFit(**values), run_id, agent_id, step0 + i, 0, model, dataset,
            created_at=T0 + timedelta(seconds=i),
        ))
    return out
