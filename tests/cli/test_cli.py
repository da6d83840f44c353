"""The ``sr-dist`` app as users run it: real processes, real Ray clusters, Parquet read back.

Each test starts ``sr-dist`` (or ``python -m sr_dist``) as a subprocess: --help, a sweep over a
user's CSV read back with ``sr-dist-query``, Ctrl-C, SIGTERM and SIGHUP (a two-node cluster started with ``ray start`` is
tests/cli/test_cluster_faults.py's). The three long runs start together (``long_runs``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from sr_dist.results import duckdb_connection, read_run

pytestmark = [
    pytest.mark.slow,
    # subprocess's fork-then-exec after JAX was imported in this process (by other test modules)
    # trips JAX's fork warning; the child execs at once and runs no JAX code.
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]

BIN = Path(sys.executable).parent


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env.update(extra)
    return env


def _sr_dist(*args: str) -> list[str]:
    script = BIN / "sr-dist"
    return [str(script), *args] if script.exists() else [sys.executable, "-m", "sr_dist", *args]


def _query(*args: str) -> list[str]:
    script = BIN / "sr-dist-query"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "sr_dist.query_cli", *args]


def _run(cmd: list[str], cwd: Path, timeout: float = 400, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=_env(**env), capture_output=True, text=True,
                          timeout=timeout)


# The overrides the issue names; `sr-dist --help` must show each of them.
HELP_KEYS = [
    "dataset.source=", "dataset.target=", "model=evolve|openai", "model.base_url=",
    "model.model=", "model.api_key_env=", "model.tool_mode=", "search.agents=",
    "search.max_seconds=", "search.max_candidates=", "search.max_turns=", "search.target_nmse=",
    "search.seed=", "evaluator=cpu|gpu", "evaluator.device", "ray.address=", "results.path=",
]


def test_help_lists_the_overrides(tmp_path: Path) -> None:
    for cmd in (_sr_dist("--help"), [sys.executable, "-m", "sr_dist", "--help"]):
        done = _run(cmd, tmp_path, timeout=120)
        assert done.returncode == 0, done.stderr
        for key in HELP_KEYS:
            assert key in done.stdout, key
        assert "dataset: feynman" in done.stdout and "model: " in done.stdout
    assert not any(tmp_path.iterdir()), "--help wrote files into the working directory"


def test_bad_override_is_a_one_line_error(tmp_path: Path) -> None:
    done = _run(_sr_dist("search.agents=0", "results.path=out"), tmp_path, timeout=120)
    assert done.returncode == 2
    assert "configuration error: search.agents must be positive" in done.stderr
    assert "Traceback" not in done.stderr


def _sweep_on_a_users_csv(tmp_path: Path) -> None:
    """A user's CSV, swept over two seeds (a sweep is one sr-dist run per combination, one
    cluster for all), then read back with ``sr-dist-query``."""
    rng = np.random.default_rng(1)
    x, z = rng.uniform(1, 5, 400), rng.uniform(1, 5, 400)
    table = np.column_stack([x, z, 2.5 * x * z])
    np.savetxt(tmp_path / "data.csv", table, delimiter=",", header="x,z,y", comments="")
    ray_tmp = Path(tempfile.mkdtemp(prefix="srdm-"))  # short: Ray's socket paths are bounded
    try:
        done = _run(_sr_dist("--multirun", "search.seed=0,1", "dataset.source=csv:data.csv",
                             "dataset.target=y", "search.max_candidates=16",
                             "search.max_seconds=300", "results.path=sweep"), tmp_path,
                    timeout=600, RAY_TMPDIR=str(ray_tmp))
        sessions = [p.name for p in (ray_tmp / "ray").glob("session_2*")]  # Ray's own folder
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "best formula:" in done.stdout and "sr-dist-query" in done.stdout
    assert len(sessions) == 1, sessions  # the second run used the cluster the first started
    con = duckdb_connection(tmp_path / "sweep")
    runs = con.sql("SELECT run_id, dataset, status, candidates FROM runs ORDER BY run_id").fetchall()
    assert len(runs) == 2 and len({r[0] for r in runs}) == 2
    assert {r[1] for r in runs} == {f"csv:{tmp_path / 'data.csv'}"}
    assert all(r[2] == "completed" for r in runs)
    per_run = dict(con.sql("SELECT run_id, count(*) FROM candidates GROUP BY run_id").fetchall())
    # Each run stops on a count or its target, not the clock: every runs row counts its own
    # rows, loaded or not.
    assert {r[0]: r[3] for r in runs} == per_run and all(r[3] > 0 for r in runs)
    # The cluster the first run started gave its workers the evaluator's settings (no runtime
    # environment per actor, sr_dist.search.ray_setup.worker_env), the second run's too.
    for (stats,) in con.sql("SELECT evaluator_stats FROM runs").fetchall():
        flags = [row["xla_flags"] for row in json.loads(stats)["per_replica"]]
        assert len(flags) == 1 and flags[0].endswith("--xla_cpu_multi_thread_eigen=false"), flags
    seeds = con.sql("SELECT DISTINCT regexp_extract(config, 'seed: ([0-9]+)\\n  max_tool', 1) "
                    "FROM runs").fetchall()
    assert sorted(s[0] for s in seeds) == ["0", "1"]
    query = _run(_query("sweep", "--sql", "select count(*) from candidates", "--format", "csv"),
                 tmp_path, timeout=120)
    assert query.returncode == 0, query.stderr
    assert int(query.stdout.strip().splitlines()[-1]) == sum(per_run.values())
    # Hydra's own records of the sweep stay under the results path, none in the working
    # directory (a single run's: the SIGTERM test below).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "sweep"]


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(_sr_dist(*args), cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for_rows(proc: subprocess.Popen[str], cand: Path) -> None:
    deadline = time.monotonic() + 300
    while not list(cand.glob("*/*/*.parquet")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no candidate file appeared"
        time.sleep(0.5)


def _runs_row(results: Path) -> tuple[str, str, str, str | None, int, int]:
    """``(run_id, status, stop_reason, signal, candidates in the row, rows on disk)``."""
    con = duckdb_connection(results)
    (run_id, status, reason, sig, candidates), = con.sql(
        "SELECT run_id, status, stop_reason, signal, candidates FROM runs").fetchall()
    rows, distinct = con.sql("SELECT count(*), count(DISTINCT candidate_id) FROM candidates"
                             ).fetchall()[0]
    assert rows == distinct, "a candidate was written twice"
    return run_id, status, reason, sig, candidates, rows


def _sigterm_then_resume(tmp_path: Path) -> None:
    """What `ray job stop`, Kubernetes and Slurm send: SIGTERM to the driver process alone."""
    proc = _start(tmp_path, "dataset.source=feynman:I.30.3", "search.max_seconds=600",
                  "search.target_nmse=null", "results.path=out")
    try:
        _wait_for_rows(proc, tmp_path / "out" / "candidates")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, out[-2000:] + err[-2000:]
    assert "SIGTERM received: stopping the agents" in out
    assert "SIGTERM received at" not in out + err  # Ray's own handler did not take it
    run_id, status, reason, sig, candidates, rows = _runs_row(tmp_path / "out")
    assert (status, reason, sig) == ("interrupted", "interrupted", "SIGTERM")
    assert candidates == rows > 0
    record = read_run(tmp_path / "out", run_id)
    assert record is not None and record.ended_at is not None
    assert not list((tmp_path / "out").rglob("*.tmp")), "a temporary file was left behind"
    con = duckdb_connection(tmp_path / "out")
    before = {a: (step, n) for a, step, n in con.sql(
        "SELECT agent_id, max(step), count(*) FROM candidates GROUP BY agent_id").fetchall()}

    # Budgets are per session; a count, not the clock (5 s on a loaded machine wrote no row).
    done = _run(_sr_dist(f"run.resume={run_id}", "search.max_seconds=300",
                         "search.max_candidates=64", "search.target_nmse=null",
                         "results.path=out"), tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    same, status, reason, sig, total, on_disk = _runs_row(tmp_path / "out")
    assert same == run_id and (status, reason, sig) == ("completed", "max_candidates", None)
    assert total == on_disk > rows  # both sessions' rows, none twice
    con = duckdb_connection(tmp_path / "out")
    agents = [a for (a,) in con.sql("SELECT DISTINCT agent_id FROM candidates").fetchall()]
    continued = 0
    for agent_id in agents:  # each agent's new steps come after its last
        step, n = before.get(agent_id, (-1, 0))
        old, new = con.execute("SELECT count(*) FILTER (WHERE step <= ?), "
                               "count(*) FILTER (WHERE step > ?) FROM candidates "
                               "WHERE agent_id = ?", [step, step, agent_id]).fetchall()[0]
        assert old == n, f"agent {agent_id}: a resumed row reused an earlier step"
        continued += new
    assert continued == on_disk - rows  # every new row is past its agent's last step
    (stats,), = con.sql("SELECT evaluator_stats FROM runs").fetchall()
    assert json.loads(stats)["prefit"]["fits"] > 0  # warmed from the old rows
    # Hydra's own records of both sessions stay under the results path, none in the working
    # directory.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _silent_server() -> tuple[socket.socket, list[socket.socket]]:
    """A loopback 'model service' that accepts connections and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)

    import threading

    threading.Thread(target=accept, daemon=True).start()
    return server, held


