"""One entry of the seed library: a tree, its error on the sample where the source knows it, and
the name of the source that made it (so a probe can count which sources find exact laws)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sr_dist.formula import Node

__all__ = ["Seed", "seeds_from"]


@dataclass(frozen=True)
class Seed:
    """``error`` is the relative RMS error on the sample (None where the source fits nothing);
    ``source`` is a name of :data:`sr_dist.sr.evolve.library.config.SOURCES`, with the
    sub-search after a slash (``transformed_sums/rational``)."""

    tree: Node
    error: float | None
    source: str


def seeds_from(trees: Iterable[Node], source: str) -> list[Seed]:
    """Seeds of ``source`` for trees whose error on the sample is not known."""
    return [Seed(tree, None, source) for tree in trees]
