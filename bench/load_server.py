"""A simulated LLM for load tests: a formula pool, a proposal policy, and a loopback
OpenAI-compatible chat server that answers every agent with ``evaluate_formulas`` tool calls.

``bench/load.py`` imports this file as a plain module (``from load_server import ...``, with
``bench/`` on ``sys.path``, as ``peers.py`` imports ``peers_lib``); tests import it as
``bench.load_server``. It imports nothing from ``bench/`` or ``tests/``.

How the server knows which agent is asking: sr-dist sends nothing per agent in an OpenAI
request (the task prompt is the same for every agent; ``context.info`` with the seed never
reaches a provider). So the server names agents itself. A request without an earlier
assistant turn starts a new agent (numbered 0, 1, ... in arrival order); every reply carries
the agent and turn in its tool-call id (``call_sim_<agent>_<turn>``), and the client sends
that id back in the next request's messages. The *last* marked assistant message wins, so
compaction (which drops old turns but never the last one) does not lose the agent. Turn = the
marked turn + 1. Only native tool calling (``tool_mode: native``, the default) is supported.
A first request the client retries (it timed out) starts one more agent, so give the pool
headroom when retries are likely; ``stats()["agents"]`` above the agents started shows it.

How an agent ends: run the search with ``search.max_turns = Proposals.turns``, so the loop
stops before asking again (stop reason ``max_turns``, no extra request, no extra row). A
request past ``turns`` (the search allows more turns) gets a plain assistant text (still
marked, so the agent stays known) and is counted in ``overruns``; the loop ends the agent
with ``no_tool_calls`` after ``max_prose_turns`` such replies. ``submit_formula`` was not
chosen: it fits one more formula per agent, and if that formula does not fit the agent
carries on.

The server runs in a thread of the caller's process (``with LoopbackChatServer(...)``) or in
its own process (``python bench/load_server.py --variables x1,x2 --agents 1000 ...``, which
prints its ``base_url`` as JSON); ``GET /v1/stats`` returns the counters either way.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import resource
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from sr_dist.formula import free_constant_prefix

__all__ = [
    "Latency",
    "LoopbackChatServer",
    "Proposals",
    "formula_pool",
    "parse_call_id",
    "raise_open_files_limit",
]

#: Most formulas a pool can hold: the tag (see :func:`formula_pool`) has 7 decimal digits.
MAX_POOL = 9_999_999
#: The tool-call id the server gives agent ``a``'s turn ``t`` (read back from the messages).
CALL_ID = "call_sim_{agent}_{turn}"
_CALL_ID_RE = re.compile(r"call_sim_(\d+)_(\d+)\Z")
_TEXT_MARK = "[sim agent={agent} turn={turn}]"
_TEXT_MARK_RE = re.compile(r"\[sim agent=(\d+) turn=(\d+)\]")
#: Structural literals the generator may use (exponents); none lies in (1, 2), the tag's range.
_POWERS = ("2", "3")
_UNARY = ("sin", "cos", "exp", "log", "sqrt")


# --------------------------------------------------------------------------- the formula pool


class _Names:
    """Hands out the constant names of one formula, at most ``limit`` of them."""

    def __init__(self, prefix: str, limit: int) -> None:
        self.prefix, self.limit, self.used = prefix, limit, 0

    def take(self) -> str | None:
        if self.used >= self.limit:
            return None
        self.used += 1
        return f"{self.prefix}{self.used - 1}"


def _inner(rng: random.Random, v: str, names: _Names) -> str:
    """A unary op's argument: ``v``, ``c*v`` or ``c*v + c'``."""
    shape = rng.random()
    if shape < 0.35:
        return v
    scale = names.take()
    if scale is None:
        return v
    if shape < 0.75:
        return f"{scale}*{v}"
    shift = names.take()
    return f"{scale}*{v} + {shift}" if shift else f"{scale}*{v}"


def _factor(rng: random.Random, variables: Sequence[str], names: _Names) -> str:
    """One factor of a term: a unary op of an inner argument, a power, or a bare variable."""
    v = rng.choice(variables)
    kind = rng.random()
    if kind < 0.55:
        op = rng.choice(_UNARY)
        if op == "log" and rng.random() < 0.7:  # log(c + v**2): the form defined everywhere
            shift = names.take()
            if shift is not None:
                return f"log({shift} + {v}**2)"
        return f"{op}({_inner(rng, v, names)})"
    if kind < 0.8:
        if rng.random() < 0.25:
            exponent = names.take()
            if exponent is not None:
                return f"{v}**{exponent}"
        return f"{v}**{rng.choice(_POWERS)}"
    return v


def _term(rng: random.Random, variables: Sequence[str], names: _Names) -> str:
    coefficient = names.take()
    factors = [_factor(rng, variables, names) for _ in range(1 if rng.random() < 0.65 else 2)]
    return "*".join([coefficient, *factors] if coefficient else factors)


def _structure(rng: random.Random, variables: Sequence[str], names: _Names) -> str:
    """A sum of 1-3 terms (maybe plus a constant), or a ratio of a term and ``c + factor``."""
    if rng.random() < 0.2:
        top = _term(rng, variables, names)
        offset = names.take()
        bottom = _factor(rng, variables, names)
        return f"({top})/({offset} + {bottom})" if offset else f"({top})/(1 + {bottom})"
    terms = [_term(rng, variables, names) for _ in range(rng.choice((1, 1, 2, 2, 2, 3)))]
    if rng.random() < 0.5:
        offset = names.take()
        if offset is not None:
            terms.append(offset)
    return " + ".join(terms)


def formula_pool(variables: Sequence[str], size: int, seed: int) -> tuple[str, ...]:
    """``size`` distinct formulas over ``variables`` with 1-5 free constants, from ``seed``.

    Structures are random (sums and products of sin/cos/exp/log/sqrt, powers, ratios), so two
    formulas may share one; each is therefore multiplied by its own tag ``1.kkkkkkk``
    (``k = index + 1``), a literal in (1, 2) that canonicalisation keeps (it folds literals
    only with literals, and the structures have none in (1, 2)). Distinct tags give
    distinct canonical forms without parsing 200,000 formulas (about 0.4 ms each); the tag
    changes nothing a fit can see (a constant absorbs it). Constants are named with
    :func:`sr_dist.formula.free_constant_prefix`, so none reads as a variable.
    """
    names = tuple(str(v) for v in variables)
    if not names:
        raise ValueError("formula_pool needs at least one variable name, e.g. the dataset's feature_names")
    if not 0 <= size <= MAX_POOL:
        raise ValueError(f"formula_pool size must be between 0 and {MAX_POOL:,}, got {size}")
    prefix = free_constant_prefix(names)
    rng = random.Random(f"formula_pool:{seed}")
    pool: list[str] = []
    for index in range(size):
        body = _structure(rng, names, _Names(prefix, rng.randint(1, 5)))
        pool.append(f"1.{index + 1:07d}*({body})")
    return tuple(pool)


# --------------------------------------------------------------------------- what agents propose


@dataclass(frozen=True)
class Proposals:
    """Which pool formulas agent ``a`` proposes at turn ``t`` (1-based), deterministically.

    Each slot is, with probability ``duplicate_share``, one of the first ``popular`` pool
    formulas (shared by all agents, as LLMs repeat the textbook forms), otherwise the formula
    at pool index ``popular + ((a * turns) + t - 1) * formulas_per_call + slot``: unique to
    (agent, turn, slot), so unique draws never collide across the run. A call never holds the
    same popular formula twice. ``duplicate_share=0`` makes every formula of the run distinct.
    """

    formulas_per_call: int
    turns: int
    duplicate_share: float
    seed: int = 0
    popular: int = 64

    def __post_init__(self) -> None:
        if self.formulas_per_call < 1 or self.turns < 1:
            raise ValueError(f"Proposals needs formulas_per_call >= 1 and turns >= 1, got {self.formulas_per_call} and {self.turns}")
        if not 0.0 <= self.duplicate_share <= 1.0:
            raise ValueError(f"Proposals.duplicate_share is a probability in [0, 1], got {self.duplicate_share}")
        if self.duplicate_share > 0 and self.popular < self.formulas_per_call:
            raise ValueError(
                f"Proposals.popular ({self.popular}) must be at least formulas_per_call ({self.formulas_per_call}) "
                "so a call can hold distinct popular formulas; raise popular"
            )

    def pool_size(self, agents: int) -> int:
        """The pool size ``agents`` agents need (pass it to :func:`formula_pool`)."""
        return self.popular + agents * self.turns * self.formulas_per_call

    def indices(self, agent: int, turn: int) -> tuple[int, ...]:
        """Pool indices of agent ``agent``'s formulas at turn ``turn`` (1..turns)."""
        if agent < 0 or not 1 <= turn <= self.turns:
            raise ValueError(f"agent must be >= 0 and turn in 1..{self.turns}, got agent {agent}, turn {turn}")
        rng = random.Random(f"proposals:{self.seed}:{agent}:{turn}")
        shared = [slot for slot in range(self.formulas_per_call) if rng.random() < self.duplicate_share]
        picks = iter(rng.sample(range(self.popular), len(shared)))
        first = self.popular + (agent * self.turns + turn - 1) * self.formulas_per_call
        chosen = set(shared)
        return tuple(next(picks) if slot in chosen else first + slot for slot in range(self.formulas_per_call))

    def formulas(self, pool: Sequence[str], agent: int, turn: int) -> tuple[str, ...]:
        """The formula texts of :meth:`indices`; a too-small pool says how big it must be."""
        found = self.indices(agent, turn)
        if max(found) >= len(pool):
            raise IndexError(
                f"the formula pool has {len(pool):,} formulas but agent {agent} needs index {max(found):,}; "
                f"build it with size Proposals.pool_size(agents) ({self.pool_size(agent + 1):,} for {agent + 1} agents)"
            )
        return tuple(pool[i] for i in found)


