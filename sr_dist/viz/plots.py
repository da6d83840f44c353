"""The three pictures of a run, drawn with matplotlib's object API (a ``Figure`` and the Agg
renderer; never ``pyplot``, so no global backend or GUI state is touched):

* ``pareto``: validation NMSE against complexity, each front formula written by its point, the
  selected answer marked (PySR issue #300's picture);
* ``fit``: predicted against true on the test split for one front formula;
* ``progress``: each agent's best validation NMSE over the run's time.

matplotlib is the optional ``plot`` extra, imported on first use.
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sr_dist.candidate import NMSE_RESOLUTION
from sr_dist.viz.formulas import formula_label
from sr_dist.viz.runs import RunView, VizError, fit_points, parse_constants, progress_series

__all__ = ["PLOT_KINDS", "PlotInfo", "figure", "render_plot", "save_plot"]

#: The kinds ``sr-dist-query --plot`` draws.
PLOT_KINDS: tuple[str, ...] = ("pareto", "fit", "progress")
#: File types a plot can be saved as (by the suffix of the output path).
FORMATS: tuple[str, ...] = ("png", "svg", "pdf")
INSTALL_HINT = "matplotlib is not installed: pip install 'sr-dist[plot]'"
_SIZE = (9.0, 5.6)
_PARETO_SIZE = (11.0, 5.6)
_DPI = 100
#: Use a log complexity axis when the front spans at least this factor.
_LOG_X_SPAN = 20


@dataclass(frozen=True)
class PlotInfo:
    """What a drawn plot shows: its kind, the labels written by the points (pareto: one per
    front formula, in complexity order), the front index of the marked or drawn formula, the
    number of data series, and the encoded image."""

    kind: str
    labels: tuple[str, ...]
    index: int | None
    series: int
    image: bytes
    format: str = "png"


def _new_figure(**kwargs: Any) -> Any:
    """A ``Figure`` drawn by the Agg renderer (no GUI, no pyplot state); matplotlib loads here."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise VizError(INSTALL_HINT) from exc
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def _floor(values: Any) -> np.ndarray:
    """Losses floored at the resolution, so an exact fit sits on a log axis."""
    return np.maximum(np.asarray(values, dtype=np.float64), NMSE_RESOLUTION)


