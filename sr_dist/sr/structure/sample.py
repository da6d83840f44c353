"""The rows of training data a structure search reads: a frozen ``(X, y)`` pair."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Sample"]


@dataclass(frozen=True)
class Sample:
    """Rows of training data the agent shared with the proposer (``X`` is rows x variables)."""

    X: np.ndarray
    y: np.ndarray

    def __post_init__(self) -> None:
        if self.X.ndim != 2 or self.y.ndim != 1 or self.X.shape[0] != self.y.shape[0]:
            raise ValueError(f"sample shapes do not match: X {self.X.shape}, y {self.y.shape}")
