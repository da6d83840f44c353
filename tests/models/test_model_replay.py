"""Recording a live run through ``record_path`` and replaying it exactly with ``provider: replay``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sr_dist.conversation import Context
from sr_dist.models import (
    ModelConfigError,
    ModelError,
    ModelProtocol,
    ModelResponse,
    RecordingModel,
    ReplayModel,
    build_model,
    load_transcript,
    request_digest,
)
from tests.support.chat_server import ScriptedChatServer, StepLike, chat_completion, error, tool_call


def mini_agent(model: ModelProtocol, tools: list[dict[str, Any]], turns: int) -> tuple[list[ModelResponse | ModelError], Context]:
    """A stand-in for the agent loop: each turn's reply and a tool result join the context."""
    context = Context(system="You propose formulas.", messages=[{"role": "user", "content": "Find f(x)."}])
    outcomes: list[ModelResponse | ModelError] = []
    for turn in range(turns):
        try:
            response = model.call(context, tools)
        except ModelError as err:
            outcomes.append(err)
            context.messages.append({"role": "user", "content": f"(model error: {err.kind}) try again"})
            continue
        outcomes.append(response)
        context.messages.append({"role": "assistant", "content": response.text, "tool_calls": list(response.tool_calls)})
        for call in response.tool_calls:
            context.messages.append({"role": "tool", "tool_call_id": call["id"], "content": f"nmse={turn / 10}"})
    return outcomes, context


def as_comparable(outcomes: list[ModelResponse | ModelError]) -> list[Any]:
    return [o.to_dict() if isinstance(o, ModelError) else o for o in outcomes]


LIVE_SCRIPT: list[StepLike] = [
    chat_completion(tool_calls=[tool_call("evaluate_formulas", {"formulas": ["a*x"]})], usage=(50, 10)),
    error(500, "boom"),
    error(500, "boom"),  # retries spent: the agent sees a ModelError
    chat_completion("Thinking it over.", usage=(80, 5)),
    chat_completion(tool_calls=[tool_call("evaluate_formulas", '{"formulas": [')], finish_reason="length", usage=(90, 64)),
]


@pytest.fixture
def recorded(tmp_path: Path, env: dict[str, str], tools, sleeps) -> tuple[Path, list[Any], Context]:
    path = tmp_path / "runs" / "agent-0.jsonl"
    with ScriptedChatServer(LIVE_SCRIPT) as server:
        cfg = {
            "provider": "openai",
            "model": "test-model",
            "base_url": server.base_url,
            "max_retries": 1,
            "retry_base_delay_s": 0.001,
            "record_path": str(path),
        }
        model = build_model(cfg, getenv=env.get, sleep=sleeps)
        assert isinstance(model, RecordingModel) and model.name == "openai:test-model"
        outcomes, context = mini_agent(model, tools, turns=4)
        model.close()
    return path, outcomes, context


def test_replay_reproduces_a_recorded_run_exactly(recorded, tools) -> None:
    path, live, live_context = recorded
    assert [type(o).__name__ for o in live] == ["ModelResponse", "ModelError", "ModelResponse", "ModelResponse"]

    replay = build_model({"provider": "replay", "replay_path": str(path), "strict": True})
    assert replay.name == "replay:openai:test-model" and replay.tool_mode == "native"
    replayed, replay_context = mini_agent(replay, tools, turns=4)

    assert as_comparable(replayed) == as_comparable(live)
    assert replay_context.messages == live_context.messages
    assert isinstance(replayed[3], ModelResponse)
    assert replayed[3].truncated and replayed[3].tool_calls[0]["function"]["arguments"] == '{"formulas": ['
    assert isinstance(replayed[1], ModelError) and (replayed[1].kind, replayed[1].status, replayed[1].attempts) == ("server_error", 500, 2)

    with pytest.raises(ModelError) as info:
        replay.call(replay_context, tools)
    assert info.value.kind == "replay_exhausted"


def test_the_transcript_holds_digests_not_prompts_or_secrets(recorded, secret, tools) -> None:
    path, _, _ = recorded
    text = path.read_text()
    assert secret not in text and "authorization" not in text.lower()
    assert "Find f(x)." not in text  # only a digest of the request is kept
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 4
    first = lines[0]
    assert first["model"] == "openai:test-model" and first["tool_mode"] == "native"
    assert first["request"]["messages"] == 2 and first["request"]["tools"] == ["evaluate_formulas"]
    assert set(first["response"]) == {"text", "tool_calls", "usage", "finish_reason"}
    assert lines[1]["error"]["kind"] == "server_error" and "response" not in lines[1]


def test_strict_replay_stops_at_the_first_divergence(recorded, tools) -> None:
    path, _, _ = recorded
    replay = build_model({"provider": "replay", "replay_path": str(path), "strict": True})
    other = Context(system="You propose formulas.", messages=[{"role": "user", "content": "Something else."}])
    with pytest.raises(ModelError) as info:
        replay.call(other, tools)
    assert info.value.kind == "replay_mismatch" and "request 1" in str(info.value) and "sha256" in str(info.value)
    assert isinstance(replay, ReplayModel) and replay.remaining == 4  # a refused request does not consume the transcript


