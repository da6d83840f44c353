"""SymbolicRegressor on a real local Ray cluster: the issue's acceptance problem fitted once for
the module (2.5*x0**2 + sin(x1), max_seconds=60), and everything read from that fit (its
plots and sr-dist-query too); a second, short fit continues it (warm_start). Two real searches
in all."""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import sympy
import torch
from omegaconf import OmegaConf

from sr_dist import SymbolicRegressor
from sr_dist.query_cli import run as query
from sr_dist.results import open_results, read_run, run_data_path, select_candidate
from sr_dist.viz import load_run, save_plot

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]

EQUATION_COLUMNS = ["complexity", "loss", "score", "expression", "simplified", "constants",
                    "sympy_format"]


def _problem(rows: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(seed).uniform(-3, 3, (rows, 2))
    return X, 2.5 * X[:, 0] ** 2 + np.sin(X[:, 1])


def _nmse(prediction: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((prediction - y) ** 2) / np.var(y))


@pytest.fixture(scope="module")
def fitted(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> SymbolicRegressor:
    X, y = _problem()
    results = tmp_path_factory.mktemp("estimator")
    est = SymbolicRegressor(max_seconds=60, results_path=str(results), verbose=False)
    assert est.fit(X, y) is est
    return est


def test_acceptance(fitted: SymbolicRegressor) -> None:
    X, y = _problem()
    x0, x1 = sympy.symbols("x0 x1", real=True)
    truth = sympy.Rational(5, 2) * x0**2 + sympy.sin(x1)
    assert sympy.simplify(fitted.sympy() - truth) == 0
    prediction = fitted.predict(X)
    assert _nmse(prediction, y) < 1e-10
    exported = fitted.jax()
    via_jax = np.asarray(exported["callable"](X, exported["parameters"]))
    assert np.allclose(via_jax, prediction, rtol=1e-5, atol=1e-5 * np.std(y))


def test_equations_table(fitted: SymbolicRegressor) -> None:
    eq = fitted.equations_
    assert isinstance(eq, pa.Table) and eq.column_names[:7] == EQUATION_COLUMNS
    frame = eq.to_pandas()
    assert list(frame.columns[:7]) == EQUATION_COLUMNS and len(frame) >= 2
    assert frame["complexity"].is_monotonic_increasing
    assert frame["loss"].is_monotonic_decreasing  # a Pareto front
    best = fitted.best_
    assert best["index"] == fitted.best_index_ and best == fitted._row(fitted.best_index_)
    assert best["simplified"] == "2.5*x0**2 + sin(x1)"
    assert best["expression"] != best["simplified"]  # the raw form keeps its constants by name
    # select="best" is the lowest validation NMSE, as the end-of-run report's best formula.
    assert best["loss"] == frame["loss"].min()
    parsimony = select_candidate(
        pa.table({"candidate_id": eq["candidate_id"], "expression": eq["expression"],
                  "complexity": eq["complexity"], "val_nmse": eq["loss"],
                  "status": pa.array(["ok"] * eq.num_rows)}), rule="parsimony")
    picky = pickle.loads(pickle.dumps(fitted)).set_params(select="parsimony")
    picky._adopt(eq, run_id=fitted.run_id_, results=Path(fitted.results_path_),
                 names=fitted.variable_names_, target_name="y", width=2, feature_names_in=None)
    assert picky.best_["candidate_id"] == parsimony["candidate_id"]


def test_every_entry_exports_alike(fitted: SymbolicRegressor) -> None:
    X, y = _problem(50, seed=9)  # rows the search never saw
    for i in range(fitted.equations_.num_rows):
        for raw in (False, True):
            want = fitted.predict(X, index=i, raw=raw)
            assert np.allclose(fitted.numpy_function(i, raw=raw)(X), want, rtol=1e-12)
            with torch.no_grad():
                got = fitted.torch(i, raw=raw)(torch.as_tensor(X)).numpy()
            assert np.allclose(got, want, rtol=1e-9, atol=1e-12)
            assert isinstance(fitted.latex(i, raw=raw), str)
    assert _nmse(fitted.predict(X, raw=True), y) < 1e-10  # the raw fit is exact too
    assert fitted.pytorch == fitted.torch  # PySR's name


def test_predict_checks_its_input(fitted: SymbolicRegressor) -> None:
    X, y = _problem(30, seed=4)
    want = fitted.predict(X)
    assert fitted.n_features_in_ == 2 and fitted.variable_names_ == ("x0", "x1")
    # Tables are matched by column name, whatever their order.
    frame = pd.DataFrame({"x1": X[:, 1], "x0": X[:, 0]})
    assert np.allclose(fitted.predict(frame), want, rtol=1e-12)
    assert np.allclose(fitted.predict(pa.table({"x1": X[:, 1], "x0": X[:, 0]})), want, rtol=1e-12)
    assert fitted.predict(X[:1]).shape == (1,)
    with pytest.raises(ValueError, match="X has 3 features, but SymbolicRegressor is expecting 2"):
        fitted.predict(np.ones((4, 3)))
    with pytest.raises(ValueError, match="Expected 2D array"):
        fitted.predict(X[:, 0])
    with pytest.raises(ValueError, match="NaN or inf"):
        fitted.predict(np.full((2, 2), np.nan))
    with pytest.raises(IndexError, match="index must be an equations_ row"):
        fitted.predict(X, index=99)
    assert fitted.score(X, y) > 1 - 1e-9


def test_fit_leaves_params(fitted: SymbolicRegressor) -> None:
    params = fitted.get_params()
    assert params["max_seconds"] == 60 and params["warm_start"] is False
    assert params == SymbolicRegressor(**params).get_params()
    assert fitted.__sklearn_is_fitted__()


def test_the_run_is_an_ordinary_run(fitted: SymbolicRegressor) -> None:
    record = read_run(fitted.results_path_, fitted.run_id_)
    assert record is not None and record.status == "completed"
    assert record.dataset.startswith("arrays:")
    config = OmegaConf.create(record.config)  # the config the CLI would have composed
    assert config.search.max_seconds == 60 and config.dataset.source == record.dataset
    root = Path(fitted.results_path_)
    assert not list(root.rglob("*.csv"))  # the data never went through a file
    assert open_results(root).candidates.count_rows() >= fitted.equations_.num_rows


def test_pickle_round_trip(fitted: SymbolicRegressor) -> None:
    X, _ = _problem(20, seed=5)
    twin = pickle.loads(pickle.dumps(fitted))
    assert twin.equations_.equals(fitted.equations_) and twin.best_ == fitted.best_
    assert np.array_equal(twin.predict(X), fitted.predict(X))


def test_from_results(fitted: SymbolicRegressor) -> None:
    X, _ = _problem(20, seed=6)
    again = SymbolicRegressor.from_results(fitted.results_path_)
    assert again.run_id_ == fitted.run_id_ and again.best_ == fitted.best_
    assert again.equations_.equals(fitted.equations_)
    assert np.array_equal(again.predict(X), fitted.predict(X))
    assert again.max_seconds == 60  # the run's budgets come back as the arguments
    same = SymbolicRegressor.from_results(fitted.results_path_, run_id=fitted.run_id_)
    assert same.best_ == fitted.best_
    with pytest.raises(ValueError, match="no run 'nope'"):
        SymbolicRegressor.from_results(fitted.results_path_, run_id="nope")


def test_the_run_can_be_plotted_and_simplified(fitted: SymbolicRegressor, tmp_path: Path) -> None:
    # The arrays lived only in memory; the copy kept with the run rebuilds its dataset.
    view = load_run(fitted.results_path_, fitted.run_id_)
    info = save_plot("fit", view, tmp_path / "fit.png")
    assert info.kind == "fit" and info.image and (tmp_path / "fit.png").stat().st_size > 0
    assert run_data_path(fitted.results_path_, fitted.run_id_).is_file()
    out = io.StringIO()
    assert query([fitted.results_path_, "--run", fitted.run_id_, "--format", "json"], out) == 0
    simplified = [row["simplified"] for row in json.loads(out.getvalue())]
    assert simplified and all(simplified)
    assert "2.5*x0**2 + sin(x1)" in simplified


def test_warm_start_continues_the_run(fitted: SymbolicRegressor) -> None:
    X, y = _problem()
    before = read_run(fitted.results_path_, fitted.run_id_)
    assert before is not None
    # max_seconds counts from the agents' start; their first turn alone takes seconds here.
    est = pickle.loads(pickle.dumps(fitted)).set_params(
        warm_start=True, max_seconds=20, target_nmse=None, max_candidates=before.candidates + 40)
    est.fit(X, y)
    assert est.run_id_ == fitted.run_id_  # the same run, continued (run.resume)
    after = read_run(est.results_path_, est.run_id_)
    assert after is not None and after.candidates > before.candidates
    assert any(o.startswith("run.resume=") for o in est.overrides_)
    assert est.best_["simplified"] == "2.5*x0**2 + sin(x1)"
