"""An estimator run's arrays kept next to its results: written, read back as the same Dataset
(rows, names, split, hash), and used by load_run_dataset, score_run and sr-dist-query --run.
A small arrays run is written with the real evaluator and results writer (no Ray needed)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from sr_dist.data import dataset_from_arrays
from sr_dist.evaluator import Evaluator
from sr_dist.query_cli import run as query
from sr_dist.results import (
    CandidateWriter,
    RunRecord,
    ScoreError,
    candidate_row,
    load_run_dataset,
    read_run,
    read_run_data,
    run_data_path,
    score_run,
    utc_now,
    write_run,
    write_run_data,
)

RUN = "20260101-000000-arr000"


def _dataset(split: tuple[float, float, float] = (0.6, 0.2, 0.2), seed: int = 3):
    X = np.random.default_rng(1).uniform(1, 2, (60, 2))
    y = 3.0 * X[:, 0] * X[:, 1]
    return dataset_from_arrays(X, y, ["mass", "v"], "y", seed=seed, split=split)


def _arrays_run(root: Path, config: str = "dataset:\n  source: unused\n") -> None:
    dataset = _dataset()
    fits = Evaluator(dataset, restarts=1).fit_many(["c0*mass", "c0*mass*v", "c0*mass*v + c1"])
    rows = [candidate_row(fit, RUN, 0, step, 0, "evolve", dataset.name)
            for step, fit in enumerate(fits)]
    with CandidateWriter(root, RUN, dataset.name, "evolve", background=False) as writer:
        writer.add(rows)
    best = min((r for r in rows if r["val_nmse"] is not None), key=lambda r: r["val_nmse"])
    write_run(root, RunRecord(run_id=RUN, dataset=dataset.name, model="evolve",
                              started_at=utc_now(), agents=1, config=config)
              .with_best(best, len(rows)).finished("completed", "max_seconds"))
    write_run_data(root, RUN, dataset)


def test_round_trip_is_the_same_dataset(tmp_path: Path) -> None:
    dataset = _dataset()
    path = write_run_data(tmp_path, RUN, dataset)
    assert path == run_data_path(tmp_path, RUN) and path.parent.name == f"run_id={RUN}"
    assert pq.read_table(path).column_names == ["mass", "v", "y"]  # readable as a table
    back = read_run_data(tmp_path, RUN, name=dataset.name)
    assert back.name == dataset.name and back.content_hash == dataset.content_hash
    assert back.feature_names == ("mass", "v") and back.target_name == "y"
    assert np.array_equal(back.X, dataset.X) and np.array_equal(back.y, dataset.y)
    for part in ("train", "val", "test"):
        assert np.array_equal(getattr(back.splits, part), getattr(dataset.splits, part))
    assert back.splits.fractions == (0.6, 0.2, 0.2) and back.seed == 3


@pytest.mark.parametrize("damage, message", [
    ("delete", "their copy .*data.parquet is missing; SymbolicRegressor.fit writes it"),
    ("other", "holds dataset arrays:.* but run .* searched arrays:"),
    ("garbage", "cannot be read as a run's arrays"),
])
def test_a_missing_or_wrong_file_is_named(tmp_path: Path, damage: str, message: str) -> None:
    dataset = _dataset()
    path = write_run_data(tmp_path, RUN, dataset)
    if damage == "delete":
        path.unlink()
    elif damage == "other":
        write_run_data(tmp_path, RUN, _dataset(seed=4))  # another split: another hash and name
    else:
        path.write_bytes(b"not parquet")
    with pytest.raises(ValueError, match=message):
        read_run_data(tmp_path, RUN, name=dataset.name)


def test_load_run_dataset_reads_an_arrays_run(tmp_path: Path) -> None:
    units = "dataset:\n  source: unused\n  units: {mass: kg, v: m/s, y: kg*m/s}\n"
    _arrays_run(tmp_path, config=units)
    record = read_run(tmp_path, RUN)
    assert record is not None
    dataset = load_run_dataset(record, tmp_path)
    assert dataset.name == record.dataset and dataset.content_hash == _dataset().content_hash
    assert dataset.units is not None  # the config's units apply, as they did to the run
    with pytest.raises(ScoreError, match="pass its results path"):
        load_run_dataset(record)
    run_data_path(tmp_path, RUN).unlink()
    with pytest.raises(ScoreError, match="cannot be rebuilt: .*data.parquet is missing"):
        load_run_dataset(record, tmp_path)


def test_score_and_simplified_front_of_an_arrays_run(tmp_path: Path) -> None:
    _arrays_run(tmp_path)
    score = score_run(tmp_path, RUN)
    assert score.metrics["nmse"] < 1e-20
    out = io.StringIO()
    assert query([str(tmp_path), "--run", RUN, "--format", "json"], out) == 0
    rows = json.loads(out.getvalue())
    assert rows and all(row["simplified"] for row in rows)
    assert "3*mass*v" in {row["simplified"] for row in rows}
