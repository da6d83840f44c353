"""``sr-dist-mcp``: sr-dist's formula tools served to any MCP client over stdio.

::

    sr-dist-mcp --dataset feynman:I.6.2 --results ./results
    sr-dist-mcp --dataset csv:data.csv --target y --n 2000 --seed 1
    sr-dist-mcp --dataset feynman:I.12.11 --units feynman
    sr-dist-mcp --dataset csv:motion.csv --units x=m --units t=s --units v=m/s

It serves ``evaluate_formulas``, ``data_summary`` and ``best_formulas`` for one dataset, with an
in-process JAX evaluator. The tools are the very ``BaseTool`` classes the agents use (same
schemas, same texts); this module only translates between them and MCP. Every fitted candidate
is recorded like in any run: Parquet rows under ``--results`` for run ``--run-id``, and a
``runs`` row written at start and again when the client disconnects.

Stdout is the protocol: logs go to stderr, and stray prints during start-up are sent there too.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types

__all__ = ["SERVED_TOOLS", "ServerOptions", "parse_options", "json_safe", "mcp_tool", "mcp_result", "main"]

log = logging.getLogger("sr_dist.mcp_server")

#: The formula tools served (``submit_formula`` ends an agent's episode, so it is not offered).
SERVED_TOOLS: tuple[str, ...] = ("evaluate_formulas", "data_summary", "best_formulas")
#: The ``model`` column of the rows this server records.
MODEL_LABEL = "mcp-client"


@dataclass(frozen=True)
class ServerOptions:
    """The command line, parsed."""

    dataset: str
    target: str | None = None
    n: int | None = None
    seed: int = 0
    results: str = "./results"
    run_id: str | None = None
    device: str = "cpu"
    log_level: str = "WARNING"
    #: ``feynman``, or name -> unit text (``None``: no units, no dimensional check).
    units: str | Mapping[str, str] | None = None
    #: With units: constants are dimensionless (the default) or may carry any unit.
    dimensionless_constants: bool = True


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sr-dist-mcp",
        description="Serve sr-dist's formula tools (evaluate_formulas, data_summary, best_formulas) "
        "for one dataset to an MCP client over stdio.",
    )
    parser.add_argument("--dataset", required=True, help="feynman:I.6.2, csv:PATH or parquet:PATH")
    parser.add_argument("--target", default=None, help="target column of a csv/parquet table (default: the last)")
    parser.add_argument("--n", type=int, default=None, help="rows to sample (feynman) or keep (tables)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the sampling and the split")
    parser.add_argument("--results", default="./results", help="results path (Parquet), as for sr-dist runs")
    parser.add_argument("--run-id", default=None, help="run id of the recorded candidates (default: a new one)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "gpu"), help="where constants are fitted")
    parser.add_argument("--log-level", default="WARNING", help="stderr log level (DEBUG, INFO, WARNING, ...)")
    parser.add_argument("--units", action="append", default=None, metavar="NAME=UNIT",
                        help="the unit of a variable or of the target (repeat for each, e.g. "
                        "--units v=m/s), a JSON object of them, or 'feynman' for a feynman: "
                        "dataset; candidates are then checked for dimensional consistency")
    parser.add_argument("--constants-with-units", action="store_true",
                        help="with --units: let free constants carry any unit (default: "
                        "constants are dimensionless)")
    return parser


def _units(parser: argparse.ArgumentParser, given: list[str] | None) -> str | dict[str, str] | None:
    if not given:
        return None
    if len(given) == 1 and given[0].strip().lower() == "feynman":
        return "feynman"
    if len(given) == 1 and given[0].strip().startswith("{"):
        import json

        try:
            value = json.loads(given[0])
        except json.JSONDecodeError as exc:
            parser.error(f"--units is not a JSON object: {exc}")
        if not isinstance(value, dict):
            parser.error("--units JSON must be an object {name: unit}")
        return {str(k): v for k, v in value.items()}
    units: dict[str, str] = {}
    for item in given:
        name, sep, unit = item.partition("=")
        if not sep or not name.strip():
            parser.error(f"--units takes NAME=UNIT (e.g. v=m/s), a JSON object or 'feynman', got {item!r}")
        units[name.strip()] = unit.strip()
    return units


def parse_options(argv: Sequence[str] | None = None) -> ServerOptions:
    """Parse the command line (``SystemExit`` with a usage message on bad input, as argparse does)."""
    parser = _parser()
    ns = parser.parse_args(argv)
    if ns.n is not None and ns.n < 1:
        parser.error(f"--n must be a positive integer, got {ns.n}")
    return ServerOptions(
        dataset=ns.dataset, target=ns.target, n=ns.n, seed=ns.seed, results=ns.results,
        run_id=ns.run_id, device=ns.device, log_level=ns.log_level.upper(),
        units=_units(parser, ns.units), dimensionless_constants=not ns.constants_with_units,
    )


# --- pure translations --------------------------------------------------------------------


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON: numpy values unwrapped, tuples as lists, NaN/Infinity as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return json_safe(tolist())
    return str(value)


def mcp_tool(tool: Any) -> mcp_types.Tool:
    """An sr-dist tool's metadata as an MCP tool listing (same name, description and schema)."""
    meta = tool.metadata
    spec = meta.spec
    return mcp_types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=dict(spec.parameters),
        annotations=mcp_types.ToolAnnotations(read_only_hint=meta.read_only, idempotent_hint=meta.idempotent),
    )


