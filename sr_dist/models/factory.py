"""``build_model(cfg)``: one config mapping in, one ready model out, or a clear config error.

The Hydra ``model`` group gives a mapping with ``provider`` and that provider's options;
presets such as ``deepseek`` or ``ollama`` are ``provider: openai`` with the endpoint filled in.
Thea's provider names are accepted as written: ``openrouter``, ``qwen``, ``deepseek``,
``ollama`` and ``mimo`` are the ``openai`` adapter with that provider's endpoint and key
variable as defaults (:mod:`sr_dist.models.providers`), and ``mock`` is ``replay`` reading
``LLM_REPLAY``. ``scripted`` is a fast seeded proposer for soak and load tests
(:mod:`sr_dist.models.scripted`).
``record_path`` on any provider wraps the model in a :class:`RecordingModel`.
"""

from __future__ import annotations

import importlib.metadata
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from sr_dist.models.base import ModelConfigError, ModelProtocol
from sr_dist.models.circuit import CIRCUIT_KEYS, circuit_policy, provider_circuit
from sr_dist.models.options import as_plain_dict, opt_str
from sr_dist.models.providers import COMPAT_PROVIDERS, MOCK_REPLAY_ENV
from sr_dist.models.replay import REPLAY_ENV, RecordingModel, ReplayModel

__all__ = ["ENTRY_POINT_GROUP", "NETWORK_PROVIDERS", "PROVIDERS", "build_model", "register_provider"]

#: The providers :func:`build_model` knows out of the box (``evolve`` comes from the SR domain
#: through the :data:`ENTRY_POINT_GROUP` entry point).
PROVIDERS = ("openai", "anthropic", "replay", "evolve", *COMPAT_PROVIDERS, "mock", "scripted")
#: The providers this layer builds itself.
_BUILTIN = tuple(p for p in PROVIDERS if p != "evolve")
#: The providers that go over the network (a search run gives each a provider circuit).
NETWORK_PROVIDERS = ("openai", "anthropic", *COMPAT_PROVIDERS)


#: Where providers from other packages announce themselves: an entry point named after the
#: provider whose object is ``build(cfg: dict) -> ModelProtocol`` (sr-dist's own ``evolve``
#: proposer is one, from the SR domain, which this layer never imports).
ENTRY_POINT_GROUP = "sr_dist.providers"

ProviderBuilder = Callable[[dict[str, Any]], ModelProtocol]
_REGISTERED: dict[str, ProviderBuilder] = {}


def register_provider(name: str, build: ProviderBuilder) -> None:
    """Make ``model.provider: <name>`` build with ``build(options)``; a built-in name is refused."""
    if name in _BUILTIN:
        raise ValueError(f"provider {name!r} is built in and cannot be replaced")
    _REGISTERED[name] = build


def _plugin(provider: Any) -> ProviderBuilder:
    """The builder registered, or announced as an entry point, for ``provider``; a
    :class:`ModelConfigError` naming the known providers for any other name."""
    if isinstance(provider, str) and provider in _REGISTERED:
        return _REGISTERED[provider]
    found = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == provider]
    if not found and provider not in PROVIDERS:
        raise ModelConfigError(f"unknown model.provider {provider!r}; known providers: {', '.join(PROVIDERS)}")
    if not found:
        raise ModelConfigError(
            f"the {provider} provider is not available: no '{ENTRY_POINT_GROUP}' entry point named "
            f"{provider!r} is installed (reinstall sr-dist, or register_provider({provider!r}, build))"
        )
    try:
        build = found[0].load()
    except (ImportError, AttributeError) as exc:
        raise ModelConfigError(
            f"the {provider} provider is not available: loading {found[0].value} failed ({exc})"
        ) from None
    if not callable(build):
        raise ModelConfigError(f"the {provider} provider's entry point {found[0].value!r} is not callable")
    return build


def _build_remote(provider: str, options: dict[str, Any], env: Callable[[str], str | None],
                  sleep: Callable[[float], None]) -> ModelProtocol:
    """A network adapter, with its provider's circuit when the config sets
    ``model.circuit_failures`` or ``model.circuit_recovery_s`` (read here, not by the adapter).

    The adapters are imported here: each pulls its provider's SDK (``openai``; ``anthropic``, an
    optional extra), which a run with another provider never needs."""
    adapter_options = {k: v for k, v in options.items() if k not in CIRCUIT_KEYS}
    model: Any
    if provider == "openai" or provider in COMPAT_PROVIDERS:
        from sr_dist.models.openai_compat import OpenAICompatModel

        model = OpenAICompatModel.from_config(
            adapter_options, getenv=env, sleep=sleep, endpoint=COMPAT_PROVIDERS.get(provider)
        )
    else:
        from sr_dist.models.anthropic_model import AnthropicModel

        model = AnthropicModel.from_config(adapter_options, getenv=env, sleep=sleep)
    if not any(k in options for k in CIRCUIT_KEYS):
        return model  # no circuit asked for: retries only (a search run always asks for one)
    policy = circuit_policy(options, pause_s=model.retry_policy.max_delay_s)
    base_url = getattr(getattr(model, "config", None), "base_url", "")
    model.circuit = provider_circuit(f"{provider}|{base_url}|{model.name}", policy)
    return model


def build_model(
    cfg: Mapping[str, Any] | Any,
    *,
    getenv: Callable[[str], str | None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ModelProtocol:
    """Build the model a config describes.

    ``cfg`` is a dict or an OmegaConf ``DictConfig`` with ``provider`` in :data:`PROVIDERS`.
    ``getenv`` (default ``os.environ.get``) is where API keys, ``SR_DIST_REPLAY`` and
    ``LLM_REPLAY`` are read; ``sleep`` is what retries wait with (both are for embedding and
    tests). Raises
    :class:`ModelConfigError` for anything that would make every call fail.
    """
    options = as_plain_dict(cfg)
    provider = options.get("provider")
    # Looked up before anything else: an unknown provider is the first error a config gets.
    plugin = _plugin(provider) if provider not in _BUILTIN else None
    record_path = opt_str(options, "record_path")
    env = getenv or os.environ.get

    model: ModelProtocol
    if provider in NETWORK_PROVIDERS:
        model = _build_remote(provider, options, env, sleep)
    elif provider in ("replay", "mock"):
        envs = (MOCK_REPLAY_ENV, REPLAY_ENV) if provider == "mock" else (REPLAY_ENV,)
        replay = ReplayModel.from_config(options, getenv=env, provider=provider, path_envs=envs)
        if record_path and os.path.realpath(os.path.expanduser(record_path)) == os.path.realpath(os.path.expanduser(replay.source)):
            raise ModelConfigError("model.record_path is the transcript being replayed; recording would erase it")
        model = replay
    elif provider == "scripted":
        from sr_dist.models.scripted import build_scripted  # only soak and load runs need it

        model = build_scripted({k: v for k, v in options.items() if k != "record_path"})
    else:
        assert plugin is not None
        model = plugin({k: v for k, v in options.items() if k != "record_path"})

    if record_path:

        model = RecordingModel(model, record_path)
    return model
