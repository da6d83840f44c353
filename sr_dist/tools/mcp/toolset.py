"""``MCPToolset``: the configured MCP servers, their tools, and the thread they live on.

The servers run on one private event loop in a daemon thread owned by the toolset. Callers in
any thread, with or without their own loop (the agent's ``asyncio.run``, a Ray async actor,
plain sync code), cross over with ``run_coroutine_threadsafe`` and a bounded wait, so a hung
server never hangs its caller: each call waits at most its timeout plus a small backstop.

``MCPTool`` objects satisfy the ``Tool`` protocol and join a ``ToolRegistry`` like any tool.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import threading
import weakref
from collections.abc import Coroutine, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from sr_dist.tools.mcp.config import MCPConfigError, MCPServerConfig, parse_servers
from sr_dist.tools.mcp.connection import STOP_BOUND_S, MCPStartupError, ServerConnection, ServerStatus
from sr_dist.tools.mcp.mapping import call_timeout_s, tool_metadata
from sr_dist.tools.metadata import ToolMetadata
from sr_dist.tools.outcomes import failure_result
from sr_dist.tools.registry import ToolRegistry
from sr_dist.tools.types import ToolCallResult
from sr_dist.tools.validation import check_arguments, compile_parameters

__all__ = ["MCPTool", "MCPToolset", "start_mcp_tools", "astart_mcp_tools", "BACKSTOP_S"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Extra time a caller waits beyond a call's own timeout before giving up on the loop thread.
BACKSTOP_S = 5.0


class _LoopThread:
    """A private asyncio loop running forever in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.close()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def in_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; ``RuntimeError`` when the loop is gone."""
        if not self.alive:
            coro.close()
            raise RuntimeError("the MCP toolset is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Run ``coro`` on the loop and wait (blocking) at most ``timeout_s``; ``TimeoutError`` after."""
        if self.in_thread():
            coro.close()
            raise RuntimeError("MCPToolset's blocking methods cannot be called from its own loop")
        future = self.submit(coro)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer from the MCP loop within {timeout_s:g}s") from None

    async def arun(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Await ``coro`` run on the loop, at most ``timeout_s``; cancelling the caller cancels it."""
        future = asyncio.wrap_future(self.submit(coro))
        try:
            return await asyncio.wait_for(future, timeout=timeout_s)
        except TimeoutError:
            raise TimeoutError(f"no answer from the MCP loop within {timeout_s:g}s") from None

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.loop.is_closed():
            return
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:
            return
        if not self.in_thread():
            self._thread.join(timeout_s)


class MCPTool:
    """One tool of one MCP server, in the catalog under ``metadata.name``.

    Calls go to the server through the toolset's loop; a refused call (server timed out
    earlier, exited, or the toolset is closed) fails at once without crossing threads.
    Arguments are checked against the server's input schema before they are sent.
    """

    __slots__ = ("_toolset", "_connection", "_metadata", "_validator", "server", "remote_name")

    def __init__(self, toolset: MCPToolset, connection: ServerConnection, remote_name: str, metadata: ToolMetadata) -> None:
        self._toolset = toolset
        self._connection = connection
        self._metadata = metadata
        self.server = connection.name
        self.remote_name = remote_name
        # Compiled now, like any registered tool: a server with a broken schema fails at start.
        self._validator = compile_parameters(
            metadata.parameters or {"type": "object"},
            what=f"input schema of tool {remote_name!r} of MCP server {connection.name!r}",
        )

    @property
    def metadata(self) -> ToolMetadata:
        return self._metadata

    def __call__(self, **arguments: Any) -> ToolCallResult:
        """Call the tool from sync code (with or without a loop running in this thread)."""
        early, arguments = self._precheck(arguments)
        if early is not None:
            return early
        timeout = self._timeout(arguments)
        try:
            return self._toolset._loop_thread().run(self._call_on_loop(arguments, timeout), timeout + BACKSTOP_S)
        except TimeoutError:
            return self._abandoned(timeout)
        except RuntimeError as exc:
            return self._failed("tool_error", f"MCP server {self.server!r}: {exc}")

    async def acall(self, **arguments: Any) -> ToolCallResult:
        """Call the tool from async code; the caller's loop stays free while the server works."""
        early, arguments = self._precheck(arguments)
        if early is not None:
            return early
        timeout = self._timeout(arguments)
        try:
            return await self._toolset._loop_thread().arun(self._call_on_loop(arguments, timeout), timeout + BACKSTOP_S)
        except TimeoutError:
            return self._abandoned(timeout)
        except RuntimeError as exc:
            return self._failed("tool_error", f"MCP server {self.server!r}: {exc}")

    def cancel(self) -> None:
        """Nothing to stop locally: a call abandoned by its caller is cancelled on the loop."""

    def __repr__(self) -> str:
        return f"MCPTool({self._metadata.name!r}, server={self.server!r}, remote={self.remote_name!r})"

    # --- helpers ---------------------------------------------------------------------------

    def _timeout(self, arguments: Mapping[str, Any]) -> float:
        return call_timeout_s(self._connection.config, self._metadata.parameters or {}, arguments)

    def _call_on_loop(self, arguments: Mapping[str, Any], timeout: float) -> Coroutine[Any, Any, ToolCallResult]:
        return self._connection.call(
            self._metadata.name, self.remote_name, arguments, timeout_s=timeout, max_chars=self._metadata.max_result_chars
        )

    def _failed(self, kind: str, reason: str, **meta: Any) -> ToolCallResult:
        return failure_result(
            self._metadata.name, kind, reason, elapsed_s=0.0, max_chars=self._metadata.max_result_chars,
            mcp_server=self.server, **meta,
        )

    def _precheck(self, arguments: Mapping[str, Any]) -> tuple[ToolCallResult | None, dict[str, Any]]:
        """A refusal before the server is asked, or the arguments as they will be sent (whole
        floats where the schema wants integers are ints, as at bind)."""
        if self._toolset.closed:
            return self._failed("tool_error", f"MCP server {self.server!r}: the MCP toolset is closed."), {}
        refused = self._connection.refusal()
        if refused is not None:
            return self._failed(*refused, refused=True), {}
        checked = check_arguments(self._validator, arguments)
        if not checked.ok:
            reason = f"invalid call to {self._metadata.name!r}: " + "; ".join(checked.reasons)
            return self._failed("invalid_tool_call", reason, model_visible=True), {}
        return None, dict(checked.arguments)

    def _abandoned(self, timeout: float) -> ToolCallResult:
        """The loop thread itself did not answer in time: treat it like a call timeout."""
        self._toolset._mark_unknown(self._connection, f"{self.remote_name!r} got no answer within {timeout:g}s")
        return self._failed(
            "timeout",
            f"MCP server {self.server!r}: tool {self.remote_name!r} did not answer within {timeout:g}s. What it did "
            "is unknown, so this server's calls are refused until it is restarted.",
        )


