"""Given starting constants: the inputs of a local search (Lamarckian inheritance).

A genetic search's offspring share most of their structure, and so most of their constants,
with a parent that was fitted already. Operon (Burlacu, Kronberger and Kommenda 2020, "Operon
C++: an efficient genetic programming framework for symbolic regression", GECCO) and Kommenda
et al. 2020 ("Parameter identification for symbolic regression using nonlinear least squares",
GPEM 21:471) start the offspring's least-squares fit from the inherited values and run a few
Levenberg-Marquardt steps, instead of a multi-start fit from scratch: most of the accuracy of a
full fit for a fraction of its cost. ``Evaluator.fit_many(formulas, starts=...)`` takes such
starts; this module checks them and turns one into the formula's canonical constant order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

import numpy as np

__all__ = ["StartError", "check_starts", "start_vector"]

#: Where a start names no value for a constant (a constant the offspring gained), it starts at
#: this value, as restart 0 of a full fit does (LLM-SR's all-ones start).
UNNAMED_START = 1.0


class StartError(ValueError):
    """A start that cannot be used for its formula (the message says which constant, and why)."""


def check_starts(starts: Sequence[Mapping[str, Any] | None] | None,
                 count: int) -> list[Mapping[str, Any] | None]:
    """One start (a mapping, or ``None`` for a full fit) per formula; ``ValueError`` for a list
    of the wrong length or an entry that is not a mapping (a caller's mistake, not a bad
    candidate, so it is raised rather than reported per formula)."""
    if starts is None:
        return [None] * count
    if isinstance(starts, (str, bytes, Mapping)):
        raise ValueError("starts must be a list with one entry (a mapping of constant names to "
                         f"values, or None) per formula, not a {type(starts).__name__}")
    out = list(starts)
    if len(out) != count:
        raise ValueError(f"starts has {len(out)} entries for {count} formulas; give one per "
                         "formula (None where the formula has no start)")
    for i, start in enumerate(out):
        if start is not None and not isinstance(start, Mapping):
            raise ValueError(f"starts[{i}] must be a mapping of constant names to values or "
                             f"None, not {type(start).__name__}")
    return out


def start_vector(start: Mapping[str, Any], names: Sequence[str],
                 canonical_names: Sequence[str]) -> np.ndarray:
    """The start's values in canonical order: ``canonical_names[j]`` is the caller's name of
    canonical constant ``j`` (``Formula.canonical_constants``), ``names`` the formula's own
    constants. Names the formula lacks, and values that are not finite numbers, raise
    :class:`StartError`; constants the start does not name get :data:`UNNAMED_START`."""
    unknown = [str(k) for k in start if k not in names]
    if unknown:
        have = ", ".join(names) if names else "none"
        raise StartError(f"start names constant(s) {', '.join(sorted(unknown))} that the formula "
                         f"does not have (its constants: {have})")
    out = np.full(len(canonical_names), UNNAMED_START, dtype=np.float64)
    for j, name in enumerate(canonical_names):
        if name not in start:
            continue
        value = start[name]
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
            raise StartError(f"start value of {name} must be a finite number, got {value!r}")
        out[j] = float(value)
    return out