def mcp_result(result: Any) -> mcp_types.CallToolResult:
    """A ``ToolCallResult`` as a ``CallToolResult``: the model text, the structured value, ``isError``."""
    structured = json_safe(result.result) if result.ok and isinstance(result.result, Mapping) else None
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=result.result_str)],
        structured_content=structured,
        is_error=not result.ok,
    )


# --- the server shell ---------------------------------------------------------------------


class _Session:
    """The dataset, evaluator, tools and results of one server process."""

    def __init__(self, options: ServerOptions) -> None:
        from sr_dist.data import load_dataset
        from sr_dist.evaluator import Evaluator
        from sr_dist.results import CandidateWriter, RunRecord, utc_now, write_run
        from sr_dist.search.recording import CandidateRecorder
        from sr_dist.search.run import new_run_id
        from sr_dist.sr.episode import EpisodeContext
        from sr_dist.tools import BaseTool

        self.options = options
        self.dataset = load_dataset(options.dataset, n=options.n, seed=options.seed, target=options.target,
                                    units=options.units)
        self.evaluator = Evaluator(self.dataset, device=options.device)
        self.run_id = options.run_id or new_run_id()
        self.results = Path(options.results)
        self.writer = CandidateWriter(self.results, self.run_id, self.dataset.name, MODEL_LABEL)
        self.recorder = CandidateRecorder(self.run_id, 0, MODEL_LABEL, self.dataset.name, self._store)
        self.context = EpisodeContext.create(self.dataset, self.evaluator, recorder=self.recorder,
                                             dimensionless_constants=options.dimensionless_constants)
        self.tools = {name: BaseTool.create(name, context=self.context) for name in SERVED_TOOLS}
        self.record = RunRecord(
            run_id=self.run_id,
            dataset=self.dataset.name,
            model=MODEL_LABEL,
            started_at=utc_now(),
            agents=1,
            config=f"sr-dist-mcp {' '.join(sys.argv[1:])}",
        )
        write_run(self.results, self.record)
        self._steps = itertools.count(1)
        self._step_lock = threading.Lock()
        self._closed = False

    def _store(self, rows: list[dict[str, Any]]) -> None:
        added = self.writer.add(rows)
        for problem in added.rejected:
            log.error("a candidate row was rejected: %s", problem)

    def next_step(self, request_id: Any) -> None:
        """Each call is a step of the recorded run (so candidate ids say which call made them)."""
        with self._step_lock:
            step = next(self._steps)
        episode = self.context.episode
        episode.begin_turn(step)
        episode.begin_call(None if request_id is None else str(request_id))

    def close(self, *, interrupted: bool, error: str | None = None) -> None:
        """Flush the candidates and mark the run ended (idempotent): ``completed`` when the client
        disconnected, ``interrupted`` after SIGTERM or SIGINT, ``failed`` with ``error``."""
        if self._closed:
            return
        self._closed = True
        from sr_dist.results import summarize_run, write_run

        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 - still try to write the runs row
            log.exception("flushing the candidates failed")
        try:
            count, best = summarize_run(self.results, self.run_id)
        except Exception:  # noqa: BLE001 - no candidates file yet, or unreadable
            count, best = 0, None
        if error is not None:
            status, reason = "failed", "error"
        elif interrupted:
            status, reason = "interrupted", "interrupted"
        else:
            status, reason = "completed", "client_closed"
        write_run(self.results, self.record.with_best(best, count).finished(status, reason, error=error))
        log.info("run %s: %d candidates written under %s", self.run_id, count, self.results)


