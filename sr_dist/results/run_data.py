"""The copy of an in-memory dataset kept next to a run's results, so the run can be read later.

A ``SymbolicRegressor.fit`` searches arrays that only ever lived in the caller's memory (dataset
``arrays:<hash>``); no source string can load them again. The estimator therefore keeps them at
``<results>/_estimator/run_id=<id>/data.parquet`` (a folder the results readers skip, like
``_hydra``): one float64 column per variable, then the target, named as in the formulas, with
the split's fractions and seed and the content hash in the file's metadata. That is all
:func:`sr_dist.data.dataset_from_arrays` needs to rebuild the same :class:`Dataset` (the same
rows, the same seeded split, the same name), which plots, reports, scores and simplified forms
of the run use.

It lives here, not in the estimator, because the results layer reads it and must not import
the estimator (``.importlinter``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sr_dist.data import ARRAYS_SCHEME, Dataset, DatasetError, dataset_from_arrays
from sr_dist.results.layout import write_atomic

__all__ = ["RECORD_DIR", "RUN_DATA_FILE", "read_run_data", "record_dir", "run_data_path",
           "write_run_data"]

#: The folder under a results path that holds the estimator's per-run records.
RECORD_DIR = "_estimator"
#: The file in a run's record folder that holds its arrays.
RUN_DATA_FILE = "data.parquet"
#: The Parquet metadata key of the rebuild arguments.
_META_KEY = b"sr_dist.run_data"
#: Bumped when the layout changes, so an old reader refuses a file it would misread.
_FORMAT = 1
#: The column that keeps a weighted dataset's sample weights (a name no variable can have).
_WEIGHT_COLUMN = "__sample_weight__"


def record_dir(results: str | os.PathLike[str], run_id: str) -> Path:
    """``<results>/_estimator/run_id=<id>``: where the estimator keeps what a run needs later."""
    return Path(results) / RECORD_DIR / f"run_id={run_id}"


def run_data_path(results: str | os.PathLike[str], run_id: str) -> Path:
    """The file :func:`write_run_data` writes for ``run_id``."""
    return record_dir(results, run_id) / RUN_DATA_FILE


def write_run_data(results: str | os.PathLike[str], run_id: str, dataset: Dataset) -> Path:
    """Keep ``dataset``'s rows, names and split for ``run_id`` (atomically; a rewrite of the
    same run, a warm start, replaces it)."""
    columns = {name: dataset.X[:, j] for j, name in enumerate(dataset.feature_names)}
    columns[dataset.target_name] = dataset.y
    meta = {
        "format": _FORMAT, "name": dataset.name, "feature_names": list(dataset.feature_names),
        "target_name": dataset.target_name, "seed": int(dataset.splits.seed),
        "split": [float(f) for f in dataset.splits.fractions],
        "content_hash": dataset.content_hash,
        "split_kind": dataset.splits.kind, "split_variable": dataset.splits.variable,
    }
    if dataset.weight is not None:
        columns[_WEIGHT_COLUMN] = dataset.weight
        meta["weight_column"] = _WEIGHT_COLUMN
    table = pa.table({k: pa.array(np.asarray(v, dtype=np.float64)) for k, v in columns.items()})
    table = table.replace_schema_metadata({_META_KEY: json.dumps(meta).encode()})
    path = run_data_path(results, run_id)
    write_atomic(table, path)
    return path


def read_run_data(results: str | os.PathLike[str], run_id: str, name: str | None = None) -> Dataset:
    """The dataset :func:`write_run_data` kept for ``run_id``, rebuilt with the same split.

    ``name``: the dataset name the run's ``runs`` row records, checked against the rebuilt one.
    Raises :class:`DatasetError` naming the file when it is missing, unreadable or not the
    data that run searched.
    """
    path = run_data_path(results, run_id)
    if not path.is_file():
        raise DatasetError(
            f"run {run_id} searched arrays held in memory ({name or ARRAYS_SCHEME + '...'}) and "
            f"their copy {path} is missing; SymbolicRegressor.fit writes it, so fit again (or "
            "restore the file) to plot, score or simplify this run")
    try:
        table = pq.read_table(path)
        meta: dict[str, Any] = json.loads((table.schema.metadata or {})[_META_KEY])
    except (OSError, KeyError, ValueError, pa.ArrowException) as exc:
        raise DatasetError(f"{path} cannot be read as a run's arrays ({exc}); fit again to "
                           "write it anew") from None
    if meta.get("format") != _FORMAT:
        raise DatasetError(f"{path} has layout {meta.get('format')!r}, this sr-dist reads "
                           f"{_FORMAT}; read it with the sr-dist version that wrote it")
    features = [str(f) for f in meta["feature_names"]]
    target = str(meta["target_name"])
    missing = [c for c in (*features, target) if c not in table.column_names]
    if missing:
        raise DatasetError(f"{path} lacks the column(s) {', '.join(missing)}; fit again to "
                           "write it anew")
    X = np.column_stack([table[c].to_numpy() for c in features]).astype(np.float64, copy=False)
    y = table[target].to_numpy().astype(np.float64, copy=False)
    weight_col = meta.get("weight_column")
    weight = (table[weight_col].to_numpy().astype(np.float64, copy=False)
              if weight_col and weight_col in table.column_names else None)
    dataset = dataset_from_arrays(X, y, features, target, seed=int(meta["seed"]),
                                  split=tuple(float(f) for f in meta["split"]),
                                  split_kind=str(meta.get("split_kind") or "random"),
                                  split_variable=meta.get("split_variable"),
                                  sample_weight=weight)
    if dataset.content_hash != meta.get("content_hash"):
        raise DatasetError(f"{path} does not hold the rows it was written with (content hash "
                           f"{dataset.content_hash[:12]}, recorded {str(meta.get('content_hash'))[:12]})")
    kept = str(meta.get("name") or dataset.name)
    if kept != dataset.name:  # a dataset named by its maker, not by its hash
        dataset = dataclasses.replace(dataset, name=kept)
    if name is not None and dataset.name != name:
        raise DatasetError(f"{path} holds dataset {dataset.name} but run {run_id} searched "
                           f"{name}; the file belongs to another run")
    return dataset
