"""``prepare(cfg, dataset=...)``: a dataset built in memory is searched instead of loading
``dataset.source``, with the config's units applied; no Ray needed to check it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hydra import compose, initialize_config_module

from sr_dist.data import dataset_from_arrays
from sr_dist.search.run import prepare
from sr_dist.search.settings import SettingsError


def _compose(*overrides: str) -> Any:
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))


def _arrays() -> Any:
    X = np.random.default_rng(0).uniform(1, 2, (30, 2))
    return dataset_from_arrays(X, X[:, 0] / X[:, 1], ["x", "t"], "v")


def test_a_ready_dataset_is_searched_as_given(tmp_path: Path) -> None:
    dataset = _arrays()
    prepared = prepare(_compose(f"results.path={tmp_path}", f"dataset.source={dataset.name}"),
                       base_dir=tmp_path, dataset=dataset)
    assert prepared.dataset is dataset and prepared.resume is None


def test_the_config_units_apply_to_it(tmp_path: Path) -> None:
    dataset = _arrays()
    prepared = prepare(_compose(f"results.path={tmp_path}", "dataset.units={x:m,t:s,v:'m/s'}"),
                       base_dir=tmp_path, dataset=dataset)
    assert prepared.dataset.units is not None
    assert prepared.dataset.units.as_text("v") == {"x": "m", "t": "s", "v": "m/s"}
    assert prepared.dataset.content_hash == dataset.content_hash
    with pytest.raises(SettingsError) as info:
        prepare(_compose(f"results.path={tmp_path}", "dataset.units={x:m,v:'m/s'}"),
                base_dir=tmp_path, dataset=dataset)
    assert info.value.key == "dataset.units" and "no unit for t" in str(info.value)


def test_only_a_dataset_value(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="dataset must be a sr_dist.data.Dataset, got ndarray"):
        prepare(_compose(f"results.path={tmp_path}"), base_dir=tmp_path, dataset=np.ones((3, 2)))
