"""Config → Settings: the shipped config groups compose, and bad values name their key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from sr_dist.conf.schema import DatasetConfig, SearchConfig
from sr_dist.search.settings import SettingsError, settings_from_config


def _compose(*overrides: str) -> Any:
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_default_config_composes_into_settings(tmp_path: Path) -> None:
    settings = settings_from_config(_compose(), base_dir=tmp_path)
    assert settings.dataset.source.startswith("feynman:")
    assert settings.model["provider"] == "evolve"
    assert settings.evaluator.device == "cpu" and settings.evaluator.num_gpus == 0
    assert settings.evaluator.options["device"] == "cpu"
    assert settings.search.agents == 2
    assert settings.ray.address is None and settings.ray.auth_mode == "disabled"
    assert settings.results.path == (tmp_path / "results").resolve()
    assert "hydra" not in OmegaConf.create(settings.config_yaml)


# Every override the issue names, and where it lands in Settings.
OVERRIDES: list[tuple[list[str], str, Any]] = [
    (["dataset.source=feynman:I.6.2"], "dataset.source", "feynman:I.6.2"),
    (["search.agents=5"], "search.agents", 5),
    (["search.max_seconds=7.5"], "search.max_seconds", 7.5),
    (["search.max_candidates=99"], "search.max_candidates", 99),
    (["search.max_turns=3"], "search.max_turns", 3),
    (["search.target_nmse=1e-6"], "search.target_nmse", 1e-6),
    (["search.target_nmse=null"], "search.target_nmse", None),
    (["search.polish_s=5"], "search.polish_s", 5.0),
    (["search.seed=4"], "search.seed", 4),
    (["search.tools=[evaluate_formulas,submit_formula]"], "search.tools",
     ("evaluate_formulas", "submit_formula")),
    (["evaluator.max_restarts=5"], "evaluator.max_restarts", 5),
    (["+evaluator.layout=diagonal"], "evaluator.options", None),
    (["evaluator.variable_projection=false"], "evaluator.options.variable_projection", False),
    (["evaluator=gpu"], "evaluator.device", "gpu"),
    (["evaluator.device=gpu", "evaluator.num_gpus=0.5"], "evaluator.num_gpus", 0.5),
    (["evaluator.max_batch=1"], "evaluator.max_batch", 1),
    (["ray.address=auto"], "ray.address", "auto"),
    (["ray.address=ray://head:10001"], "ray.address", "ray://head:10001"),
    (["ray.address=127.0.0.1:6379"], "ray.address", "127.0.0.1:6379"),
    (["ray.auth_mode=token"], "ray.auth_mode", "token"),
    (["model=openai", "model.model=gpt-x", "model.base_url=http://h/v1",
      "model.api_key_env=KEY", "model.tool_mode=json"], "model", None),
    (["model=replay"], "model.provider", "replay"),
    (["model=anthropic"], "model.provider", "anthropic"),
]


def _lookup(settings: Any, dotted: str) -> Any:
    value = settings
    for part in dotted.split("."):
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    return value


@pytest.mark.parametrize("overrides, key, expected", OVERRIDES, ids=[" ".join(o[0]) for o in OVERRIDES])
def test_overrides_reach_settings(overrides: list[str], key: str, expected: Any, tmp_path: Path) -> None:
    settings = settings_from_config(_compose(*overrides), base_dir=tmp_path)
    if key == "evaluator.options":
        assert settings.evaluator.options["layout"] == "diagonal"
    elif key == "evaluator.options.variable_projection":  # the Evaluator keyword it becomes
        assert settings.evaluator.options["variable_projection"] is expected
    elif key == "model":
        assert settings.model["model"] == "gpt-x"
        assert settings.model["base_url"] == "http://h/v1"
        assert settings.model["api_key_env"] == "KEY"
        assert settings.model["tool_mode"] == "json"
    else:
        assert _lookup(settings, key) == expected


def test_relative_paths_resolve_against_the_base_dir(tmp_path: Path) -> None:
    cfg = _compose("dataset.source=csv:data/x.csv", "results.path=out",
                   "evaluator.compilation_cache_dir=cache")
    settings = settings_from_config(cfg, base_dir=tmp_path)
    assert settings.dataset.source == f"csv:{tmp_path / 'data/x.csv'}"
    assert settings.results.path == (tmp_path / "out").resolve()
    assert settings.evaluator.compilation_cache_dir == str(tmp_path / "cache")


# Bad values: (overrides, the key the error must name).
BAD: list[tuple[list[str], str]] = [
    (["search.agents=0"], "search.agents"),
    (["search.agents=-1"], "search.agents"),
    (["search.agents=two"], "search.agents"),
    (["search.max_seconds=0"], "search.max_seconds"),
    (["search.max_seconds=-5"], "search.max_seconds"),
    (["search.max_candidates=-1"], "search.max_candidates"),
    (["search.max_turns=0"], "search.max_turns"),
    (["search.target_nmse=-1"], "search.target_nmse"),
    (["search.polish_s=-1"], "search.polish_s"),
    (["search.seed=-3"], "search.seed"),
    (["search.stop_grace_s=-1"], "search.stop_grace_s"),
    (["evaluator.device=tpu"], "evaluator.device"),
    (["evaluator.max_batch=0"], "evaluator.max_batch"),
    (["evaluator.max_wait_s=-0.1"], "evaluator.max_wait_s"),
    (["+evaluator.bogus=1"], "evaluator.bogus"),
    (["+search.agent=3"], "search.agent"),
    (["+ray.adress=auto"], "ray.adress"),
    (["search.tools=[evaluate_formulas,plot]"], "search.tools"),
    (["evaluator.device=gpu", "evaluator.num_gpus=0"], "evaluator.num_gpus"),
    (["evaluator.warmup=maybe"], "evaluator.warmup"),
    (["ray.auth_mode=open"], "ray.auth_mode"),
    (["ray.address=nowhere"], "ray.address"),
    (["ray.num_cpus=0"], "ray.num_cpus"),
    (["results.path=s3://bucket/x"], "results.path"),
    (["results.flush_s=0"], "results.flush_s"),
    (["dataset.source=''"], "dataset.source"),
    (["dataset.split=[0.5,0.5]"], "dataset.split"),
    (["dataset.noise=-1"], "dataset.noise"),
]


@pytest.mark.parametrize("overrides, key", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_values_name_their_key(overrides: list[str], key: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_config(_compose(*overrides), base_dir=tmp_path)
    assert info.value.key == key
    assert str(info.value).startswith(key + " ")


def test_missing_groups_are_reported_and_missing_keys_take_the_schema_defaults() -> None:
    with pytest.raises(SettingsError, match="^model "):
        settings_from_config({"dataset": {}})
    with pytest.raises(SettingsError, match="^search must be a config group"):
        settings_from_config({
            "model": {"provider": "evolve"}, "dataset": {"source": "feynman:I.6.2"},
            "evaluator": {}, "ray": {}, "results": {"path": "x"},
        })
    # A plain mapping (not composed by Hydra) that leaves keys out gets the schema's defaults.
    settings = settings_from_config({
        "model": {"provider": "evolve"}, "dataset": {"source": "feynman:I.6.2"},
        "evaluator": {}, "search": {}, "ray": {}, "results": {"path": "x"},
    })
    assert settings.search == SearchConfig()
    assert settings.dataset.n == DatasetConfig.n and settings.evaluator.max_batch == 256
