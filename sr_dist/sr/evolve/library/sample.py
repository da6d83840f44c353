"""The training rows an agent shares with the proposer, read from ``context.info``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sr_dist.sr.structure.sample import Sample

__all__ = ["Sample", "sample_from_info"]


def sample_from_info(info: Mapping[str, Any], variables: Sequence[str], max_rows: int = 1000) -> Sample | None:
    """Read ``info["sample"]`` = ``{"X": rows, "y": values}`` (or ``{"columns": {name: values}, "y": ...}``).

    Returns None when there is no usable sample; never raises on malformed input.
    """
    raw = info.get("sample") if isinstance(info, Mapping) else None
    if not isinstance(raw, Mapping) or "y" not in raw:
        return None
    try:
        y = np.asarray(raw["y"], dtype=float).reshape(-1)
        if "X" in raw:
            X = np.asarray(raw["X"], dtype=float)
            if X.ndim == 1:
                X = X.reshape(-1, 1)
        elif isinstance(raw.get("columns"), Mapping):
            cols = raw["columns"]
            X = np.column_stack([np.asarray(cols[v], dtype=float) for v in variables])
        else:
            return None
        if X.shape != (y.shape[0], len(variables)):
            return None
        keep = np.isfinite(y) & np.all(np.isfinite(X), axis=1)
        X, y = X[keep][:max_rows], y[keep][:max_rows]
        if y.shape[0] < 8:
            return None
        return Sample(X, y)
    except (TypeError, ValueError, KeyError):
        return None
