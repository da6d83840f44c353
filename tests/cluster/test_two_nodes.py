"""Issue 13 item 5: two Ray nodes on 127.0.0.1, two evaluator replicas placed one per node,
both fitting, and the run correct (each candidate written once)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("two_nodes.py")
ROOT = Path(__file__).resolve().parents[2]


def _namespaces_available() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(["unshare", "--net", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _namespaces_available(),
                    reason="needs unshare --net --pid (root): Ray nodes must bind 127.0.0.1 "
                           "and end with their namespace")
def test_two_replicas_are_placed_one_per_node_and_both_fit(tmp_path: Path) -> None:
    command = (f"ip link set lo up && exec {sys.executable} {SCRIPT} {tmp_path / 'results'}")
    done = subprocess.run(
        ["unshare", "--net", "--pid", "--fork", "--mount-proc", "sh", "-c", command],
        capture_output=True, text=True, timeout=400, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])

    assert len(report["nodes"]) == 2
    assert report["status"] == "completed" and report["stop_reason"] == "max_candidates", report
    assert report["lost_agents"] == []
    placed = [r["node_id"] for r in report["replicas"]]
    assert sorted(placed) == report["nodes"], "the replicas were not spread one per node"
    assert all(r["search_fits"] > 0 for r in report["replicas"]), report["replicas"]
    assert report["rows"] == report["distinct"] == report["candidates"] == report["rows_sent"]
    assert report["stored_replicas"] == 2
