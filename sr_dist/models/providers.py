"""Named OpenAI-compatible providers: Thea's ``provider:`` names, each an endpoint and a key.

``provider: deepseek`` (or ``openrouter``, ``qwen``, ``ollama``, ``mimo``) is the ``openai``
adapter with that provider's base URL and credential variable filled in, so a config written
for Thea's harness (``provider, model, api_key_env, max_tokens``) works as written. The values
are defaults only: ``base_url`` and ``api_key_env`` in the config still win.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["COMPAT_PROVIDERS", "MOCK_REPLAY_ENV", "CompatEndpoint"]


@dataclass(frozen=True, slots=True)
class CompatEndpoint:
    """Where a named OpenAI-compatible provider lives and which variable holds its key.

    ``api_key_env`` is ``None`` for a local server that needs no key.
    """

    name: str
    base_url: str
    api_key_env: str | None


#: Every named OpenAI-compatible provider :func:`~sr_dist.models.build_model` accepts.
COMPAT_PROVIDERS: Mapping[str, CompatEndpoint] = MappingProxyType(
    {
        e.name: e
        for e in (
            CompatEndpoint("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
            # DashScope's international compatible mode (mainland China: dashscope.aliyuncs.com).
            CompatEndpoint("qwen", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"),
            CompatEndpoint("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
            CompatEndpoint("ollama", "http://localhost:11434/v1", None),
            CompatEndpoint("mimo", "https://api.xiaomimimo.com/v1", "MIMO_API_KEY"),
        )
    }
)

#: Thea's variable naming a transcript for ``provider: mock`` (``SR_DIST_REPLAY`` also works).
MOCK_REPLAY_ENV = "LLM_REPLAY"
