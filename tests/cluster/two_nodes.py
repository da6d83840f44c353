"""Two Ray nodes on 127.0.0.1 and one search across them; run by ``test_two_nodes.py``.

Run it in a fresh network and PID namespace (``unshare --net --pid --fork --mount-proc``): Ray
then binds 127.0.0.1 and every process this script starts ends with the namespace. It starts
a head node and a worker node (``ray start --block``, one CPU each), runs ``run_search`` with
``evaluator.replicas=2`` (each replica reserves one CPU, so the placement group must put one
on each node), stops both nodes and prints one JSON line with what the test checks.

Usage: ``python tests/cluster/two_nodes.py RESULTS_DIR``
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PORT = 6390


def _ray_start(*args: str) -> subprocess.Popen[bytes]:
    ray = Path(sys.executable).with_name("ray")
    return subprocess.Popen([str(ray), "start", "--block", "--num-cpus=1", "--num-gpus=0",
                             "--node-ip-address=127.0.0.1", "--disable-usage-stats", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "RAY_AUTH_MODE": "disabled"})


def main(results: Path) -> dict[str, object]:
    os.environ["RAY_AUTH_MODE"] = "disabled"
    head = _ray_start("--head", f"--port={PORT}", "--include-dashboard=false")
    worker = None
    try:
        import ray

        deadline = time.monotonic() + 90
        while True:  # the head's GCS takes a few seconds to listen
            try:
                ray.init(address=f"127.0.0.1:{PORT}", logging_level="WARNING")
                break
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        worker = _ray_start(f"--address=127.0.0.1:{PORT}")
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the second node did not join")
            time.sleep(0.5)

        from hydra import compose, initialize_config_module

        from sr_dist.results import duckdb_connection
        from sr_dist.search import run_search

        with initialize_config_module("sr_dist.conf", version_base="1.3"):
            cfg = compose("config", overrides=[
                f"results.path={results}", "dataset.source=feynman:I.6.2", "dataset.n=2000",
                f"ray.address=127.0.0.1:{PORT}", "evaluator.replicas=2", "search.agents=2",
                "search.agents_per_actor=2", "search.max_candidates=150",
                "search.max_seconds=150", "search.target_nmse=null"])
        summary = run_search(cfg, stream=io.StringIO(), handle_signals=False)
        con = duckdb_connection(results)
        rows, distinct = con.execute("SELECT count(*), count(DISTINCT candidate_id) FROM "
                                     "candidates").fetchone()
        stored = con.execute("SELECT evaluator_stats FROM runs").fetchone()[0]
        nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
        ray.shutdown()
        return {
            "status": summary.status, "stop_reason": summary.stop_reason,
            "candidates": summary.candidates, "rows_sent": summary.rows_sent,
            "rows": int(rows), "distinct": int(distinct), "nodes": nodes,
            "lost_agents": list(summary.lost_agents),
            "replicas": [{"node_id": r["node_id"], "search_fits": r["search_fits"]}
                         for r in summary.evaluator["per_replica"]],
            "stored_replicas": json.loads(stored)["replicas"],
        }
    finally:
        for node in (worker, head):
            if node is not None and node.poll() is None:
                node.send_signal(signal.SIGTERM)
        for node in (worker, head):
            if node is not None:
                try:
                    node.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    node.kill()


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))), flush=True)
