"""Data-driven behaviour tables in tests/tools/conformance/*.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sr_dist.tools import FunctionTool, ToolCall, ToolError, ToolRegistry
from sr_dist.tools.resilience import CircuitState, admit, circuit_phase, settle
from sr_dist.tools.validation import argument_errors, compile_parameters

HERE = Path(__file__).parent / "conformance"


def _cases(name: str) -> list[dict[str, Any]]:
    return json.loads((HERE / name).read_text())["cases"]


ARGUMENT_CASES = _cases("argument_validation.json")
CIRCUIT_CASES = _cases("circuit.json")


def _echo(**kwargs: Any) -> dict[str, Any]:
    return {"echo": kwargs}


@pytest.mark.parametrize("case", ARGUMENT_CASES, ids=[c["id"] for c in ARGUMENT_CASES])
def test_argument_validation_reasons(case: dict[str, Any]) -> None:
    validator = compile_parameters(case["schema"])
    reasons = argument_errors(validator, case["arguments"])
    tool = FunctionTool(name="echo", description="Echo.", input_schema=case["schema"], fn=_echo)
    catalog = ToolRegistry([tool]).open_catalog()
    call = ToolCall(name="echo", arguments=case["arguments"], id="c")
    direct = tool(**case["arguments"])
    via_catalog = catalog.invoke(call)
    if case.get("valid"):
        assert reasons == []
        assert catalog.bind(call).arguments == case["arguments"]
        assert direct.ok and via_catalog.ok
        return
    joined = "; ".join(reasons)
    assert len(reasons) == len(case["reasons"]), reasons
    for expected in case["reasons"]:
        assert expected in joined, (expected, joined)
    with pytest.raises(ToolError) as info:
        catalog.bind(call)
    assert all(expected in str(info.value) for expected in case["reasons"])
    for result in (direct, via_catalog):
        assert not result.ok
        assert result.meta_data["error_kind"] == "invalid_tool_call"
        assert all(expected in result.result_str for expected in case["reasons"])


@pytest.mark.parametrize("case", CIRCUIT_CASES, ids=[c["id"] for c in CIRCUIT_CASES])
def test_circuit_state_machine(case: dict[str, Any]) -> None:
    state = CircuitState()
    for step in case["steps"]:
        admitted, probe, state = admit(state, step["t"], case["recovery_s"])
        assert admitted is step["admitted"], step
        if admitted and step["outcome"] != "pending":
            state = settle(state, step["outcome"], step["t"], case["threshold"], probe)
        assert circuit_phase(state, step["t"], case["recovery_s"]) == step["phase"], step
