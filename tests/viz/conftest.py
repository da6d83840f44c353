"""One real sr-dist run for every test of tests/viz: its plots and its report are drawn from it.

Under pytest-xdist the two files of tests/viz may run in different workers, each with its own
session: the first worker to ask makes the run, in the temporary folder the workers share, and
the others read the same results (a file lock orders them; the run's id and best NMSE are kept
beside it).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from filelock import FileLock

from tests.viz.viz_run import VizRun


def _make_run(root: Path) -> VizRun:
    """A small real run (two evolve agents in one actor, a few hundred candidates of
    feynman:I.6.2) on the session's Ray cluster."""
    from hydra import compose, initialize_config_module

    from sr_dist.search import run_search

    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        cfg = compose("config", overrides=[
            f"results.path={root}", "dataset.source=feynman:I.6.2", "dataset.n=2000",
            "search.agents=2", "search.agents_per_actor=2", "search.max_candidates=200",
            "search.max_seconds=120", "search.target_nmse=null", "evaluator.max_wait_s=0.2",
        ])
    summary = run_search(cfg, stream=io.StringIO(), handle_signals=False)
    assert summary.status == "completed" and summary.best is not None
    return VizRun(path=root, run_id=summary.run_id, best_val_nmse=float(summary.best.val_nmse))


@pytest.fixture(scope="session")
def viz_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> VizRun:
    """The run, made on the session's Ray cluster by the one worker that makes it (a worker that
    reads another's run starts no cluster for it)."""
    session = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if session is None:  # one process: its own session folder
        request.getfixturevalue("ray_cluster")
        return _make_run(tmp_path_factory.mktemp("viz") / "results")
    shared = tmp_path_factory.getbasetemp().parent / f"viz-{session}"  # all workers' parent
    shared.mkdir(exist_ok=True)
    record = shared / "run.json"
    with FileLock(str(shared / "run.lock")):
        if record.exists():
            kept = json.loads(record.read_text())
            return VizRun(path=Path(kept["path"]), run_id=kept["run_id"],
                          best_val_nmse=float(kept["best_val_nmse"]))
        request.getfixturevalue("ray_cluster")
        run = _make_run(shared / "results")
        record.write_text(json.dumps({"path": str(run.path), "run_id": run.run_id,
                                      "best_val_nmse": run.best_val_nmse}))
        return run
