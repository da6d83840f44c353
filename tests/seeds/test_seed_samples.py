"""The seed documents' code samples run on sr-dist and do what the text next to them says.

Each sample is read from ``../shared/seeds/`` (see ``samples.py``), its imports mapped onto
sr-dist, and run as written; helpers a sample calls without defining (``start_navigation``,
``send_notification``) are test doubles put in its namespace. ``test_every_sample_is_checked``
fails when a seed gains a sample no check reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from sr_dist.conversation import Context
from sr_dist.models import ModelProtocol, ModelResponse, build_model
from sr_dist.tools import (
    BaseTool,
    BuiltinTool,
    FunctionTool,
    RetryingTool,
    Tool,
    ToolCall,
    ToolCallResult,
    ToolError,
    ToolMetadata,
    ToolRegistry,
    ToolRunAbort,
    function_tool,
    kernel,
)
from sr_dist.tools.mcp.config import parse_servers
from tests.seeds.samples import SEEDS_DIR, Sample, load_samples, run_python

pytestmark = pytest.mark.skipif(
    not SEEDS_DIR.is_dir(),
    reason=f"the seed documents are not here ({SEEDS_DIR}); CI checks them out beside the repository",
)

SAMPLES: dict[str, tuple[Sample, ...]] = load_samples() if SEEDS_DIR.is_dir() else {}


#: (document prefix, marker) of every sample some check below reads.
CLAIMS: list[tuple[str, str]] = []


def sample(document: str, marker: str) -> Sample:
    """The one sample of the ``document`` (name prefix) whose text contains ``marker``."""
    assert (document, marker) in CLAIMS, f"add ({document!r}, {marker!r}) to the claims below"
    if not SAMPLES:
        pytest.skip("no seed documents")
    found = [s for name, samples in SAMPLES.items() if name.startswith(document) for s in samples if marker in s.text]
    assert len(found) == 1, f"expected one sample with {marker!r} in seed {document}, found {len(found)}"
    return found[0]


# Every sample a check reads, by a marker in its text (test_every_sample_is_checked reads this).
CLAIMS.extend([
    ("000", "class ExampleTool"),
    ("001", "async def uppercase"),
    ("001", "resilient_tool ="),
    ("001", "Name\tPurpose"),
    ("001", "名称\t用途"),
    ("003", "harness = Harness("),
    ("003", "Provider\tExtra"),
    ("003", "class MyModel"),
    ("003", "def navigate_to"),
    ("003", 'name="notify_user"'),
    ("003", "servers:"),
    ("003", '"inputSchema"'),
    ("003", '{"success": True, "observation"'),
])


# --- doubles for helpers the samples call without defining them --------------------------------


class Navigation:
    """``start_navigation(target) -> run_id``, recording each target."""

    def __init__(self, run_id: str = "run-") -> None:
        self.targets: list[str] = []
        self.prefix = run_id

    def __call__(self, target: str) -> str:
        self.targets.append(target)
        return f"{self.prefix}{target}" if self.prefix else ""


class Notifications:
    """``send_notification(message) -> observation``, recording each message."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def __call__(self, message: str) -> str:
        self.sent.append(message)
        return f"notified: {message}"


class SeedHarness:
    """What sr-dist does with Thea's ``Harness(config)``: MCP servers from ``servers`` and,
    when ``model`` is not given, the model ``build_model`` makes from ``llm``."""

    def __init__(self, config: Mapping[str, Any], model: ModelProtocol | None = None) -> None:
        self.servers = parse_servers(config.get("servers"))
        self.model = model if model is not None else build_model(config["llm"])


def run_samples(document: str, *markers: str, **names: Any) -> dict[str, Any]:
    """Run the marked samples of one document, in order, in one namespace seeded with ``names``."""
    namespace: dict[str, Any] = dict(names)
    namespace["__name__"] = f"seed_{document}_samples"
    for marker in markers:
        run_python(sample(document, marker), namespace, overrides={"Harness": SeedHarness})
    return namespace


def test_every_sample_is_checked() -> None:
    unclaimed = [
        s.id
        for name, samples in SAMPLES.items()
        for s in samples
        if not any(name.startswith(doc) and marker in s.text for doc, marker in CLAIMS)
    ]
    assert not unclaimed, f"seed samples no check reads: {unclaimed}"
    assert {name[:3] for name in SAMPLES} >= {"000", "001", "003"}


# --- 000: SRHarness BaseTool ---------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _own_tool_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed's ``example_tool`` registers by name: keep it out of other tests' registry."""
    monkeypatch.setattr(BaseTool, "_classes", {k: v for k, v in BaseTool._classes.items() if k != "example_tool"})


