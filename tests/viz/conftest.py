"""One real sr-dist run for every test of tests/viz: its plots and its report are drawn from it."""

from __future__ import annotations

import io

import pytest

from tests.viz.viz_run import VizRun


@pytest.fixture(scope="session")
def viz_run(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> VizRun:
    """A small real run (two evolve agents in one actor, a few hundred candidates of
    feynman:I.6.2) on the session's Ray cluster."""
    from hydra import compose, initialize_config_module

    from sr_dist.search import run_search

    root = tmp_path_factory.mktemp("viz") / "results"
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        cfg = compose("config", overrides=[
            f"results.path={root}", "dataset.source=feynman:I.6.2", "dataset.n=2000",
            "search.agents=2", "search.agents_per_actor=2", "search.max_candidates=200",
            "search.max_seconds=120", "search.target_nmse=null", "evaluator.max_wait_s=0.2",
        ])
    summary = run_search(cfg, stream=io.StringIO(), handle_signals=False)
    assert summary.status == "completed" and summary.best is not None
    return VizRun(path=root, run_id=summary.run_id, best_val_nmse=float(summary.best.val_nmse))
