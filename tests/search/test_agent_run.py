"""One agent episode in-process (no Ray): the real Evaluator, the evolve proposer, the recorder."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sr_dist.data import Dataset, load_dataset
from sr_dist.evaluator import Evaluator
from sr_dist.search.agent_run import AgentSpec, PreparedEpisode, prepare_episode, run_episode
from sr_dist.search.recording import CandidateRecorder


def _spec(**changes: Any) -> AgentSpec:
    base: dict[str, Any] = dict(
        run_id="r", agent_id=1, seed=7, model={"provider": "evolve", "batch_size": 8},
        model_label="evolve", dataset_name="feynman:I.12.11", max_turns=2,
    )
    base.update(changes)
    return AgentSpec(**base)


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    """The module's problem: small, so its evolve turns and fits take little time."""
    return load_dataset("feynman:I.12.11", n=200)


@pytest.fixture(scope="module")
def evaluator(dataset: Dataset) -> Evaluator:
    """One real evaluator for the module (its compiled buckets serve every test)."""
    import os

    return Evaluator(dataset, compilation_cache_dir=os.environ.get(
        "SR_DIST_JAX_CACHE_DIR", os.path.expanduser("~/.cache/sr-dist/jax")))


def test_episode_records_every_candidate(dataset: Dataset, evaluator: Evaluator) -> None:
    rows: list[dict[str, Any]] = []
    recorder = CandidateRecorder("r", 1, "evolve", dataset.name, rows.extend)
    outcome = asyncio.run(run_episode(_spec(), dataset, evaluator, recorder))
    assert outcome.agent_id == 1 and outcome.error is None
    assert outcome.stop_reason in ("max_turns", "submitted", "target_nmse")
    assert outcome.candidates == len(rows) > 0
    assert all(row["candidate_id"].startswith("r:1:") for row in rows)
    assert len({row["candidate_id"] for row in rows}) == len(rows)
    assert outcome.best_val_nmse is not None and not outcome.failed


def test_a_model_that_cannot_be_built_ends_the_agent_with_a_reason(
        monkeypatch: pytest.MonkeyPatch, dataset: Dataset) -> None:
    monkeypatch.delenv("SR_DIST_TEST_NO_SUCH_KEY", raising=False)
    spec = _spec(model={"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1",
                        "api_key_env": "SR_DIST_TEST_NO_SUCH_KEY"})
    outcome = asyncio.run(run_episode(spec, dataset, object(), lambda *a, **k: None))
    assert outcome.stop_reason == "error" and outcome.failed
    assert "SR_DIST_TEST_NO_SUCH_KEY" in (outcome.error or "")


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openrouter", "qwen", "deepseek", "ollama", "mimo"])
def test_every_network_provider_gets_a_circuit_in_a_search_run(provider: str) -> None:
    from sr_dist.models.circuit import DEFAULT_FAILURES
    from sr_dist.search.agent_run import _model_config

    cfg = _model_config(_spec(model={"provider": provider, "model": "m"}))
    assert cfg["circuit_failures"] == DEFAULT_FAILURES
    assert "circuit_failures" not in _model_config(_spec(model={"provider": "mock", "replay_path": "t.jsonl"}))


def test_search_tools_are_the_only_formula_tools_the_agent_gets(dataset: Dataset,
                                                                 evaluator: Evaluator) -> None:
    import threading

    from sr_dist.search.agent_run import build_agent

    only = build_agent(_spec(tools=("evaluate_formulas", "submit_formula")), dataset, evaluator,
                       None, threading.Event())
    assert only.catalog.names() == ("evaluate_formulas", "submit_formula")
    assert "best_formulas" not in only.context.system  # the prompt names only the tools it has
    every = build_agent(_spec(), dataset, evaluator, None, threading.Event())
    from sr_dist.sr.formula_tools import FORMULA_TOOLS

    assert every.catalog.names() == FORMULA_TOOLS and "fit_power_law" in FORMULA_TOOLS


class _SlowEvaluator:
    """The real evaluator, answering each batch only after ``delay_s`` (a replica lost mid-fit
    and the batch resent elsewhere, as the node-loss test sees)."""

    def __init__(self, inner: Evaluator, delay_s: float) -> None:
        self.inner, self.delay_s = inner, delay_s

    def fit_many(self, formulas: list[str]) -> list[Any]:
        import time

        time.sleep(self.delay_s)
        return self.inner.fit_many(formulas)


