"""Run the real ``sr-dist`` console script and check that a refusal happened before Ray started.

``RAY_TMPDIR`` points every run at its own directory: Ray creates its session folder there the
moment ``ray.init`` starts a cluster, so an absent folder proves Ray never started (no patching).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BIN = Path(sys.executable).parent


def sr_dist_command(*args: str) -> list[str]:
    script = BIN / "sr-dist"
    return [str(script), *args] if script.exists() else [sys.executable, "-m", "sr_dist", *args]


def run_sr_dist(cwd: Path, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env.pop("RAY_ADDRESS", None)
    full_env["RAY_TMPDIR"] = str(cwd / "ray-tmp")
    full_env.update(env)
    return subprocess.run(sr_dist_command(*args), cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


#: Console-script runs at once: each is mostly its imports and Hydra's compose, so four keep
#: two cores busy while another waits on its process start.
CONCURRENT_RUNS = 4


def run_sr_dist_all(runs: Mapping[str, tuple[Path, Sequence[str], Mapping[str, str]]],
                    timeout: float = 300) -> dict[str, subprocess.CompletedProcess[str]]:
    """``run_sr_dist`` for each ``name: (cwd, args, env)``, ``CONCURRENT_RUNS`` at a time.

    The refusal tables run every case as its own real process; started together they cost the
    suite a fraction of one after another, and each case still fails on its own."""
    with ThreadPoolExecutor(CONCURRENT_RUNS) as pool:
        futures = {name: pool.submit(run_sr_dist, cwd, *args, timeout=timeout, **dict(env))
                   for name, (cwd, args, env) in runs.items()}
        return {name: future.result() for name, future in futures.items()}


def assert_refused_before_ray(done: subprocess.CompletedProcess[str], cwd: Path, results: Path,
                              key: str, *fragments: str) -> str:
    """Exit 2, one stderr line naming ``key`` and the problem, no Ray, no results rows."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith(f"sr-dist: configuration error: {key} "), line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert "Traceback" not in done.stderr and done.stdout.strip() == "", done.stdout
    assert not (cwd / "ray-tmp").exists(), "Ray started a session before the error"
    # Hydra's own record may exist; no run was recorded and no candidate written.
    if results.exists():
        assert sorted(p.name for p in results.iterdir()) == ["_hydra"], list(results.iterdir())
    return line