def _second_signal(tmp_path: Path) -> None:
    """Agents stuck in a model call do not stop on the first signal (Ctrl-C: SIGINT to the
    whole process group, as a terminal sends it); a second one (SIGHUP: the terminal closed)
    ends the run at once, not after search.stop_grace_s=300, and the runs row still says
    interrupted, naming the first."""
    server, held = _silent_server()
    port = server.getsockname()[1]
    proc = subprocess.Popen(
        _sr_dist("model=openai", f"model.base_url=http://127.0.0.1:{port}/v1",
                 "model.api_key_env=SRD_TEST_KEY", "model.max_retries=0",
                 "dataset.source=feynman:I.6.2", "search.max_seconds=600",
                 "search.stop_grace_s=300", "evaluator.warmup=false", "results.path=out"),
        cwd=tmp_path, env=_env(SRD_TEST_KEY="sk-test"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while len(held) < 2:  # both agents are waiting on their model
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the agents never called their model"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(2.0)
        assert proc.poll() is None, "the first signal should wait for the agents"
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=120)  # far less than the 300 s grace
    finally:
        server.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "did not stop (a second signal); killing it" in err
    _, status, reason, sig, candidates, rows = _runs_row(tmp_path / "out")
    assert (status, reason, sig) == ("interrupted", "interrupted", "SIGINT")
    assert candidates == rows


#: The module's long runs, each test's whole scenario (its processes, signals and asserts).
LONG_RUNS = {
    "test_a_sweep_on_a_users_csv_shares_one_results_path_and_one_cluster": _sweep_on_a_users_csv,
    "test_sigterm_stops_like_ctrl_c_and_the_run_resumes": _sigterm_then_resume,
    "test_a_second_signal_skips_the_grace_period": _second_signal,
}


@pytest.fixture(scope="module")
def long_runs(request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[None]]]:
    """The long runs of the selected tests, started together on first use, each in its own
    folder with its own cluster and processes: a run is much of its time waiting (on Ray's
    start-up and shutdown, on its model, on a signal's effect), which the others' work fills.
    Each test waits for its own run and fails with that run's assertion."""
    selected = [item.name for item in request.session.items
                if item.module is request.module and item.name in LONG_RUNS]
    with ThreadPoolExecutor(max(1, len(selected))) as pool:
        yield {name: pool.submit(LONG_RUNS[name], tmp_path_factory.mktemp(name[5:35]))
               for name in selected}


