"""Faults of a real multi-node cluster (issue 14, items 1 and 3): ``ray job submit`` then
``ray job stop`` (SIGTERM to the job's driver), and a worker node lost mid-run (its raylet and
every process under it killed by pid), with agents and an evaluator replica on it (placement
read from Ray's state API).

The cluster is started with ``ray start`` on loopback (a head on 127.0.0.1 with two CPUs and
the job server, a worker on 127.0.0.2 with one CPU: two evaluator replicas spread over both,
and the head has room for the one that was on the worker), with GCS health checks of a second so a lost node is noticed
in seconds, and token authentication on. Each driver is its own process (the job's ``sr-dist``, or a ``run_search`` script
that prints its summary as JSON), so rows sent can be counted against rows written.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from sr_dist.results import duckdb_connection

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]

BIN = Path(sys.executable).parent
RAY = str(BIN / "ray")
#: GCS health checks every second, a node declared dead after two misses.
# Node loss is seen in seconds, not Ray's default half minute; not faster than this, or a
# loaded machine's worker misses its checks, is declared dead before the test kills it, and no
# actor is ever placed there (seen at load average 60 with a 1 s timeout and 2 misses).
FAST_HEALTH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "3000",
               "RAY_health_check_failure_threshold": "5",
               "RAY_health_check_initial_delay_ms": "1000"}


#: The cluster requires Ray's token authentication, as a real one should (docs/running.md).
TOKEN = secrets.token_hex(16)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN, **extra)
    return env


#: The test's own look at the cluster (run inside its namespace): ``get(path)`` reads Ray's
#: state API on the head's dashboard (``sys.argv[1]``, its port).
STATE_API = """
import json, os, sys, urllib.request
def get(path):
    url = f"http://127.0.0.1:{sys.argv[1]}/api/v0/{path}?limit=1000"
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + os.environ["RAY_AUTH_TOKEN"]})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.load(response)["data"]["result"]["result"]
"""

#: How many nodes are alive (0 when the state API did not answer).
NODES = STATE_API + """
try:
    print(sum(1 for n in get("nodes") if n.get("state") == "ALIVE"))
except (OSError, ValueError, KeyError):
    print(0)
"""

#: Where the cluster placed a run's actors, from Ray's state API (the process tree is not a
#: reliable witness: a worker process is renamed ``ray::<Class>`` only once it runs the actor):
#: the live actors of a class on the node at ``sys.argv[2]``.
ON_NODE = STATE_API + """
try:
    node = {n["node_id"] for n in get("nodes") if n.get("node_ip") == sys.argv[2] and n.get("state") == "ALIVE"}
    alive = [a for a in get("actors") if a.get("state") == "ALIVE"]
    placed = {cls: sum(1 for a in alive if a.get("class_name") == cls and a.get("node_id") in node) for cls in sys.argv[3:]}
    everywhere = {cls: sum(1 for a in alive if a.get("class_name") == cls) for cls in sys.argv[3:]}
    print(json.dumps({**placed, "node_alive": bool(node), "everywhere": everywhere}))
except (OSError, ValueError, KeyError) as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
"""

#: sr-dist's actors not yet dead anywhere in the cluster (``-1``: the state API did not answer).
LIVE_ACTORS = STATE_API + """
ours = ("AgentActor", "EvaluatorActor", "ResultWriter", "DatasetHolder")
try:
    print(sum(1 for a in get("actors") if a.get("class_name") in ours and a.get("state") != "DEAD"))
except (OSError, ValueError, KeyError):
    print(-1)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    try:
        return [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _kill_tree(proc: subprocess.Popen[bytes]) -> int:
    """SIGKILL a `ray start --block` process and every process under it, by pid."""
    victims = _tree(proc)
    for p in victims:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)
    psutil.wait_procs(victims, timeout=30)
    return len(victims)


