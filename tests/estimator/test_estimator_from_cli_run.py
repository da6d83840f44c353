"""SymbolicRegressor.from_results on a run the sr-dist command made: the dataset comes back from
the stored config, the formulas are simplified and their exports checked. The run is written
with the real in-process evaluator and the real results writer (no Ray: nothing here needs it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sr_dist.data import load_dataset
from sr_dist.estimator import SymbolicRegressor
from sr_dist.estimator.config import compose_config
from sr_dist.evaluator import Evaluator
from sr_dist.results import CandidateWriter, RunRecord, candidate_row, utc_now, write_run
from sr_dist.search import settings_from_config

RUN = "20260101-000000-cli000"
SOURCE = "feynman:I.12.1"  # F = mu*Nn


def _cli_run(root: Path) -> None:
    settings = settings_from_config(compose_config(
        [f"dataset.source={SOURCE}", "dataset.n=200", f"results.path={root}"]))
    d = settings.dataset
    dataset = load_dataset(d.source, n=d.n, seed=d.seed, split=d.split)
    fits = Evaluator(dataset, restarts=1).fit_many(["c0*mu", "c0*mu*Nn", "c0*mu*Nn + c1"])
    rows = [candidate_row(fit, RUN, 0, step, 0, "evolve", dataset.name) for step, fit in enumerate(fits)]
    with CandidateWriter(root, RUN, dataset.name, "evolve", background=False) as writer:
        writer.add(rows)  # written when the writer closes
    write_run(root, RunRecord(run_id=RUN, dataset=dataset.name, model="evolve",
                              started_at=utc_now(), agents=1, config=settings.config_yaml)
              .finished("completed", "max_seconds"))


def test_a_cli_run_comes_back_with_its_dataset(tmp_path: Path) -> None:
    _cli_run(tmp_path)
    est = SymbolicRegressor.from_results(tmp_path)
    assert est.run_id_ == RUN and est.variable_names_ == ("mu", "Nn")
    assert est.best_["simplified"] == "mu*Nn"
    assert est.equations_["complexity"].to_pylist() == sorted(est.equations_["complexity"].to_pylist())
    dataset = load_dataset(SOURCE, n=200)
    assert np.allclose(est.predict(dataset.X), dataset.y, rtol=1e-12)
    assert est.max_seconds == 120 and est.agents == 2  # the stored config's budgets


def test_arrays_without_their_record_are_refused(tmp_path: Path) -> None:
    write_run(tmp_path, RunRecord(run_id="r1", dataset="arrays:0123456789ab", model="evolve",
                                  started_at=utc_now(), config="{}"))
    with pytest.raises(ValueError, match="searched arrays held in memory.*record.*missing"):
        SymbolicRegressor.from_results(tmp_path)
