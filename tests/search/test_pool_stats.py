"""The evaluator pool's stats (sr_dist.search.pool_stats) from two real replicas' stats, and
their trip into the runs table's ``evaluator_stats`` column (also past files written before the
column existed).

Each replica is a real BatchingEvaluator over a real Evaluator (no Ray), given its share of the
formulas by the same routing the pool uses; its stats get the keys EvaluatorActor.stats adds.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sr_dist.data import load_dataset
from sr_dist.evaluator import Evaluator
from sr_dist.results import RUNS_SCHEMA, RunRecord, duckdb_connection, read_run, write_run
from sr_dist.results.layout import run_file
from sr_dist.search.pool import canonical_key
from sr_dist.search.pool_plan import xla_env
from sr_dist.search.pool_stats import merge_replica_stats, replica_row, stats_for_record
from sr_dist.search.routing import owner
from sr_dist.search.service import BatchingEvaluator, warmup_formulas

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
#: What each agent proposes (some structures twice, under other constant names or agents).
PROPOSALS: dict[int, list[str]] = {
    0: ["c*q*Ef", "c*q*B", "c*q*v", "c*q*Ef + d", "c*B*v*q"],
    1: ["k*q*Ef", "k*Ef", "k*q*B*v", "q*Ef*k + m", "sin(k*theta)*q"],
    2: ["a*q*v*B*sin(theta)", "a*Ef + q", "a*q", "a*v", "a*q*Ef"],
}
#: Keys EvaluatorActor.stats adds to the service's stats.
ACTOR_KEYS = ("replica", "node_id", "instance", "restarted", "xla_flags")


def _cache_dir() -> str:
    import os

    return os.environ.get("SR_DIST_JAX_CACHE_DIR", os.path.expanduser("~/.cache/sr-dist/jax"))


async def _run_replicas(services: list[BatchingEvaluator], variables: list[str]) -> None:
    await services[0].warmup(warmup_formulas("q", [2]))
    await services[1].warmup(warmup_formulas("q", [2, 4]))
    await services[0].prefit(["c*q*B + Ef"])
    calls = []
    for agent, texts in PROPOSALS.items():
        shares: dict[int, list[str]] = {}
        for text in texts:
            shares.setdefault(owner(canonical_key(variables, text), 2), []).append(text)
        for replica, share in shares.items():
            calls.append(services[replica].fit_many(share, agent))
            calls.append(services[replica].fit_many(share[:1], agent))  # a cache hit
    await asyncio.gather(*calls)


@pytest.fixture(scope="module")
def replicas() -> list[dict[str, Any]]:
    """Two replicas' stats after a short search, as EvaluatorActor.stats returns them."""
    dataset = load_dataset("feynman:I.12.11", n=600)
    variables = list(dataset.feature_names)
    services = [BatchingEvaluator(Evaluator(dataset, compilation_cache_dir=_cache_dir()),
                                  max_batch=4, max_wait_s=0.005, max_queue=3,
                                  key=lambda t: canonical_key(variables, t)) for _ in range(2)]
    asyncio.run(_run_replicas(services, variables))
    out = []
    for i, service in enumerate(services):
        stats = service.stats()
        stats.update(replica=i, node_id=f"node-{i}" * 4, instance=f"{100 + i}-abc{i}",
                     restarted=bool(i), xla_flags=xla_env(1)["XLA_FLAGS"])
        out.append(stats)
    assert all(s["search_fits"] > 0 for s in out), "routing gave a replica nothing"
    return out


def _walk(value: Any) -> list[tuple[str, Any]]:
    """Every (key, value) pair in nested dicts and lists."""
    pairs: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            pairs.append((k, v))
            pairs += _walk(v)
    elif isinstance(value, list):
        for v in value:
            pairs += _walk(v)
    return pairs


# --- merging -----------------------------------------------------------------------------------

def test_counters_add_up_over_replicas(replicas: list[dict[str, Any]]) -> None:
    a, b = replicas
    merged = merge_replica_stats(replicas)
    assert merged["replicas"] == 2
    for key in ("fits", "search_fits", "cache_hits", "compiles", "submitted", "invalid",
                "errors", "batches", "evaluations", "cache_entries", "failed_batches"):
        assert merged[key] == a[key] + b[key], key
    assert merged["fit_s"] == pytest.approx(a["fit_s"] + b["fit_s"], abs=1e-3)
    assert merged["busy_s"] == pytest.approx(a["busy_s"] + b["busy_s"], abs=1e-3)
    assert merged["search_fits"] == merged["fits"] - a["warmup"]["fits"] - b["warmup"]["fits"] \
        - a["prefit"]["fits"]
    assert merged["cache_hits"] >= 2  # every agent's repeated first formula
    for key in ("layout", "device", "rows"):
        assert merged[key] == a[key]


