"""Quiet by default: ``sr-dist``'s console has only sr-dist's own lines, Ray's and JAX's lines are
in the job log, and ``--verbose`` shows them on the console.

Two real ``sr-dist`` runs (one quiet, one ``--verbose``, started together), each shared by the
asserts about it.
Each run gets its own network namespace with only loopback (docs/running.md); there Ray's
start-up always prints ``network_util.cc: Failed to determine
local IP ...`` from its C++ core, which gives the routing a Ray line to route.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sr_dist.search import quiet

BUDGET = ("search.max_seconds=5", "search.max_candidates=50")
#: Lines Ray or JAX print: a C++ log prefix, a forwarded actor line, Python log/warning records.
FOREIGN = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+ [DIWEF] \d+ \d+\]|^\(\S* ?pid=|"
                     r"^(WARNING|INFO|ERROR):|^\S+\.py:\d+: \w*Warning|\bjax\b|\bray\b",
                     re.IGNORECASE)


#: The runs get their own loopback-only network namespace (root, as in CI; the test suite
#: itself may run outside one): there Ray always prints its C++ ``network_util`` line.
_LOOPBACK_ONLY = (["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"']
                  if os.geteuid() == 0 and shutil.which("unshare") else [])


def _sr_dist(tmp: Path, *args: str) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env.pop(quiet.VERBOSE_ENV, None)
    results = tmp / "results"
    done = subprocess.run([*_LOOPBACK_ONLY, sys.executable, "-m", "sr_dist", *args,
                           f"results.path={results}", *BUDGET], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=400)
    logs = sorted((results / "_hydra").glob("*/sr-dist.log"))
    return {"done": done, "log": logs[0].read_text() if logs else ""}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Both runs, started together (each in its own folder and network namespace): much of
    a run is waiting on Ray's start-up and shutdown, which the other run's work fills."""
    folders = {"quiet": (tmp_path_factory.mktemp("quiet"), ()),
               "verbose": (tmp_path_factory.mktemp("verbose"), ("--verbose",))}
    with ThreadPoolExecutor(len(folders)) as pool:
        started = {name: pool.submit(_sr_dist, tmp, *args) for name, (tmp, args) in folders.items()}
        return {name: future.result() for name, future in started.items()}


@pytest.fixture(scope="module")
def quiet_run(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return runs["quiet"]


@pytest.fixture(scope="module")
def verbose_run(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return runs["verbose"]


def _message(line: str) -> str:
    """A log line without its timestamp and pids (two runs print the same message so)."""
    return line.split("] ", 1)[-1] if line.startswith("[") else line


@pytest.mark.slow
def test_every_console_line_is_sr_dists_own(quiet_run: dict[str, Any]) -> None:
    done = quiet_run["done"]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert all(quiet.is_own_line(line) for line in done.stderr.splitlines() if line), done.stderr
    lines = done.stdout.splitlines()
    assert lines and lines[0].startswith("sr-dist: run "), lines[:3]
    report = next(i for i, line in enumerate(lines) if " completed (" in line)
    assert all(line.startswith("sr-dist:") for line in lines[:report] if line), lines[:report]
    # the report lines are sr-dist's own too: none reads like Ray's or JAX's
    foreign = [line for line in lines if FOREIGN.search(line) and "sr-dist" not in line]
    assert foreign == [], foreign


@pytest.mark.slow
def test_verbose_shows_ray_lines_that_the_quiet_run_logs(
    quiet_run: dict[str, Any], verbose_run: dict[str, Any],
) -> None:
    done = verbose_run["done"]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    shown = [line for line in done.stderr.splitlines() if line and not quiet.is_own_line(line)]
    if _LOOPBACK_ONLY:  # without a namespace (not root) Ray may have nothing to say
        assert any("network_util" in line for line in shown), done.stderr
    logged = {_message(line) for line in quiet_run["log"].splitlines()}
    for line in shown:
        if "network_util" in line:
            assert _message(line) in logged, (line, quiet_run["log"][:2000])


# --- the pieces, in process ---------------------------------------------------------------

@pytest.mark.parametrize(("line", "own"), [
    ("sr-dist: run 2026 ...", True),
    ("[WARNING] sr_dist.search.sink: the writer is unreachable", True),
    ("[ERROR] sr_dist: boom", True),
    ("[WARNING] jax._src.xla_bridge: An NVIDIA GPU may be present", False),
    ("[2026-12-01 22:25:40,212 W 943 943] network_util.cc:330: Failed", False),
    ("2026-12-01 22:30:54,522\tINFO autoscaler.py:147 -- The autoscaler took", False),
])
def test_own_lines(line: str, own: bool) -> None:
    assert quiet.is_own_line(line) is own


def test_the_console_filter_keeps_sr_dist_records_and_anyones_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(quiet.VERBOSE_ENV, raising=False)

    def record(name: str, level: int) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, "m", None, None)

    keep = quiet.OwnRecords()
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    try:
        assert keep.filter(record("sr_dist.search.driver", logging.WARNING))
        assert not keep.filter(record("sr_dist.search.driver", logging.INFO))
        assert keep.filter(record("ray", logging.ERROR))
        assert not keep.filter(record("jax._src.xla_bridge", logging.WARNING))
        assert not keep.filter(record("sr_dist_other", logging.WARNING))
        monkeypatch.setenv(quiet.VERBOSE_ENV, "1")  # sr-dist --verbose
        assert keep.filter(record("jax._src.xla_bridge", logging.WARNING))
        assert not keep.filter(record("jax._src.xla_bridge", logging.INFO))
        root.setLevel(logging.DEBUG)  # hydra.verbose=true
        assert keep.filter(record("jax._src.xla_bridge", logging.DEBUG))
    finally:
        root.setLevel(level)


def test_actor_output_prints_own_lines_and_logs_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    printed: list[dict[str, Any]] = []
    batch = {"pid": 42, "actor_name": "EvaluatorActor", "is_err": True,
             "lines": ["[WARNING] sr_dist.search.actors: slow fit", "W0000 jax platform note"]}
    with caplog.at_level(logging.INFO, logger=quiet.WORKER_OUTPUT_LOGGER):
        quiet._forward(batch, printed.append)
        quiet._forward({"pid": "autoscaler", "lines": ["status table", "event!"]},
                       printed.append, events=lambda lines: [x for x in lines if "!" in x])
    assert [p["lines"] for p in printed] == [["[WARNING] sr_dist.search.actors: slow fit"]]
    assert [r.getMessage() for r in caplog.records] == [
        "(EvaluatorActor pid=42) W0000 jax platform note", "(pid=autoscaler) event!"]


def test_native_stderr_goes_to_the_file_inside_the_block(tmp_path: Path) -> None:
    target = tmp_path / "job.log"
    with quiet.native_stderr_to(str(target)):
        os.write(2, b"a native line\n")
    assert target.read_text() == "a native line\n"
    with quiet.native_stderr_to(None):  # no job log: nothing changes
        pass
