"""``build_model``: presets, config errors (a table), the evolve hook, OmegaConf input."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

import sr_dist
from sr_dist.models import PROVIDERS, ModelConfigError, ModelProtocol, build_model

PRESET_DIR = Path(sr_dist.__file__).parent / "conf" / "model"
OPENAI_PRESETS = ["openai", "deepseek", "qwen", "openrouter", "ollama", "vllm", "llamacpp"]
PRESET_KEYS = {"provider", "model", "base_url", "api_key_env", "tool_mode", "temperature", "max_tokens", "timeout_s", "max_retries", "record_path"}
ALL_KEYS = {
    "OPENAI_API_KEY": "k1",
    "DEEPSEEK_API_KEY": "k2",
    "DASHSCOPE_API_KEY": "k3",
    "OPENROUTER_API_KEY": "k4",
    "ANTHROPIC_API_KEY": "k5",
}


def load_preset(name: str) -> Any:
    return OmegaConf.load(PRESET_DIR / f"{name}.yaml")


@pytest.mark.parametrize("name", OPENAI_PRESETS)
def test_openai_compatible_presets_build(name: str) -> None:
    cfg = load_preset(name)
    assert set(cfg) == PRESET_KEYS and cfg.provider == "openai"
    model = build_model(cfg, getenv=ALL_KEYS.get)  # a DictConfig, as Hydra hands it over
    assert isinstance(model, ModelProtocol)
    assert model.name == f"openai:{cfg.model}" and model.tool_mode == cfg.tool_mode
    assert model.config.base_url == cfg.base_url  # type: ignore[attr-defined]
    local = name in ("ollama", "vllm", "llamacpp")
    assert (cfg.api_key_env is None) == local
    assert local == cfg.base_url.startswith("http://localhost")


@pytest.mark.parametrize("name", [n for n in OPENAI_PRESETS if n not in ("ollama", "vllm", "llamacpp")])
def test_hosted_presets_need_their_key(name: str) -> None:
    cfg = load_preset(name)
    with pytest.raises(ModelConfigError) as info:
        build_model(cfg, getenv=lambda name: None)
    assert cfg.api_key_env in str(info.value) and "model.api_key_env" in str(info.value)


def test_anthropic_and_replay_presets(tmp_path: Path) -> None:
    anthropic = load_preset("anthropic")
    assert set(anthropic) == PRESET_KEYS and anthropic.api_key_env == "ANTHROPIC_API_KEY"
    replay = load_preset("replay")
    assert PRESET_KEYS <= set(replay) and replay.provider == "replay"
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"model": "openai:x", "tool_mode": "text", "response": {"text": "hi"}}\n')
    model = build_model(replay, getenv={"SR_DIST_REPLAY": str(transcript)}.get)
    assert (model.name, model.tool_mode) == ("replay:openai:x", "text")


def test_hydra_composes_every_preset() -> None:
    from hydra import compose, initialize_config_module

    # The module, not its folder: importing sr_dist.conf stores the groups' defaults.
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        for name in OPENAI_PRESETS + ["anthropic", "replay"]:
            cfg = compose(config_name="config", overrides=[f"model={name}"])
            assert cfg.model == load_preset(name)


#: (id, config, getenv mapping, text the error must contain)
CONFIG_ERRORS: list[tuple[str, Any, dict[str, str], list[str]]] = [
    ("not-a-mapping", ["openai"], {}, ["mapping"]),
    ("unknown-provider", {"provider": "gemini"}, {}, ["'gemini'", *PROVIDERS]),
    ("no-provider", {"model": "x"}, {}, ["None", "openai, anthropic, replay, evolve"]),
    ("no-model", {"provider": "openai"}, ALL_KEYS, ["model.model"]),
    ("missing-key-env", {"provider": "openai", "model": "m", "api_key_env": "MY_KEY"}, {}, ["MY_KEY", "model.api_key_env"]),
    ("default-key-env", {"provider": "openai", "model": "m"}, {}, ["OPENAI_API_KEY"]),
    ("empty-key", {"provider": "openai", "model": "m"}, {"OPENAI_API_KEY": ""}, ["OPENAI_API_KEY", "not set"]),
    ("bad-tool-mode", {"provider": "openai", "model": "m", "tool_mode": "xml"}, ALL_KEYS, ["model.tool_mode", "native, json, text", "'xml'"]),
    ("secret-in-config", {"provider": "openai", "model": "m", "api_key": "sk-live-123"}, ALL_KEYS, ["model.api_key", "environment variable"]),
    ("typo", {"provider": "openai", "model": "m", "temprature": 0.2}, ALL_KEYS, ["model.temprature", "temperature"]),
    ("negative-retries", {"provider": "openai", "model": "m", "max_retries": -1}, ALL_KEYS, ["model.max_retries"]),
    ("zero-timeout", {"provider": "openai", "model": "m", "timeout_s": 0}, ALL_KEYS, ["model.timeout_s"]),
    ("string-number", {"provider": "openai", "model": "m", "max_tokens": "100"}, ALL_KEYS, ["model.max_tokens", "integer"]),
    ("bool-number", {"provider": "openai", "model": "m", "temperature": True}, ALL_KEYS, ["model.temperature"]),
    ("bad-base-url", {"provider": "openai", "model": "m", "base_url": ""}, ALL_KEYS, ["model.base_url"]),
    ("anthropic-no-model", {"provider": "anthropic"}, ALL_KEYS, ["model.model"]),
    ("anthropic-missing-key", {"provider": "anthropic", "model": "c"}, {}, ["ANTHROPIC_API_KEY"]),
    ("replay-bad-strict", {"provider": "replay", "replay_path": "x", "strict": "yes"}, {}, ["model.strict"]),
    ("bad-record-path", {"provider": "openai", "model": "m", "record_path": 5}, ALL_KEYS, ["model.record_path"]),
]


@pytest.mark.parametrize(("cfg", "env", "needles"), [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS])
def test_config_errors(cfg: Any, env: dict[str, str], needles: list[str]) -> None:
    with pytest.raises(ModelConfigError) as info:
        build_model(cfg, getenv=env.get)
    assert isinstance(info.value, ValueError)
    for needle in needles:
        assert needle in str(info.value)
    assert "sk-live-123" not in str(info.value)


def test_record_path_in_an_unwritable_place_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    cfg = {"provider": "openai", "model": "m", "api_key_env": None, "record_path": str(blocker / "t.jsonl")}
    with pytest.raises(ModelConfigError, match="model.record_path"):
        build_model(cfg)


def test_evolve_missing_module_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sr_dist.sr.evolve.model", None)
    with pytest.raises(ModelConfigError, match="sr_dist.sr.evolve.model"):
        build_model({"provider": "evolve"})


def test_evolve_is_built_by_its_module_and_can_be_recorded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from sr_dist.models import ModelResponse, RecordingModel

    seen: list[dict[str, Any]] = []

    class Offline:
        name = "evolve"
        tool_mode = "native"

        def call(self, context: Any, tools: Any = None) -> ModelResponse:
            return ModelResponse(text="proposal")

        async def acall(self, context: Any, tools: Any = None) -> ModelResponse:
            return self.call(context, tools)

    def build_evolve(cfg: dict[str, Any]) -> Offline:
        seen.append(cfg)
        return Offline()

    module = types.ModuleType("sr_dist.sr.evolve.model")
    module.build_evolve = build_evolve  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sr_dist.sr.evolve.model", module)
    path = tmp_path / "evolve.jsonl"
    model = build_model(OmegaConf.create({"provider": "evolve", "batch_size": 8, "record_path": str(path)}))
    assert isinstance(model, RecordingModel) and model.name == "evolve"
    assert seen == [{"provider": "evolve", "batch_size": 8}]  # record_path is handled here
    from sr_dist.conversation import Context

    assert model.call(Context()).text == "proposal"
    assert '"text": "proposal"' in path.read_text()


def test_interpolations_are_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = OmegaConf.create({"name": "m1", "model": {"provider": "openai", "model": "${name}", "api_key_env": None}})
    assert build_model(cfg.model).name == "openai:m1"


def test_registered_providers_are_built_and_builtins_cannot_be_replaced() -> None:
    from sr_dist.models import ModelResponse
    from sr_dist.models.factory import _REGISTERED, register_provider

    class Echo:
        name = "echo"
        tool_mode = "json"

        def call(self, context: Any, tools: Any = None) -> ModelResponse:
            return ModelResponse(text="echo")

        async def acall(self, context: Any, tools: Any = None) -> ModelResponse:
            return self.call(context, tools)

    seen: list[dict[str, Any]] = []
    register_provider("echo-test", lambda cfg: seen.append(cfg) or Echo())  # type: ignore[func-returns-value]
    try:
        assert build_model({"provider": "echo-test", "x": 1}).name == "echo"
        assert seen == [{"provider": "echo-test", "x": 1}]
    finally:
        _REGISTERED.pop("echo-test", None)
    with pytest.raises(ValueError, match="built in"):
        register_provider("openai", lambda cfg: Echo())
    with pytest.raises(ModelConfigError, match="unknown model.provider"):
        build_model({"provider": "echo-test"})


def test_evolve_comes_from_the_installed_entry_point() -> None:
    import importlib.metadata

    (entry,) = [ep for ep in importlib.metadata.entry_points(group="sr_dist.providers") if ep.name == "evolve"]
    assert entry.value == "sr_dist.sr.evolve.model:build_evolve"
    assert build_model({"provider": "evolve"}).name == "evolve"
