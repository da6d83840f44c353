"""``sr-dist-report``'s page: one self-contained HTML file about one run.

The page loads nothing: the plots are PNG ``data:`` URIs, the formulas presentation MathML
(rendered by the browser itself), the style inline, and a Content-Security-Policy that forbids
every other source, so it opens the same offline, from an e-mail or a CI artifact. Every piece
of text from the results (formulas, config, errors) is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sr_dist.viz.formulas import formula_mathml
from sr_dist.viz.plots import PLOT_KINDS, render_plot
from sr_dist.viz.runs import (
    RunView,
    VizError,
    agent_stats,
    evaluator_stats,
    load_run,
    parse_constants,
)

__all__ = ["build_report", "write_report"]

_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        "base-uri 'none'; form-action 'none'")
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 84rem; color: #222;
       padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.selected { background: #fff4d6; } code, pre { font-size: 0.85rem; }
pre { background: #f7f7f7; padding: 0.75rem; overflow-x: auto; }
math { font-size: 1.1rem; } .note { color: #a33; }
figure { margin: 1rem 0; } img { max-width: 100%; border: 1px solid #eee; }
"""
#: Evaluator totals shown in the summary table (key in the stats, label).
_EVALUATOR_KEYS: tuple[tuple[str, str], ...] = (
    ("device", "device"), ("replicas", "replicas"), ("layout", "layout"),
    ("search_fits", "fits of new structures"), ("cache_hits", "cache hits"),
    ("fits_per_s", "fits per second (busy)"), ("search_fits_per_s", "new fits per second"),
    ("batches", "batches"), ("mean_batch_size", "mean batch size"),
    ("compiles", "XLA compiles"), ("compile_s", "compile seconds"), ("busy_s", "busy seconds"),
    ("nonfinite", "non-finite fits"), ("invalid", "invalid formulas"), ("errors", "errors"),
    ("restarts", "replica restarts"),
)
_REPLICA_KEYS: tuple[str, ...] = ("replica", "node_id", "search_fits", "cache_hits", "batches",
                                  "mean_batch_size", "busy_s", "fits_per_s", "restarted")


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return _e(value)


