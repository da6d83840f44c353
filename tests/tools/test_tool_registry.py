"""ToolRegistry, catalogs, function tools, BuiltinTool and foreign (protocol-only) tools."""

from __future__ import annotations

import asyncio
import copy
import threading
from typing import Any, Literal

import pytest

from sr_dist.tools import (
    BaseTool,
    BuiltinTool,
    FunctionTool,
    Tool,
    ToolCall,
    ToolCallResult,
    ToolError,
    ToolMetadata,
    ToolRegistry,
    ToolRunAbort,
    ToolSpec,
    function_tool,
)
from sr_dist.tools.outcomes import success_result

UPPER_SCHEMA = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string"}},
    "additionalProperties": False,
}


@function_tool(
    name="uppercase",
    description="Convert text to uppercase.",
    input_schema=UPPER_SCHEMA,
    output_schema=UPPER_SCHEMA,
    idempotent=True,
)
async def uppercase(text: str) -> dict[str, Any]:
    return {"text": text.upper()}


def _notify(message: str) -> dict[str, Any]:
    return {"success": True, "observation": f"sent {message!r}"}


NOTIFY = BuiltinTool(
    name="notify_user",
    description="Send a one-way progress notification.",
    input_schema={
        "type": "object",
        "properties": {"message": {"type": "string", "minLength": 1}},
        "required": ["message"],
        "additionalProperties": False,
    },
    fn=_notify,
)


