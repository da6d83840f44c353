"""``SymbolicRegressor``: sr-dist as a scikit-learn estimator, for notebooks and pipelines.

It follows scikit-learn's estimator protocol without importing scikit-learn (a test-only
dependency): the constructor only stores its arguments, ``get_params``/``set_params`` read and
write them, ``fit`` returns the estimator, fitted attributes end in ``_``. A fit is one
ordinary sr-dist run: the arguments become the CLI's Hydra config (:mod:`.config`), the arrays
become an in-memory :class:`~sr_dist.data.Dataset` that reaches the actors through Ray's object
store (never a temporary file), and the results are the run's Parquet tables under
``results_path``, which ``sr-dist-query`` reads like any other run.
"""

from __future__ import annotations

import inspect
import io
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sr_dist.conf.schema import ResultsConfig, SearchConfig
from sr_dist.estimator.config import compose_config, overrides_for
from sr_dist.estimator.exports import (
    check_exports,
    form_of,
    jax_export,
    latex_export,
    numpy_export,
    sympy_export,
    torch_available,
    torch_export,
)
from sr_dist.estimator.front import build_equations, constants_of, read_record, write_record
from sr_dist.estimator.inputs import (
    Features,
    as_features,
    as_target,
    check_sample_weight,
    names_or_default,
)
from sr_dist.results.run_data import write_run_data

__all__ = ["NotFittedError", "SymbolicRegressor"]

#: The selection rules ``select`` takes (:mod:`sr_dist.results.selection`).
SELECT_RULES = ("best", "parsimony")


class NotFittedError(ValueError, AttributeError):
    """The estimator was used before ``fit`` (or ``from_results``); scikit-learn's own
    ``NotFittedError`` is both of these too, so its checks accept this one."""


