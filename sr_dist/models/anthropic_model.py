"""The ``anthropic`` provider: Claude through the official SDK (the ``anthropic`` extra).

The SDK is imported when the model is built, not when :mod:`sr_dist.models` is, so installs
without the extra work until someone asks for this provider, and then they get an error that
names the extra. Requests and replies are translated by :mod:`sr_dist.models.anthropic_format`.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from sr_dist.conversation import Context
from sr_dist.models.anthropic_format import from_anthropic_response, to_anthropic_messages, to_anthropic_tools
from sr_dist.models.base import ModelConfigError, ModelError, ModelErrorKind, ModelResponse
from sr_dist.models.options import (
    COMMON_KEYS,
    check_keys,
    opt_float,
    opt_int,
    opt_str,
    req_str,
    resolve_api_key,
    retry_policy,
    tool_mode,
)
from sr_dist.models.remote import RemoteModel, error_from_sdk, scrub
from sr_dist.models.retry import RetryPolicy

__all__ = ["AnthropicConfig", "AnthropicModel", "EXTRA_HINT", "build_messages_request", "import_anthropic"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
EXTRA_HINT = "pip install 'sr-dist[anthropic]'"


def import_anthropic() -> ModuleType:
    """The ``anthropic`` SDK, or a :class:`ModelConfigError` that says how to install it."""
    try:
        return importlib.import_module("anthropic")
    except ImportError as exc:
        raise ModelConfigError(
            f"the anthropic provider needs the optional 'anthropic' package, which is not installed: {EXTRA_HINT}"
        ) from exc


@dataclass(frozen=True, slots=True)
class AnthropicConfig:
    """Checked options of the ``anthropic`` provider (the API key is not one of them)."""

    model: str
    base_url: str = DEFAULT_BASE_URL
    tool_mode: str = "native"
    temperature: float | None = None
    max_tokens: int = 4096  # the Messages API requires a limit
    timeout_s: float = 120.0
    retry: RetryPolicy = RetryPolicy()

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any]) -> AnthropicConfig:
        check_keys(cfg, COMMON_KEYS, "anthropic")
        timeout = opt_float(cfg, "timeout_s", 120.0, positive=True)
        max_tokens = opt_int(cfg, "max_tokens", 4096, minimum=1)
        assert timeout is not None and max_tokens is not None
        return cls(
            model=req_str(cfg, "model"),
            base_url=(opt_str(cfg, "base_url") or DEFAULT_BASE_URL).rstrip("/"),
            tool_mode=tool_mode(cfg),
            temperature=opt_float(cfg, "temperature", minimum=0.0),
            max_tokens=max_tokens,
            timeout_s=timeout,
            retry=retry_policy(cfg),
        )


def build_messages_request(
    config: AnthropicConfig, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> dict[str, Any]:
    """The JSON body of one Messages API request (tools only in ``native`` mode)."""
    system, turns = to_anthropic_messages(messages)
    body: dict[str, Any] = {"model": config.model, "max_tokens": config.max_tokens, "messages": turns}
    if system:
        body["system"] = system
    if config.tool_mode == "native" and tools:
        body["tools"] = to_anthropic_tools(tools)
        body["tool_choice"] = {"type": "auto"}
    if config.temperature is not None:
        body["temperature"] = config.temperature
    return body


class AnthropicModel(RemoteModel):
    """Claude behind :class:`~sr_dist.models.base.ModelProtocol`."""

    def __init__(self, config: AnthropicConfig, api_key: str, *, sleep: Callable[[float], None] = time.sleep) -> None:
        sdk = import_anthropic()
        super().__init__(name=f"anthropic:{config.model}", tool_mode=config.tool_mode, policy=config.retry, sleep=sleep)
        self.config = config
        self._sdk = sdk
        self._secret = api_key
        self._client = sdk.Anthropic(api_key=api_key, base_url=config.base_url, timeout=config.timeout_s, max_retries=0)

    @classmethod
    def from_config(
        cls, cfg: Mapping[str, Any], *, getenv: Callable[[str], str | None] | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> AnthropicModel:
        config = AnthropicConfig.from_mapping(cfg)
        import_anthropic()  # the missing extra is the first thing to report
        key = resolve_api_key(cfg, getenv=getenv or os.environ.get, default_env="ANTHROPIC_API_KEY")
        return cls(config, key, sleep=sleep)

    def _prepare(self, context: Context, tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
        return build_messages_request(self.config, context.messages_for_model(), tools)

    def _send(self, request: dict[str, Any]) -> ModelResponse:
        kwargs = dict(request)
        extra: dict[str, Any] = {}
        if "temperature" in kwargs:  # not a typed parameter in every SDK release
            extra["temperature"] = kwargs.pop("temperature")
        try:
            reply = self._client.messages.with_raw_response.create(**kwargs, extra_body=extra or None)
            body = json.loads(reply.http_response.content)
        except self._sdk.AnthropicError as exc:
            raise error_from_sdk(
                exc, self._sdk, provider=self.name, secret=self._secret, base_url=self.config.base_url, timeout_s=self.config.timeout_s
            ) from None
        except json.JSONDecodeError as exc:
            raise ModelError(f"{self.name}: the reply is not JSON ({exc})", kind=ModelErrorKind.BAD_RESPONSE) from None
        except (TypeError, ValueError) as exc:
            raise ModelError(scrub(f"{self.name}: cannot send the request: {exc}", self._secret), kind=ModelErrorKind.BAD_REQUEST) from None
        return from_anthropic_response(body)

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._client.close()

    def __repr__(self) -> str:
        return f"AnthropicModel(name={self.name!r}, base_url={self.config.base_url!r}, tool_mode={self.tool_mode!r})"
