"""Thea's provider names, accepted as written in a ``model`` config.

``openrouter``, ``qwen``, ``deepseek``, ``ollama`` and ``mimo`` are the OpenAI-compatible adapter
with the provider's endpoint and key variable as defaults; ``mock`` replays a transcript named by
``replay_path`` or ``LLM_REPLAY``. Calls go to a real chat-completions server on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

import sr_dist
from sr_dist.conversation import Context
from sr_dist.models import PROVIDERS, ModelConfigError, ModelProtocol, build_model
from sr_dist.models.circuit import reset_circuits
from sr_dist.models.factory import NETWORK_PROVIDERS
from sr_dist.models.providers import COMPAT_PROVIDERS, MOCK_REPLAY_ENV, CompatEndpoint
from tests.support.chat_server import (
    ScriptedAnthropicServer,
    ScriptedChatServer,
    anthropic_message,
    chat_completion,
)

PRESET_DIR = Path(sr_dist.__file__).parent / "conf" / "model"

#: Thea's table: provider → the variable its credential is read from (None: no remote credential).
THEA_CREDENTIALS: dict[str, str | None] = {
    "openrouter": "OPENROUTER_API_KEY",
    "qwen": "DASHSCOPE_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "ollama": None,
    "mimo": "MIMO_API_KEY",
}
KEYS = {env: f"key-for-{env.lower()}" for env in THEA_CREDENTIALS.values() if env}


def thea_llm(provider: str, **extra: Any) -> dict[str, Any]:
    """Thea's ``llm`` block as written: ``provider, model, api_key_env, max_tokens``."""
    block: dict[str, Any] = {"provider": provider, "model": f"{provider}-model", "max_tokens": 64}
    env = THEA_CREDENTIALS.get(provider)
    if env is not None:
        block["api_key_env"] = env
    return {**block, **extra}


def test_the_table_is_thea_s() -> None:
    assert {name: e.api_key_env for name, e in COMPAT_PROVIDERS.items()} == THEA_CREDENTIALS
    assert all(isinstance(e, CompatEndpoint) and e.base_url.rstrip("/").endswith("/v1") for e in COMPAT_PROVIDERS.values())
    assert COMPAT_PROVIDERS["ollama"].base_url.startswith("http://localhost:")
    assert all(e.base_url.startswith("https://") for n, e in COMPAT_PROVIDERS.items() if n != "ollama")
    assert set(THEA_CREDENTIALS) | {"mock"} <= set(PROVIDERS)
    assert set(THEA_CREDENTIALS) <= set(NETWORK_PROVIDERS) and "mock" not in NETWORK_PROVIDERS
    with pytest.raises(TypeError):
        COMPAT_PROVIDERS["x"] = CompatEndpoint("x", "http://x/v1", None)  # type: ignore[index]


@pytest.mark.parametrize("provider", sorted(THEA_CREDENTIALS))
def test_thea_s_llm_block_builds_with_the_provider_s_defaults(provider: str) -> None:
    model = build_model(thea_llm(provider), getenv=KEYS.get)
    assert isinstance(model, ModelProtocol)
    assert model.name == f"{provider}:{provider}-model" and model.tool_mode == "native"
    config = model.config  # type: ignore[attr-defined]
    assert config.base_url == COMPAT_PROVIDERS[provider].base_url and config.max_tokens == 64
    model.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("provider", sorted(THEA_CREDENTIALS))
def test_a_call_sends_the_provider_s_key_to_the_endpoint(provider: str, context: Context, tools: list[dict[str, Any]]) -> None:
    # The block as written, without api_key_env: the provider's own variable is the default.
    block = {k: v for k, v in thea_llm(provider).items() if k != "api_key_env"}
    with ScriptedChatServer([chat_completion("y = a*x")]) as server:
        model = build_model({**block, "base_url": server.base_url}, getenv=KEYS.get)
        response = model.call(context, tools)
        model.close()  # type: ignore[attr-defined]
    assert response.text == "y = a*x"
    [sent] = server.requests
    assert sent.body["model"] == f"{provider}-model" and sent.body["max_tokens"] == 64
    env = THEA_CREDENTIALS[provider]
    expected = KEYS[env] if env else "not-needed"  # ollama: the SDK needs some non-empty key
    assert sent.headers["authorization"] == f"Bearer {expected}"


@pytest.mark.parametrize("provider", sorted(p for p, env in THEA_CREDENTIALS.items() if env))
def test_a_missing_key_names_the_provider_and_the_variable(provider: str) -> None:
    env = THEA_CREDENTIALS[provider]
    for block in (thea_llm(provider), {k: v for k, v in thea_llm(provider).items() if k != "api_key_env"}):
        with pytest.raises(ModelConfigError) as info:
            build_model(block, getenv={"OPENAI_API_KEY": "wrong-provider"}.get)
        message = str(info.value)
        assert f"model.provider {provider!r} needs an API key" in message
        assert f"environment variable {env} is not set" in message and "model.api_key_env" in message


