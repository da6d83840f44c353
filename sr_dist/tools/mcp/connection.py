"""One MCP server's life on the toolset's event loop: start, list, call, stop, restart.

A ``ServerConnection`` is a small state machine. Its coroutines run only on the toolset's
loop thread; other threads read ``state`` (a plain attribute) to refuse calls without crossing
threads. Every wait is bounded: startup by ``startup_timeout_s``, a call by its timeout, a stop
by the transport's kill escalation.

States: ``stopped`` → ``starting`` → ``ready``; a call that times out makes it
``status_unknown`` (calls are refused with ``mcp_status_unknown`` until ``restart``); a process
that exits makes it ``exited`` (calls are refused with ``tool_error`` naming the exit code);
``closed`` after ``stop``. Crashed servers are not restarted automatically: like a timed-out
one, whatever it was doing may be half done, so restarting is an explicit decision.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError

from sr_dist import __version__
from sr_dist.tools.mcp.config import MCPServerConfig
from sr_dist.tools.mcp.mapping import call_result
from sr_dist.tools.mcp.transport import GRACE_S, KILL_AFTER_S, StdioProcessTransport, signal_group
from sr_dist.tools.outcomes import exception_reason, failure_result
from sr_dist.tools.types import ToolCallResult

__all__ = ["MCPStartupError", "ServerConnection", "ServerStatus", "STATES"]

log = logging.getLogger(__name__)

STATES = ("stopped", "starting", "ready", "status_unknown", "exited", "closed")
#: Longest a stop may take: the transport's escalation (stdin close, SIGTERM, SIGKILL) plus slack.
STOP_BOUND_S = GRACE_S + 2 * KILL_AFTER_S + 2.0
#: How long a call that lost its connection waits to learn the exit code.
_EXIT_CODE_WAIT_S = 1.0
_CLIENT_INFO = mcp_types.Implementation(name="sr-dist", version=__version__)


class MCPStartupError(RuntimeError):
    """A server could not be launched, initialized or listed within its startup timeout."""


@dataclass(frozen=True)
class ServerStatus:
    """A snapshot of one server, for logs, UIs and tests."""

    name: str
    state: str
    pid: int | None
    returncode: int | None
    reason: str | None
    restarts: int
    tools: tuple[str, ...]


def _with_stderr(text: str, transport: StdioProcessTransport | None) -> str:
    tail = transport.stderr_tail() if transport is not None else ""
    return f"{text}; its stderr ends with:\n{tail}" if tail else text


class ServerConnection:
    """The live connection to one configured server (see the module docstring)."""

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.state = "stopped"
        self.reason: str | None = None
        self.restarts = 0
        self.tools: tuple[mcp_types.Tool, ...] = ()
        self._client: Client | None = None
        self._transport: StdioProcessTransport | None = None
        self._runner: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._stopping = False
        self._generation = 0
        self._lock: asyncio.Lock | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def status(self) -> ServerStatus:
        transport = self._transport
        return ServerStatus(
            name=self.name,
            state=self.state,
            pid=transport.pid if transport is not None else None,
            returncode=transport.returncode if transport is not None else None,
            reason=self.reason,
            restarts=self.restarts,
            tools=tuple(t.name for t in self.tools),
        )

    def refusal(self) -> tuple[str, str] | None:
        """``(error_kind, reason)`` when a call must fail without reaching the server, else None.

        Safe from any thread (reads plain attributes only).
        """
        state = self.state
        if state == "ready":
            return None
        if state == "status_unknown":
            return (
                "mcp_status_unknown",
                f"MCP server {self.name!r} is in an unknown state after an earlier call timed out "
                f"({self.reason}); its calls are refused until it is restarted "
                f"(MCPToolset.restart({self.name!r})). Use other tools meanwhile.",
            )
        if state == "exited":
            return "tool_error", f"MCP server {self.name!r} is not running: it {self.reason}. Use other tools."
        return "tool_error", f"MCP server {self.name!r} is not running ({state})."

    # --- lifecycle (run on the loop) -------------------------------------------------------

    async def start(self) -> tuple[mcp_types.Tool, ...]:
        """Launch, initialize and list tools, within ``startup_timeout_s``; ``MCPStartupError`` otherwise."""
        if self._runner is not None and not self._runner.done():
            raise RuntimeError(f"MCP server {self.name!r} is already running")
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[mcp_types.Tool, ...]] = loop.create_future()
        self.state, self.reason, self._stopping = "starting", None, False
        self._scope = anyio.CancelScope()
        self._runner = loop.create_task(self._run(ready, self._scope), name=f"sr-dist-mcp-{self.name}")
        timeout = self.config.startup_timeout_s
        try:
            tools = await asyncio.wait_for(asyncio.shield(ready), timeout=timeout)
        except TimeoutError:
            transport = self._transport
            ready.cancel()  # nobody will read it now
            await self.stop()
            self.state = "stopped"
            self.reason = _with_stderr(
                f"MCP server {self.name!r} did not start within {timeout:g}s (startup_timeout_s)", transport
            )
            raise MCPStartupError(self.reason) from None
        except Exception as exc:  # noqa: BLE001 - any launch/handshake failure is reported by name
            transport = self._transport
            await self._learn_exit_code()
            code = transport.returncode if transport is not None else None
            await self.stop()
            self.state = "stopped"
            how = f"exited with code {code}" if code is not None else exception_reason(_root(exc))
            self.reason = _with_stderr(f"MCP server {self.name!r} failed to start ({self.config.command} ...): {how}", transport)
            raise MCPStartupError(self.reason) from exc
        self.tools = tools
        return tools

    async def _run(self, ready: asyncio.Future[tuple[mcp_types.Tool, ...]], scope: anyio.CancelScope) -> None:
        """The server's own task: it enters and leaves the client (anyio scopes demand one task)."""
        transport = StdioProcessTransport(self.config)
        self._transport = transport
        try:
            with scope:
                async with Client(transport, cache=None, client_info=_CLIENT_INFO) as client:
                    tools = await _list_all_tools(client)
                    self._client = client
                    self.state = "ready"
                    if not ready.done():
                        ready.set_result(tools)
                    await transport.exited.wait()
        except Exception as exc:  # noqa: BLE001 - reported through `ready` or the state
            if not ready.done():
                ready.set_exception(exc)
            elif not self._stopping:
                log.warning("MCP server %r: connection ended with %s", self.name, exception_reason(exc))
        finally:
            self._client = None
            if not ready.done():
                ready.set_exception(MCPStartupError(f"MCP server {self.name!r} stopped while starting"))
            if not self._stopping and self.state == "ready":  # a failed start is reported by start()
                self.state = "exited"
                self.reason = _with_stderr(f"exited with code {transport.returncode}", transport)
                log.error("MCP server %r %s", self.name, self.reason)

    async def stop(self) -> None:
        """Stop the server (close stdin, then SIGTERM, then SIGKILL its process group); bounded."""
        self._stopping = True
        runner, scope, transport = self._runner, self._scope, self._transport
        if scope is not None:
            scope.cancel()
        if runner is not None and not runner.done():
            try:
                await asyncio.wait_for(asyncio.shield(runner), timeout=STOP_BOUND_S)
            except (TimeoutError, Exception):  # noqa: BLE001 - last resort below
                pass
            if not runner.done():
                log.warning("MCP server %r did not stop in %gs; killing it", self.name, STOP_BOUND_S)
                if transport is not None and transport.pid is not None:
                    signal_group(transport.pid, signal.SIGKILL)
                runner.cancel()
        self._client = None
        if self.state != "stopped":
            self.state = "closed"

    async def restart(self) -> tuple[mcp_types.Tool, ...]:
        """Stop the server (whatever its state) and start a fresh process."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await self.stop()
            self._generation += 1
            self.restarts += 1
            return await self.start()

    # --- calls (run on the loop) -----------------------------------------------------------

    async def call(
        self, tool: str, remote: str, arguments: Mapping[str, Any], *, timeout_s: float, max_chars: int
    ) -> ToolCallResult:
        """Call ``remote`` on the server; every outcome, timeout and crash included, is a result."""
        start = time.perf_counter()

        def failed(kind: str, reason: str, **meta: Any) -> ToolCallResult:
            return failure_result(
                tool, kind, reason, elapsed_s=time.perf_counter() - start, max_chars=max_chars, mcp_server=self.name, **meta
            )

        refused = self.refusal()
        client = self._client
        if refused is not None or client is None:
            kind, reason = refused or ("tool_error", f"MCP server {self.name!r} is not connected.")
            return failed(kind, reason, refused=True)
        generation = self._generation
        deadline = anyio.move_on_after(timeout_s)
        error: Exception | None = None
        result: mcp_types.CallToolResult | None = None
        try:
            with deadline:
                result = await client.call_tool(remote, dict(arguments))
        except Exception as exc:  # noqa: BLE001 - crashes and protocol errors become results
            error = exc
        if deadline.cancelled_caught or (error is not None and deadline.cancel_called):
            if generation == self._generation and self.state == "ready":
                self.state = "status_unknown"
                self.reason = f"{remote!r} did not answer within {timeout_s:g}s"
            return failed(
                "timeout",
                f"MCP server {self.name!r}: tool {remote!r} did not answer within {timeout_s:g}s. What it did "
                "is unknown, so this server's calls are refused until it is restarted.",
            )
        if error is not None or result is None:
            return await self._call_failed(error or RuntimeError("no result"), remote, failed)
        return call_result(tool, self.name, result, elapsed_s=time.perf_counter() - start, max_chars=max_chars)

    async def _call_failed(
        self, exc: Exception, remote: str, failed: Callable[..., ToolCallResult]
    ) -> ToolCallResult:
        transport = self._transport
        closed = isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED
        if closed or (transport is not None and transport.returncode is not None):
            await self._learn_exit_code()
            code = transport.returncode if transport is not None else None
            how = f"exited (code {code})" if code is not None else "closed the connection"
            return failed(
                "tool_error",
                _with_stderr(f"MCP server {self.name!r} {how} during the call to {remote!r}", transport),
                exception=type(exc).__name__,
            )
        if isinstance(exc, MCPError):
            return failed(
                "tool_error",
                f"MCP server {self.name!r} refused the call to {remote!r}: {exc.message} (code {exc.code})",
                model_visible=True,
                exception=type(exc).__name__,
            )
        return failed(
            "tool_error",
            f"MCP server {self.name!r}: the call to {remote!r} failed: {exception_reason(exc)}",
            exception=type(exc).__name__,
        )

    async def _learn_exit_code(self) -> None:
        """Give a dying process a moment to be reaped so its exit code can be reported."""
        transport = self._transport
        if transport is None or transport.pid is None:
            return
        with anyio.move_on_after(_EXIT_CODE_WAIT_S):
            await transport.exited.wait()


async def _list_all_tools(client: Client) -> tuple[mcp_types.Tool, ...]:
    """Every tool, following pagination cursors."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(1000):  # a server that pages forever is a bug; stop rather than spin
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


def _root(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio task groups wrap failures), else ``exc``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
