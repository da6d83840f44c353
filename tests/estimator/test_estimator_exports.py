"""The exports against the reference evaluator, formula by formula, without a search: every op
of the language, constants and literals as parameters, and the comparison that catches a
wrong export."""

from __future__ import annotations

import numpy as np
import pytest
import sympy
import torch

from sr_dist.estimator.exports import (
    _mismatch,
    check_exports,
    form_of,
    jax_export,
    latex_export,
    numpy_export,
    sympy_export,
    torch_export,
)
from sr_dist.formula import FUNCTION_NAMES

VARS = ("x0", "x1")
X = np.random.default_rng(1).uniform(0.2, 0.9, (200, 2))

FORMULAS = [
    ("c0*x0**2 + sin(x1) + c1", {"c0": 2.5, "c1": -1e-3}),
    ("x0/(c0 + x1) - c0*x1", {"c0": 0.75}),
    ("2.5*x0**2 + sin(x1)", {}),
    ("pi*x0 - e**x1 + 3", {}),
    ("c0", {"c0": 1.25}),
    ("-x0**(1/3) + abs(x1 - 0.5)", {}),
    *((f"{fn}(x0) + x1", {}) for fn in FUNCTION_NAMES),
]


@pytest.mark.parametrize(("expression", "constants"), FORMULAS, ids=[f[0] for f in FORMULAS])
def test_every_export_matches_the_reference(expression: str, constants: dict[str, float]) -> None:
    form = form_of(expression, constants, VARS)
    check_exports(form, X, "entry", torch_ok=True)  # raises on any disagreement
    want = form.reference(X)
    assert np.allclose(numpy_export(form)(X), want, rtol=1e-12, equal_nan=True)
    module = torch_export(form)
    with torch.no_grad():
        got = module(torch.as_tensor(X, dtype=torch.float64)).numpy()
    assert np.allclose(got, want, rtol=1e-12, equal_nan=True)


def test_parameters_are_the_constants_then_the_fitted_literals() -> None:
    form = form_of("c1*x0 + c0*x1 + 0.5*x0**2", {"c0": 3.0, "c1": -2.0}, VARS)
    exported = jax_export(form)
    assert np.asarray(exported["parameters"]).tolist() == [-2.0, 3.0, 0.5]
    moved = np.asarray(exported["parameters"]) * 0 + 1.0  # new parameters change the output
    assert np.allclose(np.asarray(exported["callable"](X, moved)), X[:, 0] + X[:, 1] + X[:, 0] ** 2,
                       rtol=1e-5)
    module = torch_export(form)
    assert module.parameters_.requires_grad and module.parameters_.dtype == torch.float64
    loss = module(torch.as_tensor(X)).sum()
    loss.backward()  # trainable: gradients reach the constants
    assert module.parameters_.grad is not None and module.parameters_.grad.abs().sum() > 0


def test_sympy_and_latex() -> None:
    form = form_of("c0*x0**2 + sin(x1)", {"c0": 2.5}, VARS)
    x0, x1 = sympy.symbols("x0 x1", real=True)
    assert sympy.simplify(sympy_export(form) - (sympy.Rational(5, 2) * x0**2 + sympy.sin(x1))) == 0
    assert latex_export(form) == r"2.5 x_{0}^{2} + \sin{\left(x_{1} \right)}"


def test_the_comparison_catches_a_wrong_export() -> None:
    want = np.linspace(1, 2, 50)
    assert _mismatch(want * (1 + 1e-12), want, 1e-9) is None
    assert "differs on 1 of 50 rows" in str(_mismatch(np.where(np.arange(50) == 3, 7.0, want), want, 1e-9))
    assert "finite where the reference is not" in str(_mismatch(np.where(want > 1.5, np.nan, want), want, 1e-9))
    assert "shape" in str(_mismatch(want[:-1], want, 1e-9))


def test_numpy_export_checks_its_width() -> None:
    with pytest.raises(ValueError, match="X must be 2-D with 2 columns"):
        numpy_export(form_of("x0 + x1", {}, VARS))(np.ones((3, 3)))


@pytest.mark.parametrize(("expression", "low", "high"), [
    ("c0*x0*x1", 1e-20, 2e-20),          # float32 underflows
    ("exp(x0) + x1", 80.0, 100.0),       # float32 overflows
    ("(x0 + 10000.3) - 10000", 0.0, 1.0),  # float32 cancels
])
def test_the_jax_check_is_made_in_float64(expression: str, low: float, high: float) -> None:
    data = np.random.default_rng(2).uniform(low, high, (50, 2))
    check_exports(form_of(expression, {"c0": 1.5}, VARS), data, "entry", torch_ok=False)


def test_a_form_the_reference_cannot_evaluate_is_an_export_mismatch() -> None:
    from sr_dist.estimator.exports import ExportMismatch

    with pytest.raises(ExportMismatch, match="entry 3: the reference evaluator cannot evaluate"):
        check_exports(form_of("c0*x0 + c1", {}, VARS), X, "entry 3", torch_ok=False)


def test_equations_are_constant_free_even_when_simplifying_gives_up() -> None:
    from sr_dist.estimator.front import build_equations

    front = [
        {"expression": "c0*x0 + x1", "constants": '{"c0": 2.0}', "complexity": 5,
         "val_nmse": 0.0, "candidate_id": "a"},
        {"expression": "c0*x0 + c1*x1", "constants": '{"c0": 2.0, "c1": NaN}', "complexity": 7,
         "val_nmse": 0.5, "candidate_id": "b"},
    ]
    y = 2 * X[:, 0] + X[:, 1]
    table = build_equations(front, X, y, VARS)
    assert table["simplified"].to_pylist() == ["2*x0 + x1"]  # the NaN constant's row left out
