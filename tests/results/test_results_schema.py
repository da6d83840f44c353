"""CANDIDATE_SCHEMA / RUNS_SCHEMA are the public contract; rows are built and checked purely."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest
from results_helpers import T0, FakeFit

from sr_dist.results import (
    CANDIDATE_SCHEMA,
    RUNS_SCHEMA,
    RowError,
    RunRecord,
    candidate_id,
    candidate_row,
    constants_json,
    normalize_row,
)

TS = pa.timestamp("us", tz="UTC")

# The named columns, in order, with the lead's types; extras follow.
CANDIDATE_COLUMNS = [
    ("run_id", pa.string()), ("agent_id", pa.int32()), ("step", pa.int32()),
    ("candidate_id", pa.string()), ("expression", pa.string()), ("canonical", pa.string()),
    ("complexity", pa.int32()), ("constants", pa.string()), ("status", pa.string()),
    ("error", pa.string()), ("train_nmse", pa.float64()), ("val_nmse", pa.float64()),
    ("test_nmse", pa.float64()), ("r2", pa.float64()), ("model", pa.string()),
    ("dataset", pa.string()), ("created_at", TS),
    ("train_mse", pa.float64()), ("fit_s", pa.float64()), ("tool_call_id", pa.string()),
    # schema version 2: the dimensional check
    ("dimensionally_consistent", pa.bool_()), ("units_mismatch", pa.string()),
    # schema version 3: the fitting loss and the extra metrics (issue 17)
    ("train_loss", pa.float64()), ("val_loss", pa.float64()), ("mae", pa.float64()),
    ("aic", pa.float64()), ("bic", pa.float64()), ("pearson_r", pa.float64()),
    ("spearman_r", pa.float64()),
    # schema version 4: the proposer's label for where the formula came from (issue 31)
    ("origin", pa.string()),
]

RUN_COLUMNS = [
    ("run_id", pa.string()), ("status", pa.string()), ("stop_reason", pa.string()),
    ("error", pa.string()), ("dataset", pa.string()), ("model", pa.string()),
    ("agents", pa.int32()), ("config", pa.string()), ("started_at", TS), ("ended_at", TS),
    ("updated_at", TS), ("candidates", pa.int64()), ("best_candidate_id", pa.string()),
    ("best_expression", pa.string()), ("best_constants", pa.string()),
    ("best_complexity", pa.int32()), ("best_val_nmse", pa.float64()),
    ("best_test_nmse", pa.float64()), ("sr_dist_version", pa.string()),
    ("evaluator_stats", pa.string()),
    ("signal", pa.string()),
]


def test_candidate_schema_columns_and_types():
    assert [(f.name, f.type) for f in CANDIDATE_SCHEMA] == CANDIDATE_COLUMNS


def test_runs_schema_columns_and_types():
    assert [(f.name, f.type) for f in RUNS_SCHEMA] == RUN_COLUMNS


def test_candidate_id_is_deterministic_and_distinct():
    assert candidate_id("r", 1, 2, 3) == candidate_id("r", 1, 2, 3) == "r:1:2:3"
    ids = {candidate_id("a:1", a, s, i) for a in range(3) for s in range(3) for i in range(3)}
    assert len(ids) == 27
    # A run id containing the separator still cannot collide: the integers parse from the right.
    assert candidate_id("a:1", 2, 3, 4) != candidate_id("a", 1, 2, 3)


def test_candidate_row_from_dataclass_and_dict_agree():
    fit = FakeFit(expression="c0*x", canonical="c0*x", constants={"c0": 2.5, "c1": -1.0})
    from_obj = candidate_row(fit, "run", 1, 7, 2, "gpt", "feynman:I.6.2", created_at=T0,
                             tool_call_id="call_1")
    from_dict = candidate_row(vars(fit), "run", 1, 7, 2, "gpt", "feynman:I.6.2", created_at=T0,
                              tool_call_id="call_1")
    assert from_obj == from_dict
    assert from_obj["candidate_id"] == "run:1:7:2"
    assert from_obj["tool_call_id"] == "call_1"
    assert json.loads(from_obj["constants"]) == {"c0": 2.5, "c1": -1.0}
    assert list(json.loads(from_obj["constants"])) == ["c0", "c1"]  # declaration order kept
    assert normalize_row(from_obj, CANDIDATE_SCHEMA)["created_at"] == T0


def test_candidate_row_without_status_is_an_error_row_not_a_crash():
    row = candidate_row({"expression": "x"}, "run", 0, 0, 0, "m", "d", created_at=T0)
    assert row["status"] == "error" and "no status" in row["error"]
    assert normalize_row(row, CANDIDATE_SCHEMA)["val_nmse"] is None


def test_candidate_row_defaults_created_at_to_aware_utc_now():
    row = candidate_row({"expression": "x", "status": "ok"}, "run", 0, 0, 0, "m", "d")
    assert row["created_at"].tzinfo is not None


def test_constants_json_nonfinite_become_null():
    text = constants_json({"a": float("nan"), "b": np.float32(1.5), "c": float("inf")})
    assert json.loads(text) == {"a": None, "b": 1.5, "c": None}
    assert constants_json(None) is None


def _good() -> dict:
    return candidate_row(FakeFit(expression="x"), "run", 0, 0, 0, "m", "d", created_at=T0)


# Behaviour table: (change to a good row, expected error fragment or None, check of the result).
NORMALIZE_CASES = [
    ("numpy float metric", {"val_nmse": np.float32(0.25)}, None, ("val_nmse", 0.25)),
    ("numpy int complexity", {"complexity": np.int64(4)}, None, ("complexity", 4)),
    ("int metric", {"r2": 1}, None, ("r2", 1.0)),
    ("nan metric is null", {"val_nmse": float("nan")}, None, ("val_nmse", None)),
    ("inf metric is null", {"test_nmse": float("inf")}, None, ("test_nmse", None)),
    ("missing nullable", {"canonical": None}, None, ("canonical", None)),
    ("non-UTC time to UTC",
     {"created_at": datetime.fromisoformat("2025-01-02T05:04:05+02:00")}, None,
     ("created_at", T0)),
    ("null run_id", {"run_id": None}, "'run_id' must not be null", None),
    ("string agent", {"agent_id": "1"}, "'agent_id': expected an integer", None),
    ("bool step", {"step": True}, "'step': expected an integer", None),
    ("int32 overflow", {"complexity": 2**31}, "does not fit in int32", None),
    ("string metric", {"val_nmse": "0.1"}, "'val_nmse': expected a number", None),
    ("naive time", {"created_at": datetime(2025, 1, 1)}, "timezone-aware", None),
    ("non-string status", {"status": 1}, "'status': expected a string", None),
    ("unknown column", {"bogus": 1}, "unknown column(s) ['bogus']", None),
    ("consistent flag", {"dimensionally_consistent": True}, None,
     ("dimensionally_consistent", True)),
    ("numpy bool flag", {"dimensionally_consistent": np.bool_(False)}, None,
     ("dimensionally_consistent", False)),
    ("unchecked flag is null", {"dimensionally_consistent": None}, None,
     ("dimensionally_consistent", None)),
    ("int flag", {"dimensionally_consistent": 1}, "expected true or false", None),
]


@pytest.mark.parametrize(
    "change,error,check", [c[1:] for c in NORMALIZE_CASES], ids=[c[0] for c in NORMALIZE_CASES]
)
def test_normalize_row_cases(change, error, check):
    row = {**_good(), **change}
    if error is not None:
        with pytest.raises(RowError) as info:
            normalize_row(row, CANDIDATE_SCHEMA)
        assert error in str(info.value)
        return
    out = normalize_row(row, CANDIDATE_SCHEMA)
    column, expected = check
    assert out[column] == expected and type(out[column]) is type(expected)
    # The normalized row always builds a table with the explicit schema.
    assert pa.Table.from_pylist([out], schema=CANDIDATE_SCHEMA).num_rows == 1


def test_run_record_round_trips_and_validates_status():
    record = RunRecord(run_id="r", dataset="d", model="m", started_at=T0, agents=2,
                       config="search:\n  agents: 2\n")
    best = {"candidate_id": "r:0:1:0", "expression": "x", "constants": "{}", "complexity": 1,
            "val_nmse": 0.5, "test_nmse": math.inf}
    done = record.with_best(best, 10).finished("interrupted", "interrupted", ended_at=T0)
    row = done.to_row(now=T0)
    assert row["status"] == "interrupted" and row["candidates"] == 10
    assert row["best_test_nmse"] is None and row["updated_at"] == T0
    assert RunRecord.from_row(row).best_candidate_id == "r:0:1:0"
    with pytest.raises(ValueError, match="run status"):
        RunRecord(run_id="r", dataset="d", model="m", started_at=T0, status="exploded")
    assert RunRecord(run_id="r", dataset="d", model="m",
                     started_at=T0).to_row()["updated_at"].tzinfo == UTC


def test_candidate_row_accepts_the_evaluators_fit_result():
    evaluator = pytest.importorskip("sr_dist.evaluator.results")
    fit = evaluator.FitResult(
        expression="c*x", canonical="c*x", status="nonfinite", constants={"c": 2.0},
        complexity=3, train_mse=math.inf, train_nmse=math.inf, val_nmse=math.inf,
        test_nmse=math.inf, r2=-math.inf, fit_s=0.25,
    )
    row = normalize_row(candidate_row(fit, "r", 0, 1, 2, "m", "d", created_at=T0),
                        CANDIDATE_SCHEMA)
    assert row["status"] == "nonfinite" and row["constants"] == '{"c":2.0}'
    assert row["val_nmse"] is None and row["r2"] is None and row["fit_s"] == 0.25


def test_candidate_row_carries_the_dimensional_check():
    evaluator = pytest.importorskip("sr_dist.evaluator.results")
    fit = evaluator.FitResult(expression="x + t", canonical="t + x", status="ok",
                              dimensionally_consistent=False,
                              units_mismatch="x + t adds m to s")
    row = normalize_row(candidate_row(fit, "r", 0, 1, 2, "m", "d", created_at=T0),
                        CANDIDATE_SCHEMA)
    assert row["dimensionally_consistent"] is False
    assert row["units_mismatch"] == "x + t adds m to s"
    unchecked = candidate_row(FakeFit(expression="x"), "r", 0, 1, 3, "m", "d", created_at=T0)
    assert unchecked["dimensionally_consistent"] is None and unchecked["units_mismatch"] is None
