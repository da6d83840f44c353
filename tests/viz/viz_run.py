"""The value the shared run fixture of tests/viz hands to its tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class VizRun:
    """The results root of the shared run, its id and its best validation NMSE."""

    path: Path
    run_id: str
    best_val_nmse: float
