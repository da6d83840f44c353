"""Error kinds are a closed set (``ErrorKind``) whose values stay the plain strings results carry."""

from __future__ import annotations

import ast
import pickle
from enum import StrEnum
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sr_dist.tools import (
    ERROR_KINDS,
    BaseTool,
    ErrorKind,
    ToolCall,
    ToolMetadata,
    ToolRegistry,
)
from sr_dist.tools.outcomes import (
    IMPLEMENTATION_ERROR_KINDS,
    failure_result,
    is_implementation_failure,
)

TOOLS_DIR = Path(__file__).resolve().parents[2] / "sr_dist" / "tools"


def test_error_kinds_are_a_str_enum_with_the_documented_values() -> None:
    assert issubclass(ErrorKind, StrEnum)
    assert ERROR_KINDS == (
        "invalid_tool_call",
        "tool_error",
        "tool_protocol_violation",
        "timeout",
        "circuit_open",
        "cancelled",
        "mcp_status_unknown",
    )
    assert ErrorKind.TIMEOUT == "timeout" and f"{ErrorKind.TIMEOUT}" == "timeout"
    assert "timeout" in IMPLEMENTATION_ERROR_KINDS and "tool_error" in IMPLEMENTATION_ERROR_KINDS


@pytest.mark.parametrize("kind", [*ErrorKind, *ERROR_KINDS])
def test_failure_results_carry_the_plain_string(kind: str) -> None:
    result = failure_result("t", kind, "why", elapsed_s=0.0, max_chars=100)
    stored = result.meta_data["error_kind"]
    assert type(stored) is str and stored == str(kind)
    assert result.error_kind == kind
    assert pickle.loads(pickle.dumps(result)).meta_data["error_kind"] == stored
    assert pa.array([stored]).to_pylist() == [str(kind)]


def test_an_unknown_kind_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown error_kind 'timeout_soft'.*'cancelled'"):
        failure_result("t", "timeout_soft", "why", elapsed_s=0.0, max_chars=100)


class _Raises(BaseTool):
    metadata = ToolMetadata(name="ek_raises")

    def execute(self) -> dict[str, Any]:
        """Always fails."""
        raise RuntimeError("boom")


def test_results_built_by_the_runner_and_the_catalog_have_str_kinds() -> None:
    registry = ToolRegistry()
    registry.register(_Raises())
    catalog = registry.open_catalog()
    raised = catalog.invoke(ToolCall("ek_raises", {}))
    unknown = catalog.invoke(ToolCall("no_such_tool", {}))
    assert type(raised.meta_data["error_kind"]) is str and raised.error_kind == ErrorKind.TOOL_ERROR
    assert type(unknown.meta_data["error_kind"]) is str and unknown.error_kind == ErrorKind.INVALID_TOOL_CALL
    assert is_implementation_failure(raised) and not is_implementation_failure(unknown)


def _startswith_on_kinds(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
            receiver = ast.unparse(node.func.value)
            if "kind" in receiver.lower() or any("kind" in ast.unparse(arg).lower() for arg in node.args):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_kind_is_parsed_by_prefix_in_the_tool_layer() -> None:
    offenders = [hit for path in sorted(TOOLS_DIR.rglob("*.py")) for hit in _startswith_on_kinds(path)]
    assert offenders == []
