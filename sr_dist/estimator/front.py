"""``equations_``: a run's Pareto front as the table a person reads, and where it is kept.

One row per front formula, simplest first: ``complexity``, ``loss`` (validation NMSE),
``score`` (the parsimony score, :func:`sr_dist.results.front_scores`), ``expression`` (the
formula with its free constants by name, as searched), ``simplified`` (constants snapped,
dead terms dropped: :func:`sr_dist.formula.simplify.simplify_formula` on the validation rows),
``constants`` (JSON, as the results store them) and ``sympy_format``; then ``candidate_id``,
``train_nmse``, ``test_nmse`` and ``simplified_loss`` to trace a row back to the results.

The table is also written next to the run's results (``<results>/_estimator/run_id=<id>/``,
which the results readers skip like ``_hydra``), with the variable names, so
``SymbolicRegressor.from_results`` rebuilds a fit of in-memory arrays without the arrays.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sr_dist.formula import FormulaError, parse_formula
from sr_dist.formula.simplify import simplify_formula, written_in
from sr_dist.results import constants_from_json, front_scores
from sr_dist.results.run_data import RECORD_DIR, record_dir

log = logging.getLogger(__name__)

__all__ = ["EQUATIONS_SCHEMA", "RECORD_DIR", "build_equations", "constants_of", "read_record", "write_record"]

EQUATIONS_SCHEMA = pa.schema([
    pa.field("complexity", pa.int32()),
    pa.field("loss", pa.float64()),
    pa.field("score", pa.float64()),
    pa.field("expression", pa.string()),
    pa.field("simplified", pa.string()),
    pa.field("constants", pa.string()),
    pa.field("sympy_format", pa.string()),
    pa.field("candidate_id", pa.string()),
    pa.field("train_nmse", pa.float64()),
    pa.field("test_nmse", pa.float64()),
    pa.field("simplified_loss", pa.float64()),
])

#: Seconds sympy may spend simplifying one front formula.
SIMPLIFY_DEADLINE_S = 2.0


def constants_of(text: Any) -> dict[str, float]:
    """A row's ``constants`` JSON as name -> value (``null``, a non-finite fit, becomes NaN)."""
    return constants_from_json(text)


def _constant_free(text: str, variables: Sequence[str]) -> str | None:
    """``text`` if it parses with no free constants (what the default exports evaluate)."""
    try:
        return text if not parse_formula(text, tuple(variables)).constants else None
    except FormulaError:
        return None


def build_equations(front: Sequence[Mapping[str, Any]], X: np.ndarray, y: np.ndarray,
                    variables: Sequence[str]) -> pa.Table:
    """The equations table of a Pareto front (rows sorted by complexity), each formula
    simplified against ``(X, y)`` (the validation rows)."""
    scores = front_scores(front) if front else []
    rows = []
    for row, score in zip(front, scores, strict=True):
        constants = constants_of(row.get("constants"))
        simple = simplify_formula(str(row["expression"]), constants, X, y, list(variables),
                                  deadline_s=SIMPLIFY_DEADLINE_S)
        readable = _constant_free(simple.expression, variables) or written_in(
            str(row["expression"]), constants, list(variables))
        if readable is None:  # no finite value for a constant: nothing can evaluate it
            log.warning("Pareto entry %s left out of equations_: its constants %s have no "
                        "finite values", row["expression"], constants)
            continue
        rows.append({
            "complexity": int(row["complexity"]), "loss": row.get("val_nmse"), "score": score,
            "expression": str(row["expression"]), "simplified": readable,
            "constants": row.get("constants") or "{}", "sympy_format": simple.sympy_text,
            "candidate_id": row.get("candidate_id"), "train_nmse": row.get("train_nmse"),
            "test_nmse": row.get("test_nmse"),
            "simplified_loss": simple.nmse if math.isfinite(simple.nmse) else None,
        })
    return pa.Table.from_pylist(rows, schema=EQUATIONS_SCHEMA)


def _record_path(results: str | os.PathLike[str], run_id: str) -> Path:
    return record_dir(results, run_id) / "equations.parquet"


def write_record(results: str | os.PathLike[str], run_id: str, equations: pa.Table,
                 meta: Mapping[str, Any]) -> Path:
    """Keep ``equations`` and ``meta`` (variable names, target) for ``from_results``."""
    path = _record_path(results, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = equations.replace_schema_metadata({"sr_dist.estimator": json.dumps(dict(meta))})
    partial = path.with_name(f".{path.name}.partial")
    pq.write_table(table, partial)
    os.replace(partial, path)
    return path


def read_record(results: str | os.PathLike[str], run_id: str) -> tuple[pa.Table, dict[str, Any]] | None:
    """The equations and meta :func:`write_record` kept, or ``None`` if there are none."""
    path = _record_path(results, run_id)
    if not path.is_file():
        return None
    table = pq.read_table(path)
    meta = json.loads((table.schema.metadata or {}).get(b"sr_dist.estimator", b"{}"))
    return table.replace_schema_metadata(None).cast(EQUATIONS_SCHEMA), meta