def test_fits_cut_off_by_the_deadline_are_recorded_before_the_episode_returns(
        dataset: Dataset, evaluator: Evaluator) -> None:
    """The loop stops waiting for a tool call at its deadline, but the call's thread still
    fits and records its candidates; the episode returns only after they are recorded, so
    the rows the actor counts (recorder.recorded) are all the rows it sent."""
    import time

    rows: list[dict[str, Any]] = []
    recorder = CandidateRecorder("r", 1, "evolve", dataset.name, rows.extend)
    slow = _SlowEvaluator(evaluator, delay_s=3.0)
    scripted = {"provider": "scripted", "formulas_per_call": 8, "structures": 16}
    outcome = asyncio.run(run_episode(_spec(model=scripted, deadline_s=1.0, max_turns=5),
                                      dataset, slow, recorder))
    assert (outcome.stop_reason, outcome.tool_calls) == ("deadline", 1), outcome
    counted = recorder.recorded
    assert counted == len(rows) > 0  # the cut-off call's fits, recorded before the return
    time.sleep(2.0)  # nothing arrives after the episode has returned
    assert recorder.recorded == len(rows) == counted


def test_prepare_episode_builds_evolves_library_and_the_run_uses_that_agent(
        dataset: Dataset, evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch) -> None:
    """``prepare_episode`` builds the agent and runs its model's ``prepare`` (evolve builds its
    seed library there); ``run_episode`` then runs that very agent, which builds no other."""
    import threading

    import sr_dist.sr.evolve.model as evolve_model

    built: list[int] = []
    real = evolve_model.library_seeds

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(evolve_model, "library_seeds", counting)
    rows: list[dict[str, Any]] = []
    recorder = CandidateRecorder("r", 1, "evolve", dataset.name, rows.extend)
    cancel = threading.Event()
    prepared = asyncio.run(prepare_episode(_spec(), dataset, evaluator, recorder, cancel, nice=5))
    assert isinstance(prepared, PreparedEpisode) and built == [1]
    outcome = asyncio.run(run_episode(_spec(), dataset, evaluator, recorder, cancel,
                                      prepared=prepared))
    assert outcome.error is None and outcome.candidates == len(rows) > 0
    assert built == [1]  # the run's first turn found the library built


class _PreparingModel:
    """The scripted model with a ``prepare`` that notes where and how it ran."""

    def __init__(self, inner: Any, fail: bool = False) -> None:
        self.inner, self.fail = inner, fail
        self.name, self.tool_mode = inner.name, inner.tool_mode
        self.prepared: list[tuple[Any, int, int]] = []

    def prepare(self, context: Any) -> None:
        import os
        import threading

        tid = threading.get_native_id()
        self.prepared.append((context, os.getpriority(os.PRIO_PROCESS, tid),
                              os.getpriority(os.PRIO_PROCESS, os.getpid())))
        if self.fail:
            raise RuntimeError("no library today")

    def call(self, context: Any, tools: Any = None) -> Any:
        return self.inner.call(context, tools)

    async def acall(self, context: Any, tools: Any = None) -> Any:
        return await self.inner.acall(context, tools)


@pytest.mark.parametrize("fail", [False, True])
def test_aprepare_runs_below_the_callers_priority_and_a_failure_costs_nothing(
        dataset: Dataset, evaluator: Evaluator, fail: bool, caplog: pytest.LogCaptureFixture) -> None:
    """``Agent.aprepare(nice=5)`` calls the model's ``prepare`` with the agent's context in a
    thread niced 5 below the process (on Linux); a ``prepare`` that fails is logged and the
    episode runs all the same."""
    import sys
    import threading

    from sr_dist.search.agent_run import build_agent

    spec = _spec(model={"provider": "scripted", "formulas_per_call": 4, "structures": 8},
                 max_turns=2)
    rows: list[dict[str, Any]] = []
    recorder = CandidateRecorder("r", 1, "evolve", dataset.name, rows.extend)
    cancel = threading.Event()
    agent = build_agent(spec, dataset, evaluator, recorder, cancel)
    model = _PreparingModel(agent.model, fail=fail)
    agent.model = model
    asyncio.run(agent.aprepare(nice=5))
    (context, thread_nice, process_nice), = model.prepared
    assert context is agent.context
    if sys.platform.startswith("linux"):
        assert thread_nice == min(19, process_nice + 5)
    if fail:
        assert "preparing the model failed" in caplog.text and "no library today" in caplog.text
    outcome = asyncio.run(run_episode(spec, dataset, evaluator, recorder, cancel,
                                      prepared=PreparedEpisode(agent)))
    assert outcome.error is None and outcome.tool_calls >= 1
    assert outcome.candidates == len(rows) > 0


def test_a_broken_config_comes_back_from_prepare_as_the_outcome(dataset: Dataset) -> None:
    import threading

    spec = _spec(model={"provider": "no-such-provider"})
    prepared = asyncio.run(prepare_episode(spec, dataset, object(), None, threading.Event()))
    assert not isinstance(prepared, PreparedEpisode) and prepared.stop_reason == "error"
    assert "no-such-provider" in (prepared.error or "")
    assert asyncio.run(run_episode(spec, dataset, object(), None, prepared=prepared)) == prepared