def test_a_sweep_on_a_users_csv_shares_one_results_path_and_one_cluster(
        long_runs: dict[str, Future[None]]) -> None:
    long_runs["test_a_sweep_on_a_users_csv_shares_one_results_path_and_one_cluster"].result()


def test_sigterm_stops_like_ctrl_c_and_the_run_resumes(long_runs: dict[str, Future[None]]) -> None:
    long_runs["test_sigterm_stops_like_ctrl_c_and_the_run_resumes"].result()


def test_a_second_signal_skips_the_grace_period(long_runs: dict[str, Future[None]]) -> None:
    long_runs["test_a_second_signal_skips_the_grace_period"].result()


def test_the_config_groups_ship_in_the_wheel(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    source = tmp_path / "src"  # a copy, so the build's scratch files stay out of the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, source / name)
    shutil.copytree(repo / "sr_dist", source / "sr_dist",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # Without build isolation when the test extra's setuptools is here: no build env to fetch.
    for isolation in ([], ["--no-build-isolation"])[::-1]:
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q",
                                *isolation, "-w", str(tmp_path / "dist")], capture_output=True,
                               text=True, timeout=300)
        if built.returncode == 0:
            break
    if built.returncode != 0:
        pytest.skip(f"could not build a wheel here: {built.stderr.strip().splitlines()[-1:]}")
    import zipfile

    (wheel,) = (tmp_path / "dist").glob("sr_dist-*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    env = {"PYTHONPATH": str(site)}
    where = _run([sys.executable, "-c", "import sr_dist; print(sr_dist.__file__)"], run_dir, **env)
    assert where.stdout.strip() == str(site / "sr_dist" / "__init__.py")
    done = _run([sys.executable, "-m", "sr_dist", "--help", "search.agents=3"], run_dir,
                timeout=120, **env)
    assert done.returncode == 0, done.stderr
    for group in ("dataset: feynman", "evaluator: cpu, gpu", "ray: local", "results: local",
                  "search: default", "model: "):
        assert group in done.stdout
    assert "agents: 3" in done.stdout
