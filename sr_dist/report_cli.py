"""``sr-dist-report PATH [--run ID] -o report.html``: one self-contained HTML page about a run.

The page holds the run's configuration, its Pareto front with the formulas rendered, the three
plots of ``sr-dist-query --plot`` and the per-agent and evaluator stats; it loads nothing from
the network (docs/plots.md). Every failure is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sr_dist.results import SELECTION_RULES, ResultsNotFound

PROG = "sr-dist-report"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Write one self-contained HTML report of an sr-dist run.")
    parser.add_argument("path", help="results root (the run's results.path)")
    parser.add_argument("--run", metavar="ID", help="the run to report (default: the latest)")
    parser.add_argument("-o", "--out", metavar="FILE", required=True,
                        help="where to write the page (e.g. report.html)")
    parser.add_argument("--select", choices=SELECTION_RULES, default="best",
                        help="the rule that marks the answer on the front (default: best)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; a user error is one line, never a traceback."""
    args = _parser().parse_args(argv)
    from sr_dist.viz import VizError, write_report

    try:
        target = write_report(args.path, args.out, args.run, select=args.select)
    except (VizError, ResultsNotFound) as exc:
        message = str(exc)
    except OSError as exc:
        message = f"{type(exc).__name__}: " + " ".join(str(exc).split())
    else:
        print(f"{PROG}: wrote {target}", file=sys.stderr)
        return 0
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
