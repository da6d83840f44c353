"""sr-dist: distributed, GPU-accelerated symbolic regression with LLM agents."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = ["SymbolicRegressor", "__version__"]


def __getattr__(name: str) -> Any:
    """``sr_dist.SymbolicRegressor`` is loaded on first use: ``import sr_dist`` stays cheap
    (Ray actors import the package; the estimator pulls in Hydra, the search and JAX). Not
    even a typing-only import: the results layer imports this package for ``__version__``,
    and the import contract would see a chain from it up to the estimator."""
    if name == "SymbolicRegressor":
        return importlib.import_module("sr_dist.estimator").SymbolicRegressor
    raise AttributeError(f"module 'sr_dist' has no attribute {name!r}")
