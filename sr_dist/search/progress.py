"""What a run reports while it runs and when it ends: tallies, the progress line, the tables.

:class:`RunTally` folds candidate rows into counts and the best candidate (the result writer
actor keeps one). :func:`format_progress` renders a :class:`ProgressSnapshot` as one line;
:class:`ProgressReporter` redraws that line in a terminal and logs it every few seconds
otherwise. :func:`format_pareto` renders a Pareto front. Plain functions and small objects: the
driver feeds them, tests call them directly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from sr_dist.candidate import NMSE_RESOLUTION, Candidate, fitness, rank_key, record_fitness

__all__ = [
    "ProgressReporter",
    "ProgressSnapshot",
    "RunTally",
    "TallySnapshot",
    "format_duration",
    "format_pareto",
    "format_progress",
]


@dataclasses.dataclass(frozen=True)
class TallySnapshot:
    candidates: int
    by_agent: dict[int, int]
    by_status: dict[str, int]
    #: The best ``ok`` candidate so far, by :func:`sr_dist.candidate.rank_key`.
    best: Candidate | None
    #: Why the result writer stopped writing (a full or read-only disk), or ``None``: the
    #: driver stops the run ``failed`` with it.
    write_error: str | None = None


class RunTally:
    """Counts candidate rows and keeps the best; rows are ``CANDIDATE_SCHEMA`` dicts.

    It counts every row it is given: the result writer hands it only the rows it accepted
    (durably written, duplicates dropped), so the tally needs no set of ids of its own and its
    memory does not grow with the run (counters per agent and status, one best candidate).
    """

    def __init__(self) -> None:
        self._count = 0
        self._by_agent: Counter[int] = Counter()
        self._by_status: Counter[str] = Counter()
        self._best: Candidate | None = None
        self._best_key: tuple[bool, float, int, str] = (True, math.inf, 0, "")

    def add(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Count ``rows`` (each once: the caller has dropped duplicates) and keep the best."""
        for row in rows:
            self._count += 1
            self._by_agent[int(row.get("agent_id", -1))] += 1
            self._by_status[str(row.get("status"))] += 1
            self._consider(row)

    def restore(self, *, count: int, by_agent: Mapping[int, int], by_status: Mapping[str, int],
                contenders: Iterable[Mapping[str, Any]] = ()) -> None:
        """Start from counts read off disk (a restarted writer); ``contenders`` are candidate
        rows for the best (counted already, so only compared)."""
        self._count = max(0, int(count))
        self._by_agent = Counter({int(k): int(v) for k, v in by_agent.items()})
        self._by_status = Counter({str(k): int(v) for k, v in by_status.items()})
        for row in contenders:
            self._consider(row)

    def _consider(self, row: Mapping[str, Any]) -> None:
        # Most rows lose: compare the NMSE first, build a candidate only for a contender (a
        # worse NMSE can still win when it is dimensionally consistent and the best is not).
        if row.get("status") != "ok":
            return
        inconsistent = row.get("dimensionally_consistent") is False
        worse = max(record_fitness(row), NMSE_RESOLUTION) > self._best_key[1]
        if worse and inconsistent >= self._best_key[0]:
            return
        cand = Candidate.from_fit(row)
        key = rank_key(cand)
        if math.isfinite(fitness(cand)) and key < self._best_key:
            self._best, self._best_key = cand, key

    def snapshot(self, write_error: str | None = None) -> TallySnapshot:
        return TallySnapshot(
            candidates=self._count,
            by_agent=dict(sorted(self._by_agent.items())),
            by_status=dict(sorted(self._by_status.items())),
            best=self._best,
            write_error=write_error,
        )


@dataclasses.dataclass(frozen=True)
class ProgressSnapshot:
    """One moment of a run, as the progress line shows it."""

    elapsed_s: float
    candidates: int
    fits: int
    fits_per_s: float
    best_val_nmse: float | None
    best_expression: str | None
    agents_running: int
    agents_total: int
    queue_depth: int = 0
    #: The evaluator pool's queue wait, 99th percentile so far (``None``: nothing queued yet).
    queue_p99_s: float | None = None
    replicas: int = 1
    #: The evaluator replicas' busy seconds over theirs since the search began (``None``:
    #: not known yet): below 1, the evaluator waits for proposals.
    busy_share: float | None = None


