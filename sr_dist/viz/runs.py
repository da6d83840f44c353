"""What the pictures and the report show of one run, read through :mod:`sr_dist.results`.

Everything here is plain data (no matplotlib, no HTML), so the plots and the report draw the
same numbers and the tests can check them without a picture.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from sr_dist.candidate import NMSE_RESOLUTION
from sr_dist.results import (
    OK_STATUS,
    SELECTION_RULES,
    RunRecord,
    ScoreError,
    constants_from_json,
    load_run_dataset,
    open_results,
    pareto_front,
    read_run,
    regression_metrics,
    select_candidate,
    split_predictions,
)

__all__ = [
    "FitPoints",
    "RunView",
    "VizError",
    "agent_stats",
    "evaluator_stats",
    "fit_points",
    "front_index",
    "latest_run_id",
    "load_run",
    "parse_constants",
    "progress_series",
]


class VizError(ValueError):
    """A plot or report that cannot be made; the message is one line that says how to fix it."""


@dataclass(frozen=True)
class RunView:
    """One run as the pictures see it: its ``runs`` row (``None`` while it has none), its
    candidates, the Pareto front (sorted by complexity) and the front index of the selected
    answer (``selected``: ``None`` when the front is empty)."""

    path: str
    run_id: str
    record: RunRecord | None
    candidates: pa.Table
    front: tuple[dict[str, Any], ...]
    selected: int | None
    select: str


@dataclass(frozen=True)
class FitPoints:
    """Predicted against true on one split for one front formula, with its metrics."""

    row: dict[str, Any]
    index: int
    split: str
    y_true: np.ndarray
    y_pred: np.ndarray
    metrics: dict[str, float]


def parse_constants(text: str | None) -> dict[str, float]:
    """A candidate's ``constants`` JSON as floats (null, a non-finite fit, is NaN)."""
    try:
        return constants_from_json(text)
    except ValueError as exc:
        raise VizError(f"unreadable constants {str(text)[:40]!r}: {exc}") from exc


def latest_run_id(path: str | os.PathLike[str]) -> str:
    """The run that started last (its ``runs`` row); without rows, the run whose candidate was
    written last. ``ResultsNotFound`` when ``path`` holds no results."""
    results = open_results(path)
    runs = results.runs.to_table(columns=["run_id", "started_at"])
    if runs.num_rows:
        latest = max(runs.to_pylist(), key=lambda r: (r["started_at"], r["run_id"]))
        return str(latest["run_id"])
    cands = results.candidates.to_table(columns=["run_id", "created_at"])
    if cands.num_rows == 0:
        raise VizError(f"no runs under {os.fspath(path)}")
    latest = max(cands.to_pylist(), key=lambda r: (r["created_at"], r["run_id"]))
    return str(latest["run_id"])


def load_run(path: str | os.PathLike[str], run_id: str | None = None, *,
             select: str = "best") -> RunView:
    """``run_id`` (default: the latest run) of the results root ``path``; :class:`VizError`
    for a run that is not there or an unknown selection rule."""
    if select not in SELECTION_RULES:
        raise VizError(f"select must be one of {', '.join(SELECTION_RULES)}, got {select!r}")
    results = open_results(path)
    rid = run_id if run_id is not None else latest_run_id(path)
    table = results.candidates.to_table(filter=pads.field("run_id") == rid)
    record = read_run(path, rid)
    if record is None and table.num_rows == 0:
        known = sorted(set(results.runs.to_table(columns=["run_id"])["run_id"].to_pylist())
                       | set(results.candidates.to_table(columns=["run_id"])["run_id"].to_pylist()))
        shown = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
        raise VizError(f"unknown run id {rid!r} (known: {shown or 'none'})")
    front = tuple(pareto_front(table).to_pylist())
    chosen = select_candidate(table, rule=select) if front else None
    selected = None
    if chosen is not None:
        selected = next(i for i, row in enumerate(front)
                        if row["candidate_id"] == chosen["candidate_id"])
    return RunView(path=os.fspath(path), run_id=rid, record=record, candidates=table,
                   front=front, selected=selected, select=select)


def front_index(view: RunView, index: int | None) -> int:
    """``index`` into the front checked (default: the selected answer)."""
    if not view.front:
        raise VizError(f"run {view.run_id} has no Pareto front (no ok candidate with a "
                       "validation NMSE)")
    if index is None:
        assert view.selected is not None
        return view.selected
    if not 0 <= index < len(view.front):
        raise VizError(f"--index {index} is out of range: run {view.run_id}'s front has "
                       f"{len(view.front)} formulas (0..{len(view.front) - 1}, by complexity)")
    return index


