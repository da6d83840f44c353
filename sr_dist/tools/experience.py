"""Tool Experience: what agents learned using each tool, folded and summarised for the next ones.

Thea's harness appends to a tool's description, at the start of a task, what earlier attempts
learned with it. sr-dist shares it: every episode's tool-call log (:class:`CallRecord`, kept by
the agent loop) is folded by :func:`fold_experience` into one bounded :class:`ToolExperience`
per tool (calls, failures by kind, short lessons: the argument mistakes that failed and the
inputs after which the best score improved); :func:`summarize_experience` merges the records
of many episodes and runs into one bounded note per tool, which
:meth:`~sr_dist.tools.registry.ToolCatalog.with_notes` appends to its description.

Everything here is pure and generic (no results table, no Ray): the orchestration layer
stores the records (the results path's ``experience`` table) and reads them back.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sr_dist.tools.types import ToolCall, ToolCallResult

__all__ = [
    "ARGUMENT_CHARS",
    "CallRecord",
    "LESSON_CHARS",
    "MAX_FAILED_LESSONS",
    "MAX_HELPED_LESSONS",
    "SUMMARY_CHARS",
    "ToolExperience",
    "call_record",
    "fold_experience",
    "summarize_experience",
]

#: Longest argument text kept per logged call.
ARGUMENT_CHARS = 300
#: Longest lesson (one line) kept.
LESSON_CHARS = 200
#: Lessons kept per tool and episode: failures, and inputs that helped.
MAX_FAILED_LESSONS = 5
MAX_HELPED_LESSONS = 3
#: Longest note appended to one tool's description.
SUMMARY_CHARS = 800
#: Lessons shown per tool in a note.
SUMMARY_LESSONS = 6
#: Failed entries of one result (e.g. formulas of a batch that did not parse) turned into lessons.
_PARTIAL_PER_CALL = 2
#: Error kinds that say nothing about the tool (the run stopped; the call never ran).
_NOT_LESSONS = frozenset({"cancelled"})


def _clip(text: Any, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def _first_line(text: Any) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _arguments_text(arguments: Mapping[str, Any]) -> str:
    try:
        text = json.dumps(dict(arguments), sort_keys=True, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        text = str(dict(arguments))
    return _clip(text, ARGUMENT_CHARS)


@dataclass(frozen=True)
class CallRecord:
    """One tool call as the experience fold sees it (bounded text, no structured result)."""

    tool: str
    arguments: str
    ok: bool
    error_kind: str | None = None
    #: The first line of the failure's text (empty for a success).
    error: str = ""
    #: Whether the episode's best score got better with this call.
    improved: bool = False
    #: Entries of a successful result that failed on their own ("x0 + :: unexpected end").
    partial_failures: tuple[str, ...] = ()


def _partial_failures(result: Any) -> tuple[str, ...]:
    """Failed entries of a batch result: ``result["results"]`` items whose ``status`` is not ok."""
    entries = result.get("results") if isinstance(result, Mapping) else None
    if not isinstance(entries, list):
        return ()
    failed = []
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("status") not in (None, "ok"):
            what = entry.get("expression", "")
            why = _first_line(entry.get("error") or "")
            failed.append(_clip(f"{what!s} was {entry.get('status')}" + (f": {why}" if why else ""),
                                LESSON_CHARS))
            if len(failed) >= _PARTIAL_PER_CALL:
                break
    return tuple(failed)


def call_record(call: ToolCall, result: ToolCallResult, *, improved: bool = False) -> CallRecord:
    """The log entry for ``call`` and its ``result``."""
    return CallRecord(
        tool=call.name,
        arguments=_arguments_text(call.arguments),
        ok=result.ok,
        error_kind=result.error_kind,
        error="" if result.ok else _clip(_first_line(result.result_str), LESSON_CHARS),
        improved=bool(improved),
        partial_failures=_partial_failures(result.result) if result.ok else (),
    )


@dataclass(frozen=True)
class ToolExperience:
    """One tool's experience from one episode (a row of the ``experience`` table)."""

    tool: str
    calls: int = 0
    failures: int = 0
    #: Calls after which the episode's best score improved.
    improved: int = 0
    failure_kinds: Mapping[str, int] = field(default_factory=dict)
    #: Short lessons, ``failed: ...`` or ``helped: ...``, at most
    #: ``MAX_FAILED_LESSONS + MAX_HELPED_LESSONS``.
    lessons: tuple[str, ...] = ()

    def row(self) -> dict[str, Any]:
        """The record as plain values (``failure_kinds`` as JSON text, for one Parquet schema)."""
        return {"tool": self.tool, "calls": self.calls, "failures": self.failures,
                "improved": self.improved,
                "failure_kinds": json.dumps(dict(sorted(self.failure_kinds.items()))),
                "lessons": list(self.lessons)}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ToolExperience:
        """A record read back (``failure_kinds`` as JSON text or a mapping); bad parts are dropped."""
        kinds: Any = row.get("failure_kinds") or {}
        if isinstance(kinds, str):
            try:
                kinds = json.loads(kinds)
            except ValueError:
                kinds = {}
        if not isinstance(kinds, Mapping):
            kinds = {}
        lessons = row.get("lessons")
        return cls(
            tool=str(row.get("tool") or ""),
            calls=int(row.get("calls") or 0),
            failures=int(row.get("failures") or 0),
            improved=int(row.get("improved") or 0),
            failure_kinds={str(k): int(v) for k, v in kinds.items() if isinstance(v, int)},
            lessons=tuple(_clip(x, LESSON_CHARS) for x in (lessons if lessons is not None else ())
                          if isinstance(x, str)),
        )


