"""The ``openai`` provider: the official SDK against any OpenAI-compatible chat endpoint.

OpenAI, DeepSeek, Qwen (DashScope compatible mode), OpenRouter, Ollama, vLLM and llama.cpp's
server all speak this API; the presets in ``conf/model/`` differ only in ``base_url``, ``model``,
``api_key_env`` and ``tool_mode``. The SDK's own retries are off: :mod:`sr_dist.models.retry`
owns retrying so every provider behaves the same. Responses are read from the raw JSON (not
the SDK's typed objects) so that lenient servers, which bend the schema, still parse.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sr_dist.conversation import Context
from sr_dist.models.base import (
    ModelConfigError,
    ModelError,
    ModelErrorKind,
    ModelResponse,
    Usage,
)
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
from sr_dist.models.providers import CompatEndpoint
from sr_dist.models.remote import RemoteModel, error_from_sdk, scrub, server_message
from sr_dist.models.retry import RetryPolicy, classify_status

__all__ = [
    "DEFAULT_BASE_URL",
    "OpenAICompatModel",
    "OpenAIConfig",
    "build_chat_request",
    "normalize_tool_call",
    "parse_chat_completion",
    "shared_http_client",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """Checked options of the ``openai`` provider (the API key is not one of them)."""

    model: str
    base_url: str = DEFAULT_BASE_URL
    tool_mode: str = "native"
    temperature: float | None = None
    max_tokens: int | None = None
    timeout_s: float = 120.0
    retry: RetryPolicy = RetryPolicy()
    #: The ``model.provider`` that asked for this endpoint (``openai``, ``deepseek``, ...).
    provider: str = "openai"

    @classmethod
    def from_mapping(
        cls, cfg: Mapping[str, Any], *, provider: str = "openai", default_base_url: str = DEFAULT_BASE_URL
    ) -> OpenAIConfig:
        check_keys(cfg, COMMON_KEYS, provider)
        timeout = opt_float(cfg, "timeout_s", 120.0, positive=True)
        assert timeout is not None
        return cls(
            model=req_str(cfg, "model"),
            base_url=(opt_str(cfg, "base_url") or default_base_url).rstrip("/"),
            tool_mode=tool_mode(cfg),
            temperature=opt_float(cfg, "temperature", minimum=0.0),
            max_tokens=opt_int(cfg, "max_tokens", minimum=1),
            timeout_s=timeout,
            retry=retry_policy(cfg),
            provider=provider,
        )


def build_chat_request(
    config: OpenAIConfig, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> dict[str, Any]:
    """The JSON body of one chat completions request.

    Tools (with ``tool_choice: "auto"``) go out only in ``native`` mode and only when there are
    some; in ``json``/``text`` mode the agent has described them in the system prompt.
    """
    body: dict[str, Any] = {"model": config.model, "messages": [dict(m) for m in messages]}
    if config.tool_mode == "native" and tools:
        body["tools"] = [dict(t) for t in tools]
        body["tool_choice"] = "auto"
    if config.temperature is not None:
        body["temperature"] = config.temperature
    if config.max_tokens is not None:
        body["max_tokens"] = config.max_tokens
    return body


def normalize_tool_call(call: Any, index: int) -> dict[str, Any]:
    """One provider tool call as ``{"id", "type": "function", "function": {"name", "arguments"}}``.

    ``arguments`` stays the string the model wrote, unvalidated; servers that send an object
    instead get it serialised, and a missing one reads as ``"{}"`` (a call without arguments).
    """
    call = call if isinstance(call, Mapping) else {}
    fn = call.get("function")
    fn = fn if isinstance(fn, Mapping) else {}
    name = fn.get("name")
    args = fn.get("arguments")
    if args is None:
        args = "{}"
    elif not isinstance(args, str):
        args = json.dumps(args)
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = f"call_{index}_{uuid.uuid4().hex[:12]}"
    return {"id": call_id, "type": "function", "function": {"name": name if isinstance(name, str) else "", "arguments": args}}


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts, as a few servers send
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def parse_chat_completion(body: Any) -> ModelResponse:
    """A chat completion JSON body as a :class:`ModelResponse`; unusable bodies raise :class:`ModelError`."""
    if not isinstance(body, Mapping):
        raise ModelError(f"openai: the reply is not a JSON object: {str(body)[:200]!r}", kind=ModelErrorKind.BAD_RESPONSE)
    choices = body.get("choices")
    if not choices and body.get("error") is not None:
        # Some gateways (OpenRouter) report upstream failures as an error object in a 200 reply.
        err = body["error"]
        code = err.get("code") if isinstance(err, Mapping) else None
        status = code if isinstance(code, int) and 400 <= code < 600 else None
        kind, retryable = classify_status(status) if status else (ModelErrorKind.SERVER_ERROR, True)
        raise ModelError(f"openai: error in reply: {server_message(body) or err}", kind=kind, status=status, retryable=retryable)
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ModelError("openai: the reply has no choices", kind=ModelErrorKind.BAD_RESPONSE)
    choice = choices[0]
    message = choice.get("message")
    message = message if isinstance(message, Mapping) else {}
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raw_calls = [raw_calls]
    calls = [normalize_tool_call(c, i) for i, c in enumerate(raw_calls)]
    finish = choice.get("finish_reason")
    legacy = message.get("function_call")
    if not calls and isinstance(legacy, Mapping):  # the pre-tools function-calling format
        calls = [normalize_tool_call({"function": legacy}, 0)]
        finish = "tool_calls" if finish == "function_call" else finish
    usage = body.get("usage")
    return ModelResponse(
        text=_content_text(message.get("content")),
        tool_calls=tuple(calls),
        usage=Usage.from_dict(usage if isinstance(usage, Mapping) else None),
        finish_reason=finish if isinstance(finish, str) else None,
        raw=dict(body),
    )


_HTTP_LOCK = threading.Lock()
_HTTP_CLIENT: Any = None


def shared_http_client() -> Any:
    """The process's one HTTP client (connection pool) for every OpenAI-compatible model.

    A client of its own costs each model about 0.8 MB and 50 ms (an SSL context with the CA
    bundle loaded); an agent process hosting hundreds of agents (``search.agents_per_actor``)
    would spend hundreds of MB and tens of seconds on copies of the same thing. The pool is
    thread-safe and holds up to 1,000 connections (the SDK's default limits); it lives as long
    as the process.
    """
    global _HTTP_CLIENT
    with _HTTP_LOCK:
        if _HTTP_CLIENT is None or _HTTP_CLIENT.is_closed:
            import openai

            _HTTP_CLIENT = openai.DefaultHttpxClient()
        return _HTTP_CLIENT


class OpenAICompatModel(RemoteModel):
    """An OpenAI-compatible chat endpoint behind :class:`~sr_dist.models.base.ModelProtocol`."""

    def __init__(self, config: OpenAIConfig, api_key: str, *, sleep: Callable[[float], None] = time.sleep) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a core dependency
            raise ModelConfigError("the openai provider needs the 'openai' package (pip install sr-dist)") from exc
        super().__init__(name=f"{config.provider}:{config.model}", tool_mode=config.tool_mode, policy=config.retry, sleep=sleep)
        self.config = config
        self._sdk = openai
        self._secret = api_key
        self._client = openai.OpenAI(
            api_key=api_key, base_url=config.base_url, timeout=config.timeout_s, max_retries=0,
            http_client=shared_http_client(),
        )

    @classmethod
    def from_config(
        cls,
        cfg: Mapping[str, Any],
        *,
        getenv: Callable[[str], str | None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        endpoint: CompatEndpoint | None = None,
    ) -> OpenAICompatModel:
        """Build from a ``model`` config; ``endpoint`` supplies a named provider's defaults."""
        if endpoint is None:
            config = OpenAIConfig.from_mapping(cfg)
            key = resolve_api_key(cfg, getenv=getenv or os.environ.get, default_env="OPENAI_API_KEY")
        else:
            config = OpenAIConfig.from_mapping(cfg, provider=endpoint.name, default_base_url=endpoint.base_url)
            key = resolve_api_key(cfg, getenv=getenv or os.environ.get, default_env=endpoint.api_key_env, provider=endpoint.name)
        return cls(config, key, sleep=sleep)

    def _prepare(self, context: Context, tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
        return build_chat_request(self.config, context.messages_for_model(), tools)

    def _send(self, request: dict[str, Any]) -> ModelResponse:
        try:
            reply = self._client.chat.completions.with_raw_response.create(**request)
            body = json.loads(reply.http_response.content)
        except self._sdk.OpenAIError as exc:
            raise self._error(exc) from None
        except json.JSONDecodeError as exc:
            raise ModelError(f"openai: the reply is not JSON ({exc})", kind=ModelErrorKind.BAD_RESPONSE) from None
        except (TypeError, ValueError) as exc:  # e.g. a message that cannot be serialised
            raise ModelError(scrub(f"openai: cannot send the request: {exc}", self._secret), kind=ModelErrorKind.BAD_REQUEST) from None
        return parse_chat_completion(body)

    def _error(self, exc: BaseException) -> ModelError:
        return error_from_sdk(
            exc, self._sdk, provider=self.name, secret=self._secret, base_url=self.config.base_url, timeout_s=self.config.timeout_s
        )

    def close(self) -> None:
        """Nothing to release: the connection pool is the process's (``shared_http_client``)."""

    def __repr__(self) -> str:
        return f"OpenAICompatModel(name={self.name!r}, base_url={self.config.base_url!r}, tool_mode={self.tool_mode!r})"
