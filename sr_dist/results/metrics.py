"""LLM-SRBench-style scores of a formula's predictions, and of a stored run's best candidate.

Definitions (LLM-SRBench, after Kamienny et al. 2022, "End-to-end symbolic regression with
transformers"; also SR-Scientist):

* ``nmse`` = mean((ŷ - y)²) / var(y) (population variance).
* ``r2`` = 1 - SSE / SST (the coefficient of determination on the same points).
* ``acc_<τ>`` = 1 if max_i |ŷ_i - y_i| / |y_i| <= τ else 0: *every* point within relative
  error τ (``max(|y_i|, 1e-12)`` guards a zero target).
* ``acc_<τ>_worst5`` = the same with the worst 5% of points dropped: 1 if at least 95% of the
  points are within relative error τ. This is the ``accuracy_l1`` rule of Kamienny et al.'s
  code (``np.isclose(y_pred, y, atol=0, rtol=τ).mean() >= 0.95``); a non-finite prediction is
  a point outside τ.
* ``point_acc_<τ>`` = the fraction of points within relative error τ (a softer, per-point
  reading some papers use; reported for reference).

Non-finite predictions count as infinitely wrong: NMSE ``inf``, ``r2`` ``-inf``, Acc 0.
:func:`score_run` recomputes these for a stored run's best candidate on the test split of the
dataset that run searched, rebuilt from its ``runs`` row's config.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.dataset as pads

from sr_dist.data import ARRAYS_SCHEME, Dataset, DatasetError, load_dataset, resolve_units
from sr_dist.formula import FormulaError, evaluate_numpy, parse_formula
from sr_dist.results.query import ResultsNotFound, open_results, read_run
from sr_dist.results.run_data import read_run_data
from sr_dist.results.schema import RunRecord, constants_from_json
from sr_dist.results.selection import SELECTION_RULES, select_candidate

__all__ = ["DEFAULT_TAUS", "RunScore", "ScoreError", "load_run_dataset", "regression_metrics", "split_predictions",
           "score_run"]

#: The tolerances reported by default (LLM-SRBench reports τ = 0.1).
DEFAULT_TAUS: tuple[float, ...] = (0.1,)
_ZERO_GUARD = 1e-12
#: Acc_τ's worst-5% variant: the share of points that must be within τ.
_WORST5_KEEP = 0.95


class ScoreError(ValueError):
    """A run cannot be scored (no such run, no ok candidate, a dataset that cannot be rebuilt)."""


def _tau_name(tau: float) -> str:
    return format(tau, "g").replace("-", "m")


def regression_metrics(y_true: Any, y_pred: Any,
                       taus: Sequence[float] = DEFAULT_TAUS) -> dict[str, float]:
    """NMSE, R², Acc_τ (max relative error), its worst-5% variant and the per-point fraction.

    Raises ``ValueError`` for inputs of different lengths, empty inputs or a bad τ.
    """
    y = np.asarray(y_true, dtype=np.float64).ravel()
    p = np.asarray(y_pred, dtype=np.float64).ravel()
    if y.shape != p.shape:
        raise ValueError(f"y_true has {y.size} values, y_pred has {p.size}")
    if y.size == 0:
        raise ValueError("cannot score an empty set of points")
    if not np.all(np.isfinite(y)):
        raise ValueError("y_true has non-finite values")
    for tau in taus:
        if not (isinstance(tau, (int, float)) and tau > 0 and math.isfinite(tau)):
            raise ValueError(f"tolerance must be a positive number, got {tau!r}")
    finite = bool(np.all(np.isfinite(p)))
    var = float(np.var(y))
    out: dict[str, float] = {"n": float(y.size)}
    if finite:
        err = p - y
        mse = float(np.mean(err * err))
        sst = float(np.sum((y - y.mean()) ** 2))
        out["mse"] = mse
        out["nmse"] = mse / var if var > 0 else (0.0 if mse == 0 else math.inf)
        out["r2"] = (1.0 - float(np.sum(err * err)) / sst) if sst > 0 else (
            1.0 if mse == 0 else -math.inf)
        rel = np.abs(err) / np.maximum(np.abs(y), _ZERO_GUARD)
        worst = float(np.max(rel))
        p95 = float(np.percentile(rel, 95))
    else:
        out["mse"], out["nmse"], out["r2"] = math.inf, math.inf, -math.inf
        rel = None
        worst = p95 = math.inf
    out["max_rel_error"] = worst
    out["p95_rel_error"] = p95
    for tau in taus:
        name = _tau_name(tau)
        out[f"acc_{name}"] = 1.0 if worst <= tau else 0.0
        within = float(np.mean(rel <= tau)) if rel is not None else float(
            np.mean(np.isfinite(p) & (np.abs(p - y) <= tau * np.maximum(np.abs(y), _ZERO_GUARD))))
        out[f"acc_{name}_worst5"] = 1.0 if within >= _WORST5_KEEP else 0.0
        out[f"point_acc_{name}"] = within
    return out


@dataclass(frozen=True)
class RunScore:
    """:func:`score_run`'s answer: the scored candidate and its metrics on the test split."""

    run_id: str
    dataset: str
    candidate_id: str
    expression: str
    constants: dict[str, float]
    split: str
    metrics: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "dataset": self.dataset, "candidate_id": self.candidate_id,
                "expression": self.expression, "constants": dict(self.constants),
                "split": self.split, **self.metrics}


