"""How much ``context.tool_history`` the loop keeps: what the model says it reads, else all."""

from __future__ import annotations

import pytest

from sr_dist.agent import AgentLimits
from sr_dist.agent.loop import history_limit
from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.models.scripted import ScriptedModel, structure_pool
from sr_dist.sr import build_agent
from sr_dist.sr.formula_tools import ListRecorder

TURNS, CALLS, FORMULAS = 12, 2, 4


class LastCalls(ScriptedModel):
    """A scripted model that reads the last three tool calls."""

    history_calls = 3


class Everything(ScriptedModel):
    """A scripted model that says nothing about the history (as evolve and the LLM adapters)."""

    history_calls = None  # type: ignore[assignment]


def run(model: ScriptedModel, dataset: Dataset, evaluator: Evaluator) -> tuple[object, ListRecorder]:
    recorder = ListRecorder()
    agent = build_agent(model, dataset, evaluator, limits=AgentLimits(max_turns=TURNS),
                        recorder=recorder, tools=["evaluate_formulas"])
    result = agent.run()
    assert result.stop_reason == "max_turns" and result.turns == TURNS
    assert result.candidates == len(recorder) == TURNS * CALLS * FORMULAS  # every row recorded
    return agent, recorder


def model(kind: type[ScriptedModel]) -> ScriptedModel:
    # Four two-constant structures: only the bucket the other agent tests use gets compiled.
    return kind(formulas_per_call=FORMULAS, calls_per_turn=CALLS, structures=4)


def test_a_model_that_reads_no_history_gets_none_kept(agent_dataset: Dataset,
                                                      agent_evaluator: Evaluator) -> None:
    assert len(structure_pool(agent_dataset.feature_names, 4)) == 4
    agent, _ = run(model(ScriptedModel), agent_dataset, agent_evaluator)
    assert agent.context.tool_history == []  # type: ignore[attr-defined]


def test_the_history_keeps_the_latest_calls_a_model_reads(agent_dataset: Dataset,
                                                          agent_evaluator: Evaluator) -> None:
    agent, _ = run(model(LastCalls), agent_dataset, agent_evaluator)
    kept = agent.context.tool_history  # type: ignore[attr-defined]
    last = TURNS - 1  # the scripted model numbers its calls from 0
    assert [call.id for call, _ in kept] == [f"scripted-{last - 1}-1", f"scripted-{last}-0",
                                             f"scripted-{last}-1"]
    assert all(result.ok and len(result.result["results"]) == FORMULAS for _, result in kept)


def test_a_model_that_says_nothing_keeps_the_whole_history(agent_dataset: Dataset,
                                                           agent_evaluator: Evaluator) -> None:
    agent, _ = run(model(Everything), agent_dataset, agent_evaluator)
    assert len(agent.context.tool_history) == TURNS * CALLS  # type: ignore[attr-defined]


def test_history_limit_reads_only_counts() -> None:
    class Says:
        def __init__(self, value: object) -> None:
            self.history_calls = value

    assert history_limit(object()) is None
    assert history_limit(Says(None)) is None and history_limit(Says(True)) is None
    assert history_limit(Says(0)) == 0 and history_limit(Says(5)) == 5
    with pytest.raises(ValueError, match="history_calls=-1"):
        history_limit(Says(-1))
