"""The stdio transport to one MCP server process, owned by us so we know its fate.

The SDK's ``stdio_client`` hides the process; we need its exit code (to say "exited with code
1" rather than "connection closed"), its stderr (to show why it failed to start) and a kill we
control (restart after a timeout). So this transport spawns the process itself, in a new
session (its whole tree can be signalled), and frames newline-delimited JSON-RPC messages the
way the MCP stdio transport specifies. ``mcp.Client`` accepts it like any transport.

Shutdown is bounded and shielded from cancellation: close stdin, wait ``grace_s``, SIGTERM the
process group, wait ``kill_after_s``, SIGKILL.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
from contextlib import suppress
from types import TracebackType
from typing import IO, Any

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from anyio.streams.text import TextReceiveStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from sr_dist.tools.mcp.config import MCPServerConfig

__all__ = ["StdioProcessTransport", "signal_group", "GRACE_S", "KILL_AFTER_S", "STDERR_TAIL_CHARS"]

log = logging.getLogger(__name__)

#: How long a server may take to exit by itself once its stdin is closed.
GRACE_S = 2.0
#: How long after SIGTERM before SIGKILL.
KILL_AFTER_S = 2.0
#: How much of a server's stderr is quoted in failure reasons.
STDERR_TAIL_CHARS = 1500
_POLL_S = 0.02


class StdioProcessTransport:
    """An async context manager yielding ``(read_stream, write_stream)`` for ``mcp.Client``.

    While entered, ``pid`` is the server's process id and ``returncode`` its exit code once it
    has exited (``exited`` is set then). ``stderr_tail()`` returns the end of what it wrote to
    stderr (kept in a temporary file that is removed on exit).
    """

    def __init__(self, config: MCPServerConfig, *, grace_s: float = GRACE_S, kill_after_s: float = KILL_AFTER_S) -> None:
        self.config = config
        self.grace_s = grace_s
        self.kill_after_s = kill_after_s
        self.pid: int | None = None
        self.exited = anyio.Event()
        self._process: anyio.abc.Process | None = None
        self._stderr: IO[bytes] | None = None
        self._stderr_text = ""
        self._tg: anyio.abc.TaskGroup | None = None
        self._streams: list[Any] = []

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process is not None else None

    def stderr_tail(self, limit: int = STDERR_TAIL_CHARS) -> str:
        """The last ``limit`` characters the server wrote to stderr (also after exit)."""
        if self._stderr is not None and not self._stderr.closed:
            try:
                self._stderr.flush()
                size = self._stderr.seek(0, os.SEEK_END)
                self._stderr.seek(max(0, size - 4 * limit))
                self._stderr_text = self._stderr.read().decode("utf-8", "replace")
            except (OSError, ValueError):
                pass
        return self._stderr_text[-limit:].strip()

    async def __aenter__(self) -> tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]:
        config = self.config
        self._stderr = tempfile.TemporaryFile(prefix=f"sr-dist-mcp-{config.name}-", suffix=".stderr")
        try:
            self._process = await anyio.open_process(
                [config.command, *config.args],
                env={**get_default_environment(), **config.env},
                cwd=config.cwd,
                stderr=self._stderr,
                start_new_session=True,
            )
        except BaseException:
            self._stderr.close()
            raise
        self.pid = self._process.pid
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        self._streams = [read_writer, read_stream, write_stream, write_reader]
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._pump_stdout, read_writer)
        self._tg.start_soon(self._pump_stdin, write_reader, read_writer)
        self._tg.start_soon(self._watch_exit)
        return read_stream, write_stream

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        with anyio.CancelScope(shield=True):
            await self._stop_process()
            for stream in self._streams:
                with suppress(Exception):
                    await stream.aclose()
        self._tg.cancel_scope.cancel()
        try:
            await self._tg.__aexit__(None, None, None)
        finally:
            self.stderr_tail()  # keep the text: the file goes now
            if self._stderr is not None:
                self._stderr.close()
        return None

    # --- pumps -----------------------------------------------------------------------------

    async def _pump_stdout(self, sink: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        """Server stdout → one message per line; the stream closes (EOF) when the server does."""
        assert self._process is not None and self._process.stdout is not None
        buffer = ""
        try:
            async with sink:
                async for chunk in TextReceiveStream(self._process.stdout, encoding="utf-8", errors="replace"):
                    lines = (buffer + chunk).split("\n")
                    buffer = lines.pop()
                    for line in lines:
                        if not line.strip():
                            continue
                        await sink.send(_parse_line(line, self.config.name))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass

    async def _pump_stdin(
        self,
        source: MemoryObjectReceiveStream[SessionMessage],
        reader_sink: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Messages → server stdin; a broken pipe ends the session instead of hanging a request."""
        assert self._process is not None and self._process.stdin is not None
        try:
            async with source:
                async for message in source:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await self._process.stdin.send(data.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await reader_sink.aclose()

    async def _watch_exit(self) -> None:
        """Set ``exited`` when the process ends (polled: ``wait()`` also waits for pipe EOF)."""
        assert self._process is not None
        while self._process.returncode is None:
            await anyio.sleep(_POLL_S)
        self.exited.set()

    # --- shutdown --------------------------------------------------------------------------

    async def _stop_process(self) -> None:
        process = self._process
        if process is None:
            return
        if process.returncode is None and process.stdin is not None:
            with suppress(Exception):
                await process.stdin.aclose()
            if not await _wait_exit(process, self.grace_s):
                signal_group(process.pid, signal.SIGTERM)
                if not await _wait_exit(process, self.kill_after_s):
                    signal_group(process.pid, signal.SIGKILL)
                    if not await _wait_exit(process, self.kill_after_s):
                        log.warning("MCP server %r (pid %s) survived SIGKILL; abandoning it", self.config.name, process.pid)
        if process.returncode is not None:
            with suppress(Exception), anyio.move_on_after(self.kill_after_s):
                await process.aclose()  # reap it and close our pipe ends
        self.exited.set()


def _parse_line(line: str, server: str) -> SessionMessage | Exception:
    """One stdout line as a JSON-RPC message; a line that is not one is handed on as an error."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        log.warning("MCP server %r wrote a line that is not a JSON-RPC message: %.200r", server, line)
        return exc


async def _wait_exit(process: anyio.abc.Process, timeout_s: float) -> bool:
    with anyio.move_on_after(timeout_s):
        while process.returncode is None:
            await anyio.sleep(_POLL_S)
    return process.returncode is not None


def signal_group(pid: int, sig: int) -> None:
    """Signal the server's whole process group (it runs in its own session)."""
    if sys.platform == "win32":  # pragma: no cover - Windows has no process groups
        with suppress(OSError):
            os.kill(pid, sig)
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
