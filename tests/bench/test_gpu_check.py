"""bench/gpu_check.sh runs where the GPU image runs: without Ray, Hydra, omegaconf, duckdb or
jsonschema.

The script's CPU dry run is run in a subprocess whose Python cannot import those modules (a
``sitecustomize`` on PYTHONPATH puts a finder first on ``sys.meta_path`` that refuses them, so
they are absent however they are installed here), and must still print its table. Without
``--dry-run`` and without a GPU it must stop with a message that says what to do.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_check.sh"
ABSENT = ("ray", "hydra", "omegaconf", "duckdb", "jsonschema")

BLOCKER = f'''"""Make {", ".join(ABSENT)} unimportable, as on the GPU image."""
import sys

_ABSENT = {set(ABSENT)!r}


class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _ABSENT:
            raise ModuleNotFoundError(f"No module named {{name!r}} (absent on the GPU image)", name=name)
        return None


sys.meta_path.insert(0, _Absent())
'''


def _env(tmp_path: Path) -> dict[str, str]:
    """An environment like the GPU image's: the absent modules blocked, JAX on the CPU."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "PYTHONPATH": str(site), "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu",
           "OUT": str(tmp_path / "out")}
    # The suite's persistent compilation cache (tests/conftest.py): the cells' compiles are
    # paid once per machine. JAX alone reads it; nothing the check is about changes.
    if os.environ.get("SR_DIST_JAX_CACHE_DIR"):
        env["SR_DIST_JAX_CACHE_DIR"] = os.environ["SR_DIST_JAX_CACHE_DIR"]
    return env


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # Run from outside the repo: the script finds the repo root itself.
    return subprocess.run(["bash", str(SCRIPT), *args], cwd="/", env=env, capture_output=True,
                          text=True, timeout=240, check=False)


def test_the_blocker_makes_the_modules_unimportable(tmp_path: Path) -> None:
    env = _env(tmp_path)
    for name in ABSENT:
        done = subprocess.run([sys.executable, "-c", f"import {name}"], env=env, capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode != 0, f"{name} is still importable"
        assert "absent on the GPU image" in done.stderr


@pytest.mark.slow
def test_the_dry_run_prints_the_table_without_ray_or_hydra(tmp_path: Path) -> None:
    done = _run(["--dry-run"], _env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "importable: " + ", ".join(f"{name}=no" for name in ABSENT) in out
    assert "loaded by the evaluator core: none of" in out
    assert "| device | n (train rows) | batch (unique) | fits/s warm |" in out
    for batch in (8, 16):
        row = re.search(rf"^\| cpu \| 200 \(\d+\) \| {batch} \((\d+)\) \| ([0-9.]+) \|.*"
                        rf"\| ([0-9.]+) \((\d+)\) \| ([0-9.]+) \| ([^|]+) \| \d+ \|$", out,
                        re.MULTILINE)
        assert row, f"no row for batch {batch} in:\n{out}"
        assert int(row.group(1)) == batch  # the dry run's formulas are all distinct
        assert float(row.group(2)) > 0
        # The offspring's path: every ok formula fitted again from its constants, 10% off.
        assert float(row.group(3)) > 0 and 0 < int(row.group(4)) <= batch
        # The same local fits as pipelined calls (Evaluator.begin/finish).
        assert float(row.group(5)) > 0
        assert row.group(6).strip().startswith("ok "), row.group(0)
    assert "Time budget spent" not in out
    assert "Loaded by the cells: none of" in out
    written = (tmp_path / "out" / "gpu_check.md").read_text()
    table = out[out.index("| device |"):out.index("\n\nLoaded by the cells")]
    assert table in written


def test_without_a_gpu_it_says_what_to_do(tmp_path: Path) -> None:
    done = _run([], _env(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "JAX sees no gpu device" in done.stderr
    assert "--dry-run" in done.stderr
    assert "| device |" not in done.stdout
