"""Which candidate of a run to call *the* answer: model-selection rules over the Pareto front.

The lowest validation NMSE (``best``) is the right answer on clean data. On noisy data it is
not: once a formula reaches the noise floor, larger formulas that fit the noise a little
better still win by a hair, and the true law loses to a longer overfit. ``parsimony`` is the
rule PySR calls ``model_selection="best"``: among the front's formulas whose loss is within
``loss_factor`` of the lowest, take the one with the steepest drop in log-loss per unit of
complexity against the next simpler front formula, i.e. the last big improvement before the
curve goes flat. The simplest front formula is scored against the constant model (the mean:
NMSE 1 at complexity 1), so it is not favoured or penalised for having no predecessor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sr_dist.candidate import NMSE_RESOLUTION
from sr_dist.results.query import SIGNED_METRICS, metric_loss, pareto_front

__all__ = ["SELECTION_RULES", "front_scores", "select_candidate"]

#: ``best``: lowest metric; ``parsimony``: the score rule above.
SELECTION_RULES: tuple[str, ...] = ("best", "parsimony")
#: Losses below this are float rounding of an exact fit and count as equal (the candidate
#: module's resolution); the log-loss score is computed on clamped values.
_LOSS_FLOOR = NMSE_RESOLUTION
#: The NMSE of the constant model (predicting the mean), the baseline of the simplest formula.
_MEAN_LOSS = 1.0
#: Metrics on the NMSE's scale (as ranked: ``1 - r2`` is the NMSE, an uncorrelated prediction
#: has ``1 - pearson_r`` = 1), where the constant model's loss is :data:`_MEAN_LOSS`. The others
#: (``mae``, ``train_loss``, ``val_loss``) are in the target's units, where no baseline is
#: known: the simplest row then scores 0, as in PySR, so a change of units changes no pick.
_NMSE_SCALE = frozenset({"train_nmse", "val_nmse", "test_nmse", "r2", "pearson_r", "spearman_r"})


def select_candidate(table_or_path: Any, run_id: str | None = None, *, rule: str = "best",
                     metric: str = "val_nmse", loss_factor: float = 1.5) -> dict[str, Any] | None:
    """The chosen ``ok`` candidate row (a dict) of ``table_or_path``, or ``None`` if none.

    ``table_or_path`` is anything :func:`sr_dist.results.pareto_front` takes (a results path,
    a pyarrow Table or Dataset, :class:`~sr_dist.results.Results`). Raises ``ValueError`` for an
    unknown rule or a ``loss_factor`` below 1.
    """
    if rule not in SELECTION_RULES:
        raise ValueError(f"rule must be one of {SELECTION_RULES}, got {rule!r}")
    if not (isinstance(loss_factor, (int, float)) and loss_factor >= 1.0):
        raise ValueError(f"loss_factor must be a number >= 1, got {loss_factor!r}")
    if rule == "parsimony" and metric in SIGNED_METRICS:
        raise ValueError(f"rule 'parsimony' compares log-losses and {metric} may be negative; "
                         "use rule='best' with it, or an NMSE-like metric")
    front = pareto_front(table_or_path, run_id=run_id, metric=metric).to_pylist()
    if not front:
        return None
    if rule == "best":
        return front[-1]
    losses = [max(metric_loss(metric, row[metric]), _LOSS_FLOOR) for row in front]
    limit = min(losses) * loss_factor
    chosen, chosen_score = front[-1], -math.inf
    for i, score in enumerate(front_scores(front, metric)):
        if losses[i] > limit:
            continue
        if score > chosen_score:  # the first (simplest) of equal scores wins
            chosen, chosen_score = front[i], score
    return chosen


def front_scores(front: Sequence[Mapping[str, Any]], metric: str = "val_nmse") -> list[float]:
    """The ``parsimony`` score of each row of a Pareto front (sorted by complexity): the drop
    in log-loss per unit of complexity against the next simpler row (the first row against
    the constant model, or 0 for a metric in the target's units); PySR's ``score`` column,
    and what ``parsimony`` ranks by."""
    losses = [max(metric_loss(metric, row[metric]), _LOSS_FLOOR) for row in front]
    scores: list[float] = []
    for i, row in enumerate(front):
        if i == 0 and metric not in _NMSE_SCALE:
            scores.append(0.0)
            continue
        prev_loss, prev_complexity = ((_MEAN_LOSS, 1) if i == 0 else
                                      (losses[i - 1], int(front[i - 1]["complexity"])))
        step = max(int(row["complexity"]) - prev_complexity, 1)
        scores.append(-(math.log(losses[i]) - math.log(prev_loss)) / step)
    return scores