def test_batching_counters_and_batch_sizes_merge(replicas: list[dict[str, Any]]) -> None:
    a, b = (r["batching"] for r in replicas)
    batching = merge_replica_stats(replicas)["batching"]
    for key in ("requests", "formulas", "batches", "batched_formulas", "mixed_agent_batches",
                "duplicate_formulas", "cross_agent_duplicates", "in_flight_requests"):
        assert batching[key] == a[key] + b[key], key
    assert batching["requests"] == 2 * sum(
        len({owner(canonical_key(list("q Ef B v theta".split()), t), 2) for t in texts})
        for texts in PROPOSALS.values())
    assert Counter(batching["batch_sizes"]) == Counter(a["batch_sizes"]) + Counter(b["batch_sizes"])
    assert sum(size * n for size, n in batching["batch_sizes"].items()) \
        == batching["batched_formulas"]
    assert batching["mean_batch_size"] == pytest.approx(
        batching["batched_formulas"] / batching["batches"])


def _between(value: float | None, parts: list[float | None]) -> bool:
    known = [p for p in parts if p is not None]
    return value is not None and min(known) - 1e-6 <= value <= max(known) + 1e-6


def test_queue_waits_merge_from_the_histograms(replicas: list[dict[str, Any]]) -> None:
    merged = merge_replica_stats(replicas)
    for key in ("queue_wait", "latency"):
        parts = [r[key] for r in replicas]
        total = merged[key]
        assert total["count"] == sum(p["count"] for p in parts) > 0, key
        counts: Counter[str] = Counter()
        for p in parts:
            counts.update(p["counts"])
        assert total["counts"] == dict(sorted(counts.items(), key=lambda kv: int(kv[0])))
        # A mixture's percentile lies between its parts' (never an average of them).
        for q in ("p50_s", "p95_s", "p99_s"):
            assert _between(total[q], [p[q] for p in parts]), (key, q)
        assert total["max_s"] == max(p["max_s"] for p in parts)
    assert merged["queue_wait"]["count"] == merged["batching"]["formulas"]
    assert merged["latency"]["count"] == merged["batching"]["requests"]
    held = merged["held_back"]
    assert held["requests"] == sum(r["held_back"]["requests"] for r in replicas) > 0
    assert held["wait"]["count"] == held["requests"]


def test_warmup_seconds_is_the_longest_and_prefit_is_the_one_replica_s(
        replicas: list[dict[str, Any]]) -> None:
    a, b = replicas
    merged = merge_replica_stats(replicas)
    warmup = merged["warmup"]
    assert warmup["seconds"] == max(a["warmup"]["seconds"], b["warmup"]["seconds"])
    assert warmup["formulas"] == 3 and warmup["fits"] == a["warmup"]["fits"] + b["warmup"]["fits"]
    assert warmup["compiles"] == a["warmup"]["compiles"] + b["warmup"]["compiles"]
    assert b["prefit"] == {}
    assert merged["prefit"] == a["prefit"] and merged["prefit"]["formulas"] == 1


def test_per_replica_rows_and_fits_per_second(replicas: list[dict[str, Any]]) -> None:
    merged = merge_replica_stats(replicas, search_s=4.0)
    rows = merged["per_replica"]
    assert [r["replica"] for r in rows] == [0, 1]
    for row, stats in zip(rows, replicas, strict=True):
        assert row["node_id"] == stats["node_id"] and row["instance"] == stats["instance"]
        assert row["restarted"] is stats["restarted"]
        assert row["search_fits"] == stats["search_fits"]
        assert row["cache_hits"] == stats["cache_hits"]
        assert row["batches"] == stats["batching"]["batches"]
        assert row["fits_per_s"] == round(stats["search_fits"] / 4.0, 2)
        assert row["queue_wait"]["count"] == stats["queue_wait"]["count"]
        assert set(row["queue_wait"]) == {"count", "p50_s", "p95_s", "p99_s", "max_s"}
        assert row["xla_flags"] == xla_env(1)["XLA_FLAGS"]
        assert row == replica_row(stats, 4.0)
    assert merged["search_s"] == 4.0
    assert merged["search_fits_per_s"] == round(merged["search_fits"] / 4.0, 2)
    plain = merge_replica_stats(replicas)
    assert "search_fits_per_s" not in plain and "search_s" not in plain
    assert all("fits_per_s" not in row for row in plain["per_replica"])


def test_one_replica_keeps_the_single_evaluator_keys(replicas: list[dict[str, Any]]) -> None:
    single = replicas[0]
    merged = merge_replica_stats([single])
    missing = set(single) - set(merged) - set(ACTOR_KEYS)
    assert not missing, missing
    for key in ("search_fits", "fits", "cache_hits", "compiles", "queue_depth", "warmup",
                "prefit", "buckets", "rows"):
        assert merged[key] == single[key], key
    # Histograms come back with the same counts; the mean is re-derived from the rounded sum,
    # so it may differ in the last (sixth) decimal.
    for got, want in ((merged["queue_wait"], single["queue_wait"]),
                      (merged["latency"], single["latency"]),
                      (merged["held_back"]["wait"], single["held_back"]["wait"])):
        assert got["counts"] == want["counts"] and got["count"] == want["count"]
        drop = ("counts",)
        assert {k: v for k, v in got.items() if k not in drop} \
            == pytest.approx({k: v for k, v in want.items() if k not in drop}, abs=2e-6)
    assert merged["held_back"]["requests"] == single["held_back"]["requests"]
    for key, value in single["batching"].items():
        if key != "queue_wait":  # the pool's total keeps it at the top level only
            assert merged["batching"][key] == value, key
    assert merged["per_replica"][0]["instance"] == single["instance"]


