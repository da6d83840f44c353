"""The error a search raises when it cannot start or breaks down (bad config is ``SettingsError``)."""

from __future__ import annotations

__all__ = ["SearchError"]


class SearchError(RuntimeError):
    """The run could not start or broke down (bad config, Ray unreachable, a dead actor)."""