def _example_tool() -> type[BaseTool]:
    namespace = run_samples("000", "class ExampleTool")
    tool_class: type[BaseTool] = namespace["ExampleTool"]
    return tool_class


def test_000_example_tool_registers_and_infers_its_schema() -> None:
    tool_class = _example_tool()
    assert BaseTool.lookup("example_tool") is tool_class
    tool = BaseTool.create("example_tool")
    spec = tool.spec
    assert spec.description == "Inspect an expression."
    assert spec.parameters["properties"] == {
        "expression": {"type": "string", "description": "Expression supplied by the model."},
        "limit": {"type": "integer", "description": "Maximum number of returned items.", "default": 10},
    }
    assert spec.parameters["required"] == ["expression"]


def test_000_example_tool_returns_ok() -> None:
    tool = _example_tool()()
    result = tool(expression="x + 1", limit=3.0)  # a whole float for the int is bound as 3
    assert result.ok, result.result_str
    assert result.result["limit"] == 3 and type(result.result["limit"]) is int
    assert isinstance(result.result["expression"], str) and result.result["expression"]
    assert tool(expression="x").result["limit"] == 10


def test_000_result_and_error_contract() -> None:
    """Exceptions become ok=False results, ToolRunAbort is not swallowed, result_str is bounded."""

    class Faulty(BaseTool):
        metadata = ToolMetadata(name="seed_faulty", max_result_chars=80)

        def execute(self, mode: str) -> dict[str, Any]:
            if mode == "timeout":
                raise TimeoutError("the backend timed out")
            if mode == "abort":
                raise ToolRunAbort("stop the run")
            return {"text": "x" * 500}

    tool = Faulty()
    failed = tool(mode="timeout")
    assert not failed.ok and "TimeoutError: the backend timed out" in failed.result_str
    with pytest.raises(ToolRunAbort):
        tool(mode="abort")
    long = tool(mode="long")
    assert long.ok and len(long.result_str) <= 80 and long.result == {"text": "x" * 500}


# --- 001: jharness-toolkit -----------------------------------------------------------------------


