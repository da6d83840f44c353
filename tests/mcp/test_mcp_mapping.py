"""The pure parts of the MCP client: config validation, names, timeouts, result mapping.

Behaviour tables live in tests/mcp/conformance/*.json; one parametrized test runs each.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from hydra import compose, initialize_config_module

from sr_dist.tools.mcp import (
    MCPConfigError,
    MCPServerConfig,
    call_result,
    call_timeout_s,
    catalog_name,
    parse_servers,
    tool_metadata,
)

HERE = Path(__file__).parent / "conformance"


def _table(name: str) -> dict[str, Any]:
    return json.loads((HERE / name).read_text())


CONFIG = _table("config.json")
TIMEOUTS = _table("timeouts.json")
RESULTS = _table("results.json")


def _as_dict(config: MCPServerConfig) -> dict[str, Any]:
    values = dataclasses.asdict(config)
    values["args"] = list(values["args"])
    values["env"] = dict(values["env"])
    return values


@pytest.mark.parametrize("case", CONFIG["cases"], ids=[c["id"] for c in CONFIG["cases"]])
def test_server_config_table(case: dict[str, Any]) -> None:
    if "error" in case:
        with pytest.raises(MCPConfigError) as caught:
            parse_servers(case["servers"])
        assert case["error"] in str(caught.value)
        assert isinstance(caught.value, ValueError)
    else:
        assert [_as_dict(c) for c in parse_servers(case["servers"])] == case["expect"]


def test_configs_are_frozen_and_checked_when_built_directly() -> None:
    config = MCPServerConfig(name="a", command="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.command = "y"  # type: ignore[misc]
    with pytest.raises(MCPConfigError, match="MCP server 'a': call_timeout_s must be a positive number"):
        MCPServerConfig(name="a", command="x", call_timeout_s=0)
    assert parse_servers([config]) == (config,)


def test_servers_are_overridable_on_the_command_line_like_any_hydra_key() -> None:
    override = "servers=[{name: time, command: python, args: [-m, mcp_server_time, 8000], call_timeout_s: 5}]"
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        default = compose("config")
        overridden = compose("config", overrides=[override])
    assert parse_servers(default.servers) == ()
    [server] = parse_servers(overridden.servers)
    assert server == MCPServerConfig(
        name="time", command="python", args=("-m", "mcp_server_time", "8000"), call_timeout_s=5
    )


@pytest.mark.parametrize("case", TIMEOUTS["cases"], ids=[c["id"] for c in TIMEOUTS["cases"]])
def test_call_timeout_table(case: dict[str, Any]) -> None:
    config = MCPServerConfig.from_mapping(TIMEOUTS["config"])
    assert call_timeout_s(config, TIMEOUTS[case["schema"]], case["arguments"]) == case["expect"]


def test_an_infinite_timeout_argument_is_ignored() -> None:
    config = MCPServerConfig.from_mapping(TIMEOUTS["config"])
    assert call_timeout_s(config, TIMEOUTS["with_argument"], {"timeout_s": math.inf}) == 10


@pytest.mark.parametrize("case", RESULTS["cases"], ids=[c["id"] for c in RESULTS["cases"]])
def test_call_result_table(case: dict[str, Any]) -> None:
    wire = mcp_types.CallToolResult.model_validate(case["wire"])
    result = call_result("lookup", "srv", wire, elapsed_s=0.25, max_chars=4000)
    assert result.ok is case["ok"]
    assert result.result_str == case["result_str"]
    assert result.meta_data["tool"] == "lookup" and result.meta_data["mcp_server"] == "srv"
    assert result.meta_data["elapsed_s"] == 0.25
    if case["ok"]:
        assert result.result == case["result"]
    else:
        assert result.error_kind == case["error_kind"]
        assert result.meta_data["model_visible"] is case["model_visible"]
        assert result.envelope() == {"success": False, "reason": case["result_str"]}


def test_long_results_are_truncated_visibly() -> None:
    wire = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="x" * 500)])
    result = call_result("lookup", "srv", wire, elapsed_s=0.0, max_chars=100)
    assert result.ok and result.meta_data["truncated"] and len(result.result_str) <= 100
    assert "truncated" in result.result_str and result.result == {"text": "x" * 500}


@pytest.mark.parametrize(
    ("prefix", "remote", "expected"),
    [
        ("", "get_current_time", "get_current_time"),
        ("t_", "get_current_time", "t_get_current_time"),
        ("", "math.square", "math_square"),
        ("", "fs/read file", "fs_read_file"),
    ],
)
def test_catalog_names(prefix: str, remote: str, expected: str) -> None:
    assert catalog_name(prefix, remote, server="srv") == expected


def test_a_catalog_name_that_cannot_fit_is_a_config_error() -> None:
    with pytest.raises(MCPConfigError, match="MCP server 'srv': tool 'x{64}' cannot be named"):
        catalog_name("p_", "x" * 64, server="srv")


def test_tool_metadata_keeps_the_schema_and_believes_the_hints() -> None:
    config = MCPServerConfig(name="srv", command="x", call_timeout_s=7, prefix="s_")
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    listed = mcp_types.Tool(
        name="weather",
        description="Current weather.",
        input_schema=schema,
        annotations=mcp_types.ToolAnnotations(read_only_hint=True),
    )
    meta = tool_metadata(config, listed)
    assert (meta.name, meta.description, dict(meta.parameters or {})) == ("s_weather", "Current weather.", schema)
    assert meta.read_only and meta.idempotent and meta.timeout_s == 7

    bare = mcp_types.Tool(name="poke", input_schema={"type": "object"})
    meta = tool_metadata(config, bare)
    assert meta.description == "Tool 'poke' of MCP server 'srv'."
    assert not meta.read_only and not meta.idempotent
