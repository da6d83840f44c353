"""Fitted phases are moved by whole turns into [-pi, pi] (``sr_dist.evaluator.phases``)."""

from __future__ import annotations

import math
import os

import numpy as np

from sr_dist.data import dataset_from_arrays
from sr_dist.evaluator import Evaluator
from sr_dist.evaluator.phases import phase_constants, wrap_phases
from sr_dist.formula import parse_formula

CACHE = os.environ.get("SR_DIST_JAX_CACHE_DIR", os.path.expanduser("~/.cache/sr-dist/jax"))


def _tree(text: str):  # noqa: ANN202 - a Node
    return parse_formula(text, ["x0", "x1"]).canonical_tree


def test_phase_constants_are_terms_of_a_sinusoids_argument_used_once() -> None:
    # (Canonical trees number their constants afresh: one phase each, whatever its name.)
    assert phase_constants(_tree("c0*sin(c1*x0 + c2) + c3*x1")) == {"c2"}
    assert len(phase_constants(_tree("c0*cos(c1 - c2*x0)"))) == 1
    assert len(phase_constants(_tree("c0*sin(-(x0 + c1))"))) == 1
    # A frequency, a constant outside a sinusoid, a tangent's (period pi) and a shared one: none.
    assert phase_constants(_tree("c0*sin(c1*x0)")) == frozenset()
    assert phase_constants(_tree("c0*exp(x0 + c1)")) == frozenset()
    assert phase_constants(_tree("tan(x0 + c0)")) == frozenset()


def test_wrapping_moves_whole_turns_and_keeps_the_values() -> None:
    tree = _tree("c0*sin(c1*x0 + c2) + c3*x1")
    names = ["c0", "c1", "c2", "c3"]
    for turns in (-13, -1, 1, 2, 13):
        values = (3.3, 4.3, 0.9 + 2 * math.pi * turns, 1.1)
        wrapped = wrap_phases(tree, names, values)
        assert wrapped is not None
        assert abs(wrapped[2] - 0.9) < 1e-12 and wrapped[:2] == values[:2] and wrapped[3] == 1.1
    assert wrap_phases(tree, names, (3.3, 4.3, -3.0, 1.1)) is None  # already within one turn


def test_a_fit_reports_its_phase_within_one_turn() -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 5.0, (400, 2))
    y = 3.3 * np.sin(4.3 * X[:, 1] + 0.9) + 1.1 * X[:, 0]
    ev = Evaluator(dataset_from_arrays(X, y, ["x0", "x1"]), compilation_cache_dir=CACHE)
    # Started many turns away, the fit lands on a far copy of the phase; it is reported near.
    fit = ev.fit_many(["c0*sin(c1*x1 + c2) + c3*x0"], starts=[{"c0": 3.0, "c1": 4.3, "c2": 82.0, "c3": 1.0}])[0]
    assert fit.status == "ok" and fit.val_nmse is not None and fit.val_nmse < 1e-12
    assert abs(fit.constants["c2"]) <= math.pi + 1e-9
    assert abs((fit.constants["c2"] - 0.9 + math.pi) % (2 * math.pi) - math.pi) < 1e-6
