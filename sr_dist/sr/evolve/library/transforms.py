"""Transforms of a target that turn a law into a sparse sum, and the trees that undo them.

A law such as ``1/(x0 + x1)``, ``exp(x0*x1)`` or ``arcsin(x0*x1 + x2)`` is not a sum of terms,
but a transform of its values is (``1/t``, ``log t``, ``sin t``). Both the seeding (a sparse sum
of the whole target) and the decomposition (a sum for each separated part) fit ``z = forward(t)``
and hand the user ``inverse(fitted sum)``; this one catalog keeps the pairs consistent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sr_dist.formula import Node
from sr_dist.sr.evolve.tree import binary, num, unary

__all__ = ["TargetTransform", "TRANSFORMS"]


def _everywhere(t: np.ndarray) -> bool:
    return True


def _nonzero(t: np.ndarray) -> bool:
    return bool(np.all(np.abs(t) > 1e-12 * (np.max(np.abs(t)) or 1.0)))


def _positive(t: np.ndarray) -> bool:
    return bool(np.all(t > 0))


def _moderate(t: np.ndarray) -> bool:
    return bool(np.max(np.abs(t)) < 30)  # exp past e**30 lets the largest rows decide the fit


def _unit_interval(t: np.ndarray) -> bool:
    return bool(np.max(np.abs(t)) <= 1)


def _inside_right_angle(t: np.ndarray) -> bool:
    return bool(np.max(np.abs(t)) < np.pi / 2)


@dataclass(frozen=True)
class TargetTransform:
    """``forward`` maps the target to the values a sparse sum is fitted to; ``inverse`` wraps the
    fitted sum's tree so that it predicts the target again, ``inverse_values`` does the same to
    its values. ``usable``: where ``forward`` is defined and finite on every row."""

    forward: Callable[[np.ndarray], np.ndarray]
    inverse: Callable[[Node], Node]
    inverse_values: Callable[[np.ndarray], np.ndarray]
    usable: Callable[[np.ndarray], bool] = _everywhere


#: Every transform by name. ``inverse`` is the exact inverse of ``forward`` on ``usable`` targets,
#: up to the branch: ``sq`` undoes to ``sqrt(sum)`` (where the target is positive), ``acos``,
#: ``asin``, ``sin`` and ``tan`` to the principal branch.
TRANSFORMS: dict[str, TargetTransform] = {
    "id": TargetTransform(lambda t: t, lambda n: n, lambda v: v),
    "inv": TargetTransform(lambda t: 1 / t, lambda n: binary("div", num(1.0), n), lambda v: 1 / v,
                           usable=_nonzero),
    "sq": TargetTransform(lambda t: t**2, lambda n: unary("sqrt", n), np.sqrt),
    "invsq": TargetTransform(lambda t: t**-2.0, lambda n: binary("pow", n, num(-0.5)), lambda v: v**-0.5,
                             usable=_nonzero),
    "sqrt": TargetTransform(np.sqrt, lambda n: binary("pow", n, num(2.0)), lambda v: v**2, usable=_positive),
    "cbrt": TargetTransform(np.cbrt, lambda n: binary("pow", n, num(3.0)), lambda v: v**3),
    "log": TargetTransform(np.log, lambda n: unary("exp", n), np.exp, usable=_positive),
    "exp": TargetTransform(np.exp, lambda n: unary("log", n), np.log, usable=_moderate),
    "acos": TargetTransform(np.arccos, lambda n: unary("cos", n), np.cos, usable=_unit_interval),
    "asin": TargetTransform(np.arcsin, lambda n: unary("sin", n), np.sin, usable=_unit_interval),
    "sin": TargetTransform(np.sin, lambda n: unary("arcsin", n), np.arcsin,
                           usable=_inside_right_angle),
    "tan": TargetTransform(np.tan, lambda n: unary("arctan", n), np.arctan,
                           usable=_inside_right_angle),
}