def _add_unique(bucket: list[str], lesson: str, cap: int) -> None:
    if len(bucket) < cap and lesson not in bucket:
        bucket.append(lesson)


def fold_experience(log: Iterable[CallRecord]) -> tuple[ToolExperience, ...]:
    """One episode's call log folded per tool, in the order tools were first called (pure)."""
    order: list[str] = []
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    improved: Counter[str] = Counter()
    kinds: dict[str, Counter[str]] = {}
    failed: dict[str, list[str]] = {}
    helped: dict[str, list[str]] = {}
    for record in log:
        if record.error_kind in _NOT_LESSONS:
            continue
        name = record.tool
        if name not in calls:
            order.append(name)
            kinds[name], failed[name], helped[name] = Counter(), [], []
        calls[name] += 1
        if not record.ok:
            failures[name] += 1
            kind = record.error_kind or "tool_error"
            kinds[name][kind] += 1
            lesson = _clip(f"failed: {record.arguments} -> {kind}: {record.error or 'no details'}", LESSON_CHARS)
            _add_unique(failed[name], lesson, MAX_FAILED_LESSONS)
            continue
        for partial in record.partial_failures:
            _add_unique(failed[name], _clip(f"failed: {partial}", LESSON_CHARS), MAX_FAILED_LESSONS)
        if record.improved:
            improved[name] += 1
            _add_unique(helped[name], _clip(f"helped: {record.arguments}", LESSON_CHARS), MAX_HELPED_LESSONS)
    return tuple(
        ToolExperience(tool=name, calls=calls[name], failures=failures[name], improved=improved[name],
                       failure_kinds=dict(kinds[name]), lessons=(*failed[name], *helped[name]))
        for name in order
    )


def _note(tool: str, records: Sequence[ToolExperience], limit: int) -> str:
    calls = sum(r.calls for r in records)
    failures = sum(r.failures for r in records)
    improved = sum(r.improved for r in records)
    kinds: Counter[str] = Counter()
    counted: Counter[str] = Counter()
    latest: dict[str, int] = {}
    for index, record in enumerate(records):
        kinds.update(record.failure_kinds)
        for lesson in record.lessons:
            counted[lesson] += 1
            latest[lesson] = index
    kind_text = ", ".join(f"{n} {k}" for k, n in kinds.most_common())
    head = (f"Experience of {len(records)} earlier episode(s) with {tool}: {calls} call(s), "
            f"{failures} failed" + (f" ({kind_text})" if kind_text else "")
            + f", {improved} improved the best score.")
    # Most repeated first, then the most recent: what many agents ran into is worth most.
    ranked = sorted(counted, key=lambda s: (-counted[s], -latest[s]))
    failed = [s for s in ranked if s.startswith("failed:")]
    helped = [s for s in ranked if s.startswith("helped:")]
    picked = (failed[: SUMMARY_LESSONS // 2] + helped[: SUMMARY_LESSONS // 2])[:SUMMARY_LESSONS]
    lines = [head]
    for lesson in picked:
        line = "- " + lesson
        if len("\n".join([*lines, line])) > limit:
            break
        lines.append(line)
    return _clip(lines[0], limit) if len(lines) == 1 else "\n".join(lines)


def summarize_experience(records: Iterable[ToolExperience | Mapping[str, Any]], *,
                         limit: int = SUMMARY_CHARS, dataset: str | None = None) -> dict[str, str]:
    """Tool name -> a note of at most ``limit`` characters merging every record of that tool
    (records as :class:`ToolExperience` or as rows of the ``experience`` table).

    With ``dataset``, a row of another dataset (its ``dataset`` field names a different one)
    adds its counts but not its lessons: a lesson quotes its dataset's formulas and variable
    names, which would mislead (or hand a known answer to) a run on another dataset."""
    by_tool: dict[str, list[ToolExperience]] = {}
    for item in records:
        record = item if isinstance(item, ToolExperience) else ToolExperience.from_row(item)
        if (dataset is not None and isinstance(item, Mapping) and item.get("dataset")
                and str(item["dataset"]) != dataset):
            record = replace(record, lessons=())
        if record.tool and record.calls > 0:
            by_tool.setdefault(record.tool, []).append(record)
    return {tool: _note(tool, found, limit) for tool, found in by_tool.items()}
