"""``shutdown_cluster`` ends every process of the cluster this process started, the autoscaler's
monitor (which ``ray.shutdown`` alone waits a second on) included, and leaves Ray disconnected.
A real local cluster in a child process, so no cluster of the suite is touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import json, ray
    from sr_dist.search.ray_setup import LOCAL_CLUSTER_CONFIG, shutdown_cluster

    ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level=40,
             _system_config=dict(LOCAL_CLUSTER_CONFIG))
    node = ray._private.worker._global_node
    started = {kind: [info.process.pid for info in infos]
               for kind, infos in node.all_processes.items()}
    shutdown_cluster()
    print("RESULT " + json.dumps({"started": started, "initialized_after": ray.is_initialized()}))
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_every_process_of_the_started_cluster_ends() -> None:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    started = result["started"]
    assert started.get("monitor"), started  # the process the shutdown no longer waits on
    pids = [pid for pids in started.values() for pid in pids]
    assert {"raylet", "gcs_server"} <= set(started) and pids
    assert [pid for pid in pids if _alive(pid)] == []
    assert result["initialized_after"] is False
