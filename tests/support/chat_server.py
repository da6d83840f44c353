"""Scripted LLM servers on 127.0.0.1 for tests: real HTTP, real SDK clients, no mocks.

A server plays a *script*, one step per model request, and keeps every request it received so
a test can assert what the client sent. Two dialects:

* :class:`ScriptedChatServer` speaks the OpenAI chat completions API
  (``POST /v1/chat/completions``, ``GET /v1/models``); pass ``server.base_url`` (ending in
  ``/v1``) to the ``openai`` SDK or to ``build_model({"provider": "openai", ...})``.
* :class:`ScriptedAnthropicServer` speaks the Anthropic Messages API (``POST /v1/messages``);
  its ``base_url`` is the bare origin, because the ``anthropic`` SDK appends ``/v1`` itself.

A script step is one of:

* a ``dict``: the JSON body of a ``200`` reply;
* a ``(status, body)`` or ``(status, body, headers)`` tuple: any status, e.g. a ``429`` with a
  ``Retry-After`` header or a ``500``;
* a :class:`Step` (what the two forms above become), which can also delay its reply
  (``delayed(seconds, body)``) to exercise client timeouts.

Example::

    script = [
        error(429, "slow down", headers={"Retry-After": "0"}),
        chat_completion(tool_calls=[tool_call("evaluate_formulas", {"formulas": ["x"]})]),
    ]
    with ScriptedChatServer(script) as server:
        model = build_model({"provider": "openai", "base_url": server.base_url, ...})
        model.call(context, tools)
        assert len(server.requests) == 2
        assert server.requests[-1].body["tool_choice"] == "auto"

When the script runs out the server answers ``500`` with an ``error.type`` of
``script_exhausted`` (and counts it in :attr:`ScriptedServer.overruns`), so a client that sends
more requests than a test planned fails loudly instead of hanging.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = [
    "RecordedRequest",
    "ScriptedAnthropicServer",
    "ScriptedChatServer",
    "ScriptedServer",
    "Step",
    "StepLike",
    "anthropic_message",
    "chat_completion",
    "delayed",
    "error",
    "tool_call",
    "tool_use",
]

_ids = itertools.count(1)


@dataclass(frozen=True)
class Step:
    """One scripted reply: HTTP status, JSON body, extra headers, and a delay before replying."""

    body: Any
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


StepLike = Step | Mapping[str, Any] | tuple


@dataclass(frozen=True)
class RecordedRequest:
    """What the client sent: method, path, headers (lower-cased names) and the parsed JSON body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


def as_step(item: StepLike) -> Step:
    """Normalize the shorthand script forms into a :class:`Step`."""
    if isinstance(item, Step):
        return item
    if isinstance(item, Mapping):
        return Step(body=dict(item))
    if isinstance(item, tuple) and len(item) in (2, 3):
        status, body, *rest = item
        return Step(body=body, status=int(status), headers=dict(rest[0]) if rest else {})
    raise TypeError(f"a script step is a dict, a (status, body[, headers]) tuple or a Step, not {item!r}")


# --------------------------------------------------------------------------- body builders


def tool_call(name: str, arguments: Mapping[str, Any] | str, *, id: str | None = None) -> dict[str, Any]:
    """An OpenAI-format tool call; a ``str`` ``arguments`` is sent verbatim (e.g. broken JSON)."""
    args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return {"id": id or f"call_{next(_ids)}", "type": "function", "function": {"name": name, "arguments": args}}


def chat_completion(
    text: str | None = None,
    *,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    finish_reason: str | None = None,
    usage: tuple[int, int] | None = (10, 5),
    model: str = "test-model",
) -> dict[str, Any]:
    """A chat completion body with one choice.

    ``finish_reason`` defaults to ``"tool_calls"`` when there are tool calls, else ``"stop"``;
    ``usage`` is ``(prompt_tokens, completion_tokens)`` or ``None`` to leave it out.
    """
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [dict(c) for c in tool_calls]
    body: dict[str, Any] = {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return body


def tool_use(name: str, input: Mapping[str, Any], *, id: str | None = None) -> dict[str, Any]:
    """An Anthropic ``tool_use`` content block."""
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids)}", "name": name, "input": dict(input)}


