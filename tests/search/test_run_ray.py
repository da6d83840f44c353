"""run_search on a real local Ray cluster (one per module): two evolve agents, the shared
evaluator actor, the result writer, Parquet read back by DuckDB; and a lost agent."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hydra import compose, initialize_config_module

from sr_dist.results import CANDIDATE_SCHEMA, duckdb_connection, read_run
from sr_dist.search import RunSummary, run_search

pytestmark = [
    pytest.mark.slow,
    # ray.init forks and execs Ray's processes; JAX (imported by other modules of this suite)
    # warns about any fork, though the children exec at once and run no JAX code.
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]


def _cfg(results: Path, *overrides: str) -> Any:
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        return compose("config", overrides=[f"results.path={results}", *overrides])


def test_two_agents_one_evaluator(ray_cluster: None, tmp_path: Path) -> None:
    out = io.StringIO()
    summary = run_search(
        _cfg(tmp_path, "dataset.source=feynman:I.30.3", "search.agents=2",
             "search.max_candidates=300", "search.max_seconds=240", "search.target_nmse=null",
             "evaluator.max_wait_s=0.5"),
        stream=out, handle_signals=False,
    )
    assert isinstance(summary, RunSummary)
    assert summary.status == "completed" and summary.stop_reason == "max_candidates"
    assert summary.exit_code == 0 and summary.lost_agents == ()
    root = str(tmp_path / "candidates")

    # DuckDB, without sr-dist's help, reads exactly the candidate schema.
    plain = duckdb.connect()
    plain.execute("SET TimeZone = 'UTC'")  # DuckDB otherwise labels the zone with the host's
    raw = plain.sql(f"SELECT * FROM read_parquet('{root}/**/*.parquet', hive_partitioning=true)")
    schema: pa.Schema = raw.arrow().schema
    assert [(f.name, f.type) for f in schema] == [(f.name, f.type) for f in CANDIDATE_SCHEMA]

    # Candidates from both agents, every row of this run.
    con = duckdb_connection(tmp_path)
    per_agent = dict(con.sql("SELECT agent_id, count(*) FROM candidates GROUP BY agent_id").fetchall())
    assert set(per_agent) == {0, 1} and all(n > 0 for n in per_agent.values())
    total = sum(per_agent.values())
    assert total == summary.candidates >= 300

    # The evaluator mixed agents in its batches ...
    batching = summary.evaluator["batching"]
    assert batching["mixed_agent_batches"] >= 1
    assert sum(batching["batch_sizes"].values()) == batching["batches"]

    # ... and fitted every structure once, whichever agent proposed it and how often; the
    # only second fit is the full refit of a structure an offspring's local search fitted first
    # (inherited constants, docs/evaluator.md "Starts"), so at most one per local fit.
    shared = con.sql(
        "SELECT canonical FROM candidates WHERE status = 'ok' GROUP BY canonical "
        "HAVING count(DISTINCT agent_id) = 2").fetchall()
    assert shared, "the agents proposed no formula in common"
    fitted = con.sql("SELECT count(DISTINCT canonical) FROM candidates "
                     "WHERE status IN ('ok', 'nonfinite')").fetchall()[0][0]
    refits = summary.evaluator["search_fits"] - fitted
    assert 0 <= refits <= summary.evaluator["local_fits"]
    # Each shared structure's second request was served by the batch's dedup or the cache, or
    # was the full refit of a local search.
    assert (batching["duplicate_formulas"] + summary.evaluator["cache_hits"] + refits
            >= len(shared))

    # The runs row is final and agrees with the files.
    record = read_run(tmp_path, summary.run_id)
    assert record is not None and record.status == "completed"
    assert record.stop_reason == "max_candidates" and record.candidates == total
    assert record.best_expression == summary.best.expression  # type: ignore[union-attr]
    assert record.ended_at is not None and record.agents == 2

    text = out.getvalue()
    assert "Pareto front" in text and f"sr-dist-query {tmp_path} --run {summary.run_id}" in text


def test_a_polish_window_lets_agents_simplify_after_the_target(ray_cluster: None,
                                                                tmp_path: Path) -> None:
    """With ``search.polish_s`` the run goes on after the target is reached: the evolve agents
    breed from their solutions (reductions, rewrites, polishing) and submit, or are stopped
    when the window ends; the stop reason stays ``target_nmse``. (Without it the run stops at
    once: ``tests/search/test_progress.py``.)"""
    polished = run_search(
        _cfg(tmp_path, "dataset.source=feynman:I.6.2a", "search.agents=2",
             "search.max_seconds=120", "search.polish_s=10"),
        stream=io.StringIO(), handle_signals=False)
    assert polished.stop_reason == "target_nmse" and polished.status == "completed"
    reasons = [o.stop_reason for o in polished.agents]
    assert "target_nmse" not in reasons, reasons  # the driver, not each agent, stops on it
    assert "submitted" in reasons, reasons  # an agent polished its solution and submitted
    con = duckdb_connection(tmp_path)
    ((after,),) = con.sql(
        "SELECT count(*) FROM candidates WHERE run_id = $run AND created_at > "
        "(SELECT min(created_at) FROM candidates WHERE run_id = $run AND val_nmse <= 1e-20)",
        params={"run": polished.run_id}).fetchall()
    assert after > 0


@pytest.mark.parametrize("warmup", [False, True], ids=["agents-start-at-once", "after-warm-up"])
def test_an_evaluator_that_cannot_start_fails_the_run_cleanly(ray_cluster: None, tmp_path: Path,
                                                               warmup: bool) -> None:
    """Without a warm-up the agents start before the evaluator is up; its failure still fails
    the run with the evaluator's error, and no actor of the run is left."""
    import ray

    from sr_dist.search import SearchError

    run_id = f"test-bad-evaluator-{warmup}"
    with pytest.raises(SearchError, match="evaluator actor could not start") as info:
        run_search(_cfg(tmp_path, "+evaluator.layout=diagonal", "search.max_seconds=5",
                        f"evaluator.warmup={str(warmup).lower()}"),
                   stream=io.StringIO(), handle_signals=False, run_id=run_id)
    assert "layout" in str(info.value)
    record = read_run(tmp_path, run_id)
    assert record is not None and record.status == "failed" and record.stop_reason == "error"
    assert record.error is not None and "layout" in record.error
    alive = [a for a in ray.util.list_named_actors(all_namespaces=True)
             if run_id in (a["name"] if isinstance(a, dict) else a)]
    assert alive == []