def build_server(session: _Session) -> Any:
    """The low-level MCP server: lists the session's tools and runs calls through them."""
    from mcp.server.lowlevel import Server

    from sr_dist import __version__

    listing = [mcp_tool(tool) for tool in session.tools.values()]
    dataset = session.dataset

    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=listing)

    async def call_tool(ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
        tool = session.tools.get(params.name)
        if tool is None:
            known = ", ".join(session.tools)
            return mcp_types.CallToolResult(
                content=[mcp_types.TextContent(type="text", text=f"unknown tool {params.name!r}; known tools: {known}")],
                is_error=True,
            )
        session.next_step(getattr(ctx, "request_id", None))
        result = await tool.acall(**dict(params.arguments or {}))
        return mcp_result(result)

    return Server(
        "sr-dist",
        version=__version__,
        instructions=(
            f"Symbolic regression on {dataset.name}: find a formula for {dataset.target_name} in terms of "
            f"{', '.join(dataset.feature_names)}. Use data_summary, then evaluate_formulas; best_formulas "
            "lists the Pareto front of what was evaluated."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _serve(server: Any, announcement: str, on_signal: Callable[[int], None]) -> None:
    """Serve until the client disconnects; SIGTERM/SIGINT call ``on_signal`` (which exits).

    ``announcement`` goes to stderr once signals are handled and the transport is open. A signal
    cannot end the serve loop gracefully (the SDK reads stdin in a thread that only EOF frees),
    hence a callback that records the run and exits the process.
    """
    from mcp.server.stdio import stdio_server

    async with anyio.create_task_group() as group:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:

            async def stop_on_signal() -> None:
                async for signum in received:
                    on_signal(int(signum))

            group.start_soon(stop_on_signal)
            async with stdio_server() as (read_stream, write_stream):
                print(announcement, file=sys.stderr, flush=True)
                await server.run(read_stream, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns the exit status: 0 when the client disconnected, 1 if serving
    failed, 2 for a bad dataset (bad arguments exit 2 through argparse), 128 + N after signal N."""
    options = parse_options(argv)
    logging.basicConfig(stream=sys.stderr, level=options.log_level, format="sr-dist-mcp %(levelname)s %(name)s: %(message)s")
    from sr_dist.data import DatasetError

    try:
        with contextlib.redirect_stdout(sys.stderr):  # start-up chatter must not reach the protocol
            session = _Session(options)
    except (DatasetError, ValueError, OSError) as exc:
        print(f"sr-dist-mcp: {exc}", file=sys.stderr)
        return 2
    announcement = (
        f"sr-dist-mcp: serving {', '.join(SERVED_TOOLS)} for {session.dataset.name} "
        f"(run {session.run_id}, results in {session.results})"
    )

    def stop(signum: int) -> None:
        log.warning("signal %d: recording the run and exiting", signum)
        try:
            session.close(interrupted=True)
        finally:
            logging.shutdown()
            os._exit(128 + signum)

    try:
        anyio.run(_serve, build_server(session), announcement, stop)
    except Exception as exc:
        log.exception("the server failed")
        session.close(interrupted=False, error=f"{type(exc).__name__}: {exc}")
        return 1
    session.close(interrupted=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
