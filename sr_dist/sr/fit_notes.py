"""What the formula tools write onto a fit after the evaluator returned it.

The evaluator fits and scores; it knows neither units nor where a formula came from. The formula
tools add both in the agent's process (the dimensional verdict, :mod:`sr_dist.sr.dimensional`;
the proposer's ``origin`` label, here), so they reach the archive and the results table alike.
A fit is a ``FitResult`` or its dict form (what a remote evaluator returns).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MAX_ORIGIN_CHARS", "annotate_fit", "check_origins", "with_origins"]

#: Longest ``origin`` label kept (longer ones are clipped): a label, not a log.
MAX_ORIGIN_CHARS = 120


def annotate_fit(fit: Any, values: Mapping[str, Any]) -> Any:
    """``fit`` with ``values`` set (a dataclass whose fields include them, or a mapping);
    anything else is returned unchanged."""
    if dataclasses.is_dataclass(fit) and not isinstance(fit, type):
        names = {f.name for f in dataclasses.fields(fit)}
        if set(values) <= names:
            return dataclasses.replace(fit, **values)
    if isinstance(fit, Mapping):
        return {**fit, **values}
    return fit


def check_origins(origins: Sequence[str] | None, count: int) -> str | None:
    """Why ``origins`` cannot label ``count`` formulas, or ``None`` when it can. Its type (a
    list of strings) is the tool schema's to check; the one thing a schema cannot say is that
    there is one label per formula."""
    if origins is None or len(origins) == count:
        return None
    return f"origins has {len(origins)} labels for {count} formulas: give one per formula, or leave it out"


def with_origins(fits: Sequence[Any], origins: Sequence[str] | None) -> list[Any]:
    """``fits`` each with its ``origin`` (clipped to :data:`MAX_ORIGIN_CHARS`; an empty label
    counts as none); unchanged without ``origins``. ``origins`` has passed :func:`check_origins`."""
    if origins is None:
        return list(fits)
    labelled = []
    for fit, label in zip(fits, origins, strict=True):
        text = label.strip()[:MAX_ORIGIN_CHARS] or None
        labelled.append(fit if text is None else annotate_fit(fit, {"origin": text}))
    return labelled
