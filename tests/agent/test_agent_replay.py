"""Recording a run against the server and replaying it exactly; the offline evolve model in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sr_dist.agent import AgentLimits
from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.models import ReplayModel, build_model
from sr_dist.sr import build_agent
from sr_dist.sr.formula_tools import ListRecorder
from tests.support.chat_server import ScriptedChatServer, StepLike, chat_completion, error, tool_call


def test_a_recorded_run_replays_to_the_same_result_and_history(
    tmp_path: Path, agent_dataset: Dataset, agent_evaluator: Evaluator
) -> None:
    transcript = tmp_path / "agent.jsonl"
    script: list[StepLike] = [
        chat_completion("First batch.", tool_calls=[tool_call("evaluate_formulas", {"expressions": ["c*x0", "x0 +"]})]),
        error(429, "busy", headers={"Retry-After": "0"}),
        chat_completion(tool_calls=[tool_call("evaluate_formulas", '{"expressions": [')]),
        chat_completion("Thinking about the product."),
        chat_completion(tool_calls=[tool_call("evaluate_formulas", {"expressions": ["c*x0*x1", "c*x1 + d"]})]),
        error(500, "down"),
        error(500, "down"),
    ]
    limits = AgentLimits(max_turns=10)
    with ScriptedChatServer(script) as server:
        model = build_model(
            {
                "provider": "openai",
                "base_url": server.base_url,
                "model": "test",
                "api_key_env": None,
                "max_retries": 1,
                "retry_base_delay_s": 0.001,
                "record_path": str(transcript),
            }
        )
        recorder = ListRecorder()
        recorded_agent = build_agent(model, agent_dataset, agent_evaluator, limits=limits, recorder=recorder)
        recorded = recorded_agent.run()
    assert recorded.stop_reason == "model_error:server_error" and recorded.turns == 5
    assert recorded.best is not None and recorded.best.expression == "c*x0*x1"

    replay_model = build_model({"provider": "replay", "replay_path": str(transcript), "strict": True})
    replayed_agent = build_agent(replay_model, agent_dataset, agent_evaluator, limits=limits, recorder=ListRecorder())
    replayed = replayed_agent.run()

    assert replayed == recorded
    assert replayed_agent.context.tool_history == recorded_agent.context.tool_history
    assert replayed_agent.context.messages == recorded_agent.context.messages
    assert isinstance(replay_model, ReplayModel) and replay_model.remaining == 0


def test_the_evolve_model_reaches_the_target_in_process(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    model = build_model({"provider": "evolve", "batch_size": 16, "max_constants": 2})
    recorder = ListRecorder()
    agent = build_agent(model, agent_dataset, agent_evaluator, limits=AgentLimits(max_turns=15, target_nmse=1e-10), recorder=recorder, seed=5)
    assert agent.context.info["variables"] == ["x0", "x1"] and len(agent.context.info["sample"]["y"]) == 210
    result = agent.run()
    assert result.stop_reason in ("target_nmse", "submitted")
    best = result.best
    assert best is not None and best.val_nmse is not None and best.test_nmse is not None
    assert best.val_nmse <= 1e-10 and best.test_nmse <= 1e-10
    assert result.candidates == len(recorder.fits) > 0


def test_run_works_inside_a_running_event_loop(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    model = build_model({"provider": "evolve", "batch_size": 4, "max_constants": 2})
    agent = build_agent(model, agent_dataset, agent_evaluator, limits=AgentLimits(max_turns=1))

    async def main() -> str:
        return agent.run().stop_reason  # sync entry point called from async code

    assert asyncio.run(main()) in ("max_turns", "target_nmse", "submitted")
