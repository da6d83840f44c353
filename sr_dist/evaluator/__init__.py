"""Batched constant fitting in JAX: many formulas, one compiled interpreter per shape bucket.

Public names: :class:`Evaluator` (``fit_many``, or ``begin``/``wait``/``finish``;
``evaluate_many``/``predict``, ``stats``), :class:`EvaluatorOptions`, :class:`PendingFits` and
:class:`FitResult`. See ``docs/evaluator.md``.
"""

from sr_dist.evaluator.evaluator import (
    Evaluator,
    EvaluatorOptions,
    PendingFits,
    enable_persistent_cache,
)
from sr_dist.evaluator.results import STATUSES, FitResult

__all__ = ["Evaluator", "EvaluatorOptions", "FitResult", "PendingFits", "STATUSES",
           "enable_persistent_cache"]
