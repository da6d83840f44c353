"""The MCP client against real server processes over stdio: our flaky server and mcp-server-time.

No mocks: every test launches real processes. One healthy flaky server is shared by the module
for calls that leave it healthy; tests that time a server out, crash it or fail its start get
their own.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sr_dist.sr.formula_tools import FORMULA_TOOLS
from sr_dist.tools import ToolCall, ToolRegistry
from sr_dist.tools.mcp import MCPConfigError, MCPStartupError, MCPTool, MCPToolset, start_mcp_tools
from tests.mcp.support import flaky

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def healthy() -> Iterator[MCPToolset]:
    # 3 s: mcp 2.3's server takes up to ~1 s to answer a tool that raises.
    with MCPToolset([flaky(call_timeout_s=3, timeout_argument_margin_s=1)]) as toolset:
        yield toolset


def _catalog(toolset: MCPToolset) -> Any:
    registry = ToolRegistry()
    toolset.register(registry)
    return registry.open_catalog()


def _pid(toolset: MCPToolset) -> int:
    catalog = _catalog(toolset)
    result = catalog.invoke(ToolCall("pid", {}))
    assert result.ok, result.result_str
    return int(result.result["result"])


# --- a healthy server ----------------------------------------------------------------------


def test_listed_tools_join_the_catalog_with_their_schemas(healthy: MCPToolset) -> None:
    catalog = _catalog(healthy)
    assert catalog.names() == ("echo", "add", "math_square", "pid", "sleep", "slow", "slow_sec", "fail", "crash", "exit_soon")
    specs = {spec.name: spec for spec in catalog.specs()}
    assert specs["echo"].description == "Return the text unchanged."
    assert specs["echo"].parameters["required"] == ["text"]
    assert specs["echo"].parameters["properties"]["text"]["type"] == "string"
    echo, add = catalog.get("echo"), catalog.get("add")
    assert isinstance(echo, MCPTool) and echo.server == "flaky" and echo.remote_name == "echo"
    assert echo.metadata.read_only and echo.metadata.idempotent
    assert isinstance(add, MCPTool) and add.metadata.idempotent and not add.metadata.read_only
    square = catalog.get("math_square")
    assert isinstance(square, MCPTool) and square.remote_name == "math.square"
    assert healthy.status("flaky").state == "ready" and healthy.status("flaky").pid is not None


def test_calls_through_the_catalog_return_tool_call_results(healthy: MCPToolset) -> None:
    catalog = _catalog(healthy)
    echoed = catalog.invoke(ToolCall("echo", {"text": "hello"}, id="c1"))
    assert echoed.ok and echoed.result_str == "hello" and echoed.meta_data["call_id"] == "c1"
    assert echoed.meta_data["mcp_server"] == "flaky" and echoed.meta_data["tool"] == "echo"
    added = catalog.invoke(ToolCall("add", {"a": 1.5, "b": 2}))
    assert added.ok and added.result == {"sum": 3.5}
    squared = catalog.invoke(ToolCall("math_square", {"x": 3}))
    assert squared.ok and squared.result == {"result": 9.0}


def test_an_is_error_result_is_a_model_visible_failure(healthy: MCPToolset) -> None:
    result = _catalog(healthy).invoke(ToolCall("fail", {"message": "the sensor is offline"}))
    assert not result.ok and result.error_kind == "tool_error"
    assert result.meta_data["model_visible"] and result.meta_data["mcp_is_error"]
    assert "fail" in result.result_str
    assert healthy.status("flaky").state == "ready"  # a tool's own error does not poison the server


def test_bad_arguments_are_refused_before_they_reach_the_server(healthy: MCPToolset) -> None:
    catalog = _catalog(healthy)
    via_catalog = catalog.invoke(ToolCall("add", {"a": "one", "b": 2}))
    assert via_catalog.error_kind == "invalid_tool_call" and "argument 'a'" in via_catalog.result_str
    tool = catalog.get("add")
    assert isinstance(tool, MCPTool)
    direct = tool(a=1)
    assert direct.error_kind == "invalid_tool_call" and "missing required argument 'b'" in direct.result_str
    # A direct call binds like the catalog: a whole float for an integer is sent as an int.
    crash = catalog.get("crash")
    refused, sent = crash._precheck({"code": 3.0})
    assert refused is None and sent == {"code": 3} and type(sent["code"]) is int


def test_a_timeout_s_argument_extends_the_wait(healthy: MCPToolset) -> None:
    # call_timeout_s is 3 s; the tool takes 3.5 s but asks for 4 s (+1 s margin): it must finish.
    result = _catalog(healthy).invoke(ToolCall("slow", {"duration_s": 3.5, "timeout_s": 4}))
    assert result.ok, result.result_str
    assert result.result == {"result": "done after 3.5s (allowed 4.0s)"}


def test_thea_s_spellings_and_a_timeout_sec_argument_set_the_deadline() -> None:
    # The server entry as Thea writes it: call_timeout_sec and timeout_argument_margin_sec.
    entry = {k: v for k, v in flaky().items() if k != "call_timeout_s"}
    entry.update(call_timeout_sec=1, timeout_argument_margin_sec=1)
    with MCPToolset([entry]) as toolset:
        [config] = toolset.configs
        assert (config.call_timeout_s, config.timeout_argument_margin_s) == (1, 1)
        catalog = _catalog(toolset)
        # 1.5 s of work, timeout_sec 2 (+1 s margin): the deadline is 3 s, so it finishes.
        done = catalog.invoke(ToolCall("slow_sec", {"duration_s": 1.5, "timeout_sec": 2}))
        assert done.ok, done.result_str
        assert done.result == {"result": "done after 1.5s (allowed 2.0s)"}
        # timeout_sec 0.1 (+1 s margin) never shortens the 1 s call timeout, and 1.1 s is too short.
        hung = catalog.invoke(ToolCall("slow_sec", {"duration_s": 1.5, "timeout_sec": 0.1}))
        assert not hung.ok and hung.error_kind == "timeout"
        assert "did not answer within 1.1s" in hung.result_str
        assert toolset.status("flaky").state == "status_unknown"


def test_both_spellings_with_different_values_are_refused_before_launch() -> None:
    entry = flaky(call_timeout_sec=5)  # flaky() already sets call_timeout_s: 20
    with pytest.raises(MCPConfigError, match=r"call_timeout_s \(20\) and call_timeout_sec \(5\)"):
        MCPToolset([entry])


def test_sync_and_async_calls_work_from_inside_other_event_loops(healthy: MCPToolset) -> None:
    tool = _catalog(healthy).get("echo")
    assert isinstance(tool, MCPTool)

    async def main() -> list[str]:
        together = await asyncio.gather(*(tool.acall(text=f"n{i}") for i in range(8)))
        blocking = tool(text="sync inside a running loop")
        return [r.result_str for r in together] + [blocking.result_str]

    assert asyncio.run(main()) == [f"n{i}" for i in range(8)] + ["sync inside a running loop"]


# --- timeouts, crashes, restarts -----------------------------------------------------------


def test_a_timeout_fails_fast_until_restart() -> None:
    with MCPToolset([flaky(call_timeout_s=1)]) as toolset:
        catalog = _catalog(toolset)
        first_pid = _pid(toolset)
        hung = catalog.invoke(ToolCall("sleep", {"seconds": 3600}))
        assert not hung.ok and hung.error_kind == "timeout"
        assert "'flaky'" in hung.result_str and "did not answer within 1s" in hung.result_str
        status = toolset.status("flaky")
        assert status.state == "status_unknown" and "'sleep'" in (status.reason or "")

        refused = [catalog.invoke(ToolCall("echo", {"text": "x"})), asyncio.run(catalog.ainvoke(ToolCall("pid", {})))]
        for result in refused:
            assert result.error_kind == "mcp_status_unknown" and result.meta_data["refused"]
            assert "MCP server 'flaky'" in result.result_str and "restart" in result.result_str

        assert toolset.restart("flaky") == (
            "add", "crash", "echo", "exit_soon", "fail", "math.square", "pid", "sleep", "slow", "slow_sec"
        )
        assert toolset.status("flaky").state == "ready" and toolset.status("flaky").restarts == 1
        assert _pid(toolset) != first_pid
        assert catalog.invoke(ToolCall("echo", {"text": "back"})).result_str == "back"


def test_a_crash_names_the_server_and_its_exit_code() -> None:
    with MCPToolset([flaky()]) as toolset:
        catalog = _catalog(toolset)
        crashed = catalog.invoke(ToolCall("crash", {"code": 7}))
        assert not crashed.ok and crashed.error_kind == "tool_error"
        assert "MCP server 'flaky' exited (code 7)" in crashed.result_str
        assert "crashing with code 7" in crashed.result_str  # its stderr, quoted
        later = catalog.invoke(ToolCall("echo", {"text": "anyone?"}))
        assert later.error_kind == "tool_error" and "MCP server 'flaky'" in later.result_str
        assert "code 7" in later.result_str
        status = toolset.status("flaky")
        assert status.state == "exited" and status.returncode == 7
        toolset.restart("flaky")
        assert catalog.invoke(ToolCall("echo", {"text": "again"})).result_str == "again"


def test_a_server_that_dies_while_idle_is_noticed_before_the_next_call() -> None:
    with MCPToolset([flaky()]) as toolset:
        catalog = _catalog(toolset)
        assert catalog.invoke(ToolCall("exit_soon", {"code": 5})).result_str == "exiting soon"
        for _ in range(500):  # the exit is seen by the toolset's own watcher, not by a call
            if toolset.status("flaky").state == "exited":
                break
            time.sleep(0.01)
        assert toolset.status("flaky").returncode == 5
        refused = catalog.invoke(ToolCall("echo", {"text": "x"}))
        assert refused.error_kind == "tool_error" and refused.meta_data["refused"]
        assert "MCP server 'flaky' is not running: it exited with code 5" in refused.result_str


def test_close_stops_the_servers_and_later_calls_fail_cleanly() -> None:
    toolset = start_mcp_tools([flaky()])
    catalog = _catalog(toolset)
    pid = toolset.status("flaky").pid
    assert pid is not None
    toolset.close()
    toolset.close()  # idempotent
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    result = catalog.invoke(ToolCall("echo", {"text": "x"}))
    assert result.error_kind == "tool_error" and "closed" in result.result_str
    with pytest.raises(RuntimeError, match="closed"):
        toolset.restart("flaky")


def test_restart_of_an_unknown_server_names_the_configured_ones() -> None:
    with MCPToolset([]) as toolset:
        assert toolset.tools() == ()
        with pytest.raises(KeyError, match="no MCP server named 'nope'; configured: \\(none\\)"):
            toolset.restart("nope")


# --- start-up failures ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (flaky("broken", "--fail-start", "3"), ["MCP server 'broken' failed to start", "exited with code 3", "configuration is broken"]),
        (flaky("stuck", "--hang-start", startup_timeout_s=1), ["MCP server 'stuck' did not start within 1s (startup_timeout_s)"]),
        ({"name": "ghost", "command": "/nonexistent/sr-dist-mcp-server"}, ["MCP server 'ghost' failed to start", "FileNotFoundError"]),
    ],
    ids=["exits", "hangs", "missing-command"],
)
def test_start_failures_name_the_server(entry: dict[str, Any], expected: list[str]) -> None:
    toolset = MCPToolset([flaky("fine"), entry])
    with pytest.raises(MCPStartupError) as caught:
        toolset.start()
    for text in expected:
        assert text in str(caught.value)
    assert toolset.closed and toolset.status("fine").state == "closed"  # the healthy one was stopped too


def test_a_non_strict_start_leaves_a_failed_server_out() -> None:
    with MCPToolset([flaky("fine"), flaky("broken", "--fail-start", "4")]).start(strict=False) as toolset:
        assert {tool.server for tool in toolset.tools()} == {"fine"}
        assert "exited with code 4" in toolset.failures()["broken"]
        assert toolset.status("broken").state == "stopped" and "code 4" in (toolset.status("broken").reason or "")
        assert _catalog(toolset).invoke(ToolCall("echo", {"text": "ok"})).ok


# --- names ---------------------------------------------------------------------------------


def test_duplicate_server_names_are_a_config_error() -> None:
    with pytest.raises(MCPConfigError, match=r"servers\[1\].name: duplicate MCP server name 'flaky'"):
        MCPToolset([flaky(), flaky()])


def test_a_tool_offered_by_two_servers_is_a_config_error_naming_both() -> None:
    toolset = MCPToolset([flaky("one"), flaky("two")])
    with pytest.raises(MCPConfigError, match="'echo' is offered by server 'one' .* and by server 'two'"):
        toolset.start()
    assert toolset.closed
    with MCPToolset([flaky("one"), flaky("two", prefix="two_")]) as prefixed:
        names = [tool.metadata.name for tool in prefixed.tools()]
        assert "echo" in names and "two_echo" in names and "two_math_square" in names


def test_a_tool_named_like_a_built_in_tool_is_a_config_error() -> None:
    with MCPToolset([flaky("shadowing", "--shadow", "evaluate_formulas")]) as toolset:
        with pytest.raises(MCPConfigError, match="MCP server 'shadowing': its tool 'evaluate_formulas' .* built-in tool"):
            toolset.tools(reserved=FORMULA_TOOLS)
        registry = ToolRegistry()
        registry.register(toolset.tools()[0])  # 'echo' is already in this registry
        with pytest.raises(MCPConfigError, match="its tool 'echo'"):
            toolset.register(registry)


# --- a third-party server from PyPI --------------------------------------------------------


def test_mcp_server_time_is_listed_and_called_through_the_catalog(time_server: dict[str, Any]) -> None:
    with MCPToolset([time_server]) as toolset:
        catalog = _catalog(toolset)
        assert {"get_current_time", "convert_time"} <= set(catalog.names())
        now = catalog.invoke(ToolCall("get_current_time", {"timezone": "UTC"}))
        assert now.ok, now.result_str
        assert now.result["timezone"] == "UTC" and now.result["datetime"].endswith("+00:00")
        converted = catalog.invoke(
            ToolCall("convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
        )
        assert converted.ok, converted.result_str
        assert converted.result["target"]["datetime"][11:16] == "21:00"
        bad = catalog.invoke(ToolCall("get_current_time", {"timezone": "Mars/Olympus_Mons"}))
        assert not bad.ok and bad.error_kind == "tool_error" and bad.meta_data["model_visible"]
        assert toolset.status("time").state == "ready"
        assert toolset.status("time").pid != os.getpid() and sys.executable  # its own process