def test_nothing_to_merge_is_empty() -> None:
    assert merge_replica_stats([]) == {}
    assert merge_replica_stats([{}, {}]) == {}


# --- the runs table ----------------------------------------------------------------------------

def test_stats_for_record_drops_histogram_counts_and_is_json(
        replicas: list[dict[str, Any]]) -> None:
    merged = merge_replica_stats(replicas, search_s=2.5)
    record = stats_for_record(merged)
    keys = {k for k, _ in _walk(record)}
    assert "counts" not in keys and "buckets" not in keys
    assert "counts" in {k for k, _ in _walk(merged)}  # there was something to drop
    text = json.dumps(record, allow_nan=False)
    back = json.loads(text)
    assert back["replicas"] == 2 and back["queue_wait"]["p99_s"] == merged["queue_wait"]["p99_s"]
    assert back["per_replica"][1]["restarted"] is True
    assert len(text) < 8000  # one small JSON value per run, whatever the run's length
    assert "counts" in merged["queue_wait"]  # the input is left alone


def _record(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, dataset="feynman:I.12.11", model="evolve", started_at=T0,
                     agents=3, candidates=15)


def test_evaluator_stats_round_trip_through_the_runs_file_and_duckdb(
        tmp_path: Path, replicas: list[dict[str, Any]]) -> None:
    stats = stats_for_record(merge_replica_stats(replicas, search_s=2.0))
    record = _record("run-pool").with_evaluator_stats(stats).finished("completed", "max_seconds",
                                                                      ended_at=T0)
    write_run(tmp_path, record)
    back = read_run(tmp_path, "run-pool")
    assert back is not None and back.evaluator_stats is not None
    assert json.loads(back.evaluator_stats) == json.loads(json.dumps(stats))
    assert back.status == "completed"
    con = duckdb_connection(tmp_path)
    row = con.execute(
        "SELECT evaluator_stats->>'$.replicas', evaluator_stats->'$.queue_wait'->>'count', "
        "evaluator_stats->'$.per_replica'->1->>'node_id' FROM runs WHERE run_id = 'run-pool'"
    ).fetchone()
    assert row == ("2", str(stats["queue_wait"]["count"]), "node-1" * 4)


def test_with_evaluator_stats_clears_and_writes_nan_as_null() -> None:
    record = _record("r").with_evaluator_stats({"replicas": 1, "p99_s": math.nan,
                                                "rows": [math.inf, 1.5]})
    assert json.loads(record.evaluator_stats or "") == {"replicas": 1, "p99_s": None,
                                                        "rows": [None, 1.5]}
    assert record.with_evaluator_stats(None).evaluator_stats is None
    assert record.with_evaluator_stats({}).evaluator_stats is None


def _write_old_run_file(root: Path, record: RunRecord) -> None:
    """A runs file as versions before the evaluator_stats column wrote it."""
    old = RUNS_SCHEMA.remove(RUNS_SCHEMA.get_field_index("evaluator_stats"))
    row = {k: v for k, v in record.to_row().items() if k != "evaluator_stats"}
    target = run_file(root, record.run_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([row], schema=old), target)
    assert "evaluator_stats" not in pq.read_schema(target).names


def test_an_old_runs_file_without_the_column_still_reads(tmp_path: Path) -> None:
    _write_old_run_file(tmp_path, _record("run-old").finished("completed", "max_turns",
                                                               ended_at=T0))
    back = read_run(tmp_path, "run-old")
    assert back is not None and back.evaluator_stats is None
    assert back.status == "completed" and back.candidates == 15
    con = duckdb_connection(tmp_path)
    assert con.execute("SELECT run_id, evaluator_stats, typeof(evaluator_stats), "
                       "evaluator_stats->>'$.replicas' FROM runs").fetchall() \
        == [("run-old", None, "VARCHAR", None)]


def test_old_and_new_runs_files_read_together(tmp_path: Path,
                                              replicas: list[dict[str, Any]]) -> None:
    _write_old_run_file(tmp_path, _record("run-old"))
    stats = stats_for_record(merge_replica_stats(replicas))
    write_run(tmp_path, _record("run-new").with_evaluator_stats(stats))
    con = duckdb_connection(tmp_path)
    rows = con.execute("SELECT run_id, evaluator_stats->>'$.replicas' FROM runs "
                       "ORDER BY run_id").fetchall()
    assert rows == [("run-new", "2"), ("run-old", None)]
    assert read_run(tmp_path, "run-old").evaluator_stats is None  # type: ignore[union-attr]
