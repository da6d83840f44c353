"""``sr-dist-mcp`` driven by the ``mcp`` SDK's own client over stdio, plus its pure parts.

One server process for the module (its JAX compile costs seconds): list the tools, summarize
the data, evaluate formulas, read the Pareto front, then check what it recorded on disk.
"""

from __future__ import annotations

import asyncio
import math
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import mcp_types
import numpy as np
import pytest
from mcp import Client, StdioServerParameters

import sr_dist.sr.formula_tools  # noqa: F401 - registers the formula tools by name
from sr_dist.mcp_server import SERVED_TOOLS, json_safe, main, mcp_result, parse_options
from sr_dist.results import read_run
from sr_dist.tools import BaseTool, ToolCallResult

ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "mcp-test-run"

pytestmark = pytest.mark.timeout(240)


def _write_problem(path: Path) -> None:
    """``y = 3*x**2``, with a distractor column after the target (so ``--target`` matters)."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-2.0, 2.0, 240)
    z = rng.uniform(0.0, 1.0, 240)
    np.savetxt(path, np.column_stack([x, 3.0 * x**2, z]), delimiter=",", header="x,y,z", comments="", fmt="%.17g")


async def _session(params: StdioServerParameters) -> dict[str, Any]:
    """Everything the module checks, gathered in one client session."""
    async with Client(params) as client:
        listed = await client.list_tools()
        summary = await client.call_tool("data_summary", {})
        evaluated = await client.call_tool("evaluate_formulas", {"expressions": ["c0*x**2", "c0*x", "x +"]})
        refused = await client.call_tool("evaluate_formulas", {"expressions": "c0*x**2"})
        front = await client.call_tool("best_formulas", {"k": 5})
        unknown = await client.call_tool("submit_formula", {"expression": "c0*x**2"})
    return {"listed": listed, "summary": summary, "evaluated": evaluated, "refused": refused, "front": front, "unknown": unknown}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("sr-dist-mcp")
    _write_problem(home / "quadratic.csv")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sr_dist.mcp_server", "--dataset", f"csv:{home / 'quadratic.csv'}", "--target", "y",
              "--seed", "3", "--results", str(home / "results"), "--run-id", RUN_ID],
        env={"JAX_PLATFORMS": "cpu"},
        cwd=str(ROOT),
    )
    return {**asyncio.run(_session(params)), "results": home / "results"}


def test_it_lists_the_formula_tools_with_the_agents_schemas(served: dict[str, Any]) -> None:
    listed = {tool.name: tool for tool in served["listed"].tools}
    assert tuple(listed) == SERVED_TOOLS
    for name, tool in listed.items():
        ours = BaseTool.create(name).metadata
        assert tool.input_schema == dict(ours.spec.parameters)
        assert tool.description == ours.spec.description
        assert tool.annotations is not None and tool.annotations.idempotent_hint is True
    assert listed["data_summary"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert listed["evaluate_formulas"].annotations.read_only_hint is False  # type: ignore[union-attr]


def test_data_summary_describes_the_chosen_target(served: dict[str, Any]) -> None:
    summary = served["summary"]
    assert not summary.is_error
    assert summary.structured_content["target"] == "y"
    assert list(summary.structured_content["variables"]) == ["x", "z"]
    assert "Target: y." in summary.content[0].text


def test_evaluate_formulas_fits_c0_to_3_for_a_3x2_target(served: dict[str, Any]) -> None:
    evaluated = served["evaluated"]
    assert not evaluated.is_error
    quadratic, linear, broken = evaluated.structured_content["results"]
    assert quadratic["status"] == "ok" and math.isclose(quadratic["constants"]["c0"], 3.0, rel_tol=1e-3)
    assert quadratic["val_nmse"] < 1e-6
    assert linear["status"] == "ok" and linear["val_nmse"] > 0.1
    assert broken["status"] == "invalid" and "offset 3" in broken["error"]
    assert evaluated.content[0].text.startswith("Evaluated 3 formula(s)")


def test_bad_calls_are_errors_the_client_can_read(served: dict[str, Any]) -> None:
    refused = served["refused"]
    assert refused.is_error and "argument 'expressions'" in refused.content[0].text
    unknown = served["unknown"]
    assert unknown.is_error and "unknown tool 'submit_formula'" in unknown.content[0].text


def test_best_formulas_returns_the_pareto_front(served: dict[str, Any]) -> None:
    front = served["front"]
    assert not front.is_error
    entries = front.structured_content["front"]
    assert [e["expression"] for e in entries][-1] == "c0*x**2"
    assert all(isinstance(e["simplified"], str) for e in entries)  # the readable form too
    assert [e["complexity"] for e in entries] == sorted(e["complexity"] for e in entries)
    assert front.structured_content["evaluated"] == 3
    assert "Pareto front" in front.content[0].text


def test_candidates_and_the_run_row_land_in_the_results(served: dict[str, Any]) -> None:
    results = served["results"]
    rows = duckdb.connect().execute(
        f"SELECT expression, status, model FROM read_parquet('{results}/candidates/**/*.parquet', "
        f"hive_partitioning = true) WHERE run_id = '{RUN_ID}' ORDER BY candidate_id"
    ).fetchall()
    assert rows == [
        ("c0*x**2", "ok", "mcp-client"),
        ("c0*x", "ok", "mcp-client"),
        ("x +", "invalid", "mcp-client"),
    ]
    run = read_run(results, RUN_ID)
    assert run is not None and (run.status, run.stop_reason) == ("completed", "client_closed")
    assert (run.best_expression, run.candidates, run.model) == ("c0*x**2", 3, "mcp-client")


# --- the pure parts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": float("nan"), "b": [1.5, float("inf")]}, {"a": None, "b": [1.5, None]}),
        ((1, "x", None, True), [1, "x", None, True]),
        ({"n": np.float32(2.5), "v": np.arange(3)}, {"n": 2.5, "v": [0, 1, 2]}),
        ({1: {2: frozenset()}}, {"1": {"2": []}}),
    ],
)
def test_json_safe(value: Any, expected: Any) -> None:
    assert json_safe(value) == expected


def _text(result: mcp_types.CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, mcp_types.TextContent)
    return block.text


def test_results_map_to_call_tool_results() -> None:
    ok = mcp_result(ToolCallResult(True, {"score": float("nan")}, "score: NaN"))
    assert (ok.is_error, ok.structured_content, _text(ok)) == (False, {"score": None}, "score: NaN")
    failed = mcp_result(ToolCallResult(False, {"success": False, "reason": "bad"}, "bad", {"error_kind": "tool_error"}))
    assert (failed.is_error, failed.structured_content, _text(failed)) == (True, None, "bad")


def test_options_and_their_errors(capsys: pytest.CaptureFixture[str]) -> None:
    options = parse_options(["--dataset", "feynman:I.6.2", "--n", "500", "--run-id", "r"])
    assert (options.dataset, options.n, options.run_id, options.results, options.seed) == ("feynman:I.6.2", 500, "r", "./results", 0)
    with pytest.raises(SystemExit) as exited:
        parse_options(["--dataset", "feynman:I.6.2", "--n", "0"])
    assert exited.value.code == 2 and "--n must be a positive integer" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_options([])


def test_a_bad_dataset_exits_with_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dataset", "feynman:NO.SUCH", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sr-dist-mcp: ") and "NO.SUCH" in err
    assert not (tmp_path / "runs").exists()  # nothing recorded for a run that never started


def test_sigterm_flushes_and_marks_the_run_interrupted(tmp_path: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "sr_dist.mcp_server", "--dataset", "feynman:I.6.2", "--n", "200",
         "--results", str(tmp_path), "--run-id", "stopped"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
    )
    try:
        assert server.stderr is not None
        for line in server.stderr:  # start-up logs may come first
            if line.startswith(b"sr-dist-mcp: serving"):
                break
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        server.kill()
    run = read_run(tmp_path, "stopped")
    assert run is not None and (run.status, run.stop_reason) == ("interrupted", "interrupted")
    assert run.ended_at is not None and run.candidates == 0
