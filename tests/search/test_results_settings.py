"""The ``results`` keys that roll and compact the writer's files: defaults, overrides, and
bad values refused with their key named."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_module

from sr_dist.search.settings import SettingsError, settings_from_config


def _settings(tmp_path: Path, *overrides: str) -> Any:
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    return settings_from_config(cfg, base_dir=tmp_path).results


def test_defaults_roll_and_compact(tmp_path: Path) -> None:
    results = _settings(tmp_path)
    assert (results.roll_files, results.roll_s, results.target_file_mb, results.compact) == (
        32, 120.0, 256.0, True)


def test_overrides_reach_the_settings(tmp_path: Path) -> None:
    results = _settings(tmp_path, "results.roll_files=0", "results.roll_s=null",
                        "results.target_file_mb=16", "results.compact=false",
                        "results.flush_s=0.5")
    assert (results.roll_files, results.roll_s, results.target_file_mb, results.compact,
            results.flush_s) == (0, None, 16.0, False, 0.5)


@pytest.mark.parametrize("override, message", [
    ("results.roll_files=1", "must be 0 (never roll) or at least 2"),
    ("results.roll_files=-2", "must be at least 0"),
    ("results.roll_files=2.5", "must be an integer"),
    ("results.roll_s=0", "must be positive"),
    ("results.target_file_mb=0", "must be positive"),
    ("results.compact=sometimes", "must be true or false"),
])
def test_bad_values_name_their_key(tmp_path: Path, override: str, message: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(message)) as info:
        _settings(tmp_path, override)
    assert info.value.key == override.split("=")[0]