class SymbolicRegressor:
    """Symbolic regression with sr-dist, following scikit-learn's estimator protocol.

    The arguments mirror the config keys (``docs/running.md``): ``model`` (a model preset:
    ``evolve``, ``openai``, ...) and ``model_options`` (its keys), ``agents``, ``max_seconds``,
    ``max_candidates``, ``max_turns``, ``target_nmse``, ``seed``, ``evaluator`` (``cpu`` or
    ``gpu``) and ``evaluator_options``, ``ray_address``, ``results_path``; ``overrides`` adds
    any other ``KEY=VALUE`` the CLI takes (``dataset.split=[0.8,0.1,0.1]``). ``select``: which
    Pareto formula is ``best_`` (``best``: the lowest validation NMSE, what the end-of-run
    report calls the best formula; ``parsimony``: the last big drop in loss per complexity).
    ``warm_start``: a second ``fit`` continues the last run (``run.resume``) instead of
    starting over. ``verbose``: print the run's progress and report.
    """

    def __init__(
        self,
        model: str = "evolve",
        *,
        model_options: Mapping[str, Any] | None = None,
        agents: int = SearchConfig.agents,
        max_seconds: float = SearchConfig.max_seconds,
        max_candidates: int = SearchConfig.max_candidates,
        max_turns: int = SearchConfig.max_turns,
        target_nmse: float | None = SearchConfig.target_nmse,
        seed: int = SearchConfig.seed,
        evaluator: str = "cpu",
        evaluator_options: Mapping[str, Any] | None = None,
        ray_address: str | None = None,
        results_path: str = ResultsConfig.path,
        select: str = "best",
        warm_start: bool = False,
        verbose: bool = True,
        overrides: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.model_options = model_options
        self.agents = agents
        self.max_seconds = max_seconds
        self.max_candidates = max_candidates
        self.max_turns = max_turns
        self.target_nmse = target_nmse
        self.seed = seed
        self.evaluator = evaluator
        self.evaluator_options = evaluator_options
        self.ray_address = ray_address
        self.results_path = results_path
        self.select = select
        self.warm_start = warm_start
        self.verbose = verbose
        self.overrides = overrides

    # --- scikit-learn's protocol -----------------------------------------------------------

    @classmethod
    def _param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return [p.name for p in signature.parameters.values() if p.name != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor arguments as stored (``deep`` is accepted; nothing nests)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> SymbolicRegressor:
        valid = self._param_names()
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"Invalid parameter {key!r} for SymbolicRegressor; valid "
                                 f"parameters are: {', '.join(valid)}")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        shown = [f"{k}={v!r}" for k, v in self.get_params().items()
                 if not (k in defaults and _same(v, defaults[k]))]
        return f"SymbolicRegressor({', '.join(shown)})"

    def __sklearn_tags__(self) -> Any:
        """scikit-learn's tags (called only by scikit-learn, so importing it here is free)."""
        from sklearn.utils import InputTags, RegressorTags, Tags, TargetTags

        return Tags(estimator_type="regressor", target_tags=TargetTags(required=True),
                    regressor_tags=RegressorTags(), input_tags=InputTags(allow_nan=False),
                    non_deterministic=True)

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "equations_")

    _estimator_type = "regressor"

    # --- fit ---------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any, variable_names: Sequence[str] | None = None,
            units: Mapping[str, Any] | None = None, sample_weight: Any = None) -> SymbolicRegressor:
        """Search formulas for ``y`` from the columns of ``X``; returns ``self``.

        ``X``: a numpy array, pandas DataFrame or pyarrow Table; ``y``: numbers (array, Series).
        ``variable_names``: the formula variables' names (default: the table's column names,
        else ``x0, x1, ...``). ``units``: name -> unit for every variable and the target (``y``,
        or the Series' name), to check candidates for dimensional consistency.
        ``sample_weight``: one non-negative weight per row; it weights the fitting loss and the
        NMSE every candidate is ranked by (docs/objectives.md).
        """
        from sr_dist.data import dataset_from_arrays
        from sr_dist.search import run_search, settings_from_config

        if self.select not in SELECT_RULES:
            raise ValueError(f"select must be one of {', '.join(SELECT_RULES)}, got {self.select!r}")
        features = as_features(X)
        rows, width = features.matrix.shape
        target = as_target(y, rows)
        weights = check_sample_weight(sample_weight, rows)
        names = self._variable_names(features, variable_names)
        target_name = "y" if "y" not in names else "target"
        resume = getattr(self, "run_id_", None) if self.warm_start else None
        if resume is not None and Path(str(self.results_path)).resolve() != Path(self.results_path_):
            resume = None  # another results path: nothing there to continue
        overrides = overrides_for(self.get_params(), units=units, resume=resume)
        settings = settings_from_config(compose_config(overrides))
        dataset = dataset_from_arrays(features.matrix, target, names, target_name,
                                      seed=settings.dataset.seed, split=settings.dataset.split,
                                      split_kind=settings.dataset.split_kind,
                                      split_variable=settings.dataset.split_variable,
                                      sample_weight=weights)
        overrides = overrides_for(self.get_params(), units=units, resume=resume, source=dataset.name)
        cfg = compose_config(overrides)
        out = sys.stdout if self.verbose else io.StringIO()
        summary = run_search(cfg, dataset=dataset, stream=out,
                             handle_signals=threading.current_thread() is threading.main_thread(),
                             keep_cluster=True)
        # The arrays live only in this process: keep a copy with the run, so its plots, report,
        # scores and simplified forms (sr-dist-query, sr_dist.viz) can rebuild the dataset.
        write_run_data(summary.results_path, summary.run_id, dataset)
        if summary.best is None:
            raise RuntimeError(f"run {summary.run_id} fitted no formula ({summary.status}, "
                               f"{summary.stop_reason}); see sr-dist-query {summary.results_path} "
                               f"--run {summary.run_id}, or give it more time (max_seconds)")
        X_check, y_check = (dataset.X_val, dataset.y_val) if dataset.y_val.size else \
            (dataset.X_train, dataset.y_train)
        from sr_dist.results import pareto_front

        front = pareto_front(summary.results_path, run_id=summary.run_id).to_pylist()
        equations = build_equations(front, X_check, y_check, names)
        self._adopt(equations, run_id=summary.run_id, results=Path(summary.results_path),
                    names=names, target_name=target_name, width=width,
                    feature_names_in=features.names if variable_names is None else None)
        self.stop_reason_ = summary.stop_reason
        self.overrides_ = tuple(overrides)
        self._check_all_exports(dataset.X_train)
        write_record(self.results_path_, self.run_id_, self.equations_, {
            "variables": list(names), "target": target_name, "n_features_in": width,
            "feature_names_in": None if self.feature_names_in_is_none else list(names),
            "dataset": dataset.name,
        })
        return self

    def _variable_names(self, features: Features, variable_names: Sequence[str] | None) -> tuple[str, ...]:
        width = features.matrix.shape[1]
        if variable_names is not None:
            if isinstance(variable_names, str) or len(variable_names) != width:
                raise ValueError(f"variable_names must be {width} names, one per column of X, "
                                 f"got {variable_names!r}")
            return tuple(str(v) for v in variable_names)
        return names_or_default(features.names, width)

    def _adopt(self, equations: pa.Table, *, run_id: str, results: Path, names: Sequence[str],
               target_name: str, width: int, feature_names_in: Sequence[str] | None) -> None:
        """Set the fitted attributes from an equations table."""
        if equations.num_rows == 0:
            raise RuntimeError(f"run {run_id} has no fitted formula to build an estimator from")
        self.equations_ = equations
        self.run_id_ = run_id
        self.results_path_ = str(results.resolve())
        self.variable_names_ = tuple(names)
        self.target_name_ = target_name
        self.n_features_in_ = int(width)
        if feature_names_in is not None:
            self.feature_names_in_ = np.asarray(list(feature_names_in), dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.best_index_ = self._select_index()
        self.best_ = self._row(self.best_index_)

    @property
    def feature_names_in_is_none(self) -> bool:
        return not hasattr(self, "feature_names_in_")

    def _select_index(self) -> int:
        """The ``select`` rule over the front (:func:`sr_dist.results.select_candidate`)."""
        from sr_dist.results import select_candidate

        eq = self.equations_
        table = pa.table({
            "candidate_id": eq["candidate_id"], "expression": eq["expression"],
            "complexity": eq["complexity"], "val_nmse": eq["loss"],
            "status": pa.array(["ok"] * eq.num_rows),
        })
        chosen = select_candidate(table, rule=self.select if self.select in SELECT_RULES else "best")
        ids = eq["candidate_id"].to_pylist()
        return int(ids.index(chosen["candidate_id"]) if chosen is not None else eq.num_rows - 1)

    def _row(self, index: int) -> dict[str, Any]:
        row = {name: self.equations_[name][index].as_py() for name in self.equations_.column_names}
        row["index"] = index
        return row

    def _check_all_exports(self, X_train: np.ndarray) -> None:
        """Every export of every front formula, raw and simplified, against the reference
        evaluator on the training rows (an export that is wrong fails here, not later)."""
        torch_ok = torch_available()
        for i in range(self.equations_.num_rows):
            for raw in (False, True):
                form = self._form(i, raw=raw)
                label = (f"Pareto entry {i} (complexity {self.equations_['complexity'][i].as_py()}, "
                         f"{'raw' if raw else 'simplified'} form)")
                check_exports(form, X_train, label, torch_ok=torch_ok)

    # --- reading the fit -------------------------------------------------------------------

    def _fitted(self) -> None:
        if not hasattr(self, "equations_"):
            raise _not_fitted_error()("This SymbolicRegressor instance is not fitted yet: call "
                                      "fit(X, y) or SymbolicRegressor.from_results(path) first")

    def _index(self, index: int | None) -> int:
        self._fitted()
        if index is None:
            return int(self.best_index_)
        count = self.equations_.num_rows
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) \
                or not -count <= int(index) < count:
            raise IndexError(f"index must be an equations_ row, 0..{count - 1} (or None for "
                             f"best_), got {index!r}")
        return int(index) % int(count)

    def _form(self, index: int | None = None, raw: bool = False) -> Any:
        i = self._index(index)
        if raw:
            return form_of(self.equations_["expression"][i].as_py(),
                           constants_of(self.equations_["constants"][i].as_py()),
                           self.variable_names_)
        return form_of(self.equations_["simplified"][i].as_py(), {}, self.variable_names_)

    def _predict_matrix(self, X: Any) -> np.ndarray:
        self._fitted()
        features = as_features(X)
        matrix = features.matrix
        if features.names is not None and set(self.variable_names_) <= set(features.names) \
                and features.names != self.variable_names_:
            order = [features.names.index(v) for v in self.variable_names_]
            matrix = matrix[:, order]  # a table's columns are matched by name
        if matrix.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {matrix.shape[1]} features, but SymbolicRegressor is "
                             f"expecting {self.n_features_in_} features as input "
                             f"({', '.join(self.variable_names_)})")
        if not np.all(np.isfinite(matrix)):
            raise ValueError("X has NaN or inf values; the formulas are only defined on numbers")
        return matrix

    def predict(self, X: Any, index: int | None = None, *, raw: bool = False) -> np.ndarray:
        """``y`` predicted by ``best_`` (or ``equations_`` row ``index``), from its simplified
        form (``raw=True``: the fitted formula with its constants as fitted)."""
        matrix = self._predict_matrix(X)
        return numpy_export(self._form(index, raw))(matrix)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² of :meth:`predict` on ``(X, y)``, as scikit-learn's regressors score."""
        prediction = self.predict(X)
        target = as_target(y, prediction.shape[0])
        weights = np.ones_like(target) if sample_weight is None else \
            np.asarray(sample_weight, dtype=np.float64)
        mean = np.average(target, weights=weights)
        total = float(np.sum(weights * (target - mean) ** 2))
        residual = float(np.sum(weights * (target - prediction) ** 2))
        if total == 0.0:
            return 1.0 if residual == 0.0 else 0.0
        return 1.0 - residual / total

    def sympy(self, index: int | None = None, *, raw: bool = False) -> Any:
        """The formula as a sympy expression (real symbols; simplified unless ``raw``)."""
        return sympy_export(self._form(index, raw))

    def latex(self, index: int | None = None, *, raw: bool = False) -> str:
        return latex_export(self._form(index, raw))

    def jax(self, index: int | None = None, *, raw: bool = False) -> dict[str, Any]:
        """``{"callable": jitted f(X, parameters), "parameters": jnp array}``, as PySR's."""
        return jax_export(self._form(index, raw))

    def torch(self, index: int | None = None, *, raw: bool = False) -> Any:
        """A ``torch.nn.Module`` computing the formula (needs PyTorch)."""
        return torch_export(self._form(index, raw))

    #: PySR's name for :meth:`torch`.
    pytorch = torch

    def numpy_function(self, index: int | None = None, *, raw: bool = False) -> Any:
        """A plain ``f(X) -> y`` in float64 numpy."""
        return numpy_export(self._form(index, raw))

    # --- reloading ----------------------------------------------------------------------

    @classmethod
    def from_results(cls, path: str | Path, run_id: str | None = None, **params: Any) -> SymbolicRegressor:
        """A fitted estimator rebuilt from a results directory: run ``run_id`` (default: the
        latest run there). A run of this estimator is read back as it was fitted; a CLI run's
        dataset is loaded again from its stored config (its exports checked again)."""
        from sr_dist.results import open_results

        root = Path(path)
        runs = open_results(root).runs.to_table().to_pylist()
        if not runs:
            raise ValueError(f"no runs under {root}")
        if run_id is None:
            record = max(runs, key=lambda r: (r["started_at"], r["updated_at"]))
        else:
            matching = [r for r in runs if r["run_id"] == run_id]
            if not matching:
                raise ValueError(f"no run {run_id!r} under {root}; runs there: "
                                 f"{', '.join(sorted(r['run_id'] for r in runs))}")
            record = max(matching, key=lambda r: r["updated_at"])
        if "results_path" in params:
            raise TypeError("from_results takes the results directory as its path argument; "
                            "do not pass results_path too")
        estimator = cls(results_path=str(root), **{**_params_from_config(record.get("config")), **params})
        kept = read_record(root, record["run_id"])
        if kept is not None:
            equations, meta = kept
            estimator._adopt(equations, run_id=record["run_id"], results=root,
                             names=meta["variables"], target_name=meta.get("target", "y"),
                             width=int(meta["n_features_in"]),
                             feature_names_in=meta.get("feature_names_in"))
        else:
            estimator._adopt_cli_run(root, record)
        estimator.stop_reason_ = record.get("stop_reason")
        return estimator

    def _adopt_cli_run(self, root: Path, record: Mapping[str, Any]) -> None:
        from sr_dist.data import ARRAYS_SCHEME, load_dataset
        from sr_dist.results import pareto_front
        from sr_dist.search import settings_from_config

        if str(record["dataset"]).startswith(ARRAYS_SCHEME):
            raise ValueError(f"run {record['run_id']} searched arrays held in memory and its "
                             f"estimator record ({root}/_estimator/) is missing, so its variable "
                             "names are unknown; fit again")
        from omegaconf import OmegaConf

        settings = settings_from_config(OmegaConf.create(record["config"]), base_dir=root)
        d = settings.dataset
        dataset = load_dataset(d.source, n=d.n, seed=d.seed, noise=d.noise, target=d.target,
                               split=d.split, units=d.units, split_kind=d.split_kind,
                               split_variable=d.split_variable, weight=d.weight)
        front = pareto_front(root, run_id=record["run_id"]).to_pylist()
        X_check, y_check = (dataset.X_val, dataset.y_val) if dataset.y_val.size else \
            (dataset.X_train, dataset.y_train)
        equations = build_equations(front, X_check, y_check, dataset.feature_names)
        self._adopt(equations, run_id=record["run_id"], results=root,
                    names=dataset.feature_names, target_name=dataset.target_name,
                    width=len(dataset.feature_names), feature_names_in=None)
        self._check_all_exports(dataset.X_train)


