"""Simplified forms of results rows: each row's fitted formula through
:func:`sr_dist.formula.simplify_formula`, checked on the dataset's validation split.

The validation split is where a candidate's loss (``val_nmse``) comes from, so a simplified
form that keeps the validation NMSE within the tolerance is as good an answer by the measure
the search used; a dataset without one is checked on its training split (as ``fitness`` does).
A listing (a Pareto front) gets a total time budget on top of the per-entry deadline, so a
front of many entries cannot hold up a report: rows past the budget keep their raw form.
Results are cached per (dataset, expression, constants) in this process, because the agents'
``best_formulas`` tool lists mostly the same front again and again.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from sr_dist.formula import Simplified, simplify_formula
from sr_dist.results.schema import constants_from_json

__all__ = ["CACHE_SIZE", "ENTRY_DEADLINE_S", "LISTING_BUDGET_S", "check_rows", "simplify_entries",
           "simplify_entry", "with_simplified"]

#: sympy deadline of one entry (seconds).
ENTRY_DEADLINE_S = 1.0
#: Time all entries of one listing may take together (seconds).
LISTING_BUDGET_S = 10.0
#: Entries kept in the per-process cache.
CACHE_SIZE = 2048

_cache: OrderedDict[tuple[Any, ...], Simplified] = OrderedDict()
_cache_lock = threading.Lock()


def check_rows(dataset: Any) -> tuple[np.ndarray, np.ndarray]:
    """The rows a simplification is checked on: validation split, else the training split."""
    if len(dataset.y_val):
        return np.asarray(dataset.X_val), np.asarray(dataset.y_val)
    return np.asarray(dataset.X_train), np.asarray(dataset.y_train)


def _unchanged(expression: str, why: str) -> Simplified:
    return Simplified(expression, expression, math.inf, math.inf, False, (why,))


def simplify_entry(expression: str, constants: Any, dataset: Any, *,
                   deadline_s: float = ENTRY_DEADLINE_S) -> Simplified:
    """One row's simplified form on the dataset's check rows; never raises."""
    try:
        values = constants_from_json(constants)
        X, y = check_rows(dataset)
        names = tuple(dataset.feature_names)
    except (ValueError, TypeError, AttributeError) as exc:
        return _unchanged(str(expression), f"not simplified: {exc}")
    key = (getattr(dataset, "content_hash", None) or id(dataset), len(y), str(expression),
           tuple(values.items()))
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    result = simplify_formula(str(expression), values, X, y, names, deadline_s=deadline_s)
    if not any("deadline" in step for step in result.steps):  # a cut-short answer may improve
        with _cache_lock:
            _cache[key] = result
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return result


def simplify_entries(rows: Sequence[Mapping[str, Any]], dataset: Any, *,
                     budget_s: float = LISTING_BUDGET_S) -> list[Simplified]:
    """Each row's simplified form, in order, within ``budget_s`` in all."""
    end = time.monotonic() + budget_s
    out: list[Simplified] = []
    for row in rows:
        expression = str(row.get("expression") or "")
        left = end - time.monotonic()
        if left <= 0:
            out.append(_unchanged(expression, "not simplified: the listing's time budget is spent"))
            continue
        out.append(simplify_entry(expression, row.get("constants"), dataset,
                                  deadline_s=min(ENTRY_DEADLINE_S, left)))
    return out


def with_simplified(table: pa.Table, dataset: Any, *, after: str = "expression") -> pa.Table:
    """``table`` with a ``simplified`` string column placed after ``after`` (null when the
    form could not be checked: no dataset, an unusable row)."""
    if dataset is None:
        texts: list[str | None] = [None] * table.num_rows
    else:
        texts = [s.expression if math.isfinite(s.raw_nmse) else None
                 for s in simplify_entries(table.to_pylist(), dataset)]
    column = pa.array(texts, pa.string())
    names = table.column_names
    at = names.index(after) + 1 if after in names else len(names)
    return table.add_column(at, "simplified", column)