def _dataset_args(config_text: str | None) -> dict[str, Any]:
    """``load_dataset`` arguments from a runs row's config (YAML or JSON text)."""
    if not config_text:
        raise ScoreError("the run's row has no config; cannot rebuild its dataset")
    try:
        import yaml

        cfg = yaml.safe_load(config_text)
    except Exception as exc:  # noqa: BLE001 - any parse failure is a clear ScoreError
        raise ScoreError(f"the run's config cannot be read: {exc}") from exc
    if not isinstance(cfg, Mapping) or not isinstance(cfg.get("dataset"), Mapping):
        raise ScoreError("the run's config has no dataset section")
    d = cfg["dataset"]
    if not d.get("source"):
        raise ScoreError("the run's config has no dataset.source")
    args: dict[str, Any] = {"source": str(d["source"])}
    for key in ("n", "seed", "noise", "target"):
        if d.get(key) is not None:
            args[key] = d[key]
    for key in ("split_kind", "split_variable", "weight"):  # absent in older runs' configs
        if d.get(key) is not None:
            args[key] = d[key]
    if isinstance(d.get("split"), str):  # dataset.split=ood: a kind, the default fractions
        args["split_kind"] = d["split"]
    elif d.get("split") is not None:
        args["split"] = tuple(float(v) for v in d["split"])
    return args


def _config_units(config_text: str | None) -> Any:
    """The run config's ``dataset.units`` (``None`` when it has none or cannot be read)."""
    try:
        import yaml

        cfg = yaml.safe_load(config_text or "")
    except Exception:  # noqa: BLE001 - _dataset_args reports an unreadable config
        return None
    d = cfg.get("dataset") if isinstance(cfg, Mapping) else None
    return d.get("units") if isinstance(d, Mapping) else None


def load_run_dataset(record: RunRecord,
                     results: str | os.PathLike[str] | None = None) -> Dataset:
    """The dataset ``record``'s run searched, with the same seeded split; :class:`ScoreError`
    says why when it cannot be rebuilt (no config, a CSV that moved, a missing arrays file).

    A run of files or Feynman equations is loaded again from its config. A run of in-memory
    arrays (``arrays:<hash>``, a ``SymbolicRegressor`` fit) is read back from the copy the
    estimator kept under ``results`` (the run's results path), with its config's units.
    """
    try:
        if not str(record.dataset).startswith(ARRAYS_SCHEME):
            return load_dataset(**_dataset_args(record.config))
        if results is None:
            raise ScoreError(f"run {record.run_id} searched arrays held in memory; pass its "
                             "results path (load_run_dataset(record, results=PATH)) to read "
                             "the copy kept there")
        dataset = read_run_data(results, record.run_id, name=record.dataset)
        units = _config_units(record.config)
        return dataset if units is None else dataset.with_units(resolve_units(units, dataset))
    except DatasetError as exc:
        raise ScoreError(f"the run's dataset cannot be rebuilt: {exc}") from exc


