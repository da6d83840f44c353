"""Run the real ``sr-dist`` console script and check that a refusal happened before Ray started.

``RAY_TMPDIR`` points every run at its own directory: Ray creates its session folder there the
moment ``ray.init`` starts a cluster, so an absent folder proves Ray never started (no patching).
"""

from __future__ import annotations

import os
import subprocess
import sys
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
