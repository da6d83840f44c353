"""The thin stateful shell shared by the network adapters, and SDK error translation.

An adapter supplies two things: how to turn a context into one request (pure) and how to send
one request and read one response (one attempt, raising :class:`ModelError`). This shell adds
the retry loop, the provider's circuit (:mod:`sr_dist.models.circuit`) and the async entry
point. The real work is synchronous; ``acall`` runs it on a
worker thread, so it never blocks, and never deadlocks, a running event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from sr_dist.conversation import Context
from sr_dist.models.base import ModelError, ModelErrorKind, ModelResponse
from sr_dist.models.circuit import ProviderCircuit, call_through_circuit
from sr_dist.models.retry import RetryPolicy, call_with_retries, classify_status, parse_retry_after

__all__ = ["RemoteModel", "error_from_sdk", "scrub", "server_message"]

_MAX_MESSAGE = 500


def scrub(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of the secret masked (servers sometimes echo a bad key)."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text


def server_message(body: object) -> str | None:
    """The human-readable part of an error body (``{"error": {"message": ...}}`` and variants)."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            msg = inner.get("message")
            if isinstance(msg, str) and msg.strip():
                return msg.strip()
        elif isinstance(inner, str) and inner.strip():
            return inner.strip()
        msg = body.get("message")
        if isinstance(msg, str) and msg.strip():
            return msg.strip()
    if isinstance(body, str) and body.strip():
        return body.strip()
    return None


def error_from_sdk(
    exc: BaseException, sdk: ModuleType, *, provider: str, secret: str | None, base_url: str, timeout_s: float
) -> ModelError:
    """Translate an ``openai``/``anthropic`` SDK exception (the two share their class names)."""
    status: int | None = None
    retry_after: float | None = None
    if isinstance(exc, sdk.APITimeoutError):
        kind, retryable = ModelErrorKind.TIMEOUT, True
        detail = f"no reply from {base_url} within {timeout_s:g} s"
    elif isinstance(exc, sdk.APIConnectionError):
        kind, retryable = ModelErrorKind.CONNECTION, True
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        detail = f"could not reach {base_url}{cause}"
    elif isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        kind, retryable = classify_status(status)
        retry_after = parse_retry_after(dict(exc.response.headers))
        detail = f"HTTP {status}: {server_message(exc.body) or exc.message}"
    else:
        kind, retryable = ModelErrorKind.BAD_RESPONSE, False
        detail = f"{type(exc).__name__}: {exc}"
    text = scrub(f"{provider}: {detail}", secret)
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 3] + "..."
    return ModelError(text, kind=kind, status=status, retryable=retryable, retry_after_s=retry_after)


class RemoteModel:
    """Retrying shell around one-attempt ``_prepare``/``_send`` implemented by a subclass."""

    name: str
    tool_mode: str

    def __init__(
        self,
        *,
        name: str,
        tool_mode: str,
        policy: RetryPolicy,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = name
        self.tool_mode = tool_mode
        self.retry_policy = policy
        self._sleep = sleep
        #: The provider's circuit (``build_model`` sets it; ``None``: retries only).
        self.circuit: ProviderCircuit | None = None

    def _prepare(self, context: Context, tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
        raise NotImplementedError

    def _send(self, request: dict[str, Any]) -> ModelResponse:
        raise NotImplementedError

    def call(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse:
        try:
            request = self._prepare(context, tools)
        except ModelError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError) as exc:  # malformed messages or tools
            raise ModelError(f"{self.name}: cannot build the request: {exc}"[:500], kind=ModelErrorKind.BAD_REQUEST) from None
        def one_call() -> ModelResponse:
            return call_with_retries(lambda: self._send(request), self.retry_policy, sleep=self._sleep)

        return call_through_circuit(self.circuit, one_call, sleep=self._sleep)

    async def acall(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse:
        return await asyncio.to_thread(self.call, context, tools)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, tool_mode={self.tool_mode!r})"
