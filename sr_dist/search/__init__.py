"""Run orchestration on Ray: ``run_search(cfg) -> RunSummary``.

See ``docs/running.md``. The pure parts (settings, micro-batching, progress, stop rules) import
without Ray; ``run_search`` imports Ray when called.

The names below are loaded on first use: every Ray actor imports a module of this package
(``sr_dist.search.actors``), and none of them needs the driver's imports (results, reports,
resume, the model factory).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sr_dist.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from sr_dist.search.run import BestFormula, RunSummary, SearchError, run_search
    from sr_dist.search.settings import Settings, SettingsError, settings_from_config

__all__ = [
    "BestFormula",
    "RunSummary",
    "SearchError",
    "Settings",
    "SettingsError",
    "run_search",
    "settings_from_config",
]

_HOME = {
    "BestFormula": "sr_dist.search.run",
    "RunSummary": "sr_dist.search.run",
    "SearchError": "sr_dist.search.errors",
    "run_search": "sr_dist.search.run",
    "Settings": "sr_dist.search.settings",
    "SettingsError": "sr_dist.search.settings",
    "settings_from_config": "sr_dist.search.settings",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOME, __all__)
