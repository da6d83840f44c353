"""SymbolicRegressor without a search: the scikit-learn protocol, its input checks, and the one
settings path it shares with the CLI. Nothing here starts Ray (each test would cost a run)."""

from __future__ import annotations

import functools
import pickle
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import estimator_checks_generator

from sr_dist.estimator import NotFittedError, SymbolicRegressor
from sr_dist.estimator.config import compose_config, overrides_for
from sr_dist.estimator.inputs import check_sample_weight
from sr_dist.search import SettingsError, settings_from_config

#: scikit-learn's checks that fit a model, each a real search here (Ray actors, the evaluator's
#: compile; 30-40 s a fit on the 2-core test machine, several fits a check): skipped so the suite
#: stays within its time. What they check is tested once on the module-scoped fitted estimator
#: of test_estimator_fit.py (named after each reason); the checks below that refuse bad input
#: before any search runs are all run.
FITTING = "fits a real search per call (tens of seconds each)"
SKIPPED: dict[str, str] = {
    "check_fit_score_takes_y": FITTING,
    "check_estimators_overwrite_params": f"{FITTING}; parameters are only read: see test_fit_leaves_params",
    "check_dont_overwrite_parameters": f"{FITTING}; see test_fit_leaves_params",
    "check_estimators_fit_returns_self": f"{FITTING}; see test_fit_leaves_params",
    "check_readonly_memmap_input": f"{FITTING}; the data layer copies X (freeze)",
    "check_n_features_in_after_fitting": f"{FITTING}; see test_predict_checks_its_input",
    "check_positive_only_tag_during_fit": FITTING,
    "check_estimators_dtypes": f"{FITTING}; X is converted to float64 first",
    "check_sample_weights_pandas_series": f"{FITTING}; equal weights are accepted, see test_sample_weight",
    "check_sample_weights_not_an_array": FITTING,
    "check_sample_weights_list": FITTING,
    "check_sample_weights_shape": FITTING,
    "check_sample_weights_not_overwritten": FITTING,
    "check_sample_weight_equivalence_on_dense_data": f"{FITTING}; weighted fits: tests/evaluator/test_evaluator_losses.py",
    "check_dtype_object": FITTING,
    "check_pipeline_consistency": FITTING,
    "check_estimators_nan_inf": f"{FITTING} (after the NaN/inf refusals, tested in test_bad_input)",
    "check_estimators_pickle": f"{FITTING}; see test_pickle_round_trip",
    "check_array_api_input": "the array API is not supported (array_api_support=False)",
    "check_f_contiguous_array_estimator": FITTING,
    "check_regressors_train": FITTING,
    "check_regressor_data_not_an_array": f"{FITTING}; tables and frames: test_predict_checks_its_input",
    "check_regressors_no_decision_function": FITTING,
    "check_supervised_y_2d": FITTING,
    "check_regressors_int": FITTING,
    "check_fit2d_1feature": FITTING,
    "check_dict_unchanged": FITTING,
    "check_fit_idempotent": f"{FITTING}, and the search is not deterministic in time",
    "check_fit_check_is_fitted": f"{FITTING}; see test_unfitted",
    "check_n_features_in": f"{FITTING}; see test_predict_checks_its_input",
    "check_fit2d_predict1d": f"{FITTING}; see test_predict_checks_its_input",
}


def _name(check: Any) -> str:
    return check.func.__name__ if isinstance(check, functools.partial) else check.__name__


def _tiny(tmp: Path) -> SymbolicRegressor:
    """The cheapest possible search, should a check fit after all (none here may)."""
    return SymbolicRegressor(agents=1, max_seconds=5, max_candidates=16, verbose=False,
                             evaluator_options={"warmup": False}, results_path=str(tmp))


CHECK_DIR = Path(__file__).parent / "_never_written"
with warnings.catch_warnings():  # "does not inherit from BaseEstimator": on purpose
    warnings.simplefilter("ignore", UserWarning)
    CHECKS = list(estimator_checks_generator(_tiny(CHECK_DIR), legacy=True,
                                             expected_failed_checks=SKIPPED, mark="skip"))


@pytest.mark.filterwarnings("ignore:Estimator SymbolicRegressor does not inherit")
@pytest.mark.parametrize(("estimator", "check"), CHECKS,
                         ids=[f"{_name(c)}-{i}" for i, (_, c) in enumerate(CHECKS)])
def test_sklearn_check(estimator: SymbolicRegressor, check: Any, tmp_path: Path) -> None:
    estimator.set_params(results_path=str(tmp_path))
    check(estimator)
    # None of the checks that run started a search (a run leaves its runs table behind).
    assert not (tmp_path / "runs").exists()


@pytest.mark.filterwarnings("ignore:Estimator SymbolicRegressor does not inherit")
def test_every_check_is_run_or_skipped_with_a_reason() -> None:
    names = {_name(check) for _, check in estimator_checks_generator(_tiny(CHECK_DIR), legacy=True)}
    assert set(SKIPPED) <= names, sorted(set(SKIPPED) - names)
    assert len(names - set(SKIPPED)) >= 20  # the protocol and input checks that run


def test_params_round_trip() -> None:
    est = SymbolicRegressor(max_seconds=60, agents=3, model_options={"batch_size": 8})
    params = est.get_params()
    assert params["max_seconds"] == 60 and params["agents"] == 3 and params["model"] == "evolve"
    assert params["model_options"] is est.model_options  # stored as given
    twin = clone(est)
    assert twin.get_params() == params and twin is not est
    assert est.set_params(select="parsimony") is est and est.select == "parsimony"
    with pytest.raises(ValueError, match="Invalid parameter 'max_second'.*valid parameters are"):
        est.set_params(max_second=1)
    assert repr(SymbolicRegressor(max_seconds=60)) == "SymbolicRegressor(max_seconds=60)"


