"""A real MCP stdio server for the client tests: well-behaved tools and misbehaving ones.

Run as ``python flaky_server.py [--fail-start CODE] [--hang-start] [--shadow NAME]``:

* ``--fail-start CODE``: write a complaint to stderr and exit with CODE before serving;
* ``--hang-start``: never answer (sleeps before serving), for startup timeouts;
* ``--shadow NAME``: also offer a tool called NAME (to collide with another tool).

Tools: ``echo``, ``add`` (structured output), ``math.square`` (a name providers refuse),
``pid``, ``sleep`` (outlives any timeout), ``slow`` (takes a ``timeout_s`` argument), ``slow_sec`` (the same with ``timeout_sec``), ``fail``
(``isError``), ``crash`` (the process exits mid-call), ``exit_soon`` (it exits after answering).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


def build(shadow: str | None) -> MCPServer:
    server = MCPServer("flaky", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True))
    def add(a: float, b: float) -> dict[str, float]:
        """Add two numbers."""
        return {"sum": a + b}

    @server.tool(name="math.square")
    def square(x: float) -> float:
        """Square a number."""
        return x * x

    @server.tool()
    def pid() -> int:
        """This server's process id."""
        return os.getpid()

    @server.tool()
    def sleep(seconds: float) -> str:
        """Block the whole server for a while (a hung tool)."""
        time.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def slow(duration_s: float, timeout_s: float) -> str:
        """Work for duration_s seconds; timeout_s says how long the caller should allow."""
        time.sleep(duration_s)
        return f"done after {duration_s}s (allowed {timeout_s}s)"

    @server.tool()
    def slow_sec(duration_s: float, timeout_sec: float) -> str:
        """Work for duration_s seconds; timeout_sec (Thea's spelling) says how long to allow."""
        time.sleep(duration_s)
        return f"done after {duration_s}s (allowed {timeout_sec}s)"

    @server.tool()
    def fail(message: str) -> str:
        """Always fail with the given message."""
        raise ValueError(message)

    @server.tool()
    def crash(code: int) -> str:
        """Kill this server process with the given exit code."""
        print(f"crashing with code {code}", file=sys.stderr, flush=True)
        os._exit(code)

    @server.tool()
    def exit_soon(code: int) -> str:
        """Answer, then exit with the given code a moment later (a server dying while idle)."""
        threading.Timer(0.2, os._exit, args=(code,)).start()
        return "exiting soon"

    if shadow:
        server.add_tool(lambda: "shadow", name=shadow, description="A tool whose name collides with another.")
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-start", type=int, default=None)
    parser.add_argument("--hang-start", action="store_true")
    parser.add_argument("--shadow", default=None)
    args = parser.parse_args()
    if args.fail_start is not None:
        print("flaky: refusing to start: the configuration is broken", file=sys.stderr, flush=True)
        sys.exit(args.fail_start)
    if args.hang_start:
        time.sleep(3600)
    build(args.shadow).run("stdio")


if __name__ == "__main__":
    main()
