"""Run orchestration on Ray: ``run_search(cfg) -> RunSummary``.

See ``docs/running.md``. The pure parts (settings, micro-batching, progress, stop rules) import
without Ray; ``run_search`` imports Ray when called.
"""

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