# --------------------------------------------------------------------------- the server


@dataclass(frozen=True)
class Latency:
    """The simulated model's think time: ``mean_s`` ± ``spread_s``, uniform or clipped gaussian
    (``spread_s`` its standard deviation, clipped at 0 and ``2 * mean_s``); 0 answers at once."""

    mean_s: float = 0.0
    spread_s: float = 0.0
    distribution: str = "uniform"

    def __post_init__(self) -> None:
        if self.mean_s < 0 or self.spread_s < 0:
            raise ValueError(f"Latency needs mean_s >= 0 and spread_s >= 0, got {self.mean_s} and {self.spread_s}")
        if self.distribution not in ("uniform", "gauss"):
            raise ValueError(f"Latency.distribution is 'uniform' or 'gauss', got {self.distribution!r}")

    def sample(self, rng: random.Random) -> float:
        if self.spread_s == 0:
            return self.mean_s
        if self.distribution == "uniform":
            return max(0.0, rng.uniform(self.mean_s - self.spread_s, self.mean_s + self.spread_s))
        return min(max(0.0, rng.gauss(self.mean_s, self.spread_s)), 2 * self.mean_s)


def raise_open_files_limit() -> int:
    """Raise this process's open-files soft limit to its hard limit (capped at 2**20, for an
    unlimited hard limit); returns the soft limit now in force. 10,000 keep-alive agents need
    20,000 descriptors when client and server share a process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 2**20 if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target


def parse_call_id(messages: Any) -> tuple[int, int] | None:
    """(agent, turn) of the last marked assistant message (tool-call id or text mark), or None."""
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        for call in reversed(message.get("tool_calls") or []):
            found = _CALL_ID_RE.match(str(call.get("id", ""))) if isinstance(call, Mapping) else None
            if found:
                return int(found.group(1)), int(found.group(2))
        content = message.get("content")
        found_text = _TEXT_MARK_RE.search(content) if isinstance(content, str) else None
        if found_text:
            return int(found_text.group(1)), int(found_text.group(2))
    return None


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large"}
_MAX_BODY = 64 * 2**20


class LoopbackChatServer:
    """An OpenAI-compatible chat completions server on 127.0.0.1 (ephemeral port) playing an LLM
    that proposes ``proposals``' formulas from ``pool``, after ``latency``.

    One background thread runs its own asyncio loop on ``asyncio.start_server``; connections
    are HTTP/1.1 keep-alive and cost a task each (no thread), so 10,000+ can stay open. Use it
    as a context manager; ``base_url`` ends in ``/v1`` (give it to ``model.base_url``).
    """

    def __init__(self, pool: Sequence[str], proposals: Proposals, latency: Latency = Latency(),
                 *, seed: int = 0, backlog: int = 4096) -> None:
        self.pool = pool
        self.proposals = proposals
        self.latency = latency
        self._rng = random.Random(f"latency:{seed}")
        self._backlog = backlog
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        self.open_files_limit = 0
        self._reset_counters()

    def _reset_counters(self) -> None:
        self._requests = 0
        self._completions = 0
        self._overruns = 0
        self._repeats = 0
        self._errors = 0
        self._agents = 0
        self._turns: dict[int, int] = {}
        self._proposed = 0
        self._unique: set[int] = set()
        self._open = 0
        self._peak = 0
        self._connections = 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError("this LoopbackChatServer is already started; build a new one")
        self.open_files_limit = raise_open_files_limit()
        self._thread = threading.Thread(target=self._serve, name="loopback-chat-server", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            raise RuntimeError(f"the loopback chat server could not start: {self._startup_error}") from self._startup_error
        return self

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=self._backlog, limit=2**20)
            )
            self.port = int(self._server.sockets[0].getsockname()[1])
        except BaseException as exc:  # noqa: BLE001 - handed to start(), which raises it
            self._startup_error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shutdown())
            loop.close()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    def close(self) -> None:
        """Stop accepting, close every connection, join the thread (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            if thread.is_alive():
                raise RuntimeError("the loopback chat server's thread did not stop within 30 s")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------ counters

    def stats(self) -> dict[str, Any]:
        """Counters so far: requests, completions (tool-call replies), overruns (text replies past
        ``turns``), repeats (an (agent, turn) asked again, e.g. a client retry), errors, agents,
        per-agent turns, formulas proposed and unique ones, connections open/peak/total."""
        with self._lock:
            return {
                "requests": self._requests,
                "completions": self._completions,
                "overruns": self._overruns,
                "repeats": self._repeats,
                "errors": self._errors,
                "agents": self._agents,
                "turns": dict(self._turns),
                "formulas_proposed": self._proposed,
                "unique_formulas_proposed": len(self._unique),
                "connections_open": self._open,
                "connections_peak": self._peak,
                "connections_total": self._connections,
                "open_files_limit": self.open_files_limit,
            }

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        with self._lock:
            self._open += 1
            self._connections += 1
            self._peak = max(self._peak, self._open)
        try:
            while await self._one_request(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass  # the client went away or sent garbage: drop the connection
        except asyncio.CancelledError:
            pass  # shutting down
        finally:
            with self._lock:
                self._open -= 1
            self._handlers.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when the connection should close."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise
            return False  # a clean close between requests
        lines = head.decode("latin-1").split("\r\n")
        method, path, version = (lines[0].split(" ") + ["", "", ""])[:3]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        keep_alive = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
        length = int(headers.get("content-length", "0") or 0)
        if length > _MAX_BODY:
            await self._reply(writer, 413, {"error": {"message": "request body too large", "type": "invalid_request_error"}}, False)
            return False
        body = await reader.readexactly(length) if length else b""
        with self._lock:
            self._requests += 1
        try:
            status, payload = await self._route(method, path.split("?", 1)[0], body)
        except _BadRequest as bad:
            with self._lock:
                self._errors += 1
            status, payload = bad.status, {"error": {"message": str(bad), "type": "invalid_request_error"}}
        await self._reply(writer, status, payload, keep_alive)
        return keep_alive

    async def _reply(self, writer: asyncio.StreamWriter, status: int, payload: Any, keep_alive: bool) -> None:
        data = json.dumps(payload).encode()
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + data)
        await writer.drain()

    async def _route(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        if path in ("/v1/stats", "/stats") and method == "GET":  # the counters, for a server in another process
            return 200, self.stats()
        if path in ("/v1/models", "/models") and method == "GET":
            return 200, {"object": "list", "data": [{"id": "simulated", "object": "model", "owned_by": "sr-dist-bench"}]}
        if path not in ("/v1/chat/completions", "/chat/completions"):
            raise _BadRequest(404, f"no route {method} {path}; this server answers POST /v1/chat/completions")
        if method != "POST":
            raise _BadRequest(405, f"{path} takes POST, not {method}")
        try:
            request = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise _BadRequest(400, f"the request body is not JSON ({exc})") from None
        messages = request.get("messages") if isinstance(request, Mapping) else None
        if not isinstance(messages, list):
            raise _BadRequest(400, "the request has no messages list")
        agent, turn = self._identify(messages)
        delay = self.latency.sample(self._rng)
        if delay > 0:
            await asyncio.sleep(delay)
        return 200, self._completion(agent, turn, str(request.get("model") or "simulated"))

    def _identify(self, messages: list[Any]) -> tuple[int, int]:
        """(agent, turn) of a request: from the last marked assistant message, or a new agent."""
        found = parse_call_id(messages)
        if found is None:
            if any(isinstance(m, Mapping) and m.get("role") == "assistant" for m in messages):
                raise _BadRequest(
                    400,
                    "the conversation has assistant turns this server did not write (no call_sim_<agent>_<turn> "
                    "tool-call id); start each agent's conversation against this server",
                )
            with self._lock:
                agent = self._agents
                self._agents += 1
            return agent, 1
        agent, last = found
        return agent, last + 1

    def _completion(self, agent: int, turn: int, model: str) -> dict[str, Any]:
        message: dict[str, Any]
        with self._lock:
            if turn <= self._turns.get(agent, 0):
                self._repeats += 1
            self._turns[agent] = max(turn, self._turns.get(agent, 0))
        if turn > self.proposals.turns:
            with self._lock:
                self._overruns += 1
            message = {"role": "assistant", "content": f"{_TEXT_MARK.format(agent=agent, turn=turn)} I have no more formulas to try."}
            finish = "stop"
        else:
            indices = self.proposals.indices(agent, turn)
            if max(indices) >= len(self.pool):
                raise _BadRequest(
                    400,
                    f"the formula pool has {len(self.pool):,} formulas, too few for agent {agent}; "
                    f"build it with size Proposals.pool_size(agents)",
                )
            arguments = json.dumps({"expressions": [self.pool[i] for i in indices]})
            call = {"id": CALL_ID.format(agent=agent, turn=turn), "type": "function",
                    "function": {"name": "evaluate_formulas", "arguments": arguments}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
            with self._lock:
                self._completions += 1
                self._proposed += len(indices)
                self._unique.update(indices)
        return {
            "id": f"chatcmpl-sim-{agent}-{turn}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }


# --------------------------------------------------------------------------- a server process


def main(argv: Sequence[str] | None = None) -> int:
    """Serve in the foreground (its own process, so it does not share the GIL with the agents or
    the driver): print one JSON line with ``base_url``, serve until SIGINT/SIGTERM or stdin
    closes, then print the final :meth:`LoopbackChatServer.stats` line. ``GET /v1/stats`` reads
    the counters meanwhile."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--variables", required=True, help="the dataset's variable names, comma-separated")
    parser.add_argument("--agents", type=int, required=True, help="agents the pool must serve")
    parser.add_argument("--formulas-per-call", type=int, default=8)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--duplicate-share", type=float, default=0.2)
    parser.add_argument("--popular", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.0, help="mean seconds before each reply")
    parser.add_argument("--spread", type=float, default=0.0, help="uniform half-width (or gauss sd) of the latency")
    parser.add_argument("--distribution", choices=("uniform", "gauss"), default="uniform")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    proposals = Proposals(args.formulas_per_call, args.turns, args.duplicate_share, args.seed, args.popular)
    pool = formula_pool(args.variables.split(","), proposals.pool_size(args.agents), args.seed)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())

    def until_stdin_closes() -> None:
        sys.stdin.read()
        done.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    with LoopbackChatServer(pool, proposals, Latency(args.latency, args.spread, args.distribution), seed=args.seed) as server:
        print(json.dumps({"base_url": server.base_url, "pool": len(pool), "open_files_limit": server.open_files_limit}), flush=True)
        done.wait()
        stats = server.stats()
    stats["turns"] = {str(k): v for k, v in stats["turns"].items()}
    print(json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
