"""The LLM-SR compatibility fit (``method="llmsr"``): BFGS on the MSE from all ones, one start.

Reference: ``scipy.optimize.minimize(mse, ones, method="BFGS")`` in float64 numpy, which is what
LLM-SR and SR-Scientist run. The optimum (constants and MSE) must agree.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy.optimize import minimize

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.formula import evaluate_numpy, parse_formula

# (formula, data generator): smooth problems with one optimum reachable from all ones.
CASES: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = [
    ("a*x0*x1/x2**2", lambda X: 0.3 * X[:, 0] * X[:, 1] / X[:, 2] ** 2),
    ("a*x0 + b*x1**2 + c", lambda X: 1.5 * X[:, 0] - 0.25 * X[:, 1] ** 2 + 2.0),
    ("a*exp(b*x2) + c*x0", lambda X: 0.5 * np.exp(0.7 * X[:, 2]) + np.sin(X[:, 0])),
    ("a*x0**b + c", lambda X: 2.0 * X[:, 0] ** 1.5 + 1.0),
]


@pytest.fixture(scope="module")
def data(make_dataset: Callable[..., Dataset]) -> list[Dataset]:
    return [make_dataset(fn, seed=i) for i, (_, fn) in enumerate(CASES)]


def _scipy_bfgs(formula: str, ds: Dataset) -> tuple[np.ndarray, float]:
    f = parse_formula(formula, ds.feature_names)

    def mse(c: np.ndarray) -> float:
        pred = evaluate_numpy(f, ds.X_train, ds.feature_names, dict(zip(f.constants, c)))
        return float(np.mean((pred - ds.y_train) ** 2))

    out = minimize(mse, np.ones(len(f.constants)), method="BFGS")
    return np.asarray(out.x), float(out.fun)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_llmsr_fit_matches_scipy_bfgs_from_ones(index: int, data: list[Dataset]) -> None:
    formula = CASES[index][0]
    ds = data[index]
    result = Evaluator(ds, method="llmsr", dtype="float64").fit(formula)
    assert result.status == "ok", result.error
    ref_c, ref_mse = _scipy_bfgs(formula, ds)
    got = np.array(list(result.constants.values()))
    # Both at the optimum: equal MSE, up to the gradient tolerance when the fit is exact.
    assert result.train_mse == pytest.approx(ref_mse, rel=1e-5, abs=1e-8 * np.var(ds.y_train))
    np.testing.assert_allclose(got, ref_c, rtol=1e-3, atol=1e-5)


def test_llmsr_starts_from_ones_only(make_dataset: Callable[..., Dataset]) -> None:
    # One start from all ones whatever ``restarts`` says: the fit does not depend on it.
    ds = make_dataset(lambda X: np.cos(5.0 * X[:, 0]), seed=11)
    one = Evaluator(ds, method="llmsr", dtype="float64", restarts=1).fit("a*cos(b*x0)")
    many = Evaluator(ds, method="llmsr", dtype="float64", restarts=8).fit("a*cos(b*x0)")
    assert one.constants == many.constants
    ref_c, _ = _scipy_bfgs("a*cos(b*x0)", ds)
    assert one.status == "ok" and np.all(np.isfinite(ref_c))


def test_method_option_is_validated_and_defaults_to_lm(data: list[Dataset]) -> None:
    assert Evaluator(data[0]).options.method == "lm"
    with pytest.raises(ValueError, match="method"):
        Evaluator(data[0], method="newton")
    lm = Evaluator(data[0]).options.fit_key()
    assert Evaluator(data[0], method="llmsr").options.fit_key() != lm  # separate cache entries