def test_a_hanging_mcp_tool_does_not_hold_up_a_ray_run(ray_cluster: None, tmp_path: Path) -> None:
    """Issue 6 acceptance on Ray: the hang times out, the next call to that server fails fast,
    both count as failed tool calls, the agent goes on to submit, and the run ends normally."""
    import sys

    from tests.support.chat_server import ScriptedChatServer, chat_completion, tool_call

    flaky = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "flaky_server.py"
    server_cfg = ("+servers=[{name: flaky, command: '" + sys.executable + "', args: ['"
                  + str(flaky) + "'], startup_timeout_s: 30, call_timeout_s: 1}]")
    script = [
        chat_completion(tool_calls=[tool_call("sleep", {"seconds": 3600}, id="hang")]),
        chat_completion(tool_calls=[tool_call("echo", {"text": "still there?"}, id="echo")]),
        chat_completion(tool_calls=[tool_call("evaluate_formulas", {"expressions": ["c*theta"]}, id="ev")]),
        chat_completion(tool_calls=[tool_call("submit_formula", {"expression": "c*theta"}, id="sub")]),
    ]
    with ScriptedChatServer(script) as chat:
        summary = run_search(
            _cfg(tmp_path, "dataset.source=feynman:I.6.2", "search.agents=1", "model=openai",
                 f"model.base_url={chat.base_url}", "model.model=scripted", "model.api_key_env=null",
                 "search.max_seconds=120", "search.target_nmse=null", server_cfg.replace("+servers", "servers")),
            stream=io.StringIO(), handle_signals=False,
        )
    assert summary.status == "completed" and summary.lost_agents == ()
    [agent] = summary.agents
    assert agent.stop_reason == "submitted", agent
    assert agent.tool_calls == 4 and agent.failed_tool_calls == 2, agent
    con = duckdb_connection(tmp_path)
    assert con.sql("SELECT count(*) FROM candidates").fetchall()[0][0] == 2  # evaluate + submit


def test_llm_agents_share_processes_through_the_real_openai_path(ray_cluster: None,
                                                                  tmp_path: Path) -> None:
    """``search.agents_per_actor``: six agents on a loopback OpenAI-compatible server (the
    simulated LLM of bench/load.py) run in two agent processes; every proposal is fitted and
    written once."""
    from bench.load_server import Latency, LoopbackChatServer, Proposals, formula_pool

    proposals = Proposals(formulas_per_call=4, turns=2, duplicate_share=0.5, popular=8)
    pool = formula_pool(["sigma", "theta"], proposals.pool_size(6), seed=3)
    with LoopbackChatServer(pool, proposals, Latency(0.2, 0.1)) as server:
        summary = run_search(
            _cfg(tmp_path, "dataset.source=feynman:I.6.2", "dataset.n=1000", "search.agents=6",
                 "search.agents_per_actor=3", "search.max_turns=2", "search.target_nmse=null",
                 "model=openai", f"model.base_url={server.base_url}", "model.model=simulated",
                 "model.api_key_env=null", "evaluator.warmup=false"),
            stream=io.StringIO(), handle_signals=False)
        served = server.stats()
    assert summary.status == "completed" and summary.lost_agents == ()
    assert [a.stop_reason for a in summary.agents] == ["max_turns"] * 6
    assert len({a.host for a in summary.agents}) == 2  # 6 agents, 3 per process
    assert served["agents"] == 6 and served["errors"] == 0 and served["requests"] == 12
    assert summary.rows_sent == summary.candidates == summary.writer["rows_written"] == 6 * 2 * 4
    assert summary.evaluator["cache_hits"] > 0  # agents proposed some of the same formulas


def test_more_replicas_than_the_local_cluster_holds_fail_at_once(ray_cluster: None,
                                                                  tmp_path: Path) -> None:
    from sr_dist.search import SearchError

    # The session's cluster has 2 CPUs; three one-core replicas can never be placed.
    with pytest.raises(SearchError, match=r"evaluator.replicas=3 needs 3 CPU .*ray.num_cpus"):
        run_search(_cfg(tmp_path, "evaluator.replicas=3", "search.max_seconds=5"),
                   stream=io.StringIO(), handle_signals=False, run_id="test-too-many-replicas")
    record = read_run(tmp_path, "test-too-many-replicas")
    assert record is not None and record.status == "failed"
