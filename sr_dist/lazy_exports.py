"""Package names loaded on first use (PEP 562), so importing a package stays cheap.

``sr_dist.search`` and ``sr_dist.results`` export names whose modules pull in heavy libraries
(Ray, pandas, DuckDB, pyarrow's dataset layer) that most importers, Ray's actor processes above
all, never need. A package lists where each name lives; :func:`lazy_exports` gives it the
module ``__getattr__`` and ``__dir__`` that import the home module on first access and keep the
value in the package, so a second access is a plain attribute lookup.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, homes: Mapping[str, str], exported: Iterable[str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose names ``homes`` maps to the modules
    that define them. ``exported`` (the package's ``__all__``) must name exactly those, so the
    typing-only imports, ``__all__`` and ``homes`` cannot drift apart unnoticed."""
    listed = set(exported)
    if listed != set(homes):
        raise ValueError(f"{package}: __all__ and the lazy names differ: "
                         f"{sorted(listed ^ set(homes))}")

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # the next access skips this function
        return value

    def names() -> list[str]:
        return sorted(listed)

    return load, names