def anthropic_message(
    text: str | None = None,
    *,
    tool_uses: Sequence[Mapping[str, Any]] = (),
    stop_reason: str | None = None,
    usage: tuple[int, int] = (10, 5),
    model: str = "claude-test",
) -> dict[str, Any]:
    """An Anthropic Messages API response body (text block first, then ``tool_use`` blocks)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [dict(b) for b in tool_uses]
    return {
        "id": f"msg_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def error(status: int, message: str, *, type: str = "error", headers: Mapping[str, str] | None = None) -> Step:
    """An error reply in the ``{"error": {"message", "type"}}`` shape both dialects use."""
    return Step(body={"error": {"message": message, "type": type}}, status=status, headers=dict(headers or {}))


def delayed(seconds: float, step: StepLike) -> Step:
    """The same reply, sent only after ``seconds`` (to run past a client's timeout)."""
    base = as_step(step)
    return Step(body=base.body, status=base.status, headers=base.headers, delay_s=seconds)


# --------------------------------------------------------------------------- the server


class ScriptedServer:
    """A threaded HTTP server on 127.0.0.1 (ephemeral port) that answers from a script.

    Subclasses name the POST path that consumes script steps (``completion_path``) and the
    suffix of :attr:`base_url`. Use it as a context manager; requests are recorded in order.
    """

    completion_path: str = ""
    base_path: str = ""

    def __init__(self, script: Iterable[StepLike] = ()) -> None:
        self._steps: list[Step] = [as_step(s) for s in script]
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._served = 0
        self.overruns = 0
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle
    def start(self) -> Self:
        handler = _make_handler(self)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # a handler still sleeping on a delayed step must not block close
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what tests read
    @property
    def origin(self) -> str:
        assert self._httpd is not None, "server not started"
        port = self._httpd.server_address[1]
        return f"http://127.0.0.1:{port}"

    @property
    def base_url(self) -> str:
        """What to hand the client as its base URL."""
        return self.origin + self.base_path

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def completion_requests(self) -> list[RecordedRequest]:
        """Only the requests that consumed (or tried to consume) a script step."""
        return [r for r in self.requests if r.path == self.completion_path]

    @property
    def remaining(self) -> int:
        """Script steps not yet served."""
        with self._lock:
            return len(self._steps) - self._served

    def add(self, *steps: StepLike) -> None:
        """Append steps to the script (e.g. between two phases of a test)."""
        with self._lock:
            self._steps.extend(as_step(s) for s in steps)

    # -- called by the handler
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_step(self) -> Step:
        with self._lock:
            if self._served < len(self._steps):
                step = self._steps[self._served]
                self._served += 1
                return step
            self.overruns += 1
        return error(500, "scripted server: script exhausted", type="script_exhausted")

    def handle_get(self, path: str) -> Step:
        return error(404, f"no route for GET {path}", type="not_found")


class ScriptedChatServer(ScriptedServer):
    """OpenAI chat completions dialect; :attr:`base_url` ends in ``/v1``."""

    completion_path = "/v1/chat/completions"
    base_path = "/v1"

    def __init__(self, script: Iterable[StepLike] = (), *, models: Sequence[str] = ("test-model",)) -> None:
        super().__init__(script)
        self.models = tuple(models)

    def handle_get(self, path: str) -> Step:
        if path == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in self.models]
            return Step(body={"object": "list", "data": data})
        return super().handle_get(path)


class ScriptedAnthropicServer(ScriptedServer):
    """Anthropic Messages dialect; :attr:`base_url` is the bare origin (the SDK adds ``/v1``)."""

    completion_path = "/v1/messages"
    base_path = ""


def _make_handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def _path(self) -> str:
            return self.path.split("?", 1)[0]

        def do_GET(self) -> None:
            path = self._path()
            server._record(RecordedRequest("GET", path, _headers(self), None))
            self._reply(server.handle_get(path))

        def do_POST(self) -> None:
            path = self._path()
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = raw.decode("utf-8", "replace")
            server._record(RecordedRequest("POST", path, _headers(self), body))
            if path != server.completion_path:
                self._reply(error(404, f"no route for POST {path}", type="not_found"))
                return
            step = server._next_step()
            if step.delay_s and server._closing.wait(step.delay_s):
                return  # the server is closing; drop the reply
            self._reply(step)

        def _reply(self, step: Step) -> None:
            payload = step.body if isinstance(step.body, (bytes, str)) else json.dumps(step.body)
            data = payload.encode() if isinstance(payload, str) else payload
            try:
                self.send_response(step.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in step.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (e.g. its timeout fired); nothing to tell it

    return Handler


def _headers(handler: BaseHTTPRequestHandler) -> dict[str, str]:
    return {k.lower(): v for k, v in handler.headers.items()}