def split_predictions(expression: str, constants: Mapping[str, float], dataset: Dataset,
                      split: str, *, what: str = "the formula") -> tuple[np.ndarray, np.ndarray]:
    """``(y, predictions)`` of a fitted formula on ``split`` of ``dataset``, in float64 numpy;
    :class:`ScoreError` for an empty split or a formula that cannot be evaluated."""
    X = {"train": dataset.X_train, "val": dataset.X_val, "test": dataset.X_test}[split]
    y = {"train": dataset.y_train, "val": dataset.y_val, "test": dataset.y_test}[split]
    if len(y) == 0:
        raise ScoreError(f"the dataset's {split} split is empty; pick another split")
    try:
        formula = parse_formula(expression, dataset.feature_names)
        pred = evaluate_numpy(formula, X, dataset.feature_names, constants)
    except (FormulaError, ValueError, KeyError) as exc:
        raise ScoreError(f"{what} cannot be evaluated: {exc}") from exc
    return np.asarray(y, dtype=np.float64), np.asarray(pred)


def score_run(path: str | os.PathLike[str], run_id: str, *, candidate_id: str | None = None,
              split: str = "test", taus: Sequence[float] = DEFAULT_TAUS,
              dataset: Any | None = None, select: str = "best") -> RunScore:
    """Score ``run_id``'s chosen candidate (or ``candidate_id``) on ``split`` of its dataset.

    ``select`` is a rule of :func:`sr_dist.results.select_candidate`: ``best`` is the runs
    row's ``best_candidate_id`` (the best by the run's ``search.rank_by``), ``parsimony`` the PySR-style pick
    that resists overfitting noisy data. The expression and constants come from the candidates
    table. The dataset is rebuilt from the runs row's config
    (``dataset.source/n/seed/noise/target/split``; an estimator run's arrays from the copy
    under ``path``, :func:`load_run_dataset`) unless ``dataset`` is given. Predictions are
    computed in float64 numpy (``sr_dist.formula.evaluate_numpy``).
    Raises :class:`ScoreError` with the reason when the run cannot be scored.
    """
    if split not in ("train", "val", "test"):
        raise ScoreError(f"split must be 'train', 'val' or 'test', got {split!r}")
    if select not in SELECTION_RULES:
        raise ScoreError(f"select must be one of {SELECTION_RULES}, got {select!r}")
    record = read_run(path, run_id)
    if record is None:
        raise ScoreError(f"no run {run_id!r} under {os.fspath(path)}")
    wanted = candidate_id or record.best_candidate_id
    if candidate_id is None and select != "best":
        try:
            picked = select_candidate(path, run_id, rule=select)
        except ResultsNotFound as exc:
            raise ScoreError(str(exc)) from exc
        wanted = picked["candidate_id"] if picked is not None else None
    if not wanted:
        raise ScoreError(f"run {run_id!r} has no best candidate (no ok candidate was written)")
    try:
        results = open_results(path)
    except ResultsNotFound as exc:
        raise ScoreError(str(exc)) from exc
    table = results.candidates.to_table(
        filter=(pads.field("run_id") == run_id) & (pads.field("candidate_id") == wanted),
        columns=["candidate_id", "expression", "constants", "status", "dataset"])
    if table.num_rows == 0:
        raise ScoreError(f"candidate {wanted!r} of run {run_id!r} is not in the candidates table")
    row = table.slice(0, 1).to_pylist()[0]
    try:
        constants = constants_from_json(row["constants"])
    except ValueError as exc:
        raise ScoreError(f"candidate {wanted!r} has unreadable constants: {exc}") from exc
    if dataset is None:
        dataset = load_run_dataset(record, path)
    y, pred = split_predictions(row["expression"], constants, dataset, split,
                                what=f"candidate {wanted!r}")
    return RunScore(run_id=run_id, dataset=record.dataset, candidate_id=wanted,
                    expression=row["expression"], constants=constants, split=split,
                    metrics=regression_metrics(y, pred, taus))
