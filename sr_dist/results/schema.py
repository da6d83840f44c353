"""Arrow schemas of the results tables and the pure functions that build their rows.

Two tables live under ``results.path``:

* ``candidates``: one row per proposed formula, good or bad (``CANDIDATE_SCHEMA``);
* ``runs``: one row per run (``RUNS_SCHEMA``), rewritten as the run progresses.

Everything here is plain data in, plain data out: no I/O, no clocks except where a caller
leaves ``created_at`` unset.

``constants`` (and ``best_constants``) are JSON text rather than an Arrow ``map``: DuckDB reads
JSON text with its ``json`` functions and pyarrow/pandas hand it over as a plain ``str``, while
Arrow maps come back as lists of pairs in pyarrow and as ``MAP`` in DuckDB, which is awkward to
filter or print; JSON also keeps the order in which the formula declared its constants.
Non-finite numbers (which JSON cannot spell) are written as ``null``, and so are non-finite
metrics: ``status`` says why a candidate has no score.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pyarrow as pa
from numpy import bool_ as np_bool

from sr_dist import __version__

#: The ``status`` a successfully fitted candidate carries (the evaluator's ``FitResult.status``).
OK_STATUS = "ok"

#: Run states written to ``runs.status``.
RUN_STATUSES: tuple[str, ...] = ("running", "completed", "interrupted", "failed")

#: The agents' own stop reasons a run takes over when every agent ended the same way.
_AGENT_BUDGET_REASONS = ("max_turns", "max_tool_calls", "max_tokens", "deadline",
                         "failure_budget", "submitted", "no_tool_calls", "cancelled", "aborted")

#: How a run can end: each ``runs.status`` and the ``stop_reason`` values that go with it (a
#: closed table; docs/reliability.md prints it and ``RunRecord.finished`` refuses other pairs).
#: ``completed`` never goes with ``error``: a run that broke is ``failed``.
RUN_OUTCOMES: Mapping[str, frozenset[str | None]] = MappingProxyType({
    "running": frozenset({None}),
    "completed": frozenset({"target_nmse", "max_candidates", "max_seconds", "agents_done",
                            "client_closed", *_AGENT_BUDGET_REASONS}),
    "interrupted": frozenset({"interrupted"}),
    "failed": frozenset({"agents_failed", "error", "write_failed"}),
})


def status_of(stop_reason: str) -> str | None:
    """The one ``runs.status`` that ``stop_reason`` goes with, or ``None`` if it is unknown."""
    for status, reasons in RUN_OUTCOMES.items():
        if stop_reason in reasons:
            return status
    return None

_TS = pa.timestamp("us", tz="UTC")

CANDIDATE_SCHEMA: pa.Schema = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("agent_id", pa.int32(), nullable=False),
        pa.field("step", pa.int32(), nullable=False),
        pa.field("candidate_id", pa.string(), nullable=False),
        pa.field("expression", pa.string(), nullable=False),
        pa.field("canonical", pa.string()),
        pa.field("complexity", pa.int32()),
        pa.field("constants", pa.string()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("train_nmse", pa.float64()),
        pa.field("val_nmse", pa.float64()),
        pa.field("test_nmse", pa.float64()),
        pa.field("r2", pa.float64()),
        pa.field("model", pa.string(), nullable=False),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("created_at", _TS, nullable=False),
        # Extras beyond the list.
        pa.field("train_mse", pa.float64()),
        pa.field("fit_s", pa.float64()),
        pa.field("tool_call_id", pa.string()),
        # Schema version 2: the dimensional check (null when the dataset has no units, and in
        # files written before version 2; a new column is always nullable and goes last).
        pa.field("dimensionally_consistent", pa.bool_()),
        pa.field("units_mismatch", pa.string()),
        # Schema version 3 (issue 17): the fitting loss (evaluator.loss) on the train and
        # validation splits, and the extra metrics of search.metrics; null where not computed
        # and in files written before version 3.
        pa.field("train_loss", pa.float64()),
        pa.field("val_loss", pa.float64()),
        pa.field("mae", pa.float64()),
        pa.field("aic", pa.float64()),
        pa.field("bic", pa.float64()),
        pa.field("pearson_r", pa.float64()),
        pa.field("spearman_r", pa.float64()),
        # Schema version 4 (issue 31): where the formula came from, as its proposer labelled
        # it (evaluate_formulas' origins: evolve writes library/<source>, gp/<operator>,
        # reduction; an LLM its own label); null when unlabelled and in older files.
        pa.field("origin", pa.string()),
    ],
    metadata={"sr_dist.table": "candidates", "sr_dist.schema_version": "4"},
)

RUNS_SCHEMA: pa.Schema = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("stop_reason", pa.string()),
        pa.field("error", pa.string()),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("agents", pa.int32()),
        pa.field("config", pa.string()),
        pa.field("started_at", _TS, nullable=False),
        pa.field("ended_at", _TS),
        pa.field("updated_at", _TS, nullable=False),
        pa.field("candidates", pa.int64(), nullable=False),
        pa.field("best_candidate_id", pa.string()),
        pa.field("best_expression", pa.string()),
        pa.field("best_constants", pa.string()),
        pa.field("best_complexity", pa.int32()),
        pa.field("best_val_nmse", pa.float64()),
        pa.field("best_test_nmse", pa.float64()),
        pa.field("sr_dist_version", pa.string(), nullable=False),
        # JSON: the evaluator pool's stats (totals, queue-wait percentiles, one entry per
        # replica); null while the run is going and in runs written before it existed.
        pa.field("evaluator_stats", pa.string()),
        # The signal that interrupted the run (``SIGINT``, ``SIGTERM``, ``SIGHUP``); null
        # otherwise and in runs written before it existed.
        pa.field("signal", pa.string()),
    ],
    metadata={"sr_dist.table": "runs", "sr_dist.schema_version": "1"},
)

#: Hive partition keys, outermost first, per table. Their values also stay in the files.
CANDIDATE_PARTITIONS: tuple[str, ...] = ("dataset", "run_id")
RUN_PARTITIONS: tuple[str, ...] = ("run_id",)

#: Schema version 3's metric columns: a fit's own field, else its ``metrics`` mapping's entry.
METRIC_COLUMNS: tuple[str, ...] = ("train_loss", "val_loss", "mae", "aic", "bic", "pearson_r",
                                   "spearman_r")

#: Fields a FitResult-like object may carry, copied into a candidate row.
_FIT_FIELDS: tuple[str, ...] = (
    "expression", "canonical", "status", "error", "constants", "complexity",
    "train_mse", "train_nmse", "val_nmse", "test_nmse", "r2", "fit_s",
    "dimensionally_consistent", "units_mismatch", "origin",
)


def utc_now() -> datetime:
    """The current time as an aware UTC datetime (what ``created_at`` columns hold)."""
    return datetime.now(UTC)


def candidate_id(run_id: str, agent_id: int, step: int, index: int) -> str:
    """The id of the ``index``-th candidate of ``agent_id``'s turn ``step``.

    Deterministic, so a retry after an actor restart produces the same id and is deduplicated.
    The three integers come last, so the id parses unambiguously from the right even when the
    run id contains ``:``.
    """
    return f"{run_id}:{int(agent_id)}:{int(step)}:{int(index)}"


def constants_json(constants: Mapping[str, Any] | None) -> str | None:
    """Fitted constants as a JSON object in declaration order; non-finite values become null."""
    if constants is None:
        return None
    out: dict[str, float | None] = {}
    for name, value in constants.items():
        number = float(value)
        out[str(name)] = number if math.isfinite(number) else None
    return json.dumps(out, allow_nan=False, separators=(",", ":"))


def constants_from_json(value: Any) -> dict[str, float]:
    """The inverse of :func:`constants_json`: a row's ``constants`` (JSON text, or a mapping)
    as name -> float, null (a non-finite fit) as NaN. ``ValueError`` (``json.JSONDecodeError``
    is one) for text that is not a JSON object."""
    if value is None or value == "":
        return {}
    raw = json.loads(value) if isinstance(value, str) else value
    if not isinstance(raw, Mapping):
        raise ValueError(f"constants must be a JSON object, got {type(raw).__name__}")
    return {str(k): (math.nan if v is None else float(v)) for k, v in raw.items()}


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def candidate_row(
    fit: Any,
    run_id: str,
    agent_id: int,
    step: int,
    index: int,
    model: str,
    dataset: str,
    created_at: datetime | None = None,
    tool_call_id: str | None = None,
) -> dict[str, Any]:
    """One ``CANDIDATE_SCHEMA`` row from a FitResult-like object or mapping.

    Missing fit fields become null (``status`` defaults to ``"error"`` and says so in ``error``),
    so a half-filled result still lands in the table rather than being dropped.
    """
    values = {name: _get(fit, name) for name in _FIT_FIELDS}
    constants = values["constants"]
    if isinstance(constants, str) or constants is None:
        constants_text = constants
    else:
        constants_text = constants_json(constants)
    status = values["status"]
    error = values["error"]
    if status is None:
        status = "error"
        error = error or "fit result carried no status"
    row: dict[str, Any] = {
        "run_id": run_id,
        "agent_id": agent_id,
        "step": step,
        "candidate_id": candidate_id(run_id, agent_id, step, index),
        "expression": "" if values["expression"] is None else str(values["expression"]),
        "canonical": values["canonical"],
        "complexity": values["complexity"],
        "constants": constants_text,
        "status": str(status),
        "error": error,
        "train_nmse": values["train_nmse"],
        "val_nmse": values["val_nmse"],
        "test_nmse": values["test_nmse"],
        "r2": values["r2"],
        "model": model,
        "dataset": dataset,
        "created_at": created_at if created_at is not None else utc_now(),
        "train_mse": values["train_mse"],
        "fit_s": values["fit_s"],
        "tool_call_id": tool_call_id,
        "dimensionally_consistent": values["dimensionally_consistent"],
        "units_mismatch": values["units_mismatch"],
        "origin": values["origin"],
    }
    metrics = _get(fit, "metrics")
    for name in METRIC_COLUMNS:
        value = _get(fit, name)
        if value is None and isinstance(metrics, Mapping):
            value = metrics.get(name)
        row[name] = value
    return row


# --- row normalization -------------------------------------------------------------------------

class RowError(ValueError):
    """A row that does not fit its schema; the message names the column and the problem."""


Normalizer = Callable[[Any], Any]


def _int_normalizer(bits: int) -> Normalizer:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1)

    def norm(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"expected an integer, got {type(value).__name__}")
        number = int(value)
        if not low <= number < high:
            raise ValueError(f"{number} does not fit in int{bits}")
        return number

    return norm


def _float_normalizer(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    number = float(value)
    return number if math.isfinite(number) else None


def _str_normalizer(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _bool_normalizer(value: Any) -> bool:
    if not isinstance(value, (bool, np_bool)):
        raise TypeError(f"expected true or false, got {type(value).__name__}")
    return bool(value)


def _ts_normalizer(value: Any) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("expected a timezone-aware datetime")
    return value.astimezone(UTC)


def _normalizer(dtype: pa.DataType) -> Normalizer:
    if pa.types.is_string(dtype):
        return _str_normalizer
    if pa.types.is_int32(dtype):
        return _int_normalizer(32)
    if pa.types.is_int64(dtype):
        return _int_normalizer(64)
    if pa.types.is_float64(dtype):
        return _float_normalizer
    if pa.types.is_timestamp(dtype):
        return _ts_normalizer
    if pa.types.is_boolean(dtype):
        return _bool_normalizer
    raise TypeError(f"no normalizer for Arrow type {dtype}")


def _plan(schema: pa.Schema) -> tuple[tuple[str, bool, Normalizer], ...]:
    return tuple((f.name, f.nullable, _normalizer(f.type)) for f in schema)


_PLANS: dict[pa.Schema, tuple[tuple[str, bool, Normalizer], ...]] = {}


def normalize_row(row: Mapping[str, Any], schema: pa.Schema) -> dict[str, Any]:
    """``row`` with exactly ``schema``'s columns, converted to plain Python values.

    Unknown keys, missing non-nullable columns and values of the wrong type raise ``RowError``;
    missing nullable columns become null and non-finite floats become null.
    """
    plan = _PLANS.get(schema)
    if plan is None:
        plan = _PLANS.setdefault(schema, _plan(schema))
    extra = set(row) - {name for name, _, _ in plan}
    if extra:
        raise RowError(f"unknown column(s) {sorted(extra)}")
    out: dict[str, Any] = {}
    for name, nullable, norm in plan:
        value = row.get(name)
        if value is None:
            if not nullable:
                raise RowError(f"column {name!r} must not be null")
            out[name] = None
            continue
        try:
            value = norm(value)
        except (TypeError, ValueError) as exc:
            raise RowError(f"column {name!r}: {exc}") from None
        if value is None and not nullable:
            raise RowError(f"column {name!r} must be a finite number")
        out[name] = value
    return out


# --- runs --------------------------------------------------------------------------------------

def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as ``None`` (JSON has no such numbers)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """The one ``runs`` row of a run; rewrite it (``write_run``) as the run progresses.

    ``status`` is one of ``RUN_STATUSES``; ``stop_reason`` says why a run ended
    (``max_seconds``, ``max_candidates``, ``max_turns``, ``target_nmse``, ``interrupted``,
    ``error``, ...). ``config`` is the resolved run configuration as YAML (or JSON) text.
    """

    run_id: str
    dataset: str
    model: str
    started_at: datetime
    status: str = "running"
    stop_reason: str | None = None
    error: str | None = None
    agents: int | None = None
    config: str | None = None
    ended_at: datetime | None = None
    updated_at: datetime | None = None
    candidates: int = 0
    best_candidate_id: str | None = None
    best_expression: str | None = None
    best_constants: str | None = None
    best_complexity: int | None = None
    best_val_nmse: float | None = None
    best_test_nmse: float | None = None
    sr_dist_version: str = __version__
    #: The evaluator pool's stats as JSON text (``with_evaluator_stats``).
    evaluator_stats: str | None = None
    #: The name of the signal that interrupted the run (``status == "interrupted"``).
    signal: str | None = None

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {RUN_STATUSES}, got {self.status!r}")

    def finished(
        self,
        status: str,
        stop_reason: str | None,
        ended_at: datetime | None = None,
        error: str | None = None,
        signal: str | None = None,
    ) -> RunRecord:
        """This record marked as ended (``completed``, ``interrupted`` or ``failed``); the pair
        of ``status`` and ``stop_reason`` must be one of ``RUN_OUTCOMES``."""
        if status == "running" or stop_reason not in RUN_OUTCOMES.get(status, ()):
            allowed = sorted(str(r) for r in RUN_OUTCOMES.get(status, ()))
            raise ValueError(f"a run cannot end {status!r} with stop_reason {stop_reason!r} "
                             f"(allowed with {status!r}: {allowed}; see RUN_OUTCOMES)")
        end = ended_at if ended_at is not None else utc_now()
        return dataclasses.replace(
            self, status=status, stop_reason=stop_reason, ended_at=end, error=error,
            signal=signal if status == "interrupted" else None,
        )

    def with_best(self, best: Mapping[str, Any] | None, candidates: int) -> RunRecord:
        """This record with the candidate count and the best candidate row (or none)."""
        if best is None:
            return dataclasses.replace(self, candidates=candidates)
        return dataclasses.replace(
            self,
            candidates=candidates,
            best_candidate_id=best.get("candidate_id"),
            best_expression=best.get("expression"),
            best_constants=best.get("constants"),
            best_complexity=best.get("complexity"),
            best_val_nmse=best.get("val_nmse"),
            best_test_nmse=best.get("test_nmse"),
        )

    def with_evaluator_stats(self, stats: Mapping[str, Any] | None) -> RunRecord:
        """This record with the evaluator pool's stats (stored as JSON text; ``None`` clears)."""
        text = None if not stats else json.dumps(_finite(stats), sort_keys=True, default=str)
        return dataclasses.replace(self, evaluator_stats=text)

    def to_row(self, now: datetime | None = None) -> dict[str, Any]:
        """The ``RUNS_SCHEMA`` row; ``updated_at`` defaults to ``now``."""
        row = dataclasses.asdict(self)
        if row["updated_at"] is None:
            row["updated_at"] = now if now is not None else utc_now()
        return normalize_row(row, RUNS_SCHEMA)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunRecord:
        """The record a ``runs`` row describes (columns this version does not know are dropped)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})
