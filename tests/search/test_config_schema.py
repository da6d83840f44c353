"""The config groups' schema (sr_dist/conf/schema.py): the ConfigStore holds its defaults, no YAML
repeats them, evaluator=gpu is the cpu option on a GPU, and ``search.tools`` is checked."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

import sr_dist.conf
from sr_dist.conf.schema import (
    GROUP_OPTIONS,
    DatasetConfig,
    EvaluatorConfig,
    RayConfig,
    ResultsConfig,
    SearchConfig,
    SettingsError,
)
from sr_dist.search import Settings, settings_from_config
from sr_dist.sr.formula_tools import FORMULA_TOOLS, OPT_IN_TOOLS

CONF = Path(sr_dist.conf.__file__).parent


def _compose(*overrides: str) -> Any:
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))


def _plain(cfg: Any) -> dict[str, Any]:
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    return {str(k): v for k, v in container.items()}


@pytest.mark.parametrize("group, name, schema", GROUP_OPTIONS, ids=[g[0] for g in GROUP_OPTIONS])
def test_the_config_store_holds_each_groups_dataclass_defaults(group: str, name: str,
                                                               schema: Any) -> None:
    # Composed with no overrides, the group is those defaults; the dataclass built from it is
    # the dataclass's own default instance (nothing in YAML changed a value on the way).
    composed = _plain(_compose())[group]
    assert list(composed) == list(schema.config_keys())
    if schema is not EvaluatorConfig:  # its cache directory comes from an oc.env default
        assert schema.from_section(composed) == schema()


def test_no_yaml_file_repeats_a_groups_defaults() -> None:
    for group, name, _ in GROUP_OPTIONS:
        assert not (CONF / group / f"{name}.yaml").exists(), f"{group}/{name}.yaml shadows the schema"


def test_gpu_yaml_derives_from_cpu() -> None:
    gpu = OmegaConf.load(CONF / "evaluator" / "gpu.yaml")
    assert list(gpu.defaults) == ["cpu", "_self_"]
    # The device, the wait for batch-mates (0 on the CPU, 20 ms for a GPU's wide batches) and
    # the warm-up (off on the CPU: the search starts once the agents are prepared).
    assert {k for k in gpu if k != "defaults"} == {"device", "max_wait_s", "warmup"}
    cpu, on_gpu = _plain(_compose())["evaluator"], _plain(_compose("evaluator=gpu"))["evaluator"]
    assert cpu["max_wait_s"] == 0.0 and cpu["warmup"] is False
    assert on_gpu == {**cpu, "device": "gpu", "max_wait_s": 0.02, "warmup": True}
    # A cpu override still reaches the gpu option, since it is the same node underneath.
    changed = _plain(_compose("evaluator=gpu", "evaluator.max_batch=7"))["evaluator"]
    assert changed["max_batch"] == 7 and changed["device"] == "gpu"


def test_gpu_settings_reserve_the_default_gpu(tmp_path: Path) -> None:
    settings = settings_from_config(_compose("evaluator=gpu"), base_dir=tmp_path)
    assert settings.evaluator.device == "gpu" and settings.evaluator.num_gpus == 1.0
    assert settings.evaluator.options["device"] == "gpu"


def test_the_jax_cache_default_follows_the_environment(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SR_DIST_JAX_CACHE_DIR", str(tmp_path / "jax"))
    settings = settings_from_config(_compose(), base_dir=tmp_path)
    assert settings.evaluator.compilation_cache_dir == str(tmp_path / "jax")
    monkeypatch.delenv("SR_DIST_JAX_CACHE_DIR")
    settings = settings_from_config(_compose(), base_dir=tmp_path)
    assert settings.evaluator.compilation_cache_dir == str(Path("~/.cache/sr-dist/jax").expanduser())


def test_the_dataclasses_check_their_values_when_built_directly() -> None:
    with pytest.raises(SettingsError, match=r"^search.agents must be positive, got -1$"):
        SearchConfig(agents=-1)
    with pytest.raises(SettingsError, match="^dataset.split must sum to 1"):
        DatasetConfig(split=(0.5, 0.5, 0.5))
    with pytest.raises(SettingsError, match="^ray.auth_mode must be one of disabled, token"):
        RayConfig(auth_mode="open")
    with pytest.raises(SettingsError, match="^results.path must be a local or mounted"):
        ResultsConfig(path="s3://bucket")
    with pytest.raises(SettingsError, match="^evaluator.num_gpus must be positive"):
        EvaluatorConfig(device="gpu", num_gpus=0)
    assert RayConfig(address="local").starts_cluster
    assert SearchConfig(max_seconds=3).max_seconds == 3.0


def test_frozen_values() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        SearchConfig().agents = 3  # type: ignore[misc]


@pytest.mark.parametrize("schema, key, noun", [
    (SearchConfig, "agent", "a search option"),
    (DatasetConfig, "sorce", "a dataset option"),
    (RayConfig, "adress", "a ray option"),
    (ResultsConfig, "flush", "a results option"),
    (EvaluatorConfig, "restart", "an evaluator option"),
])
def test_unknown_keys_name_the_key_and_the_known_ones(schema: Any, key: str, noun: str) -> None:
    with pytest.raises(SettingsError) as info:
        schema.from_section({key: 1})
    assert info.value.key == f"{schema.GROUP}.{key}"
    assert f"is not {noun} (known: " in str(info.value)


# --- search.tools ------------------------------------------------------------------------------

def test_search_tools_default_is_every_formula_tool(tmp_path: Path) -> None:
    settings = settings_from_config(_compose(), base_dir=tmp_path)
    assert settings.search.tools is None
    assert isinstance(settings, Settings)


def test_search_tools_keeps_the_order_given(tmp_path: Path) -> None:
    chosen = list(reversed(FORMULA_TOOLS))
    settings = settings_from_config(_compose(f"search.tools=[{','.join(chosen)}]"),
                                    base_dir=tmp_path)
    assert settings.search.tools == tuple(chosen)


@pytest.mark.parametrize("override, fragment", [
    ("search.tools=[evaluate_formulas,plot]", "names an unknown tool 'plot' (known: "
                                              + ", ".join((*FORMULA_TOOLS, *OPT_IN_TOOLS)) + ")"),
    ("search.tools=[]", "must be null (every formula tool) or a non-empty list"),
    ("search.tools=submit_formula", "must be null (every formula tool) or a non-empty list"),
    ("search.tools=[submit_formula,submit_formula]", "names 'submit_formula' twice"),
])
def test_bad_search_tools_are_refused(override: str, fragment: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_config(_compose(override), base_dir=tmp_path)
    assert info.value.key == "search.tools"
    assert fragment in str(info.value)


# --- the evaluator pool's keys ------------------------------------------------------------------

def test_pool_keys_default_to_one_replica(tmp_path: Path) -> None:
    config = EvaluatorConfig()
    assert (config.replicas, config.cpus_per_replica, config.max_queue,
            config.max_in_flight) == (1, 1, 4096, 4)
    assert SearchConfig().agents_per_actor == 1
    settings = settings_from_config(_compose(), base_dir=tmp_path)
    assert settings.evaluator.replicas == 1 and settings.evaluator.max_queue == 4096
    assert settings.evaluator.max_in_flight == 4 and settings.search.agents_per_actor == 1


@pytest.mark.parametrize("value, expected", [
    ("auto", "auto"), ("AUTO", "auto"), (" auto ", "auto"), ("2", 2), (" 3 ", 3), (1, 1), (16, 16),
])
def test_replicas_takes_a_positive_integer_or_auto(value: Any, expected: Any) -> None:
    assert EvaluatorConfig(replicas=value).replicas == expected


@pytest.mark.parametrize("value, shown", [
    (0, "0"), (-1, "-1"), ("x", "'x'"), (1.5, "1.5"), (True, "True"), (False, "False"),
    ("0", "0"), ("-2", "'-2'"), ("", "''"), (None, "None"), ("1.5", "'1.5'"),
])
def test_bad_replicas_are_refused_naming_the_key(value: Any, shown: str) -> None:
    with pytest.raises(SettingsError) as info:
        EvaluatorConfig(replicas=value)
    assert info.value.key == "evaluator.replicas"
    assert str(info.value) == f"evaluator.replicas must be a positive integer or 'auto', got {shown}"


@pytest.mark.parametrize("override, expected", [
    ("evaluator.replicas=auto", "auto"), ("evaluator.replicas=2", 2),
    ("evaluator.cpus_per_replica=2", 2), ("evaluator.max_queue=1", 1),
    ("evaluator.max_in_flight=1", 1), ("search.agents_per_actor=8", 8),
    ("evaluator.pipeline=false", False), ("evaluator.pipeline=true", True),
])
def test_pool_overrides_reach_settings(override: str, expected: Any, tmp_path: Path) -> None:
    settings = settings_from_config(_compose(override), base_dir=tmp_path)
    group, key = override.split("=")[0].split(".")
    assert getattr(getattr(settings, group), key) == expected


@pytest.mark.parametrize("override, message", [
    ("evaluator.replicas=0", "evaluator.replicas must be a positive integer or 'auto', got 0"),
    ("evaluator.replicas=some", "evaluator.replicas must be a positive integer or 'auto', "
                                "got 'some'"),
    ("evaluator.cpus_per_replica=0", "evaluator.cpus_per_replica must be positive, got 0"),
    ("evaluator.cpus_per_replica=1.5", "evaluator.cpus_per_replica must be an integer, got 1.5"),
    ("evaluator.max_queue=0", "evaluator.max_queue must be positive, got 0"),
    ("evaluator.max_queue=-4", "evaluator.max_queue must be positive, got -4"),
    ("evaluator.max_in_flight=0", "evaluator.max_in_flight must be positive, got 0"),
    ("evaluator.max_in_flight=true", "evaluator.max_in_flight must be an integer, got True"),
    ("search.agents_per_actor=0", "search.agents_per_actor must be positive, got 0"),
    ("search.agents_per_actor=many", "search.agents_per_actor must be an integer, got 'many'"),
    ("evaluator.pipeline=sometimes", "evaluator.pipeline must be true or false, got 'sometimes'"),
])
def test_bad_pool_values_are_refused(override: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_config(_compose(override), base_dir=tmp_path)
    assert str(info.value) == message
    assert info.value.key == override.split("=")[0]