def _loopback_namespace() -> subprocess.Popen[bytes] | None:
    """A network namespace with only loopback, held by a sleeping process (root only).

    Outside one, Ray swaps 127.0.0.1 for this host's own address in places and the head's job
    agent is never reachable; every process of this module (the nodes, the drivers, the job
    CLI, the test's own HTTP calls) enters this namespace with ``nsenter``.
    """
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("nsenter")):
        return None
    holder = subprocess.Popen(["unshare", "--net", "sh", "-c",
                               "ip link set lo up && echo up && exec sleep 86400"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"up"
    return holder


class Cluster:
    def __init__(self) -> None:
        self.netns = _loopback_namespace()
        self.prefix = ([] if self.netns is None
                       else ["nsenter", f"--net=/proc/{self.netns.pid}/ns/net"])
        self.temp = tempfile.mkdtemp(prefix="srd-faults-")
        self.port, self.dashboard = _free_port(), _free_port()
        self.head = subprocess.Popen(
            [*self.prefix, RAY, "start", "--head", "--node-ip-address=127.0.0.1", "--block",
             f"--port={self.port}", "--num-cpus=2",
             "--include-dashboard=true", "--dashboard-host=127.0.0.1",
             f"--dashboard-port={self.dashboard}", f"--temp-dir={self.temp}"],
            env=_env(**FAST_HEALTH), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self._wait_port(self.port, self.head, "the head node")
        # Its own loopback address, so a driver on this machine attaches to the head's raylet
        # (as a driver on a cluster's head does), not to the node the test will kill.
        self.worker = subprocess.Popen(
            [*self.prefix, RAY, "start", f"--address=127.0.0.1:{self.port}", "--num-cpus=1",
             "--node-ip-address=127.0.0.2", "--block"],
            env=_env(**FAST_HEALTH), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self._wait_port(self.dashboard, self.head, "the job server")
        deadline = time.monotonic() + 120
        while self.alive_nodes() < 2:  # placement needs both nodes there before a run starts
            assert self.worker.poll() is None, "the worker node's ray start exited"
            assert time.monotonic() < deadline, "the worker node did not join"
            time.sleep(0.5)

    def _wait_port(self, port: int, proc: subprocess.Popen[bytes], what: str) -> None:
        deadline = time.monotonic() + 120
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=1)"
        while True:
            assert proc.poll() is None, f"{what} exited"
            if subprocess.run([*self.prefix, sys.executable, "-c", probe],
                              capture_output=True).returncode == 0:
                return
            assert time.monotonic() < deadline, f"{what} did not come up"
            time.sleep(0.5)

    def alive_nodes(self) -> int:
        done = subprocess.run([*self.prefix, sys.executable, "-c", NODES, str(self.dashboard)],
                              env=_env(), capture_output=True, text=True, timeout=60)
        return int(done.stdout.strip() or 0)

    def popen(self, args: list[str], **kwargs: Any) -> subprocess.Popen[str]:
        return subprocess.Popen([*self.prefix, *args], **kwargs)

    def run(self, args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.prefix, *args], **kwargs)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def jobs(self) -> str:
        return f"http://127.0.0.1:{self.dashboard}"

    def wait_until_idle(self, timeout_s: float = 120) -> None:
        """Wait until no sr-dist actor of an earlier test is alive: an evaluator of a stopped job still
        holding the worker's one CPU would make the next run's SPREAD placement put both
        replicas (and every agent) on the head."""
        deadline = time.monotonic() + timeout_s
        while True:
            done = subprocess.run([*self.prefix, sys.executable, "-c", LIVE_ACTORS,
                                   str(self.dashboard)], env=_env(), capture_output=True,
                                  text=True, timeout=60)
            live = int(done.stdout.strip() or -1)
            if live == 0:
                return
            assert time.monotonic() < deadline, f"earlier actors still alive: {live}"
            time.sleep(1)

    def on_worker(self, *classes: str) -> dict[str, Any]:
        """How many live actors of each class Ray has placed on the worker node (127.0.0.2),
        and ``node_alive``; ``error`` instead when the state API did not answer (load)."""
        done = subprocess.run([*self.prefix, sys.executable, "-c", ON_NODE, str(self.dashboard),
                               "127.0.0.2", *classes],
                              env=_env(), capture_output=True, text=True, timeout=60)
        try:
            placed: dict[str, Any] = json.loads(done.stdout.strip())
        except ValueError:
            return {"error": f"the probe printed {done.stdout[-300:]!r} {done.stderr[-300:]!r}"}
        return placed if "error" in placed else {
            **{cls: int(placed.get(cls, 0)) for cls in classes},
            "node_alive": placed.get("node_alive"), "everywhere": placed.get("everywhere", {})}

    def close(self) -> None:
        for proc in (self.worker, self.head):
            if proc.poll() is None:
                _kill_tree(proc)
        if self.netns is not None:
            self.netns.kill()
            self.netns.wait()
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.close()


def _runs(results: Path) -> list[tuple[Any, ...]]:
    con = duckdb_connection(results)
    return con.sql("SELECT run_id, status, stop_reason, signal, candidates FROM runs").fetchall()


def _rows(results: Path) -> tuple[int, int]:
    con = duckdb_connection(results)
    rows, distinct = con.sql("SELECT count(*), count(DISTINCT candidate_id) FROM candidates"
                             ).fetchall()[0]
    return int(rows), int(distinct)


def _rows_per_agent(results: Path) -> dict[str, int]:
    con = duckdb_connection(results)
    return {str(a): int(n) for a, n in con.sql(
        "SELECT agent_id, count(*) FROM candidates GROUP BY agent_id ORDER BY agent_id"
    ).fetchall()}


def _has_rows(results: Path) -> bool:
    return bool(list((results / "candidates").glob("*/*/*.parquet")))


def _job(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    command, *rest = args
    return cluster.run([RAY, "job", command, "--address", cluster.jobs, *rest], env=_env(),
                       capture_output=True, text=True, timeout=300)


def test_ray_job_stop_interrupts_the_run(cluster: Cluster, tmp_path: Path) -> None:
    """SIGTERM through `ray job stop`; the row it leaves is what `run.resume` continues
    (tests/cli/test_cli.py resumes one after a SIGTERM)."""
    out = tmp_path / "out"
    # `ray job stop` waits RAY_JOB_STOP_WAIT_TIME_S (3 s by default) before SIGKILL; a job
    # that wants its grace period says so in its runtime env (docs/reliability.md).
    runtime = json.dumps({"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "60"}})
    job_id = f"srd-job-{os.getpid()}"
    deadline = time.monotonic() + 120
    while True:  # the head's job agent takes a moment after its dashboard answers
        submitted = _job(cluster, "submit", "--no-wait", f"--submission-id={job_id}",
                         f"--runtime-env-json={runtime}", "--", "sr-dist", "ray.address=auto",
                         "ray.auth_mode=token", "dataset.source=feynman:I.30.3",
                         "search.max_seconds=600", "search.target_nmse=null",
                         f"results.path={out}")
        if submitted.returncode == 0 or "No available agent" not in submitted.stderr \
                or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    deadline = time.monotonic() + 240
    while not _has_rows(out):
        assert time.monotonic() < deadline, _job(cluster, "logs", job_id).stdout[-3000:]
        time.sleep(0.5)
    stopped = _job(cluster, "stop", job_id)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    logs = _job(cluster, "logs", job_id).stdout
    assert "SIGTERM received: stopping the agents" in logs, logs[-3000:]
    (run_id, status, reason, sig, candidates), = _runs(out)
    assert (status, reason, sig) == ("interrupted", "interrupted", "SIGTERM"), logs[-3000:]
    rows, distinct = _rows(out)
    assert candidates == rows == distinct > 0



DRIVER = """
import faulthandler, json, signal, sys
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test's look inside a hang
from hydra import compose, initialize_config_module
from sr_dist.search import run_search
with initialize_config_module("sr_dist.conf", version_base="1.3"):
    cfg = compose("config", overrides=sys.argv[1:])
s = run_search(cfg, run_id="node-loss")
print("SUMMARY " + json.dumps({
    "status": s.status, "stop_reason": s.stop_reason, "candidates": s.candidates,
    "rows_sent": s.rows_sent, "lost": list(s.lost_agents),
    "restarts": {a.agent_id: a.restarts for a in s.agents},
    "per_agent": {a.agent_id: [a.rows_sent, a.stop_reason, a.host] for a in s.agents},
    "evaluator_restarts": s.evaluator.get("restarts"), "duplicates": s.writer.get("duplicates"),
}))
"""


# Two things made this test fail in 2026-12-02's runs, both fixed: an agent the deadline stopped
# while its tool call waited on a batch resent after the replica's loss still recorded that
# call's rows after its outcome had counted them (run_episode now waits for such fits:
# tests/search/test_agent_run.py), and under load no agent reached the worker before a 30 s
# budget ended (60 s now). On failure it prints its per-agent counts (sent, on disk).
#
# A third was Ray's, not sr-dist's: SPREAD is best effort, and once (CI-like load, after the
# job-stop test) the run placed nothing on the live worker, so there was nothing to lose. Such a
# run proves nothing either way; it is stopped and started afresh (PLACEMENT_TRIES in all) and
# the test fails as a setup error only when every try placed nothing there.
PLACEMENT_TRIES = 3
PLACEMENT_WAIT_S = 90
AGENTS, REPLICAS = 3, 2


def _start_node_loss_run(cluster: Cluster, out: Path) -> subprocess.Popen[str]:
    return cluster.popen(
        [sys.executable, "-c", DRIVER, f"ray.address={cluster.address}", "ray.auth_mode=token",
         f"search.agents={AGENTS}",
         f"evaluator.replicas={REPLICAS}", "dataset.source=feynman:I.30.3", "search.max_seconds=60",
         "search.target_nmse=null", "search.max_candidates=1000000", "results.flush_s=0.5",
         "+model.stop_nmse=0",  # no agent submits a solution: the run ends at max_seconds
         "search.stop_grace_s=120",  # rows_sent counts only agents that stop by themselves
         f"results.path={out}"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _placed_on_worker(cluster: Cluster, driver: subprocess.Popen[str],
                      out: Path) -> tuple[bool, str]:
    """Wait until the run has rows and one replica and an agent on the worker (the pool's
    SPREAD placement): ``(True, '')``, or ``(False, why)`` when Ray placed nothing there in
    time or the run ended first."""
    deadline = time.monotonic() + PLACEMENT_WAIT_S
    placed: dict[str, Any] = {}
    while not (_has_rows(out) and placed.get("AgentActor", 0) >= 1
               and placed.get("EvaluatorActor", 0) == 1):
        # Declared dead before the kill (missed health checks): nothing can be placed there.
        assert placed.get("node_alive") is not False, f"the worker node died early: {placed}"
        if driver.poll() is not None:  # say what was missing (pytest cuts long asserts)
            ended_out, ended_err = driver.communicate()
            return False, (f"the run ended first: rows {_has_rows(out)}, on the worker "
                           f"{placed}\n{ended_out[-3000:]}\n{ended_err[-3000:]}")
        if time.monotonic() > deadline:
            return False, f"no agent and replica on the worker in {PLACEMENT_WAIT_S} s: {placed}"
        if _has_rows(out) and placed.get("everywhere") == {"AgentActor": AGENTS, "EvaluatorActor": REPLICAS}:
            # Every actor is placed and the worker lacks one kind: actors never move, so this
            # run cannot prove anything; a new one is cheaper than waiting out its budget.
            return False, f"every actor placed, the worker lacks an agent or a replica: {placed}"
        time.sleep(0.5)
        placed = cluster.on_worker("AgentActor", "EvaluatorActor")
    return True, ""


#: The run's budget (60 s) plus its stop grace (120 s) and room for wrap-up; below pytest's
#: 300-s timeout so that a hang fails with the driver's output and thread stacks.
DRIVER_END_S = 230


def _communicate_or_dump(driver: subprocess.Popen[str]) -> tuple[str, str]:
    """The driver's output once it ends, or a failure with its threads' stacks (SIGUSR1 makes
    it print them) and its output when it has not ended in ``DRIVER_END_S``."""
    try:
        return driver.communicate(timeout=DRIVER_END_S)
    except subprocess.TimeoutExpired:
        driver.send_signal(signal.SIGUSR1)
        time.sleep(3)
        driver.kill()
        stdout, stderr = driver.communicate()
        pytest.fail(f"the driver did not end {DRIVER_END_S} s after the node loss\n"
                    f"stdout:\n{stdout[-6000:]}\nstderr:\n{stderr[-20000:]}")


def test_a_lost_worker_node_loses_no_candidate(cluster: Cluster, tmp_path: Path) -> None:
    """Runs last: it kills the module's worker node."""
    misses: list[str] = []
    for attempt in range(PLACEMENT_TRIES):
        out = tmp_path / f"out{attempt}"
        cluster.wait_until_idle()
        driver = _start_node_loss_run(cluster, out)
        try:
            placed, why = _placed_on_worker(cluster, driver, out)
            if not placed:
                misses.append(why)
                continue
            assert _kill_tree(cluster.worker) > 2  # the raylet, its workers, its agents
            stdout, stderr = _communicate_or_dump(driver)
            break
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
    else:
        pytest.fail(f"setup: Ray placed nothing on the worker in {PLACEMENT_TRIES} runs:\n"
                    + "\n---\n".join(misses))
    print(f"node loss: placed on try {attempt + 1}", *misses, sep="\n")
    assert driver.returncode == 0, stdout[-3000:] + stderr[-3000:]
    summary = json.loads(stdout.split("SUMMARY ", 1)[1])
    said = json.dumps(summary)  # whole: pytest shortens a dict's repr to one line
    assert (summary["status"], summary["stop_reason"]) == ("completed", "max_seconds"), said
    assert summary["lost"] == [], said  # every lost agent was started again
    assert sum(summary["restarts"].values()) >= 1, said  # the agent(s) that were there
    assert summary["evaluator_restarts"] >= 1, said  # the replica that was there
    rows, distinct = _rows(out)
    print("node loss: summary", json.dumps(summary), "rows on disk per agent",
          _rows_per_agent(out), "\ndriver stdout:", stdout[-3000:], "\ndriver stderr:",
          stderr[-8000:])
    assert rows == distinct == summary["candidates"] == summary["rows_sent"], (
        summary, _rows_per_agent(out), stdout[-3000:], stderr[-6000:])
    assert "restarting lost agent(s)" in stdout
    assert "constructor arguments in the object store" not in stderr
    print("node loss:", summary, f"rows on disk {rows}")