def format_duration(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _short(text: str | None, width: int) -> str:
    if not text:
        return "-"
    return text if len(text) <= width else text[: width - 1] + "…"


def format_progress(snap: ProgressSnapshot, width: int = 60) -> str:
    """``[00:42] 1,234 candidates | 85.2 fits/s | best val NMSE 3.1e-04 x*y | agents 2/2``,
    then the evaluator queue (``queue 12 p99 40 ms``) once something has been queued, with
    the replica count when there are several, and how busy the evaluator was
    (``evaluator busy 84%``) once that is known."""
    best = "-" if snap.best_val_nmse is None else f"{snap.best_val_nmse:.3g}"
    parts = [
        f"[{format_duration(snap.elapsed_s)}] {snap.candidates:,} candidates",
        f"{snap.fits_per_s:.1f} fits/s",
        f"best val NMSE {best} {_short(snap.best_expression, width)}",
        f"agents {snap.agents_running}/{snap.agents_total}",
    ]
    if snap.queue_p99_s is not None:
        pool = f" on {snap.replicas} replicas" if snap.replicas > 1 else ""
        parts.append(f"queue {snap.queue_depth:,} p99 {snap.queue_p99_s * 1000:.0f} ms{pool}")
    if snap.busy_share is not None:
        parts.append(f"evaluator busy {100 * min(1.0, snap.busy_share):.0f}%")
    return " | ".join(parts)


class ProgressReporter:
    """Shows progress: a redrawn line on a terminal, a log line every ``interval_s`` otherwise.

    ``update`` is cheap to call often; it decides itself whether to print.
    """

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None,
                 interval_s: float = 10.0, redraw_s: float = 0.5) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty()) if callable(isatty) else False
        self.tty = tty
        self.interval_s = interval_s if not tty else redraw_s
        self._last: float | None = None
        self._drawn = 0

    def update(self, snap: ProgressSnapshot, now: float, force: bool = False) -> None:
        if not force and self._last is not None and now - self._last < self.interval_s:
            return
        self._last = now
        line = format_progress(snap)
        if self.tty:
            pad = " " * max(0, self._drawn - len(line))
            self.stream.write("\r" + line + pad)
            self._drawn = len(line)
        else:
            self.stream.write("sr-dist: " + line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        """End the redrawn line so later output starts on its own line."""
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = 0


#: Widest simplified form in a Pareto table before it is cut short.
SIMPLIFIED_WIDTH = 40


def _constants_text(constants: str | None, digits: int = 6) -> str:
    if not constants:
        return ""
    try:
        values = json.loads(constants)
    except (TypeError, ValueError):
        return f" [{constants}]"
    if not isinstance(values, dict) or not values:
        return ""
    parts = []
    for name, value in values.items():
        parts.append(f"{name}={'nan' if value is None else format(float(value), f'.{digits}g')}")
    return " [" + ", ".join(parts) + "]"


def format_pareto(rows: Sequence[Mapping[str, Any]], metric: str = "val_nmse",
                  width: int = 70) -> str:
    """A Pareto front (rows sorted by complexity) as a fixed-width table; rows that carry a
    ``simplified`` form show it in its own column, beside the fitted formula."""
    if not rows:
        return "(no successfully fitted candidates)"
    simplified = [str(r.get("simplified") or "-") for r in rows]
    show = any("simplified" in r for r in rows)
    column = min(max(len("simplified"), *map(len, simplified)), SIMPLIFIED_WIDTH) if show else 0
    middle = f"{'simplified':<{column}}  " if show else ""
    header = f"{'complexity':>10}  {metric:>10}  {'test_nmse':>10}  {middle}formula"
    lines = [header, "-" * len(header)]
    for row, simple in zip(rows, simplified):
        value = row.get(metric)
        test = row.get("test_nmse")
        formula = str(row.get("expression")) + _constants_text(row.get("constants"), 4)
        cell = f"{_short(simple, column):<{column}}  " if show else ""
        lines.append(
            f"{row.get('complexity', '-')!s:>10}  "
            f"{'-' if value is None else format(float(value), '.4g'):>10}  "
            f"{'-' if test is None else format(float(test), '.4g'):>10}  "
            f"{cell}{_short(formula, width)}"
        )
    return "\n".join(lines)


def format_constants(constants: str | None) -> str:
    """Fitted constants (the JSON text of a results row) as ``a=1.5, b=2``."""
    return _constants_text(constants).strip(" []")
