"""Pictures and the HTML report of a run, read from its results through :mod:`sr_dist.results`.

``sr-dist-query PATH --plot pareto|fit|progress --out FILE.png`` and ``sr-dist-report PATH -o
report.html`` are the faces; docs/plots.md shows what they draw. This package sits just above
the results layer (docs/architecture.md): no Ray, no Hydra, matplotlib only when drawing.
"""

from sr_dist.viz.formulas import formula_label, formula_mathml, with_constants
from sr_dist.viz.plots import FORMATS, INSTALL_HINT, PLOT_KINDS, PlotInfo, figure, render_plot, save_plot
from sr_dist.viz.report import build_report, write_report
from sr_dist.viz.runs import (
    FitPoints,
    RunView,
    VizError,
    agent_stats,
    evaluator_stats,
    fit_points,
    front_index,
    latest_run_id,
    load_run,
    parse_constants,
    progress_series,
)

__all__ = [
    "FORMATS",
    "INSTALL_HINT",
    "PLOT_KINDS",
    "FitPoints",
    "PlotInfo",
    "RunView",
    "VizError",
    "agent_stats",
    "build_report",
    "evaluator_stats",
    "figure",
    "fit_points",
    "formula_label",
    "formula_mathml",
    "front_index",
    "latest_run_id",
    "load_run",
    "parse_constants",
    "progress_series",
    "render_plot",
    "save_plot",
    "with_constants",
    "write_report",
]
