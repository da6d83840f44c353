"""The value every fit returns (crosses Ray and Arrow boundaries, so plain data only)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["ok", "nonfinite", "invalid", "error"]
STATUSES: tuple[str, ...] = ("ok", "nonfinite", "invalid", "error")


@dataclass(frozen=True)
class FitResult:
    """Outcome of fitting one formula.

    - ``status``: ``ok``; ``nonfinite`` (the prediction at the fitted constants is not finite on
      some train/validation/test row); ``invalid`` (did not parse or uses unknown variables;
      ``error`` holds the message); ``error`` (internal failure, e.g. too large for the largest
      bucket; ``error`` says why).
    - ``constants``: fitted values by the formula's *original* constant names.
    - ``train_mse``: mean squared error on all train rows; ``*_nmse`` = MSE / Var(y) on that split
      (population variance); ``r2`` = 1 - ``val_nmse`` (validation R²). Metrics are ``inf`` for a
      split with non-finite predictions (``r2`` then ``-inf``), and ``None`` when not computed
      (``invalid``/``error``, or an empty split).
    - ``fit_s``: this formula's share of its batch's wall time (compile time excluded).
    - ``cached``: served from the result cache (``fit_s`` is then the original fit's).
    - ``local``: fitted by a local search from a start the caller gave (``fit_many``'s
      ``starts``), not by the multi-start fit.
    - ``dimensionally_consistent`` / ``units_mismatch``: the dimensional check, filled by the
      formula tools when the dataset has units (``None`` otherwise; the evaluator leaves them).
    - ``origin``: where the formula came from, as its proposer said (``evaluate_formulas``'
      ``origins``: ``library/power_law``, ``gp/crossover``, an LLM's own label); filled by the
      formula tools, ``None`` when the proposer gave none. It never changes the fit.
    """

    expression: str
    canonical: str | None
    status: Status
    error: str | None = None
    constants: dict[str, float] = field(default_factory=dict)
    complexity: int | None = None
    train_mse: float | None = None
    train_nmse: float | None = None
    val_nmse: float | None = None
    test_nmse: float | None = None
    r2: float | None = None
    fit_s: float = 0.0
    cached: bool = False
    iterations: int = 0
    dimensionally_consistent: bool | None = None
    units_mismatch: str | None = None
    #: The fitting loss (``EvaluatorOptions.loss``, weighted mean per row) on the train and
    #: validation splits; for ``mse`` the (weighted) MSE. ``inf`` with non-finite predictions.
    train_loss: float | None = None
    val_loss: float | None = None
    #: The extra metrics asked for (``EvaluatorOptions.metrics``), name -> value (``None``
    #: where undefined); empty when none were asked for or the fit failed.
    metrics: dict[str, float | None] = field(default_factory=dict)
    #: The metric candidates rank by (``EvaluatorOptions.rank_by``; ``val_nmse`` by default).
    rank_by: str = "val_nmse"
    origin: str | None = None
    local: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, object]:
        """Plain-dict form (for Arrow rows and JSON)."""
        return {
            "expression": self.expression, "canonical": self.canonical, "status": self.status,
            "error": self.error, "constants": dict(self.constants),
            "complexity": self.complexity, "train_mse": self.train_mse,
            "train_nmse": self.train_nmse, "val_nmse": self.val_nmse,
            "test_nmse": self.test_nmse, "r2": self.r2, "fit_s": self.fit_s,
            "cached": self.cached, "iterations": self.iterations,
            "dimensionally_consistent": self.dimensionally_consistent,
            "units_mismatch": self.units_mismatch,
            "train_loss": self.train_loss, "val_loss": self.val_loss,
            "metrics": dict(self.metrics), "rank_by": self.rank_by, "origin": self.origin,
            "local": self.local,
        }


def nmse(mse: float, variance: float) -> float:
    """MSE normalised by the target variance; a constant target gives 0 for a perfect fit."""
    if math.isnan(mse) or math.isinf(mse):
        return math.inf
    if variance > 0.0:
        return mse / variance
    return 0.0 if mse == 0.0 else math.inf


def failed(expression: str, status: Status, message: str, canonical: str | None = None,
           complexity: int | None = None) -> FitResult:
    """A result for a formula that was not fitted."""
    return FitResult(expression=expression, canonical=canonical, status=status, error=message,
                     complexity=complexity)
