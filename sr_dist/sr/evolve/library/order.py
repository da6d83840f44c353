"""How the library's groups of seeds are merged: round-robin, so every batch samples every kind."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["interleave"]

T = TypeVar("T")


def interleave(groups: Sequence[Sequence[T]]) -> list[T]:
    """Round-robin over the groups, so every batch samples every kind of structure."""
    out: list[T] = []
    for items in itertools.zip_longest(*groups):
        out.extend(t for t in items if t is not None)
    return out