def test_a_named_provider_still_takes_its_options_and_refuses_typos() -> None:
    cfg = thea_llm("deepseek", base_url="http://127.0.0.1:9/v1/", api_key_env="MY_KEY", tool_mode="json")
    model = build_model(cfg, getenv={"MY_KEY": "k"}.get)
    assert model.config.base_url == "http://127.0.0.1:9/v1" and model.tool_mode == "json"  # type: ignore[attr-defined]
    with pytest.raises(ModelConfigError, match=r"unknown key\(s\) for provider 'qwen': model.max_token"):
        build_model({"provider": "qwen", "model": "q", "max_token": 5}, getenv=KEYS.get)
    with pytest.raises(ModelConfigError, match="model.model is required"):
        build_model({"provider": "mimo"}, getenv=KEYS.get)


def test_a_named_provider_gets_its_own_circuit() -> None:
    reset_circuits()
    try:
        model = build_model(thea_llm("openrouter", circuit_failures=2), getenv=KEYS.get)
        circuit = model.circuit  # type: ignore[attr-defined]
        assert circuit is not None and circuit.policy.failures == 2
        assert circuit.key.startswith("openrouter|https://openrouter.ai/api/v1|")
    finally:
        reset_circuits()


def test_openai_and_anthropic_accept_thea_s_block_as_written(context: Context) -> None:
    keys = {"OPENAI_API_KEY": "k-openai", "ANTHROPIC_API_KEY": "k-anthropic"}
    with ScriptedChatServer([chat_completion("ok")]) as server:
        block = {"provider": "openai", "model": "gpt-x", "api_key_env": "OPENAI_API_KEY", "max_tokens": 4096}
        model = build_model({**block, "base_url": server.base_url}, getenv=keys.get)
        assert model.call(context).text == "ok" and model.name == "openai:gpt-x"
    pytest.importorskip("anthropic", reason="the anthropic extra is not installed (pip install 'sr-dist[anthropic]')")
    with ScriptedAnthropicServer([anthropic_message("hello")]) as server:
        block = {"provider": "anthropic", "model": "claude-sonnet-4-20250514", "api_key_env": "ANTHROPIC_API_KEY", "max_tokens": 4096}
        model = build_model({**block, "base_url": server.base_url}, getenv=keys.get)
        assert model.call(context).text == "hello"
    [sent] = server.completion_requests
    assert "k-anthropic" in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "").removeprefix("Bearer "))
    assert sent.body["max_tokens"] == 4096


# --- mock ------------------------------------------------------------------------------------


def _transcript(tmp_path: Path, text: str, name: str = "t.jsonl") -> str:
    path = tmp_path / name
    path.write_text(f'{{"model": "openai:x", "tool_mode": "native", "response": {{"text": "{text}"}}}}\n')
    return str(path)


def test_mock_replays_from_replay_path_with_thea_s_keys(tmp_path: Path, context: Context) -> None:
    block = {"provider": "mock", "model": "recorded", "api_key_env": "NOT_READ", "max_tokens": 10}
    model = build_model({**block, "replay_path": _transcript(tmp_path, "from-path")}, getenv=lambda name: None)
    assert model.name == "replay:recorded" and model.call(context).text == "from-path"


def test_mock_reads_llm_replay_before_sr_dist_replay(tmp_path: Path, context: Context) -> None:
    thea = _transcript(tmp_path, "from-llm-replay", "a.jsonl")
    ours = _transcript(tmp_path, "from-sr-dist-replay", "b.jsonl")
    assert MOCK_REPLAY_ENV == "LLM_REPLAY"
    both = {"LLM_REPLAY": thea, "SR_DIST_REPLAY": ours}
    assert build_model({"provider": "mock"}, getenv=both.get).call(context).text == "from-llm-replay"
    assert build_model({"provider": "mock"}, getenv={"SR_DIST_REPLAY": ours}.get).call(context).text == "from-sr-dist-replay"
    # replay keeps reading only its own variable
    with pytest.raises(ModelConfigError, match="SR_DIST_REPLAY environment variable"):
        build_model({"provider": "replay"}, getenv={"LLM_REPLAY": thea}.get)


def test_mock_without_a_transcript_says_where_to_put_one() -> None:
    with pytest.raises(ModelConfigError) as info:
        build_model({"provider": "mock", "model": "m"}, getenv=lambda name: None)
    message = str(info.value)
    assert "the mock provider needs a transcript" in message
    assert "model.replay_path" in message and "LLM_REPLAY or SR_DIST_REPLAY" in message
    with pytest.raises(ModelConfigError, match=r"unknown key\(s\) for provider 'mock': model.replay"):
        build_model({"provider": "mock", "replay": "x"}, getenv=lambda name: None)


# --- presets -----------------------------------------------------------------------------------


def test_the_mimo_preset_composes_and_builds() -> None:
    from hydra import compose, initialize_config_module

    preset = OmegaConf.load(PRESET_DIR / "mimo.yaml")
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=mimo"])
    assert cfg.model == preset and preset.provider == "mimo"
    model = build_model(cfg.model, getenv=KEYS.get)
    assert model.name == "mimo:mimo-v2-flash"
    assert model.config.base_url == COMPAT_PROVIDERS["mimo"].base_url  # type: ignore[attr-defined]