def _quick_start() -> tuple[dict[str, Any], str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        namespace = run_samples("001", "async def uppercase")
    return namespace, out.getvalue()


def test_001_quick_start_runs_and_prints_the_bound_tool() -> None:
    namespace, printed = _quick_start()
    assert printed == "uppercase\n"
    uppercase = namespace["uppercase"]
    assert isinstance(uppercase, FunctionTool) and isinstance(uppercase, Tool)
    assert uppercase.metadata.idempotent is True  # execution=ToolExecution(idempotent=True)
    assert namespace["ToolCall"] is kernel.ToolCall


def test_001_open_catalog_is_an_immutable_snapshot() -> None:
    namespace, _ = _quick_start()
    registry = ToolRegistry((namespace["uppercase"],))

    async def opened() -> Any:
        return await registry.open_catalog()

    catalog = asyncio.run(opened())
    registry.register(function_tool(name="later", input_schema={"type": "object"})(lambda: {"ok": 1}))
    assert catalog.names() == ("uppercase",)
    assert registry.open_catalog().names() == ("uppercase", "later")


def test_001_validation_happens_at_registration_bind_and_after_the_call() -> None:
    namespace, _ = _quick_start()
    catalog = ToolRegistry((namespace["uppercase"],)).open_catalog()
    call = namespace["ToolCall"]
    with pytest.raises(ToolError, match="argument 'text'"):
        catalog.bind(call("c1", "uppercase", {"text": 5}))
    with pytest.raises(ToolError, match="unknown tool"):
        catalog.bind(call("c2", "lowercase", {"text": "a"}))
    result = catalog.bind(call("c3", "uppercase", {"text": "hello"})).invoke()
    assert result.ok and result.result == {"text": "HELLO"}
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        function_tool(name="bad", input_schema={"type": "object", "properties": {"a": {"type": "nope"}}})(str)
    with pytest.raises(ValueError, match="unresolvable"):
        function_tool(name="bad", input_schema={"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}})(str)

    @function_tool(name="broken_output", input_schema={"type": "object"}, output_schema={"type": "object", "required": ["text"]})
    async def broken(call: kernel.ToolCall, context: kernel.ToolContext) -> kernel.ToolResult:
        return kernel.SettledResult(kernel.ToolSuccess(structured_content={"other": 1}))

    invalid = broken()
    assert invalid.error_kind == "tool_error" and invalid.meta_data["output_invalid"] is True


def test_001_resilience_sample_composes_around_the_tool() -> None:
    namespace, _ = _quick_start()
    run_python(sample("001", "resilient_tool ="), namespace)
    resilient = namespace["resilient_tool"]
    assert resilient.metadata.name == "uppercase" and resilient.failure_threshold == 3
    assert resilient.tool.attempt_timeout_s == 2.0 and resilient.tool.max_attempts == 3
    assert asyncio.run(resilient.acall(text="hi")).result == {"text": "HI"}


def test_001_retries_need_idempotence_and_retry_only_exceptions() -> None:
    attempts: list[int] = []
    schema: dict[str, Any] = {"type": "object"}

    @function_tool(name="flaky", input_schema=schema, execution=kernel.ToolExecution(idempotent=True))
    async def flaky(call: kernel.ToolCall, context: kernel.ToolContext) -> kernel.ToolResult:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("backend hiccup")
        return kernel.SettledResult(kernel.ToolFailure("the model asked for something impossible"))

    result = RetryingTool(flaky, max_attempts=3, attempt_timeout_seconds=2.0, backoff_s=0.0)()
    assert result.meta_data["attempts"] == 2  # the exception was retried, the failure result was not
    assert not result.ok and result.meta_data["model_visible"] is True
    not_idempotent = function_tool(name="once", input_schema=schema)(lambda: {"done": True})
    with pytest.raises(ValueError, match="not declared idempotent"):
        RetryingTool(not_idempotent, max_attempts=3)


@pytest.mark.parametrize("header", ["Name\tPurpose", "名称\t用途"])
def test_001_public_api_names_exist(header: str) -> None:
    import sr_dist.tools as toolkit

    rows = sample("001", header).table()[1:]
    names = [row[0] for row in rows]
    assert names == ["ToolRegistry", "Tool", "function_tool", "FunctionTool", "RetryingTool", "CircuitBreakingTool"]
    for name in names:
        assert hasattr(toolkit, name), name


# --- 003: Thea models and tools ------------------------------------------------------------------


def test_003_harness_builds_the_model_from_config_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-seed-test")
    harness = run_samples("003", "harness = Harness(")["harness"]
    assert harness.servers == ()
    assert isinstance(harness.model, ModelProtocol)
    assert harness.model.name == "anthropic:claude-sonnet-4-20250514"


def _providers() -> list[Any]:
    if not SAMPLES:
        return []
    rows = sample("003", "Provider\tExtra").table()[1:]
    params = []
    for provider, _extra, credential in rows:
        params.append(pytest.param(provider, credential, id=provider))
    return params


@pytest.mark.parametrize(("provider", "credential"), _providers())
def test_003_provider_table(provider: str, credential: str, tmp_path: Path) -> None:
    """Each provider builds with only the credential the table names (none for ollama)."""
    transcript = tmp_path / "replay.jsonl"
    transcript.write_text("")
    if provider == "mock":
        env = {"LLM_REPLAY": str(transcript)}
    elif credential == "no remote credential":
        env = {}
    else:
        env = {credential: "sk-seed-test"}
    model = build_model({"provider": provider, "model": "seed-model"}, getenv=env.get)
    assert isinstance(model, ModelProtocol)


def test_003_custom_model_adapter_matches_the_model_protocol_call() -> None:
    namespace = run_samples("003", "class MyModel")
    assert namespace["Context"] is Context and namespace["ModelResponse"] is ModelResponse
    mine = inspect.signature(namespace["MyModel"].call)
    ours = inspect.signature(ModelProtocol.call)
    assert list(mine.parameters) == list(ours.parameters) == ["self", "context", "tools"]


def _thea_registry() -> tuple[dict[str, Any], Navigation, Notifications]:
    navigation, notifications = Navigation(), Notifications()
    namespace = run_samples(
        "003",
        "def navigate_to",
        'name="notify_user"',
        start_navigation=navigation,
        send_notification=notifications,
    )
    return namespace, navigation, notifications


def test_003_registry_tool_derives_the_schema_from_the_signature() -> None:
    namespace, navigation, _ = _thea_registry()
    catalog = namespace["registry"].open_catalog()
    spec = {s.name: s for s in catalog.specs()}["navigate_to"]
    assert spec.description == "Navigate to one confirmed Scene Graph ref."
    assert spec.parameters == {
        "type": "object",
        "properties": {"target": {"type": "string"}},
        "required": ["target"],
        "additionalProperties": False,
    }
    result = catalog.invoke(ToolCall("navigate_to", {"target": "drawer"}))
    assert result.ok and result.result == {"success": True, "run_id": "run-drawer"}
    assert navigation.targets == ["drawer"]


def test_003_builtin_tool_sample() -> None:
    namespace, _, notifications = _thea_registry()
    catalog = namespace["registry"].open_catalog()
    assert catalog.names() == ("navigate_to", "notify_user")
    sent = catalog.invoke(ToolCall("notify_user", {"message": "half way"}))
    assert sent.ok and sent.envelope() == {"success": True, "observation": "notified: half way"}
    refused = catalog.invoke(ToolCall("notify_user", {"message": ""}))
    assert refused.error_kind == "invalid_tool_call" and refused.envelope()["success"] is False
    assert notifications.sent == ["half way"]


def test_003_mcp_yaml_parses_with_call_timeout_sec() -> None:
    config = yaml.safe_load(sample("003", "servers:").text)
    server = config["servers"][0]
    assert server["call_timeout_sec"] == 300 and server["timeout_argument_margin_sec"] == 60
    assert server["command"] == "python" and server["args"] == ["-m", "robot_runtime.mcp_server"]


def test_003_mcp_yaml_is_an_sr_dist_server_config() -> None:
    (server,) = parse_servers(yaml.safe_load(sample("003", "servers:").text)["servers"])
    assert server.name == "robot-tools" and server.args == ("-m", "robot_runtime.mcp_server")
    assert server.call_timeout_s == 300 and server.timeout_argument_margin_s == 60


def test_003_tool_definition_is_what_the_model_sees() -> None:
    import json

    definition = json.loads(sample("003", '"inputSchema"').text)
    tool = BuiltinTool(
        name=definition["name"],
        description=definition["description"],
        input_schema=definition["inputSchema"],
        fn=lambda target: {"success": True, "observation": f"picked {target}"},
    )
    (spec,) = ToolRegistry([tool]).open_catalog().specs()
    assert spec.to_dict() == {
        "name": definition["name"],
        "description": definition["description"],
        "parameters": definition["inputSchema"],
    }


def _returning(value: Any, **options: Any) -> BuiltinTool:
    return BuiltinTool(name="envelope", description="", input_schema={"type": "object"}, fn=lambda: value, **options)


def test_003_tool_result_envelopes() -> None:
    import ast

    lines = [ast.literal_eval(line) for line in sample("003", '{"success": True, "observation"').text.splitlines()]
    for envelope in lines:
        result = _returning(envelope)()
        assert result.ok is envelope["success"]
        assert result.envelope() == envelope
    # "A successful result requires at least one value field beyond success."
    assert _returning({"success": True})().error_kind == "tool_protocol_violation"
    # "A failed result requires a non-empty reason."
    empty = _returning({"success": False, "reason": ""})()
    assert empty.error_kind == "tool_protocol_violation" and empty.envelope()["reason"]
    # "Argument and result validation failures use the same failure envelope."
    checked = BuiltinTool(
        name="checked",
        description="",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        output_schema={"type": "object", "required": ["observation"]},
        fn=lambda n=0: {"success": True, "other": n},
    )
    for failed in (checked(n="x"), checked(n=1)):
        assert set(failed.envelope()) == {"success", "reason"} and failed.envelope()["success"] is False


def test_003_an_evaluated_physical_tool_must_return_a_run_id() -> None:
    namespace, _, _ = _thea_registry()
    navigate = namespace["navigate_to"].fn
    registry = ToolRegistry()
    registry.tool(description="Navigate.", name="navigate_evaluated", evaluated=True)(navigate)
    catalog = registry.open_catalog()
    assert catalog.invoke(ToolCall("navigate_evaluated", {"target": "door"})).ok
    namespace["start_navigation"] = Navigation(run_id="")  # the helper now answers an empty run_id
    failed = catalog.invoke(ToolCall("navigate_evaluated", {"target": "door"}))
    assert failed.error_kind == "tool_protocol_violation" and "run_id" in failed.result_str


def test_003_evaluator_post_conditions_remain_hidden() -> None:
    def evaluator(arguments: Mapping[str, Any], result: ToolCallResult) -> tuple[bool, str]:
        return False, "HIDDEN: the drawer is still closed"

    tool = _returning({"success": True, "run_id": "run-9"}, evaluated=True, post_condition=evaluator)
    result = tool()
    assert result.ok and result.meta_data["post_condition"]["ok"] is False
    assert "HIDDEN" not in result.result_str and "HIDDEN" not in str(result.envelope())
