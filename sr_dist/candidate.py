"""The fitted candidate: one value, one fitness rule, one rank rule, one Pareto front.

Every layer that holds "a formula and how well it fitted" uses :class:`Candidate`: the episode
archive and the agent's result, the ``evolve`` proposer's reading of its history, the progress
line, resume and model selection. The rules are plain functions so they cannot drift apart:

- :func:`fitness`: validation NMSE, else train NMSE, ``inf`` when unusable; or, under another
  ``search.rank_by`` (:data:`RANK_METRICS`), that metric as a lower-is-better loss;
- :func:`rank_key`: dimensionally consistent before inconsistent (where units are known), then
  lower fitness (to :data:`NMSE_RESOLUTION`), then simpler, then the text;
- :func:`pareto_front`: generic over any items, given their loss and complexity;
  :func:`candidate_front` leaves out dimensionally inconsistent candidates when a consistent
  one exists, so an inconsistent formula is never *the* answer while a consistent one is there.

No JAX, Ray or Arrow here: the numeric core's bottom layer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

__all__ = [
    "Candidate",
    "NMSE_RESOLUTION",
    "RANK_METRICS",
    "rank_loss",
    "UNITS_FIELDS",
    "admissible",
    "as_number",
    "candidate_front",
    "best_of",
    "fitness",
    "nmse_fitness",
    "pareto_front",
    "rank_key",
    "ranked_nmse",
    "record_fitness",
]

T = TypeVar("T")

#: NMSE differences below this are rounding noise (float32 fits of an exact formula land
#: anywhere in 1e-15..1e-12), so for ranking every NMSE under it counts as equal: among
#: essentially perfect fits the simplest wins, not the one with the luckiest rounding.
NMSE_RESOLUTION = 1e-12

#: What ``search.rank_by`` may name: the default, the fitting loss, and the extra metrics.
RANK_METRICS: tuple[str, ...] = ("val_nmse", "val_loss", "mae", "r2", "aic", "bic",
                                 "pearson_r", "spearman_r")
#: Rank metrics where higher is better: ranked by ``1 - value`` (so 0 is a perfect fit, as for
#: the NMSE, and ``r2`` ranks exactly as ``val_nmse``).
_HIGHER_IS_BETTER = frozenset({"r2", "pearson_r", "spearman_r"})
#: Rank metrics that may be negative (information criteria): not clamped at the resolution.
_SIGNED = frozenset({"aic", "bic"})

#: The fields a formula tool reports for one fit (what ``evolve`` and the compactor read).
RECORD_FIELDS = ("expression", "canonical", "status", "constants", "train_nmse", "val_nmse", "complexity", "error")
#: What the model is shown of a candidate in a listing (no status: only fitted ones are listed).
BRIEF_FIELDS = ("expression", "canonical", "constants", "train_nmse", "val_nmse", "complexity")
#: The dimensional check's fields; a record or listing carries them only where units are known.
UNITS_FIELDS = ("dimensionally_consistent", "units_mismatch")


def as_number(value: Any) -> float | None:
    """``value`` as a float, or None for None, booleans and anything that is not a number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _get(source: Any, name: str) -> Any:
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def _constants(value: Any) -> dict[str, float]:
    """Constants from a mapping or its JSON text (as the results table stores them)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, float] = {}
    for name, number in value.items():
        parsed = as_number(number)
        out[str(name)] = math.nan if parsed is None else parsed
    return out


def _bool_or_none(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


@dataclass(frozen=True)
class Candidate:
    """One evaluated formula: what was proposed, how it fitted, and where it came from.

    ``test_nmse`` is kept for reporting and is never shown to a model. The provenance fields
    (``step``, ``tool_call_id``, ``agent_id``, ``candidate_id``) are filled where known;
    ``recovered`` is whether it matches the dataset's known law, where one is known and checked.
    ``dimensionally_consistent`` is the dimensional check's verdict (``None``: the dataset has
    no units, or the formula did not parse) and ``units_mismatch`` its sentence when not.
    """

    expression: str
    canonical: str | None = None
    status: str = "ok"
    error: str | None = None
    constants: Mapping[str, float] = field(default_factory=dict)
    complexity: int | None = None
    train_nmse: float | None = None
    val_nmse: float | None = None
    test_nmse: float | None = None
    step: int = 0
    tool_call_id: str | None = None
    agent_id: int | None = None
    candidate_id: str | None = None
    recovered: bool | None = None
    dimensionally_consistent: bool | None = None
    units_mismatch: str | None = None
    #: The metric this candidate ranks by (``search.rank_by``, stamped on each fit by the
    #: evaluator) and the values it may need: ``train_loss``, ``val_loss`` and the extra metrics.
    rank_by: str = "val_nmse"
    metrics: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def key(self) -> str:
        """The identity used to deduplicate: the canonical form, else the text."""
        return self.canonical or self.expression

    @classmethod
    def from_fit(cls, fit: Any, *, step: int = 0, tool_call_id: str | None = None,
                 agent_id: int | None = None) -> Candidate:
        """From a ``FitResult``, a tool result record or a results-table row (any object or
        mapping with those field names; constants may be JSON text, as Parquet stores them)."""
        return cls(
            expression=str(_get(fit, "expression") or ""),
            canonical=_get(fit, "canonical"),
            status=str(_get(fit, "status") or "error"),
            error=_get(fit, "error"),
            constants=_constants(_get(fit, "constants")),
            complexity=_int_or_none(_get(fit, "complexity")),
            train_nmse=as_number(_get(fit, "train_nmse")),
            val_nmse=as_number(_get(fit, "val_nmse")),
            test_nmse=as_number(_get(fit, "test_nmse")),
            step=_int_or_none(_get(fit, "step")) or step,
            tool_call_id=_get(fit, "tool_call_id") or tool_call_id,
            agent_id=_int_or_none(_get(fit, "agent_id")),
            candidate_id=_get(fit, "candidate_id"),
            dimensionally_consistent=_bool_or_none(_get(fit, "dimensionally_consistent")),
            units_mismatch=_get(fit, "units_mismatch"),
            rank_by=str(_get(fit, "rank_by") or "val_nmse"),
            metrics=_metric_values(fit),
        )

    def with_recovered(self, recovered: bool | None) -> Candidate:
        return replace(self, recovered=recovered)

    def record(self) -> dict[str, Any]:
        """The structured result of one fit, as a formula tool returns it (:data:`RECORD_FIELDS`)."""
        return self._fields(RECORD_FIELDS)

    def brief(self) -> dict[str, Any]:
        """What a listing of fitted candidates shows the model (:data:`BRIEF_FIELDS`)."""
        return self._fields(BRIEF_FIELDS)

    def _fields(self, names: tuple[str, ...]) -> dict[str, Any]:
        values = self.to_dict()
        if self.dimensionally_consistent is not None:
            names = (*names, *UNITS_FIELDS)
        return {name: values[name] for name in names}

    def to_dict(self) -> dict[str, Any]:
        return {
            "expression": self.expression,
            "canonical": self.canonical,
            "status": self.status,
            "error": self.error,
            "constants": dict(self.constants),
            "complexity": self.complexity,
            "train_nmse": self.train_nmse,
            "val_nmse": self.val_nmse,
            "test_nmse": self.test_nmse,
            "step": self.step,
            "tool_call_id": self.tool_call_id,
            "agent_id": self.agent_id,
            "candidate_id": self.candidate_id,
            "recovered": self.recovered,
            "dimensionally_consistent": self.dimensionally_consistent,
            "units_mismatch": self.units_mismatch,
            "rank_by": self.rank_by,
            "metrics": dict(self.metrics),
        }


def _metric_values(fit: Any) -> dict[str, float | None]:
    """``train_loss``, ``val_loss`` and the extra metrics of a fit (a ``metrics`` mapping, or
    flat columns as a results row has them)."""
    out: dict[str, float | None] = {}
    nested = _get(fit, "metrics")
    for name in ("train_loss", "val_loss", *RANK_METRICS[2:]):
        value = _get(fit, name)
        if value is None and isinstance(nested, Mapping):
            value = nested.get(name)
        number = as_number(value)
        if number is not None:
            out[name] = number
    return out


def rank_loss(rank_by: str, values: Mapping[str, Any]) -> float:
    """The lower-is-better value ``rank_by`` ranks a fit by, from its fields (a row, a record
    or a candidate's metrics): the metric itself, or ``1 - value`` for higher-is-better ones;
    ``inf`` when it is missing or not a number."""
    number = as_number(values.get(rank_by))
    if number is None or math.isnan(number):
        return math.inf
    return 1.0 - number if rank_by in _HIGHER_IS_BETTER else number


def fitness(candidate: Candidate) -> float:
    """Validation NMSE (train NMSE when there is no validation split); ``inf`` when unusable.
    Under another ``rank_by``: :func:`rank_loss` of that metric (``val_loss`` and ``r2`` fall
    back to the train split the same way)."""
    if not candidate.ok:
        return math.inf
    if candidate.rank_by != "val_nmse":
        values: dict[str, Any] = dict(candidate.metrics)
        # Without a validation split, ranking reads the train split, as val_nmse falls back
        # to train_nmse (and the extra metrics are measured on the train rows).
        if candidate.rank_by == "r2" and "r2" not in values:
            nmse = next((v for v in (candidate.val_nmse, candidate.train_nmse)
                         if v is not None and not math.isnan(v)), None)
            if nmse is not None:
                values["r2"] = 1.0 - nmse
        if candidate.rank_by == "val_loss" and "val_loss" not in values:
            values["val_loss"] = values.get("train_loss")
        return rank_loss(candidate.rank_by, values)
    for value in (candidate.val_nmse, candidate.train_nmse):
        if value is not None and not math.isnan(value):
            return value
    return math.inf


def nmse_fitness(candidate: Candidate) -> float:
    """:func:`fitness` by the NMSE whatever ``rank_by`` is: what ``search.target_nmse`` and a
    line labelled ``val_nmse`` compare."""
    return fitness(replace(candidate, rank_by="val_nmse"))


def record_fitness(record: Mapping[str, Any]) -> float:
    """:func:`fitness` of a plain result row (a tool result record, a Parquet row): validation
    NMSE, else train NMSE; ``inf`` when neither is a finite number. Rows carry no usable status
    in every producer, so this reads the numbers only."""
    for key in ("val_nmse", "train_nmse"):
        value = as_number(record.get(key))
        if value is not None and math.isfinite(value):
            return value
    return math.inf


def ranked_nmse(candidate: Candidate) -> float:
    """:func:`fitness` clamped at :data:`NMSE_RESOLUTION`, the value orderings compare
    (information criteria, which may be negative, are not clamped)."""
    if candidate.rank_by in _SIGNED:
        return fitness(candidate)
    return max(fitness(candidate), NMSE_RESOLUTION)


def rank_key(candidate: Candidate) -> tuple[bool, float, int, str]:
    """Total order "better first": dimensionally consistent (or unchecked) before inconsistent,
    then lower NMSE (to :data:`NMSE_RESOLUTION`), then simpler, then canonical text
    (deterministic)."""
    return (candidate.dimensionally_consistent is False, ranked_nmse(candidate),
            candidate.complexity or 0, candidate.key)


def admissible(items: Sequence[T], consistent: Callable[[T], bool | None]) -> list[T]:
    """The items an answer may be chosen from: all of them, less the dimensionally
    inconsistent ones (``consistent(item) is False``) when at least one item is consistent."""
    if any(consistent(item) is True for item in items):
        return [item for item in items if consistent(item) is not False]
    return list(items)


def best_of(candidates: Iterable[Candidate]) -> Candidate | None:
    """The best of ``candidates`` by :func:`rank_key`, or None when none was fitted."""
    usable = [c for c in candidates if math.isfinite(fitness(c))]
    return min(usable, key=rank_key) if usable else None


def pareto_front(
    items: Iterable[T],
    *,
    loss: Callable[[T], float],
    complexity: Callable[[T], int],
    key: Callable[[T], Any] | None = None,
) -> list[T]:
    """The items no other item beats on both complexity and loss, simplest first.

    Items with a non-finite loss take no part. Of items with equal complexity and loss the one
    that comes first by ``key`` (default: input order) is kept; along the front the loss
    strictly falls. Callers choose the loss: :func:`ranked_nmse` for candidates (so essentially
    exact fits tie and the simplest wins), a raw metric elsewhere.
    """
    indexed = [(i, item, float(loss(item))) for i, item in enumerate(items)]
    usable = [(i, item, value) for i, item, value in indexed if math.isfinite(value)]
    order: Callable[[tuple[int, T, float]], Any]
    if key is None:
        order = lambda entry: (complexity(entry[1]), entry[2], entry[0])  # noqa: E731
    else:
        tie = key
        order = lambda entry: (complexity(entry[1]), entry[2], tie(entry[1]), entry[0])  # noqa: E731
    front: list[T] = []
    best = math.inf
    for _, item, value in sorted(usable, key=order):
        if value < best:
            front.append(item)
            best = value
    return front


def candidate_front(candidates: Sequence[Candidate]) -> tuple[Candidate, ...]:
    """:func:`pareto_front` of fitted candidates by :func:`ranked_nmse`, one per canonical form,
    over the :func:`admissible` ones (no inconsistent formula while a consistent one exists)."""
    seen: set[str] = set()
    distinct: list[Candidate] = []
    usable = [c for c in candidates if math.isfinite(fitness(c))]
    for cand in sorted(admissible(usable, lambda c: c.dimensionally_consistent), key=rank_key):
        if cand.key not in seen:
            seen.add(cand.key)
            distinct.append(cand)
    return tuple(pareto_front(distinct, loss=ranked_nmse, complexity=lambda c: c.complexity or 0, key=lambda c: c.key))