def _pareto(view: RunView) -> tuple[Any, tuple[str, ...], int | None, int]:
    if not view.front:
        raise VizError(f"run {view.run_id} has no Pareto front (no ok candidate with a "
                       "validation NMSE) to plot")
    fig = _new_figure(figsize=_PARETO_SIZE, dpi=_DPI, layout="constrained")
    ax = fig.add_subplot()
    x = np.array([int(r["complexity"]) for r in view.front], dtype=np.float64)
    y = _floor([r["val_nmse"] for r in view.front])
    ax.step(x, y, where="post", color="0.7", linewidth=1, zorder=1)
    ax.scatter(x, y, s=28, color="tab:blue", zorder=2, label="Pareto front")
    labels = tuple(formula_label(r["expression"], parse_constants(r["constants"]), max_chars=64)
                   for r in view.front)
    if view.selected is not None:
        ax.scatter([x[view.selected]], [y[view.selected]], s=160, marker="*", color="tab:red",
                   zorder=4, label=f"selected ({view.select})")
    ax.set_yscale("log")
    if x.max() / max(x.min(), 1) >= _LOG_X_SPAN:
        ax.set_xscale("log")
    ax.margins(x=0.08, y=0.08)
    # Each formula goes in a column right of the axes, joined to its point by a thin line:
    # front points crowd where the loss flattens, and labels by the points would overlap there.
    for i, (xi, yi, ty, text) in enumerate(zip(x, y, _label_rows(ax, y), labels)):
        ax.annotate(text, (xi, yi), xytext=(1.02, ty), textcoords="axes fraction",
                    fontsize=7.5, va="center", color="tab:red" if i == view.selected else "0.1",
                    arrowprops={"arrowstyle": "-", "color": "0.75", "linewidth": 0.6,
                                "shrinkA": 0, "shrinkB": 3})
    ax.set_xlabel("complexity (nodes)")
    ax.set_ylabel("validation NMSE")
    ax.set_title(f"Pareto front, run {view.run_id} ({_dataset(view)})", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    return fig, labels, view.selected, 1


def _label_rows(ax: Any, y: np.ndarray) -> list[float]:
    """Heights (axes fraction) of the label column: each near its point's height on the log
    axis, at least one text line apart, all inside the axes' height."""
    low, high = (math.log10(v) for v in ax.get_ylim())
    want = [(math.log10(v) - low) / ((high - low) or 1.0) for v in y]
    gap = min(0.07, 1.0 / (len(y) + 1))
    order = sorted(range(len(y)), key=lambda i: want[i])
    rows = [0.0] * len(y)
    floor = 0.0
    for i in order:  # bottom up, each at least one gap above the one below
        rows[i] = max(want[i], floor)
        floor = rows[i] + gap
    ceiling = 1.0
    for i in reversed(order):  # then top down, so none leaves the top
        rows[i] = min(rows[i], ceiling)
        ceiling = rows[i] - gap
    return rows


def _fit(view: RunView, index: int | None, dataset: Any | None) -> tuple[Any, tuple[str, ...],
                                                                          int | None, int]:
    points = fit_points(view, index, "test", dataset)
    fig = _new_figure(figsize=(6.4, 6.0), dpi=_DPI, layout="constrained")
    ax = fig.add_subplot()
    y, p = points.y_true, points.y_pred
    finite = np.isfinite(p)
    lo, hi = float(np.min(y)), float(np.max(y))
    pad = 0.05 * (hi - lo or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.5", linewidth=1,
            linestyle="--", label="predicted = true")
    ax.scatter(y[finite], p[finite], s=6, alpha=0.5, color="tab:blue", linewidths=0,
               label=f"test rows ({int(finite.sum())})")
    if finite.any():
        span = (min(lo, float(np.min(p[finite]))), max(hi, float(np.max(p[finite]))))
        # Keep the picture about the true range when a few predictions run far off.
        if span[1] - span[0] > 10 * (hi - lo + 2 * pad):
            span = (lo - 2 * pad, hi + 2 * pad)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(span[0] - pad, span[1] + pad)
    label = formula_label(points.row["expression"], parse_constants(points.row["constants"]),
                          max_chars=70)
    m = points.metrics
    ax.set_title(f"{label}\nfront #{points.index}, test NMSE {_g(m['nmse'])}, R² {_g(m['r2'])}",
                 fontsize=9)
    ax.set_xlabel("true (test split)")
    ax.set_ylabel("predicted")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return fig, (label,), points.index, 1


def _progress(view: RunView) -> tuple[Any, tuple[str, ...], int | None, int]:
    start, series = progress_series(view)
    if not series:
        raise VizError(f"run {view.run_id} has no ok candidate with a validation NMSE to plot")
    fig = _new_figure(figsize=_SIZE, dpi=_DPI, layout="constrained")
    ax = fig.add_subplot()
    end = max(float(t[-1]) for t, _ in series.values())
    if view.record is not None and view.record.ended_at is not None and start is not None:
        end = max(end, (view.record.ended_at - start).total_seconds())
    labels = []
    for agent, (t, best) in series.items():
        label = f"agent {agent}"
        labels.append(label)
        ax.step(np.append(t, end), np.append(best, best[-1]), where="post", linewidth=1.5,
                label=label)
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the run started")
    ax.set_ylabel("best validation NMSE so far")
    ax.set_title(f"Search progress, run {view.run_id} ({_dataset(view)})", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    return fig, tuple(labels), None, len(series)


def _dataset(view: RunView) -> str:
    if view.record is not None:
        return view.record.dataset
    names = view.candidates["dataset"].to_pylist()[:1] if view.candidates.num_rows else []
    return str(names[0]) if names else "unknown dataset"


def _g(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else str(value)


def figure(kind: str, view: RunView, *, index: int | None = None,
           dataset: Any | None = None) -> tuple[Any, PlotInfo]:
    """The matplotlib ``Figure`` of ``kind`` and what it shows (``image`` left empty)."""
    if kind not in PLOT_KINDS:
        raise VizError(f"unknown plot kind {kind!r}: choose one of {', '.join(PLOT_KINDS)}")
    if kind != "fit" and index is not None:
        raise VizError("--index picks the formula of the fit plot; the other plots show "
                       "the whole front")
    if kind == "pareto":
        fig, labels, idx, series = _pareto(view)
    elif kind == "fit":
        fig, labels, idx, series = _fit(view, index, dataset)
    else:
        fig, labels, idx, series = _progress(view)
    return fig, PlotInfo(kind=kind, labels=labels, index=idx, series=series, image=b"")


def render_plot(kind: str, view: RunView, *, index: int | None = None, fmt: str = "png",
                dataset: Any | None = None) -> PlotInfo:
    """Draw ``kind`` and encode it as ``fmt`` (``png``, ``svg`` or ``pdf``)."""
    if fmt not in FORMATS:
        raise VizError(f"cannot write a {fmt!r} image: use one of {', '.join(FORMATS)}")
    fig, info = figure(kind, view, index=index, dataset=dataset)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=_DPI)
    return PlotInfo(kind=info.kind, labels=info.labels, index=info.index, series=info.series,
                    image=buf.getvalue(), format=fmt)


def save_plot(kind: str, view: RunView, out: str | os.PathLike[str], *,
              index: int | None = None) -> PlotInfo:
    """Draw ``kind`` into the file ``out``; its suffix picks the format."""
    target = Path(out)
    fmt = target.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise VizError(f"--out {os.fspath(out)!r}: the name must end in "
                       f"{', '.join('.' + f for f in FORMATS)}")
    if not target.parent.is_dir():
        raise VizError(f"--out {os.fspath(out)!r}: the folder {os.fspath(target.parent)!r} "
                       "does not exist")
    info = render_plot(kind, view, index=index, fmt=fmt)
    target.write_bytes(info.image)
    return info