def _when(value: datetime | None) -> str:
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[bool],
           row_classes: Sequence[str] | None = None, css_id: str | None = None) -> str:
    """An HTML table of cells that are already markup (escape before)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    body = []
    for i, row in enumerate(rows):
        klass = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        cells = "".join(f'<td class="num">{c}</td>' if num else f"<td>{c}</td>"
                        for c, num in zip(row, numeric))
        body.append(f"<tr{klass}>{cells}</tr>")
    ident = f' id="{css_id}"' if css_id else ""
    return f"<table{ident}>{thead}<tbody>{''.join(body)}</tbody></table>"


def _summary(view: RunView) -> str:
    r = view.record
    if r is None:
        return ('<p class="note">This run has no runs row yet (still starting, or its writer '
                f"died): {view.candidates.num_rows} candidate(s) on disk.</p>")
    seconds = ((r.ended_at - r.started_at).total_seconds() if r.ended_at is not None else None)
    pairs = [
        ("dataset", _e(r.dataset)), ("model", _e(r.model)), ("agents", _num(r.agents)),
        ("status", _e(r.status)), ("stop reason", _e(r.stop_reason or "–")),
        ("started", _when(r.started_at)), ("ended", _when(r.ended_at)),
        ("seconds", _num(seconds)), ("candidates", _num(r.candidates)),
        ("best validation NMSE", _num(r.best_val_nmse)), ("best test NMSE", _num(r.best_test_nmse)),
        ("best formula", f"<code>{_e(r.best_expression or '–')}</code>"),
        ("sr-dist version", _e(r.sr_dist_version)),
    ]
    if r.error:
        pairs.append(("error", f'<span class="note">{_e(r.error)}</span>'))
    return _table(("", ""), ([f"<b>{_e(k)}</b>", v] for k, v in pairs), (False, False),
                  css_id="summary")


def _front(view: RunView) -> str:
    if not view.front:
        return '<p class="note">No Pareto front: no ok candidate with a validation NMSE.</p>'
    rows, classes = [], []
    for i, row in enumerate(view.front):
        constants = parse_constants(row["constants"])
        consts = ", ".join(f"{_e(k)}={_num(v)}" for k, v in constants.items())
        mark = f'<span title="selected ({_e(view.select)})">★</span>' if i == view.selected else ""
        rows.append([str(i), _num(row["complexity"]), _num(row["val_nmse"]),
                     _num(row["test_nmse"]), formula_mathml(row["expression"], constants),
                     f"<code>{_e(row['expression'])}</code>"
                     + (f"<br><small>{consts}</small>" if consts else ""),
                     _num(row["agent_id"]), mark])
        classes.append("selected" if i == view.selected else "")
    return _table(("#", "complexity", "val NMSE", "test NMSE", "formula", "as fitted",
                   "agent", ""), rows, (True, True, True, True, False, False, True, False),
                  row_classes=classes, css_id="pareto")


def _plots(view: RunView, dataset: Any | None) -> str:
    parts = []
    titles = {"pareto": "Pareto front: validation NMSE against complexity",
              "fit": "Selected formula: predicted against true on the test split",
              "progress": "Best validation NMSE over time, per agent"}
    for kind in PLOT_KINDS:
        try:
            info = render_plot(kind, view, dataset=dataset)
        except VizError as exc:
            if "pip install" in str(exc):
                raise
            parts.append(f'<p class="note">No {kind} plot: {_e(exc)}</p>')
            continue
        data = base64.b64encode(info.image).decode("ascii")
        parts.append(f'<figure id="plot-{kind}"><img alt="{_e(titles[kind])}" '
                     f'src="data:image/png;base64,{data}"><figcaption>{_e(titles[kind])}'
                     "</figcaption></figure>")
    return "\n".join(parts)


def _agents(view: RunView) -> str:
    stats = agent_stats(view)
    if not stats:
        return "<p>No candidates.</p>"
    rows = [[str(s["agent"]), _num(s["candidates"]), _num(s["ok"]),
             _e(", ".join(f"{k} {v}" for k, v in sorted(s["other"].items())) or "–"),
             _num(s["turns"]), _num(s["best_val_nmse"]),
             f"<code>{_e(s['best_expression'] or '–')}</code>", _num(s["mean_fit_s"])]
            for s in stats]
    return _table(("agent", "candidates", "ok", "other statuses", "turns", "best val NMSE",
                   "best formula", "mean fit s"), rows,
                  (True, True, True, False, True, True, False, True), css_id="agents")


def _percentiles(block: Any) -> str:
    if not isinstance(block, Mapping):
        return "–"
    return " / ".join(_num(block.get(k)) for k in ("p50_s", "p95_s", "p99_s"))


def _evaluator(view: RunView) -> str:
    stats = evaluator_stats(view)
    if stats is None:
        return "<p>No evaluator stats in the runs row (the run is going, or predates them).</p>"
    pairs = [(label, _num(stats.get(key))) for key, label in _EVALUATOR_KEYS if key in stats]
    pairs.append(("queue wait p50 / p95 / p99 s", _percentiles(stats.get("queue_wait"))))
    pairs.append(("batch latency p50 / p95 / p99 s", _percentiles(stats.get("latency"))))
    parts = [_table(("", ""), ([_e(k), v] for k, v in pairs), (False, True), css_id="evaluator")]
    replicas = stats.get("per_replica")
    if isinstance(replicas, list) and replicas:
        rows = [[_num(r.get(k)) if k != "node_id" else _e(str(r.get(k, ""))[:12])
                 for k in _REPLICA_KEYS] for r in replicas if isinstance(r, Mapping)]
        parts.append("<h3>Replicas</h3>" + _table(_REPLICA_KEYS, rows,
                                                  [k != "node_id" for k in _REPLICA_KEYS]))
    raw = json.dumps(stats, indent=2, sort_keys=True)
    parts.append(f"<details><summary>all evaluator stats (JSON)</summary><pre>{_e(raw)}</pre>"
                 "</details>")
    return "\n".join(parts)


def build_report(path: str | os.PathLike[str], run_id: str | None = None, *,
                 select: str = "best", dataset: Any | None = None) -> str:
    """The HTML page of ``run_id`` (default: the latest run) under the results root ``path``.

    ``select`` is the rule that marks the answer (:func:`sr_dist.results.select_candidate`);
    ``dataset`` replaces the one rebuilt from the runs row for the fit plot."""
    view = load_run(path, run_id, select=select)
    config = view.record.config if view.record is not None and view.record.config else None
    title = f"sr-dist run {view.run_id}"
    sections = [
        f"<h1>{_e(title)}</h1>", _summary(view),
        "<h2>Pareto front</h2>",
        "<p>Formulas with their fitted constants put in (4 significant digits), simplest first; "
        "each is the best validation NMSE at its complexity.</p>", _front(view),
        "<h2>Plots</h2>", _plots(view, dataset),
        "<h2>Agents</h2>", _agents(view),
        "<h2>Evaluator</h2>", _evaluator(view),
        "<h2>Run configuration</h2>",
        f'<pre id="config">{_e(config)}</pre>' if config else "<p>No configuration recorded.</p>",
    ]
    body = "\n".join(sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head>\n<body>\n{body}\n"
            "</body></html>\n")


def write_report(path: str | os.PathLike[str], out: str | os.PathLike[str],
                 run_id: str | None = None, *, select: str = "best") -> Path:
    """Write :func:`build_report`'s page to ``out`` (its folder must exist)."""
    target = Path(out)
    if not target.parent.is_dir():
        raise VizError(f"-o {os.fspath(out)!r}: the folder {os.fspath(target.parent)!r} "
                       "does not exist")
    page = build_report(path, run_id, select=select)
    target.write_text(page, encoding="utf-8")
    return target