def test_lenient_replay_ignores_request_differences(recorded) -> None:
    path, live, _ = recorded
    replay = build_model({"provider": "replay", "replay_path": str(path)})
    assert replay.call(Context(messages=[{"role": "user", "content": "anything"}])) == live[0]


def test_replay_path_from_the_environment_and_acall(recorded, tools) -> None:
    path, live, _ = recorded
    replay = build_model({"provider": "replay"}, getenv={"SR_DIST_REPLAY": str(path)}.get)
    assert asyncio.run(replay.acall(Context(), tools)) == live[0]


def test_recording_through_acall(tmp_path: Path, env, context: Context) -> None:
    path = tmp_path / "async.jsonl"
    with ScriptedChatServer([chat_completion("one"), chat_completion("two")]) as server:
        cfg = {"provider": "openai", "model": "m", "base_url": server.base_url, "record_path": str(path)}
        model = build_model(cfg, getenv=env.get)
        first = asyncio.run(model.acall(context))
        second = model.call(context)
    entries = load_transcript(path)
    assert [e.response for e in entries] == [first, second]
    assert entries[0].request == request_digest(context.messages_for_model(), None)


def test_a_recorded_json_mode_replays_in_json_mode(tmp_path: Path, env, context: Context) -> None:
    path = tmp_path / "json.jsonl"
    with ScriptedChatServer([chat_completion('{"tool": "t", "params": {}}')]) as server:
        cfg = {"provider": "openai", "model": "m", "base_url": server.base_url, "tool_mode": "json", "record_path": str(path)}
        build_model(cfg, getenv=env.get).call(context)
    replay = build_model({"provider": "replay", "replay_path": str(path), "model": "label"})
    assert (replay.name, replay.tool_mode) == ("replay:label", "json")


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    return str(path)


BAD_TRANSCRIPTS: list[tuple[str, Callable[[Path], dict[str, Any]], str]] = [
    ("no-path", lambda tmp: {"provider": "replay"}, "SR_DIST_REPLAY"),
    ("missing-file", lambda tmp: {"provider": "replay", "replay_path": str(tmp / "nope.jsonl")}, "cannot read the replay transcript"),
    ("not-json", lambda tmp: {"provider": "replay", "replay_path": _write(tmp, '{"response": {}}\n\n{oops\n')}, "t.jsonl:3: not JSON"),
    ("no-response", lambda tmp: {"provider": "replay", "replay_path": _write(tmp, '{"request": {}}\n')}, "t.jsonl:1: each line needs a 'response'"),
    ("bad-calls", lambda tmp: {"provider": "replay", "replay_path": _write(tmp, '{"response": {"tool_calls": 3}}\n')}, "bad response"),
    ("unknown-key", lambda tmp: {"provider": "replay", "replay_path": _write(tmp, ""), "strictness": True}, "model.strictness"),
    ("unknown-error-kind", lambda tmp: {"provider": "replay", "replay_path": _write(tmp, '{"error": {"kind": "meltdown"}}\n')},
     "t.jsonl:1: bad error: unknown model error kind 'meltdown'"),
]


@pytest.mark.parametrize(("make_cfg", "message"), [c[1:] for c in BAD_TRANSCRIPTS], ids=[c[0] for c in BAD_TRANSCRIPTS])
def test_bad_transcripts_are_config_errors(tmp_path: Path, make_cfg, message: str) -> None:
    with pytest.raises(ModelConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        build_model(make_cfg(tmp_path), getenv=lambda name: None)


def test_recording_over_the_replayed_transcript_is_refused(recorded) -> None:
    path, _, _ = recorded
    before = path.read_text()
    with pytest.raises(ModelConfigError, match="erase"):
        build_model({"provider": "replay", "replay_path": str(path), "record_path": str(path)})
    assert path.read_text() == before


def test_replay_of_a_replay_records_the_same_responses(recorded, tmp_path: Path, tools) -> None:
    path, live, _ = recorded
    copy = tmp_path / "copy.jsonl"
    model = build_model({"provider": "replay", "replay_path": str(path), "record_path": str(copy)})
    outcomes, _ = mini_agent(model, tools, turns=4)
    assert isinstance(model, RecordingModel) and isinstance(model.inner, ReplayModel)
    assert as_comparable(outcomes) == as_comparable(live)
    assert [e.request for e in load_transcript(copy)] == [e.request for e in load_transcript(path)]


def test_a_transcript_that_cannot_be_written_is_a_model_error(tmp_path: Path, context: Context) -> None:
    path = tmp_path / "gone" / "t.jsonl"
    model = build_model({"provider": "replay", "replay_path": _write(tmp_path, '{"response": {"text": "x"}}\n'), "record_path": str(path)})
    path.unlink()
    path.parent.rmdir()  # the directory vanished under the run
    with pytest.raises(ModelError) as info:
        model.call(context)
    assert info.value.kind == "config" and "gone" in str(info.value)