_SKLEARN_NOT_FITTED: type[NotFittedError] | None = None


def _not_fitted_error() -> type[NotFittedError]:
    """:class:`NotFittedError`, and scikit-learn's too when scikit-learn is loaded already (its
    checks and ``check_is_fitted`` callers test for their own class); never imports it."""
    global _SKLEARN_NOT_FITTED
    if "sklearn" not in sys.modules:
        return NotFittedError
    if _SKLEARN_NOT_FITTED is None:
        from sklearn.exceptions import NotFittedError as SklearnNotFitted

        _SKLEARN_NOT_FITTED = type("NotFittedError", (NotFittedError, SklearnNotFitted), {
            "__module__": __name__, "__doc__": NotFittedError.__doc__})
    return _SKLEARN_NOT_FITTED


def _params_from_config(config: Any) -> dict[str, Any]:
    """The estimator arguments a stored run config sets (its search budgets)."""
    if not config:
        return {}
    from omegaconf import OmegaConf

    try:
        cfg = OmegaConf.to_container(OmegaConf.create(config))
    except Exception:  # noqa: BLE001 - an unreadable config: defaults
        return {}
    search = cfg.get("search") if isinstance(cfg, dict) else None
    if not isinstance(search, dict):
        return {}
    return {k: search[k] for k in ("agents", "max_seconds", "max_candidates", "max_turns",
                                   "target_nmse", "seed") if k in search}


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - arrays and odd objects: shown
        return False