class MCPToolset:
    """The configured MCP servers and their tools; one private loop thread runs them all.

    ``start()`` launches every server (concurrently, each bounded by its ``startup_timeout_s``),
    lists their tools and checks the names; ``tools()`` returns them for a registry;
    ``restart(name)`` replaces a server's process; ``close()`` stops them all. Every method has
    an ``a``-prefixed async twin, and the toolset is a (sync or async) context manager.
    """

    def __init__(self, servers: Iterable[MCPServerConfig] | Any = ()) -> None:
        self.configs: tuple[MCPServerConfig, ...] = parse_servers(servers)
        self._connections = {c.name: ServerConnection(c) for c in self.configs}
        self._tools: dict[str, MCPTool] = {}
        self._failures: dict[str, str] = {}
        self._thread: _LoopThread | None = None
        self._lock = threading.Lock()
        self._started = False
        self.closed = False

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, *, strict: bool = True) -> MCPToolset:
        """Start every server; returns ``self``.

        ``strict`` (the default): any server that fails to start raises ``MCPStartupError``
        naming it, after the others are stopped again. ``strict=False``: a failed server is
        logged, left out (no tools) and reported by ``failures()``. A tool-name collision is
        always an ``MCPConfigError``.
        """
        if not self.configs:
            self._started = True
            return self
        thread = self._loop_thread()
        try:
            thread.run(self._start_all(strict), self._startup_bound())
        except TimeoutError:
            self.close()
            raise MCPStartupError("the MCP servers did not start in time (the loop thread is stuck)") from None
        except BaseException:
            self.close()
            raise
        return self

    async def astart(self, *, strict: bool = True) -> MCPToolset:
        """Async :meth:`start`."""
        if not self.configs:
            self._started = True
            return self
        try:
            await self._loop_thread().arun(self._start_all(strict), self._startup_bound())
        except TimeoutError:
            await self.aclose()
            raise MCPStartupError("the MCP servers did not start in time (the loop thread is stuck)") from None
        except BaseException:
            await self.aclose()
            raise
        return self

    def restart(self, name: str) -> tuple[str, ...]:
        """Stop server ``name`` (terminate, then kill) and start a fresh one; returns its tools' names.

        Clears ``mcp_status_unknown``. ``KeyError`` for an unknown server; ``MCPStartupError`` if
        the new process does not start (the server then stays down).
        """
        connection = self._connection(name)
        bound = connection.config.startup_timeout_s + STOP_BOUND_S + BACKSTOP_S
        tools = self._loop_thread().run(connection.restart(), bound)
        return self._after_restart(connection, tools)

    async def arestart(self, name: str) -> tuple[str, ...]:
        """Async :meth:`restart`."""
        connection = self._connection(name)
        bound = connection.config.startup_timeout_s + STOP_BOUND_S + BACKSTOP_S
        tools = await self._loop_thread().arun(connection.restart(), bound)
        return self._after_restart(connection, tools)

    def close(self) -> None:
        """Stop every server and the loop thread (bounded; idempotent)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            thread = self._thread
        if thread is None:
            return
        if thread.alive and not thread.in_thread():
            try:
                thread.run(self._stop_all(), STOP_BOUND_S + BACKSTOP_S)
            except (TimeoutError, RuntimeError) as exc:
                log.warning("stopping the MCP servers: %s", exc)
        thread.stop()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            thread = self._thread
        if thread is None:
            return
        if thread.alive:
            try:
                await thread.arun(self._stop_all(), STOP_BOUND_S + BACKSTOP_S)
            except (TimeoutError, RuntimeError) as exc:
                log.warning("stopping the MCP servers: %s", exc)
        await asyncio.get_running_loop().run_in_executor(None, thread.stop)

    def __enter__(self) -> MCPToolset:
        return self if self._started else self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> MCPToolset:
        return self if self._started else await self.astart()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    # --- what it offers --------------------------------------------------------------------

    @property
    def server_names(self) -> tuple[str, ...]:
        return tuple(self._connections)

    def tools(self, *, reserved: Iterable[str] = ()) -> tuple[MCPTool, ...]:
        """The tools of every started server, in config order.

        ``reserved`` names tools already in the catalog (e.g. the formula tools): an MCP tool
        with one of those names is an ``MCPConfigError`` naming the server and both tools.
        """
        tools = tuple(self._tools.values())
        taken = set(reserved)
        for tool in tools:
            if tool.metadata.name in taken:
                raise MCPConfigError(
                    f"MCP server {tool.server!r}: its tool {tool.remote_name!r} would be named "
                    f"{tool.metadata.name!r} in the catalog, which a built-in tool already uses; "
                    f"set servers[].prefix for {tool.server!r}"
                )
        return tools

    def register(self, registry: ToolRegistry) -> tuple[MCPTool, ...]:
        """Add every MCP tool to ``registry`` (collisions with its tools are ``MCPConfigError``)."""
        tools = self.tools(reserved=registry.names())
        for tool in tools:
            registry.register(tool)
        return tools

    def status(self, name: str) -> ServerStatus:
        """A snapshot of server ``name`` (state, pid, exit code, reason, restarts, tools)."""
        return self._connection(name).status()

    def failures(self) -> dict[str, str]:
        """Servers that failed to start under ``start(strict=False)``, with the reason."""
        return dict(self._failures)

    def __repr__(self) -> str:
        return f"MCPToolset(servers={list(self._connections)}, tools={list(self._tools)})"

    # --- internals -------------------------------------------------------------------------

    def _connection(self, name: str) -> ServerConnection:
        try:
            return self._connections[name]
        except KeyError:
            known = ", ".join(self._connections) or "(none)"
            raise KeyError(f"no MCP server named {name!r}; configured: {known}") from None

    def _loop_thread(self) -> _LoopThread:
        with self._lock:
            if self.closed:
                raise RuntimeError("the MCP toolset is closed")
            if self._thread is None:
                self._thread = _LoopThread("sr-dist-mcp-loop")
                _close_at_exit(self)
            return self._thread

    def _startup_bound(self) -> float:
        return max(c.startup_timeout_s for c in self.configs) + STOP_BOUND_S + BACKSTOP_S

    async def _start_all(self, strict: bool) -> None:
        if self._started:
            raise RuntimeError("this MCPToolset has already been started")
        self._started = True
        connections = list(self._connections.values())
        outcomes = await asyncio.gather(*(c.start() for c in connections), return_exceptions=True)
        errors: list[BaseException] = []
        for connection, outcome in zip(connections, outcomes):
            if isinstance(outcome, BaseException):
                if strict:
                    errors.append(outcome)
                else:
                    self._failures[connection.name] = str(outcome)
                    log.error("%s", outcome)
        if errors:
            await self._stop_all()
            first = errors[0]
            if len(errors) > 1:
                raise MCPStartupError("; ".join(str(e) for e in errors)) from first
            raise first
        tools: dict[str, MCPTool] = {}
        for connection in connections:
            if connection.state != "ready":
                continue
            for remote in connection.tools:
                try:
                    tool = MCPTool(self, connection, remote.name, tool_metadata(connection.config, remote))
                except ValueError as exc:
                    await self._stop_all()
                    raise MCPConfigError(f"MCP server {connection.name!r}: tool {remote.name!r}: {exc}") from exc
                other = tools.get(tool.metadata.name)
                if other is not None:
                    await self._stop_all()
                    raise MCPConfigError(
                        f"MCP tool name collision: {tool.metadata.name!r} is offered by server {other.server!r} "
                        f"(tool {other.remote_name!r}) and by server {tool.server!r} (tool {tool.remote_name!r}); "
                        "set servers[].prefix on one of them"
                    )
                tools[tool.metadata.name] = tool
        self._tools = tools

    async def _stop_all(self) -> None:
        await asyncio.gather(*(c.stop() for c in self._connections.values()), return_exceptions=True)

    def _after_restart(self, connection: ServerConnection, tools: Iterable[Any]) -> tuple[str, ...]:
        offered = {t.name for t in tools}
        known = {t.remote_name for t in self._tools.values() if t.server == connection.name}
        if offered != known:
            log.warning(
                "MCP server %r changed its tools on restart (gone: %s; new, not in the catalog: %s)",
                connection.name,
                sorted(known - offered) or "none",
                sorted(offered - known) or "none",
            )
        return tuple(sorted(offered))

    def _mark_unknown(self, connection: ServerConnection, reason: str) -> None:
        """From a caller thread: the loop did not answer, so the server's state is unknown."""

        def mark() -> None:
            if connection.state == "ready":
                connection.state = "status_unknown"
                connection.reason = reason

        thread = self._thread
        if thread is not None and thread.alive:
            thread.loop.call_soon_threadsafe(mark)
        else:
            mark()


def _close_at_exit(toolset: MCPToolset) -> None:
    """Stop a toolset's servers at interpreter exit if its owner forgot to."""
    ref = weakref.ref(toolset)

    def close() -> None:
        live = ref()
        if live is not None:
            live.close()

    atexit.register(close)


def start_mcp_tools(servers: Any, *, strict: bool = True) -> MCPToolset:
    """The one entry point for wiring: parse the ``servers`` config and start them.

    ``servers`` is the top-level ``servers`` list of the run config (an OmegaConf node, a list of
    mappings, or ``MCPServerConfig`` values; ``None``/empty gives a toolset with no tools that
    costs nothing). Add the tools to a registry with ``toolset.register(registry)`` or pass
    ``toolset.tools(reserved=...)`` as extra tools; ``close()`` the toolset when the run ends.
    """
    return MCPToolset(servers).start(strict=strict)


async def astart_mcp_tools(servers: Any, *, strict: bool = True) -> MCPToolset:
    """Async :func:`start_mcp_tools` (for Ray async actors and other running loops)."""
    return await MCPToolset(servers).astart(strict=strict)

