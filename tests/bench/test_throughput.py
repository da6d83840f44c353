"""bench/throughput.py's own parts: the target rows, the variants, reading a run back from real
Parquet results (the real writer, DuckDB) and the table. The sr-dist runs themselves are the
CLI's, tested in tests/cli."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from sr_dist.data import load_dataset
from sr_dist.evaluator import Evaluator
from sr_dist.results import CandidateWriter, RunRecord, candidate_row, utc_now, write_run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import throughput  # noqa: E402


def test_rows_are_seeded_and_carry_one_percent_noise(tmp_path: Path) -> None:
    X, y = throughput.make_rows(2000)
    X2, y2 = throughput.make_rows(2000)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    clean = 1.3 * X[:, 0] * np.sin(X[:, 1]) + X[:, 2] ** 2 / (1 + X[:, 3]) + 0.4 * X[:, 0] * np.exp(-X[:, 3])
    noise = np.std(y - clean) / np.sqrt(np.mean(clean ** 2))
    assert noise == pytest.approx(throughput.NOISE, rel=0.1)
    path = tmp_path / "rows.csv"
    throughput.write_csv(path, X[:50], y[:50])
    ds = load_dataset(f"csv:{path}", target="y")
    assert tuple(ds.feature_names) == ("x0", "x1", "x2", "x3") and ds.n == 50


def test_variants_put_the_default_first_and_refuse_a_nameless_one() -> None:
    assert throughput.parse_variants([]) == [("default", [])]
    assert throughput.parse_variants(["fast=+model.inherit_constants=true evaluator.restarts=2"]) == [
        ("default", []), ("fast", ["+model.inherit_constants=true", "evaluator.restarts=2"])]
    assert throughput.parse_variants(["default=a=1"]) == [("default", ["a=1"])]
    with pytest.raises(SystemExit, match="NAME=OVERRIDES"):
        throughput.parse_variants(["no-equals-sign"])


def test_a_run_is_read_back_and_tabled(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    throughput.write_csv(path, *throughput.make_rows(200))
    dataset = load_dataset(f"csv:{path}", target="y")
    fits = Evaluator(dataset, restarts=1).fit_many(["a*x0 + b", "b + x0*a", "c*x2**2", "x1 +"])
    rows = [candidate_row(fit, "r1", 0, step, 0, "evolve", dataset.name) for step, fit in enumerate(fits)]
    with CandidateWriter(tmp_path / "res", "r1", dataset.name, "evolve", background=False) as writer:
        writer.add(rows)
    stats = {"search_s": 2.0, "busy_s": 1.5, "search_fits": 2, "compile_s": 0.5, "compiles": 1,
             "warmup": {"compile_s": 1.0}}
    write_run(tmp_path / "res", RunRecord(run_id="r1", dataset=dataset.name, model="evolve",
                                          started_at=utc_now(), agents=1, config="{}")
              .finished("completed", "max_seconds").with_evaluator_stats(stats))
    read = throughput.read_run(tmp_path / "res")
    assert read["candidates"] == 4 and read["distinct_ok"] == 2  # one canonical form twice, one invalid
    run = throughput.summarize("default", 200, 1, 1, 1.0, 4.0, read)
    assert run.overhead_s == 3.0 and run.busy_share == 0.75 and run.compile_s == 1.5
    assert run.distinct_per_search_s == 1.0 and run.fits_per_busy_s == pytest.approx(2 / 1.5)
    table = throughput.render([run], {200: throughput.Peer(200, 2.0, 100)}, 1.0, "0.1")
    assert "| default | 200 | 1 | 1 | 4.0 | 2.0 | 3.0 | 4 | 2 | 1 | 0 | 75% | 1 | 1.5 | 1.00 | 0.0200 |" in table
