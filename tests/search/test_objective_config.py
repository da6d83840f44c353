"""The objective keys of issue 17 through the real Hydra compose and settings: evaluator.loss,
evaluator.huber_delta, search.metrics/rank_by, dataset.split kinds and dataset.weight."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_module

from sr_dist.search import SettingsError, settings_from_config


def _settings(tmp_path: Path, *overrides: str) -> Any:
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"results.path={tmp_path}", *overrides])
    return settings_from_config(cfg, base_dir=tmp_path)


def test_defaults_change_nothing(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    assert s.evaluator.options["loss"] == "mse" and s.evaluator.options["huber_delta"] == 1.0
    assert "metrics" not in s.evaluator.options and "rank_by" not in s.evaluator.options
    assert s.search.metrics == () and s.search.rank_by == "val_nmse"
    assert s.dataset.split_kind == "random" and s.dataset.weight is None


def test_the_keys_reach_the_evaluator_options(tmp_path: Path) -> None:
    s = _settings(tmp_path, "evaluator.loss=huber", "evaluator.huber_delta=0.5",
                  "search.metrics=[r2,mae]", "search.rank_by=mae")
    assert s.evaluator.options["loss"] == "huber" and s.evaluator.options["huber_delta"] == 0.5
    assert s.evaluator.options["metrics"] == ("r2", "mae")
    assert s.evaluator.options["rank_by"] == "mae"


def test_split_shorthand_and_kind(tmp_path: Path) -> None:
    s = _settings(tmp_path, "dataset.split=ood", "dataset.split_variable=theta")
    assert s.dataset.split_kind == "ood" and s.dataset.split == (0.7, 0.15, 0.15)
    assert s.dataset.split_variable == "theta"
    s = _settings(tmp_path, "dataset.split_kind=chronological", "dataset.split=[0.6,0.2,0.2]")
    assert s.dataset.split_kind == "chronological" and s.dataset.split == (0.6, 0.2, 0.2)


@pytest.mark.parametrize(("overrides", "message"), [
    (("evaluator.loss=hubber",), "evaluator.loss is not usable: loss 'hubber' is not a built-in"),
    (("evaluator.loss=no_such_pkg_q.losses:f",), "cannot import module 'no_such_pkg_q.losses'"),
    (("evaluator.huber_delta=0",), "evaluator.huber_delta must be positive"),
    (("search.metrics=[rmse]",), "search.metrics unknown metric 'rmse'"),
    (("search.metrics=[r2,r2]",), "listed twice"),
    (("search.rank_by=mae",), r"search.rank_by is 'mae', which is not computed; add it to "
                              r"search.metrics \(search.metrics=\[mae\]\)"),
    (("search.rank_by=loss",), "search.rank_by must be one of val_nmse, val_loss"),
    (("dataset.split=ood",), "dataset.split_variable must name a variable for an ood split"),
    (("dataset.split=sorted",), "dataset.split must be three fractions .* or one of random"),
    (("dataset.split=ood", "dataset.split_kind=chronological", "dataset.split_variable=x"),
     "is 'ood' but dataset.split_kind is 'chronological'"),
    (("dataset.split_variable=x0",), "dataset.split_variable is only used by an ood split"),
    (("dataset.weight=w",), "dataset.weight needs a csv: or parquet: source"),
])
def test_bad_values_name_their_key(tmp_path: Path, overrides: tuple[str, ...],
                                   message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        _settings(tmp_path, *overrides)