def fit_points(view: RunView, index: int | None = None, split: str = "test",
               dataset: Any | None = None) -> FitPoints:
    """Predictions of front formula ``index`` (default: the selected answer) on ``split`` of
    the run's dataset, rebuilt from its ``runs`` row unless ``dataset`` is given."""
    i = front_index(view, index)
    row = view.front[i]
    if dataset is None:
        if view.record is None:
            raise VizError(f"run {view.run_id} has no runs row yet, so its dataset is unknown")
        try:
            dataset = load_run_dataset(view.record, view.path)
        except ScoreError as exc:
            raise VizError(str(exc)) from exc
    try:
        y_true, pred = split_predictions(row["expression"], parse_constants(row["constants"]),
                                         dataset, split, what=f"front formula {i}")
    except ScoreError as exc:
        raise VizError(str(exc)) from exc
    return FitPoints(row=row, index=i, split=split, y_true=y_true, y_pred=np.asarray(pred),
                     metrics=regression_metrics(y_true, pred))


def _seconds(stamps: Sequence[datetime], start: datetime) -> np.ndarray:
    return np.array([(t - start).total_seconds() for t in stamps], dtype=np.float64)


def progress_series(view: RunView) -> tuple[datetime | None,
                                            dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Per agent, ``(seconds since the run started, best validation NMSE so far)`` at each
    improvement, plus the start time (the runs row's, else the first candidate's). NMSEs are
    floored at the candidate module's resolution so a log axis can show an exact fit."""
    ok = view.candidates.filter(pc.and_(pc.equal(view.candidates["status"], OK_STATUS),
                                        pc.is_valid(view.candidates["val_nmse"])))
    if ok.num_rows == 0:
        return (view.record.started_at if view.record else None), {}
    rows = sorted(ok.select(["agent_id", "created_at", "val_nmse", "candidate_id"]).to_pylist(),
                  key=lambda r: (r["created_at"], r["candidate_id"]))
    start = view.record.started_at if view.record is not None else rows[0]["created_at"]
    series: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    by_agent: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_agent.setdefault(int(row["agent_id"]), []).append(row)
    for agent, items in sorted(by_agent.items()):
        stamps, bests, best = [], [], math.inf
        for item in items:
            loss = max(float(item["val_nmse"]), NMSE_RESOLUTION)
            if loss < best:
                best = loss
                stamps.append(item["created_at"])
                bests.append(loss)
        series[agent] = (_seconds(stamps, start), np.array(bests, dtype=np.float64))
    return start, series


def agent_stats(view: RunView) -> list[dict[str, Any]]:
    """One row per agent: candidates, ok ones, other statuses, turns, best validation NMSE and
    its formula, mean fit seconds."""
    rows = view.candidates.select(
        ["agent_id", "step", "status", "val_nmse", "expression", "fit_s"]).to_pylist()
    out: dict[int, dict[str, Any]] = {}
    for row in rows:
        agent = int(row["agent_id"])
        entry = out.setdefault(agent, {"agent": agent, "candidates": 0, "ok": 0, "other": {},
                                       "turns": 0, "best_val_nmse": None, "best_expression": None,
                                       "_fit": []})
        entry["candidates"] += 1
        entry["turns"] = max(entry["turns"], int(row["step"]))
        if row["status"] == OK_STATUS:
            entry["ok"] += 1
            loss = row["val_nmse"]
            if loss is not None and (entry["best_val_nmse"] is None or loss < entry["best_val_nmse"]):
                entry["best_val_nmse"], entry["best_expression"] = loss, row["expression"]
        else:
            entry["other"][row["status"]] = entry["other"].get(row["status"], 0) + 1
        if row["fit_s"] is not None:
            entry["_fit"].append(float(row["fit_s"]))
    result = []
    for agent in sorted(out):
        entry = out[agent]
        fits = entry.pop("_fit")
        entry["mean_fit_s"] = float(np.mean(fits)) if fits else None
        result.append(entry)
    return result


def evaluator_stats(view: RunView) -> Mapping[str, Any] | None:
    """The runs row's evaluator pool stats (``None`` while the run goes or when absent)."""
    if view.record is None or not view.record.evaluator_stats:
        return None
    try:
        stats = json.loads(view.record.evaluator_stats)
    except json.JSONDecodeError:
        return None
    return stats if isinstance(stats, Mapping) else None