def test_unfitted() -> None:
    est = SymbolicRegressor()
    for call in (lambda: est.predict(np.ones((3, 2))), est.sympy, est.latex, est.jax,
                 est.numpy_function):
        with pytest.raises(NotFittedError, match="not fitted yet: call fit"):
            call()
    assert not est.__sklearn_is_fitted__()
    assert pickle.loads(pickle.dumps(est)).get_params() == est.get_params()


def _xy(rows: int = 40) -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(0).uniform(1, 2, (rows, 2))
    return X, X[:, 0] + X[:, 1]


X, Y = _xy()
BAD_INPUT = [
    ((X[:, 0], Y), ValueError, "Expected 2D array, got 1D array"),
    ((X.astype(complex), Y), ValueError, "Complex data not supported"),
    ((np.where(X > 1.9, np.nan, X), Y), ValueError, "NaN/inf"),
    ((X, np.where(Y > 3.5, np.inf, Y)), ValueError, "target array 'y' has"),
    ((X, Y[:-1]), ValueError, "X has 40 rows but y has 39"),
    ((X, np.column_stack([Y, Y])), ValueError, "one formula for one target"),
    ((X[:3], Y[:3]), ValueError, "3 samples"),
    ((X, None), ValueError, "requires y to be passed"),
    ((np.array([["a", "b"]] * 40), Y), ValueError, "X must hold numbers"),
]


@pytest.mark.parametrize(("args", "error", "message"), BAD_INPUT, ids=[b[2][:25] for b in BAD_INPUT])
def test_bad_input(args: tuple, error: type[Exception], message: str, tmp_path: Path) -> None:
    est = _tiny(tmp_path)
    with pytest.raises(error, match=message.replace("(", r"\(")):
        est.fit(*args)
    assert not (tmp_path / "runs").exists()


def test_bad_names_and_settings_fail_before_a_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="variable_names must be 2 names"):
        _tiny(tmp_path).fit(X, Y, variable_names=["a"])
    with pytest.raises(ValueError, match="variable name 'sin' cannot be a formula variable"):
        _tiny(tmp_path).fit(X, Y, variable_names=["a", "sin"])
    with pytest.raises(SettingsError, match="search.agents must be positive"):
        _tiny(tmp_path).set_params(agents=0).fit(X, Y)
    with pytest.raises(ValueError, match="select must be one of best, parsimony"):
        _tiny(tmp_path).set_params(select="shortest").fit(X, Y)
    with pytest.raises(ValueError, match="model must be the name of a model preset"):
        _tiny(tmp_path).set_params(model={"provider": "evolve"}).fit(X, Y)
    assert not (tmp_path / "runs").exists()


def test_sample_weight(tmp_path: Path) -> None:
    """Unequal weights are taken (a weighted fit: tests/evaluator/test_evaluator_losses.py);
    weights that cannot work are refused before a run starts."""
    weights = check_sample_weight(np.arange(40.0), 40)
    assert weights is not None and weights.tolist() == list(np.arange(40.0))
    assert check_sample_weight(None, 40) is None
    with pytest.raises(ValueError, match="all zero"):
        _tiny(tmp_path).fit(X, Y, sample_weight=np.zeros(40))
    with pytest.raises(ValueError, match="finite and non-negative"):
        _tiny(tmp_path).fit(X, Y, sample_weight=-np.ones(40))
    with pytest.raises(ValueError, match="one number per row"):
        _tiny(tmp_path).fit(X, Y, sample_weight=np.ones(39))
    assert not (tmp_path / "runs").exists()


def test_defaults_compose_the_cli_default_config(tmp_path: Path) -> None:
    """One settings path: the estimator's defaults are the CLI's, key for key."""
    ours = settings_from_config(compose_config(overrides_for(SymbolicRegressor().get_params())))
    cli = settings_from_config(compose_config([]))
    assert ours.config_yaml == cli.config_yaml


def test_arguments_are_the_cli_overrides(tmp_path: Path) -> None:
    est = SymbolicRegressor(
        "evolve", agents=3, max_seconds=60, max_candidates=500, target_nmse=None, seed=4,
        evaluator="gpu", evaluator_options={"max_batch": 7, "layout": "diagonal"},
        model_options={"batch_size": 8}, results_path=str(tmp_path / "r w's"),
        ray_address="auto", overrides=("dataset.split=[0.8,0.1,0.1]",))
    ours = settings_from_config(compose_config(overrides_for(
        est.get_params(), units={"x0": "kg*m/s**2", "x1": "s", "y": "m"}, resume="R1")))
    cli = settings_from_config(compose_config([
        "evaluator=gpu", "search.agents=3", "search.max_seconds=60", "search.max_candidates=500",
        "search.target_nmse=null", "search.seed=4", "evaluator.max_batch=7",
        "+evaluator.layout=diagonal", "model.batch_size=8", f"results.path='{tmp_path}/r w\\'s'",
        "ray.address=auto", "dataset.split=[0.8,0.1,0.1]",
        "dataset.units={x0:'kg*m/s**2',x1:s,y:m}", "run.resume=R1"]))
    assert ours.config_yaml == cli.config_yaml
    assert ours.results.path == tmp_path / "r w's" and ours.evaluator.options["layout"] == "diagonal"


def test_import_sr_dist_stays_cheap() -> None:
    code = ("import sys, sr_dist; heavy = [m for m in ('sr_dist.estimator', 'hydra', 'jax', 'ray') "
            "if m in sys.modules]; print(heavy); print(sr_dist.SymbolicRegressor.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=120).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "sr_dist.estimator.regressor"
