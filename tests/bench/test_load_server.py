"""The load benchmark's simulated LLM: formula pool, proposal policy, and the loopback server
driving real sr-dist agents (real OpenAI SDK, parser, tools and Evaluator; no Ray)."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
from collections import Counter
from typing import Any

import pytest

from bench.load_server import Latency, LoopbackChatServer, Proposals, formula_pool, parse_call_id
from sr_dist.data import load_dataset
from sr_dist.evaluator import Evaluator
from sr_dist.formula import parse_formula
from sr_dist.search.agent_run import AgentOutcome, AgentSpec, run_episode
from sr_dist.sr.formula_tools import ListRecorder

DATASET = "feynman:I.12.11"


@pytest.fixture(scope="module")
def dataset() -> Any:
    return load_dataset(DATASET, n=300)


@pytest.fixture(scope="module")
def evaluator(dataset: Any) -> Evaluator:
    return Evaluator(dataset, compilation_cache_dir=os.environ.get(
        "SR_DIST_JAX_CACHE_DIR", os.path.expanduser("~/.cache/sr-dist/jax")))


# --------------------------------------------------------------------------- formula_pool


def test_pool_formulas_all_parse_with_distinct_canonical_forms() -> None:
    variables = ["x", "c0", "theta"]  # a variable named like a constant: the prefix must dodge it
    pool = formula_pool(variables, 400, seed=3)
    parsed = [parse_formula(text, variables) for text in pool]
    assert len(pool) == 400
    assert len({f.canonical for f in parsed}) == 400
    assert all(1 <= len(f.constants) <= 5 and "c0" not in f.constants for f in parsed)
    assert len({len(f.constants) for f in parsed}) == 5  # every constant count occurs
    ops = " ".join(pool)
    assert all(name in ops for name in ("sin(", "cos(", "exp(", "log(", "sqrt(", "**", ")/("))


def test_pool_is_deterministic_from_its_seed() -> None:
    assert formula_pool(["x", "y"], 300, seed=1) == formula_pool(["x", "y"], 300, seed=1)
    assert formula_pool(["x", "y"], 300, seed=1) != formula_pool(["x", "y"], 300, seed=2)
    assert formula_pool(["x"], 50, seed=1) == formula_pool(["x"], 300, seed=1)[:50]
    with pytest.raises(ValueError, match="at least one variable"):
        formula_pool([], 10, seed=0)


# --------------------------------------------------------------------------- Proposals


def test_unique_draws_never_repeat_and_popular_ones_are_shared() -> None:
    policy = Proposals(formulas_per_call=8, turns=5, duplicate_share=0.3, seed=4, popular=16)
    draws = [policy.indices(a, t) for a in range(50) for t in range(1, 6)]
    unique = [i for call in draws for i in call if i >= policy.popular]
    shared = [i for call in draws for i in call if i < policy.popular]
    assert len(unique) == len(set(unique)) and max(unique) < policy.pool_size(50)
    assert 0.2 < len(shared) / (len(shared) + len(unique)) < 0.4
    assert all(len(set(call)) == len(call) for call in draws)  # no formula twice in one call
    assert draws == [policy.indices(a, t) for a in range(50) for t in range(1, 6)]


def test_no_duplicates_at_share_zero_and_only_popular_at_one() -> None:
    none = Proposals(formulas_per_call=4, turns=3, duplicate_share=0.0)
    every = [i for a in range(20) for t in (1, 2, 3) for i in none.indices(a, t)]
    assert len(every) == len(set(every)) == 20 * 3 * 4 and min(every) >= none.popular
    allpop = Proposals(formulas_per_call=4, turns=3, duplicate_share=1.0, popular=4)
    assert {i for a in range(5) for i in allpop.indices(a, 1)} == {0, 1, 2, 3}
    with pytest.raises(ValueError, match="raise popular"):
        Proposals(formulas_per_call=8, turns=1, duplicate_share=0.5, popular=4)
    with pytest.raises(IndexError, match="pool_size"):
        none.formulas(formula_pool(["x"], 10, seed=0), agent=3, turn=1)


# --------------------------------------------------------------------------- the server, real agents


def _spec(agent_id: int, base_url: str, max_turns: int) -> AgentSpec:
    model = {"provider": "openai", "base_url": base_url, "model": "simulated", "api_key_env": None,
             "max_retries": 0}
    return AgentSpec(run_id="load", agent_id=agent_id, seed=agent_id, model=model, model_label="sim",
                     dataset_name=DATASET, max_turns=max_turns)


async def _agents(n: int, base_url: str, max_turns: int, dataset: Any, evaluator: Evaluator,
                  recorder: ListRecorder) -> list[AgentOutcome]:
    return list(await asyncio.gather(*(run_episode(_spec(i, base_url, max_turns), dataset, evaluator, recorder)
                                       for i in range(n))))


@pytest.mark.parametrize("share", [0.0, 0.6])
def test_real_agents_evaluate_exactly_the_policy_formulas(share: float, dataset: Any,
                                                          evaluator: Evaluator) -> None:
    policy = Proposals(formulas_per_call=2, turns=2, duplicate_share=share, seed=5, popular=2)
    pool = formula_pool(dataset.feature_names, policy.pool_size(3), seed=5)
    recorder = ListRecorder()
    with LoopbackChatServer(pool, policy) as server:
        outcomes = asyncio.run(_agents(3, server.base_url, policy.turns, dataset, evaluator, recorder))
        stats = server.stats()
    assert [(o.stop_reason, o.turns, o.error) for o in outcomes] == [("max_turns", 2, None)] * 3
    assert stats["agents"] == 3 and stats["turns"] == {0: 2, 1: 2, 2: 2}
    assert (stats["requests"], stats["completions"], stats["overruns"], stats["errors"], stats["repeats"]) == (6, 6, 0, 0, 0)
    # Each recorded tool call is one (agent, turn) of the policy, in the agent's turn order.
    by_agent: dict[int, list[tuple[str, ...]]] = {}
    for batch in sorted(recorder.batches, key=lambda b: (b.agent_id, b.step)):
        by_agent.setdefault(batch.agent_id, []).append(tuple(f.expression for f in batch.fits))
    sim_agent = {batch.agent_id: parse_call_id([{"role": "assistant", "tool_calls": [{"id": batch.tool_call_id}]}])
                 for batch in recorder.batches}
    for agent_id, calls in by_agent.items():
        found = sim_agent[agent_id]
        assert found is not None
        assert calls == [policy.formulas(pool, found[0], t) for t in (1, 2)]
    evaluated = Counter(f.expression for f in recorder.fits)
    owners = Counter(e for a, calls in by_agent.items() for e in {x for c in calls for x in c})
    assert sum(evaluated.values()) == stats["formulas_proposed"] == 12
    assert len(evaluated) == stats["unique_formulas_proposed"]
    if share == 0:
        assert max(evaluated.values()) == 1 and len(evaluated) == 12
    else:
        assert max(owners.values()) > 1  # some formula was proposed by two different agents


def test_a_turn_past_the_policy_gets_text_and_the_agent_ends_cleanly(dataset: Any, evaluator: Evaluator) -> None:
    policy = Proposals(formulas_per_call=2, turns=1, duplicate_share=0.0)
    pool = formula_pool(dataset.feature_names, policy.pool_size(1), seed=0)
    recorder = ListRecorder()
    with LoopbackChatServer(pool, policy, Latency(0.01, 0.005)) as server:
        (outcome,) = asyncio.run(_agents(1, server.base_url, 10, dataset, evaluator, recorder))
        stats = server.stats()
    # Prose replies stay marked, so the server still knows the agent; the loop stops after
    # max_prose_turns (3) of them.
    assert outcome.stop_reason == "no_tool_calls" and outcome.error is None and outcome.candidates == 2
    assert stats["turns"] == {0: 4} and stats["overruns"] == 3 and stats["errors"] == 0


# --------------------------------------------------------------------------- raw HTTP


def _post(conn: http.client.HTTPConnection, path: str, body: Any) -> tuple[int, Any]:
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    reply = conn.getresponse()
    return reply.status, json.loads(reply.read())


def test_keep_alive_errors_and_clean_shutdown() -> None:
    policy = Proposals(formulas_per_call=2, turns=2, duplicate_share=0.0)
    pool = formula_pool(["x"], policy.pool_size(2), seed=0)
    server = LoopbackChatServer(pool, policy)
    with server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        status, first = _post(conn, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "go"}]})
        call = first["choices"][0]["message"]["tool_calls"][0]
        assert status == 200 and call["function"]["name"] == "evaluate_formulas"
        assert json.loads(call["function"]["arguments"]) == {"expressions": list(policy.formulas(pool, 0, 1))}
        history = [{"role": "user", "content": "go"}, first["choices"][0]["message"],
                   {"role": "tool", "tool_call_id": call["id"], "content": "ok"}]
        status, second = _post(conn, "/chat/completions", {"model": "m", "messages": history})
        assert status == 200 and second["choices"][0]["message"]["tool_calls"][0]["id"] == "call_sim_0_2"
        foreign = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "hello"}]
        assert _post(conn, "/v1/chat/completions", {"messages": foreign})[0] == 400
        assert _post(conn, "/v1/nowhere", {})[0] == 404
        stats = server.stats()
        assert stats["connections_total"] == 1 and stats["connections_open"] == 1  # one keep-alive connection
        assert stats["requests"] == 4 and stats["errors"] == 2 and stats["turns"] == {0: 2}
        assert stats["open_files_limit"] > 0
    assert server.stats()["connections_open"] == 0
    with pytest.raises(OSError):
        http.client.HTTPConnection("127.0.0.1", server.port, timeout=2).request("GET", "/v1/models")


def test_the_server_runs_as_its_own_process() -> None:
    import subprocess
    import sys

    command = [sys.executable, "bench/load_server.py", "--variables", "x,y", "--agents", "2", "--turns", "1",
               "--formulas-per-call", "3", "--duplicate-share", "0"]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        started = json.loads(proc.stdout.readline())
        assert started["pool"] == 64 + 2 * 3 and started["base_url"].endswith("/v1")
        host, port = started["base_url"].removeprefix("http://").removesuffix("/v1").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        status, reply = _post(conn, "/v1/chat/completions", {"messages": [{"role": "user", "content": "go"}]})
        arguments = json.loads(reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])
        assert status == 200 and len(arguments["expressions"]) == 3
        conn.request("GET", "/v1/stats")
        assert json.loads(conn.getresponse().read())["formulas_proposed"] == 3
        conn.close()
        proc.stdin.close()  # the end of stdin stops it
        final = json.loads(proc.stdout.readline())
        assert proc.wait(timeout=30) == 0
    assert final["requests"] == 2 and final["turns"] == {"0": 1} and final["unique_formulas_proposed"] == 3
