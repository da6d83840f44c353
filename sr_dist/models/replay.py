"""Recording a run's model responses, and replaying them exactly.

A transcript is JSONL, one line per model call, in call order::

    {"model": "openai:gpt-4o-mini", "tool_mode": "native",
     "request": {"messages": 3, "sha256": "…", "tools": ["evaluate_formulas"]},
     "response": {"text": "…", "tool_calls": [...], "usage": {...}, "finish_reason": "tool_calls"}}

A call that failed is recorded with ``"error": {kind, message, status, retryable, attempts}``
in place of ``"response"``, and replays as the same :class:`ModelError`, so an agent's recovery
path replays too. The request is stored only as a digest (message count, SHA-256 of the
canonical JSON of the messages, tool names): never headers, keys or the prompt text itself.
With ``strict`` the replay checks each request's digest against the recording and stops at the
first divergence.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sr_dist.conversation import Context
from sr_dist.models.base import ModelConfigError, ModelError, ModelErrorKind, ModelProtocol, ModelResponse
from sr_dist.models.options import COMMON_KEYS, check_keys, opt_bool, opt_str, tool_mode

__all__ = [
    "REPLAY_ENV",
    "RecordingModel",
    "ReplayModel",
    "TranscriptEntry",
    "load_transcript",
    "request_digest",
]

#: Environment variable naming the transcript when ``replay_path`` is not configured.
REPLAY_ENV = "SR_DIST_REPLAY"

_REPLAY_KEYS = COMMON_KEYS | {"replay_path", "strict"}


def _tool_name(tool: Mapping[str, Any]) -> str:
    fn = tool.get("function")
    if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
        return fn["name"]
    return str(tool.get("name", ""))


def request_digest(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """What identifies a request without storing it: count, content hash, tool names."""
    canonical = json.dumps(list(messages), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return {
        "messages": len(messages),
        "sha256": hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
        "tools": [_tool_name(t) for t in tools or ()],
    }


@dataclass(frozen=True)
class TranscriptEntry:
    """One recorded call: what was asked (digest) and what came back (response or error)."""

    request: Mapping[str, Any] | None
    response: ModelResponse | None = None
    error: ModelError | None = None
    model: str | None = None
    tool_mode: str | None = None

    def to_json(self) -> str:
        line: dict[str, Any] = {"model": self.model, "tool_mode": self.tool_mode, "request": self.request}
        if self.error is not None:
            line["error"] = self.error.to_dict()
        else:
            assert self.response is not None
            line["response"] = self.response.to_dict()
        return json.dumps(line, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, where: str = "transcript") -> TranscriptEntry:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ModelConfigError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(data, dict):
            raise ModelConfigError(f"{where}: expected a JSON object, got {type(data).__name__}")
        request = data.get("request")
        if request is not None and not isinstance(request, dict):
            raise ModelConfigError(f"{where}: 'request' must be an object")
        if isinstance(data.get("error"), dict):
            try:
                error = ModelError.from_dict(data["error"])
            except ValueError as exc:  # an unknown error kind: the transcript is not one we wrote
                raise ModelConfigError(f"{where}: bad error: {exc}") from None
            return cls(request, error=error, model=data.get("model"), tool_mode=data.get("tool_mode"))
        if not isinstance(data.get("response"), dict):
            raise ModelConfigError(f"{where}: each line needs a 'response' (or an 'error') object")
        try:
            response = ModelResponse.from_dict(data["response"])
        except ValueError as exc:
            raise ModelConfigError(f"{where}: bad response: {exc}") from None
        return cls(request, response=response, model=data.get("model"), tool_mode=data.get("tool_mode"))


def load_transcript(path: str | os.PathLike[str]) -> tuple[TranscriptEntry, ...]:
    """Every entry of a JSONL transcript; blank lines are skipped, a bad line names its number."""
    p = Path(path).expanduser()
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ModelConfigError(f"cannot read the replay transcript {str(p)!r}: {exc.strerror or exc}") from None
    return tuple(TranscriptEntry.from_json(line, f"{p}:{n}") for n, line in enumerate(lines, 1) if line.strip())


class ReplayModel:
    """Answers each call with the next recorded response, in order."""

    def __init__(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        name: str = "replay",
        tool_mode: str = "native",
        strict: bool = False,
        source: str = "<memory>",
    ) -> None:
        self.name = name
        self.tool_mode = tool_mode
        self.strict = strict
        self.source = source
        self._entries = tuple(entries)
        self._next = 0
        self._lock = threading.Lock()

    @classmethod
    def from_config(
        cls,
        cfg: Mapping[str, Any],
        *,
        getenv: Callable[[str], str | None] = os.environ.get,
        provider: str = "replay",
        path_envs: Sequence[str] = (REPLAY_ENV,),
    ) -> ReplayModel:
        """Build from a ``model`` config: the transcript is ``model.replay_path``, else the first
        of ``path_envs`` that is set (``mock`` reads Thea's ``LLM_REPLAY`` before ``SR_DIST_REPLAY``)."""
        check_keys(cfg, _REPLAY_KEYS, provider)
        strict = opt_bool(cfg, "strict", False)
        tool_mode(cfg)  # options are checked before the transcript is read
        path = opt_str(cfg, "replay_path") or next((v for v in (getenv(e) for e in path_envs) if v), None)
        if not path:
            envs = " or ".join(path_envs)
            raise ModelConfigError(
                f"the {provider} provider needs a transcript: set model.replay_path or the {envs} environment variable"
            )
        entries = load_transcript(path)
        recorded = next((e for e in entries if e.model or e.tool_mode), None)
        label = opt_str(cfg, "model") or (recorded.model if recorded else None) or Path(path).stem
        default_mode = recorded.tool_mode if recorded and recorded.tool_mode in ("native", "json", "text") else "native"
        return cls(
            entries,
            name=f"replay:{label}",
            tool_mode=tool_mode(cfg, default=default_mode),
            strict=strict,
            source=str(path),
        )

    @property
    def remaining(self) -> int:
        """Recorded responses not yet replayed."""
        with self._lock:
            return len(self._entries) - self._next

    def call(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse:
        with self._lock:
            index = self._next
            if index >= len(self._entries):
                raise ModelError(
                    f"{self.name}: the transcript {self.source} has no response left ({len(self._entries)} recorded)",
                    kind=ModelErrorKind.REPLAY_EXHAUSTED,
                )
            entry = self._entries[index]
            if self.strict and entry.request is not None:
                self._check(index, entry.request, request_digest(context.messages_for_model(), tools))
            self._next += 1
        if entry.error is not None:
            raise ModelError.from_dict(entry.error.to_dict())
        assert entry.response is not None
        return entry.response

    async def acall(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse:
        return self.call(context, tools)

    def _check(self, index: int, recorded: Mapping[str, Any], actual: Mapping[str, Any]) -> None:
        diffs = [
            f"{key}: recorded {_short(recorded.get(key))}, now {_short(actual.get(key))}"
            for key in ("messages", "sha256", "tools")
            if key in recorded and recorded.get(key) != actual.get(key)
        ]
        if diffs:
            raise ModelError(
                f"{self.name}: request {index + 1} differs from the recording in {self.source} ({'; '.join(diffs)})",
                kind=ModelErrorKind.REPLAY_MISMATCH,
            )

    def __repr__(self) -> str:
        return f"ReplayModel(name={self.name!r}, source={self.source!r}, remaining={self.remaining})"


def _short(value: Any) -> str:
    return repr(value[:12] + "…") if isinstance(value, str) and len(value) > 12 else repr(value)


class RecordingModel:
    """Wraps any model and appends each call (response or error) to a JSONL transcript.

    The file is created, or emptied, when the recorder is built: one transcript, one run.
    Each line is appended and closed as it is written, so a crashed run still leaves a usable
    prefix and the recorder holds no open file between calls.
    """

    def __init__(self, inner: ModelProtocol, path: str | os.PathLike[str]) -> None:
        self.inner = inner
        self.name = inner.name
        self.tool_mode = inner.tool_mode
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("", encoding="utf-8")
        except OSError as exc:
            raise ModelConfigError(f"cannot write the transcript model.record_path={str(self.path)!r}: {exc.strerror or exc}") from None
        self._lock = threading.Lock()

    def _write(self, entry: TranscriptEntry) -> None:
        line = entry.to_json()
        try:
            with self._lock, self.path.open("a", encoding="utf-8") as out:
                out.write(line + "\n")
        except OSError as exc:  # a run that cannot be recorded should not pretend it was
            raise ModelError(f"cannot append to the transcript {self.path}: {exc.strerror or exc}", kind=ModelErrorKind.CONFIG) from None

    def _entry(self, request: dict[str, Any], response: ModelResponse | None = None, error: ModelError | None = None) -> TranscriptEntry:
        return TranscriptEntry(request, response=response, error=error, model=self.name, tool_mode=self.tool_mode)

    def call(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse:
        request = request_digest(context.messages_for_model(), tools)
        try:
            response = self.inner.call(context, tools)
        except ModelError as err:
            self._write(self._entry(request, error=err))
            raise
        self._write(self._entry(request, response=response))
        return response

    async def acall(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse:
        request = request_digest(context.messages_for_model(), tools)
        try:
            response = await self.inner.acall(context, tools)
        except ModelError as err:
            self._write(self._entry(request, error=err))
            raise
        self._write(self._entry(request, response=response))
        return response

    def close(self) -> None:
        """Close the wrapped model, if it can be closed (the transcript is never left open)."""
        closer = getattr(self.inner, "close", None)
        if callable(closer):
            closer()

    def __repr__(self) -> str:
        return f"RecordingModel({self.inner!r}, path={str(self.path)!r})"
