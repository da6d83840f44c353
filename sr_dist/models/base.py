"""The values and the protocol every model adapter shares.

Adapters translate one request and one response; the agent owns the conversation. What crosses
that boundary is frozen (:class:`ModelResponse`, :class:`Usage`) so a response can be logged,
recorded and replayed without anyone changing it on the way, and every failure is one
exception type (:class:`ModelError`) the agent can catch and reason about.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from sr_dist.conversation import Context

__all__ = [
    "ERROR_KINDS",
    "TOOL_MODES",
    "ModelConfigError",
    "ModelError",
    "ModelErrorKind",
    "ModelProtocol",
    "ModelResponse",
    "Usage",
    "error_kind",
]

#: How an adapter exchanges tool calls with its server: ``native`` sends the tools and reads
#: structured calls back; ``json`` and ``text`` send no tools (the agent describes them in the
#: system prompt and the matching parser reads calls out of the reply text).
TOOL_MODES = ("native", "json", "text")

class ModelErrorKind(StrEnum):
    """The closed set of :attr:`ModelError.kind` values.

    A ``StrEnum`` so that a kind compares equal to, formats as and serialises as its plain
    string (``"timeout"``), which is what transcripts, stop reasons and results store, while
    a typo in code or an unknown kind in a transcript is caught instead of passing silently.
    """

    RATE_LIMITED = "rate_limited"  # 429
    SERVER_ERROR = "server_error"  # 5xx, or an error object in a 200 reply
    TIMEOUT = "timeout"  # the client's timeout fired, or a 408
    TRANSIENT = "transient"  # 409 / 425: the server asks to try again
    CONNECTION = "connection"  # could not connect / connection dropped
    AUTH = "auth"  # 401 / 403
    NOT_FOUND = "not_found"  # 404: usually a wrong model name or base_url
    BAD_REQUEST = "bad_request"  # other 4xx: the request itself is wrong
    BAD_RESPONSE = "bad_response"  # a reply that is not a usable completion
    CONFIG = "config"  # the adapter is misconfigured for this call
    REPLAY_EXHAUSTED = "replay_exhausted"  # a replay transcript has no more responses
    REPLAY_MISMATCH = "replay_mismatch"  # a strict replay saw a request that differs from the recording
    CIRCUIT_OPEN = "circuit_open"  # the provider's circuit is open after repeated failed calls (circuit.py)


#: The values :attr:`ModelError.kind` takes, as plain strings, in declaration order.
ERROR_KINDS: tuple[str, ...] = tuple(kind.value for kind in ModelErrorKind)


def error_kind(kind: str | ModelErrorKind) -> ModelErrorKind:
    """``kind`` as a :class:`ModelErrorKind`; ``ValueError`` naming the known kinds otherwise."""
    try:
        return ModelErrorKind(kind)
    except ValueError:
        raise ValueError(f"unknown model error kind {kind!r}; expected one of {', '.join(ERROR_KINDS)}") from None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one call (or, summed with ``+``, of many)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )

    @classmethod
    def of(cls, prompt_tokens: int | None, completion_tokens: int | None, total_tokens: int | None = None) -> Usage:
        """Build from possibly-missing counts; a missing total is the sum of the parts."""
        p, c = int(prompt_tokens or 0), int(completion_tokens or 0)
        return cls(p, c, int(total_tokens) if total_tokens is not None else p + c)

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Usage:
        data = data or {}
        return cls.of(data.get("prompt_tokens"), data.get("completion_tokens"), data.get("total_tokens"))


@dataclass(frozen=True)
class ModelResponse:
    """One model turn.

    ``tool_calls`` are OpenAI chat-format dicts
    ``{"id", "type": "function", "function": {"name", "arguments"}}`` whatever the provider;
    ``arguments`` is the raw JSON *string* the model wrote, not validated here (the ``openai``
    parser reports unreadable arguments back to the model). ``raw`` is the provider's JSON reply,
    for debugging only: it takes no part in equality, so a replayed response equals the recorded
    one.
    """

    text: str = ""
    tool_calls: tuple[dict[str, Any], ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    raw: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Own copies, so neither ``raw`` nor a caller's list can change the calls afterwards.
        object.__setattr__(self, "tool_calls", tuple(copy.deepcopy(dict(c)) for c in self.tool_calls))

    @property
    def truncated(self) -> bool:
        """The reply stopped at the token limit: its text or calls may be cut off."""
        return self.finish_reason == "length"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a transcript stores (``raw`` left out)."""
        return {
            "text": self.text,
            "tool_calls": [copy.deepcopy(c) for c in self.tool_calls],
            "usage": self.usage.to_dict(),
            "finish_reason": self.finish_reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelResponse:
        calls = data.get("tool_calls") or ()
        if not isinstance(calls, Sequence) or not all(isinstance(c, Mapping) for c in calls):
            raise ValueError("tool_calls must be a list of objects")
        text = data.get("text")
        return cls(
            text=text if isinstance(text, str) else "",
            tool_calls=tuple(dict(c) for c in calls),
            usage=Usage.from_dict(data.get("usage")),
            finish_reason=data.get("finish_reason"),
        )


class ModelError(Exception):
    """A model call failed for good (retries, where allowed, are already spent).

    ``kind`` is a :class:`ModelErrorKind` (a plain string such as ``"timeout"`` is accepted and
    converted; an unknown one is a ``ValueError``); ``status`` the HTTP status if there was one;
    ``retryable`` whether the failure was of a transient sort; ``attempts`` how many requests
    were made; ``retry_after_s`` the server's ``Retry-After`` hint, if any. The message never
    contains credentials.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str | ModelErrorKind,
        status: int | None = None,
        retryable: bool = False,
        attempts: int = 1,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind: ModelErrorKind = error_kind(kind)
        self.status = status
        self.retryable = retryable
        self.attempts = attempts
        self.retry_after_s = retry_after_s

    def with_attempts(self, attempts: int) -> ModelError:
        """The same error, reporting how many attempts were made in total."""
        return ModelError(
            self.message,
            kind=self.kind,
            status=self.status,
            retryable=self.retryable,
            attempts=attempts,
            retry_after_s=self.retry_after_s,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "kind": self.kind.value,
            "status": self.status,
            "retryable": self.retryable,
            "attempts": self.attempts,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelError:
        """The inverse of :meth:`to_dict`; an unknown ``kind`` is a ``ValueError``."""
        return cls(
            str(data.get("message", "")),
            kind=str(data.get("kind", "server_error")),
            status=data.get("status"),
            retryable=bool(data.get("retryable", False)),
            attempts=int(data.get("attempts", 1)),
        )

    def __str__(self) -> str:
        status = f", HTTP {self.status}" if self.status is not None else ""
        tries = f", after {self.attempts} attempts" if self.attempts > 1 else ""
        return f"{self.message} [{self.kind.value}{status}{tries}]"

    def __repr__(self) -> str:
        return f"ModelError({self.message!r}, kind={self.kind.value!r}, status={self.status!r}, attempts={self.attempts})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields survive pickling (Ray ships exceptions between processes).
        return (_rebuild_model_error, (self.message, self.kind.value, self.status, self.retryable, self.attempts, self.retry_after_s))


def _rebuild_model_error(
    message: str, kind: str | ModelErrorKind, status: int | None, retryable: bool, attempts: int, retry_after_s: float | None
) -> ModelError:
    return ModelError(message, kind=kind, status=status, retryable=retryable, attempts=attempts, retry_after_s=retry_after_s)


class ModelConfigError(ValueError):
    """The model configuration cannot work; raised by :func:`build_model`, before any call."""


@runtime_checkable
class ModelProtocol(Protocol):
    """What the agent needs from a model.

    ``name`` identifies the model in results (``"openai:gpt-4o-mini"``); ``tool_mode`` tells the
    agent which parser reads the replies. ``tools`` are OpenAI function-tool dicts
    (``catalog.openai_tools()``); adapters in ``json``/``text`` mode do not send them. Both
    calls raise :class:`ModelError` on failure and nothing else.

    Optional: ``prepare(context)``, the part of the first call's work that needs only the
    task (``context.info``), which the agent loop runs before its clock starts
    (``Agent.aprepare``); the offline ``evolve`` builds its seed library there.
    """

    name: str
    tool_mode: str

    def call(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse: ...

    async def acall(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse: ...