class ForeignTool:
    """A protocol-only tool (what an MCP-served tool looks like): metadata + acall, no __call__."""

    def __init__(self, name: str = "remote_lookup", output: Any = None) -> None:
        self._metadata = ToolMetadata(
            name=name,
            description="Look something up remotely.",
            parameters={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
            output_schema={"type": "object", "required": ["value"]},
        )
        self.output = output
        self.calls: list[dict[str, Any]] = []

    @property
    def metadata(self) -> ToolMetadata:
        return self._metadata

    async def acall(self, **arguments: Any) -> ToolCallResult:
        self.calls.append(arguments)
        value = self.output if self.output is not None else {"value": arguments["key"] * 2}
        return success_result(self._metadata.name, value, elapsed_s=0.0, max_chars=8000)


def test_function_tool_and_builtin_tool_are_tools() -> None:
    assert isinstance(uppercase, FunctionTool) and isinstance(uppercase, Tool)
    assert isinstance(NOTIFY, Tool)
    assert uppercase.metadata.idempotent is True
    assert uppercase(text="abc").result == {"text": "ABC"}
    assert asyncio.run(uppercase.acall(text="x")).result_str == "text: X"
    result = NOTIFY(message="halfway")
    assert result.ok and result.envelope() == {"success": True, "observation": "sent 'halfway'"}
    empty = NOTIFY(message="")
    assert empty.meta_data["error_kind"] == "invalid_tool_call" and "'message'" in empty.result_str


def test_registry_tool_decorator_infers_the_schema() -> None:
    registry = ToolRegistry()

    @registry.tool(description="Navigate to one confirmed ref.")
    def navigate_to(target: str, speed: Literal["slow", "fast"] = "slow") -> dict[str, Any]:
        """Ignored summary.

        Args:
            target: The ref to go to.
        """
        return {"success": True, "run_id": f"run-{target}-{speed}"}

    @registry.tool
    def ping() -> dict[str, Any]:
        """Check that the tool layer answers."""
        return {"pong": True}

    assert navigate_to.fn(target="a") == {"success": True, "run_id": "run-a-slow"}
    spec = {s.name: s for s in registry.open_catalog().specs()}
    assert spec["navigate_to"] == ToolSpec(
        name="navigate_to",
        description="Navigate to one confirmed ref.",
        parameters={
            "type": "object",
            "properties": {
                "target": {"type": "string", "description": "The ref to go to."},
                "speed": {"type": "string", "enum": ["slow", "fast"], "default": "slow"},
            },
            "required": ["target"],
            "additionalProperties": False,
        },
    )
    assert spec["ping"].description == "Check that the tool layer answers."
    result = registry.open_catalog().invoke(ToolCall("navigate_to", {"target": "door"}))
    assert result.ok and result.result["run_id"] == "run-door-slow"


def test_every_tool_kind_registers_the_same_way() -> None:
    from sr_dist.tools import CircuitBreakingTool, RetryingTool

    @BaseTool.register("reg_base_tool")
    class Base(BaseTool):
        def execute(self, x: int) -> dict[str, Any]:
            """Double x."""
            return {"x": 2 * x}

    wrapped = CircuitBreakingTool(RetryingTool(uppercase, max_attempts=2, backoff_s=0.0))
    registry = ToolRegistry([BaseTool.create("reg_base_tool"), wrapped, NOTIFY, ForeignTool()])
    catalog = registry.open_catalog()
    assert catalog.names() == ("reg_base_tool", "uppercase", "notify_user", "remote_lookup")
    assert catalog.invoke(ToolCall("reg_base_tool", {"x": 2})).result == {"x": 4}
    upper = catalog.invoke(ToolCall("uppercase", {"text": "q"}))
    assert upper.result == {"text": "Q"} and upper.meta_data["attempts"] == 1
    assert catalog.invoke(ToolCall("remote_lookup", {"key": "ab"})).result == {"value": "abab"}
    assert asyncio.run(catalog.ainvoke(ToolCall("remote_lookup", {"key": "c"}))).result == {"value": "cc"}


def test_register_rejects_non_tools() -> None:
    with pytest.raises(TypeError):
        ToolRegistry().register(lambda text: text)  # type: ignore[arg-type]


def test_duplicate_name_raises_value_error() -> None:
    registry = ToolRegistry([uppercase])
    with pytest.raises(ValueError, match="already registered"):
        registry.register(FunctionTool(name="uppercase", description="", input_schema=UPPER_SCHEMA, fn=str.upper))
    assert len(registry) == 1


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        ({"type": "object", "properties": {"a": {"type": "strin"}}}, "not a valid JSON Schema"),
        ({"type": "object", "properties": {"a": {"minLength": -1}}}, "not a valid JSON Schema"),
        ({"type": "object", "required": "a"}, "not a valid JSON Schema"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "unresolvable \\$ref"),
        ({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}, "unresolvable \\$ref"),
        ({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}}, "unresolvable \\$ref"),
        ({"type": "array"}, "type"),
    ],
)
def test_invalid_schemas_are_rejected_at_registration(schema: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ToolRegistry().register(ForeignToolWith(schema))
    with pytest.raises(ValueError, match=match):
        FunctionTool(name="f", description="", input_schema=schema, fn=lambda **_: {})


def test_invalid_output_schema_is_rejected() -> None:
    with pytest.raises(ValueError, match="output schema"):
        FunctionTool(name="f", description="", input_schema=UPPER_SCHEMA, output_schema={"type": 5}, fn=lambda **_: {})


def test_resolvable_refs_are_accepted_including_nested_ids() -> None:
    schema = {
        "type": "object",
        "$defs": {"expr": {"type": "string"}},
        "properties": {
            "a": {"$ref": "#/$defs/expr"},
            "b": {
                "$id": "urn:example:inner",
                "$defs": {"n": {"type": "integer"}},
                "type": "object",
                "properties": {"n": {"$ref": "#/$defs/n"}},
            },
        },
    }
    tool = ForeignToolWith(schema)
    catalog = ToolRegistry([tool]).open_catalog()
    assert catalog.bind(ToolCall("custom", {"a": "x", "b": {"n": 1}}))
    with pytest.raises(ToolError, match="argument 'b.n'"):
        catalog.bind(ToolCall("custom", {"a": "x", "b": {"n": "one"}}))


class ForeignToolWith(ForeignTool):
    def __init__(self, parameters: dict[str, Any]) -> None:
        super().__init__("custom")
        self._metadata = ToolMetadata(name="custom", description="Custom.", parameters=parameters)


def test_registry_is_thread_safe() -> None:
    registry = ToolRegistry()
    barrier = threading.Barrier(8)
    errors: list[Exception] = []

    def worker(k: int) -> None:
        barrier.wait()
        for i in range(25):
            try:
                registry.register(ForeignTool(f"t{i}"))  # every name is attempted by 8 threads
            except ValueError as exc:
                errors.append(exc)
            registry.open_catalog().specs()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(registry.names()) == sorted(f"t{i}" for i in range(25))
    assert len(errors) == 25 * 7  # exactly one registration per name won


def test_catalog_is_an_immutable_snapshot() -> None:
    registry = ToolRegistry([uppercase])
    catalog = registry.open_catalog()
    registry.register(NOTIFY)
    assert catalog.names() == ("uppercase",)
    assert "notify_user" not in catalog
    assert registry.open_catalog().names() == ("uppercase", "notify_user")
    specs = catalog.specs()
    specs[0].parameters["properties"]["text"]["type"] = "integer"  # type: ignore[index]
    tools = catalog.openai_tools()
    tools[0]["function"]["parameters"]["required"].append("junk")
    assert catalog.specs()[0].parameters["properties"]["text"]["type"] == "string"
    assert catalog.openai_tools()[0]["function"]["parameters"]["required"] == ["text"]
    assert catalog.invoke(ToolCall("uppercase", {"text": "a"})).ok


def test_catalog_copies_the_schema_at_registration() -> None:
    schema = copy.deepcopy(UPPER_SCHEMA)
    tool = ForeignToolWith(schema)
    registry = ToolRegistry([tool])
    schema["properties"]["text"]["type"] = "integer"  # mutating the caller's dict later
    catalog = registry.open_catalog()
    assert catalog.bind(ToolCall("custom", {"text": "still a string"}))


def test_specs_and_openai_tools_format() -> None:
    catalog = ToolRegistry([uppercase, NOTIFY]).open_catalog()
    specs = catalog.specs()
    assert all(isinstance(s, ToolSpec) for s in specs)
    assert specs[0] == ToolSpec("uppercase", "Convert text to uppercase.", UPPER_SCHEMA)
    assert catalog.openai_tools()[1] == {
        "type": "function",
        "function": {
            "name": "notify_user",
            "description": "Send a one-way progress notification.",
            "parameters": dict(NOTIFY.metadata.parameters or {}),
        },
    }


def test_bind_raises_tool_error_for_unknown_tool_listing_known_names() -> None:
    catalog = ToolRegistry([uppercase, NOTIFY]).open_catalog()
    with pytest.raises(ToolError) as info:
        catalog.bind(ToolCall("upper", {"text": "a"}))
    assert "unknown tool 'upper'" in str(info.value)
    assert "uppercase" in str(info.value) and "notify_user" in str(info.value)
    assert info.value.tool == "upper"


def test_bind_raises_tool_error_naming_the_argument() -> None:
    catalog = ToolRegistry([uppercase]).open_catalog()
    with pytest.raises(ToolError) as info:
        catalog.bind(ToolCall("uppercase", {"text": 5}))
    assert info.value.reasons == ("argument 'text': 5 is not of type 'string'",)


def test_bind_rejects_arguments_that_are_not_an_object() -> None:
    catalog = ToolRegistry([uppercase]).open_catalog()
    with pytest.raises(ToolError, match="JSON object"):
        catalog.bind(ToolCall("uppercase", ["text"]))  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_invoke_never_raises_for_bad_calls(mode: str) -> None:
    foreign = ForeignTool()
    catalog = ToolRegistry([uppercase, foreign]).open_catalog()

    def run(call: ToolCall) -> ToolCallResult:
        return catalog.invoke(call) if mode == "sync" else asyncio.run(catalog.ainvoke(call))

    unknown = run(ToolCall("nope", {}, id="call-1"))
    assert not unknown.ok and unknown.meta_data["error_kind"] == "invalid_tool_call"
    assert "uppercase" in unknown.result_str and unknown.meta_data["call_id"] == "call-1"
    bad = run(ToolCall("remote_lookup", {"key": 3}, id="call-2"))
    assert bad.meta_data["error_kind"] == "invalid_tool_call"
    assert "argument 'key'" in bad.result_str
    assert foreign.calls == []  # nothing ran
    good = run(ToolCall("remote_lookup", {"key": "k"}, id="call-3"))
    assert good.ok and good.meta_data["call_id"] == "call-3"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_declared_output_schema_is_checked_for_any_tool(mode: str) -> None:
    foreign = ForeignTool(output={"not_value": 1})
    catalog = ToolRegistry([foreign]).open_catalog()
    call = ToolCall("remote_lookup", {"key": "k"})
    result = catalog.invoke(call) if mode == "sync" else asyncio.run(catalog.ainvoke(call))
    assert not result.ok
    assert result.meta_data["error_kind"] == "tool_error"
    assert "missing required field 'value'" in result.result_str


def test_function_tool_output_schema_mismatch() -> None:
    @function_tool(name="liar", description="", input_schema={"type": "object"}, output_schema=UPPER_SCHEMA)
    def liar() -> dict[str, Any]:
        return {"text": 1}

    for result in (liar(), ToolRegistry([liar]).open_catalog().invoke(ToolCall("liar", {}))):
        assert not result.ok and result.meta_data["error_kind"] == "tool_error"
        assert "field 'text'" in result.result_str


class _BrokenForeign(ForeignTool):
    def __init__(self, behaviour: str) -> None:
        super().__init__("broken")
        self.behaviour = behaviour

    async def acall(self, **arguments: Any) -> ToolCallResult:
        if self.behaviour == "raise":
            raise RuntimeError("connection reset")
        if self.behaviour == "abort":
            raise ToolRunAbort("stop")
        return {"value": 1}  # type: ignore[return-value]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_foreign_tool_breaking_the_contract_is_contained(mode: str) -> None:
    for behaviour, expected in (("raise", "connection reset"), ("wrong_type", "not ToolCallResult")):
        catalog = ToolRegistry([_BrokenForeign(behaviour)]).open_catalog()
        call = ToolCall("broken", {"key": "k"})
        result = catalog.invoke(call) if mode == "sync" else asyncio.run(catalog.ainvoke(call))
        assert not result.ok and result.meta_data["error_kind"] == "tool_error"
        assert expected in result.result_str
    catalog = ToolRegistry([_BrokenForeign("abort")]).open_catalog()
    with pytest.raises(ToolRunAbort):
        if mode == "sync":
            catalog.invoke(ToolCall("broken", {"key": "k"}))
        else:
            asyncio.run(catalog.ainvoke(ToolCall("broken", {"key": "k"})))


def test_function_tool_with_context_honours_cancellation() -> None:
    event = threading.Event()
    tool = NOTIFY.with_context({"cancel_event": event})
    assert tool(message="a").ok
    event.set()
    result = tool(message="a")
    assert result.meta_data["error_kind"] == "cancelled"
    assert NOTIFY(message="a").ok  # the original is unchanged


def test_function_tool_requires_an_explicit_schema() -> None:
    with pytest.raises(ValueError, match="input_schema"):
        function_tool(name="f", description="", input_schema=None)  # type: ignore[arg-type]


def test_results_and_errors_survive_pickling() -> None:
    import pickle

    catalog = ToolRegistry([uppercase]).open_catalog()
    for result in (
        catalog.invoke(ToolCall("uppercase", {"text": "a"}, id="1")),
        catalog.invoke(ToolCall("uppercase", {"text": 1}, id="2")),
    ):
        assert pickle.loads(pickle.dumps(result)) == result
    error = ToolError("bad", tool="t", reasons=("r1",))
    copy_ = pickle.loads(pickle.dumps(error))
    assert (str(copy_), copy_.tool, copy_.reasons) == ("bad", "t", ("r1",))


def test_inferred_async_function_tool_with_timeout() -> None:
    registry = ToolRegistry()

    @registry.tool(description="Wait.", timeout_s=0.3)  # the 0 s call must fit even under load
    async def wait(seconds: float) -> dict[str, Any]:
        await asyncio.sleep(seconds)
        return {"waited": seconds}

    catalog = registry.open_catalog()
    assert catalog.invoke(ToolCall("wait", {"seconds": 0})).ok
    slow = asyncio.run(catalog.ainvoke(ToolCall("wait", {"seconds": 30})))
    assert slow.meta_data["error_kind"] == "timeout"
    assert catalog.specs()[0].parameters["properties"]["seconds"] == {"type": "number"}


class _AsyncCallable:
    """A callable object with an async __call__ (e.g. a client wrapper) used as a tool's fn."""

    async def __call__(self, key: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"value": key}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_async_callable_object_as_fn(mode: str) -> None:
    tool = BuiltinTool(
        name="async_callable",
        description="",
        input_schema={"type": "object", "properties": {"key": {"type": "string"}}},
        fn=_AsyncCallable(),
        timeout_s=5.0,
    )
    result = tool(key="k") if mode == "sync" else asyncio.run(tool.acall(key="k"))
    assert result.ok and result.result == {"value": "k"}


class _Scale(BaseTool):
    metadata = ToolMetadata(name="scale_values")

    def execute(self, values: list[float], factor: int = 2) -> dict[str, Any]:
        """Multiply each value by factor.

        Args:
            values: The numbers.
            factor: The multiplier.
        """
        return {"values": [v * factor for v in values]}


class _Rewriting(_Scale):
    """A subclass whose ``acall`` changes the arguments before the runner sees them."""

    metadata = ToolMetadata(name="scale_rewritten")

    async def acall(self, /, **arguments: Any) -> ToolCallResult:
        return await super().acall(**{**arguments, "factor": "three"})


def _counting_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    import sr_dist.tools.execution as execution

    seen: list[str] = []
    real = execution.check_arguments

    def counting(validator: Any, arguments: Any) -> Any:
        seen.append(sorted(arguments))
        return real(validator, arguments)

    monkeypatch.setattr(execution, "check_arguments", counting)
    return seen


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_catalog_call_validates_its_arguments_once(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """The catalog's bind has checked (and coerced) the arguments against the tool's own schema,
    so the tool's runner does not check them again; a direct call still checks them."""
    seen = _counting_checks(monkeypatch)
    catalog = ToolRegistry([_Scale()]).open_catalog()
    call = ToolCall("scale_values", {"values": [1.5, 2.0], "factor": 3.0})
    result = catalog.invoke(call) if mode == "sync" else asyncio.run(catalog.ainvoke(call))
    assert result.ok and result.result == {"values": [4.5, 6.0]}  # 3.0 coerced to 3 by the bind
    assert seen == []  # the runner's own check was skipped
    direct = _Scale()(values=[1.0], factor=2)
    assert direct.ok and len(seen) == 1
    refused = catalog.invoke(ToolCall("scale_values", {"values": "no"}))
    assert not refused.ok and "values" in refused.result_str and len(seen) == 1


def test_arguments_changed_after_the_bind_are_validated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counting_checks(monkeypatch)
    catalog = ToolRegistry([_Rewriting()]).open_catalog()
    result = asyncio.run(catalog.ainvoke(ToolCall("scale_rewritten", {"values": [1.0]})))
    assert len(seen) == 1 and not result.ok and "factor" in result.result_str
