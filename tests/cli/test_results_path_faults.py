"""A results path that cannot take the results (issue 14, item 6): a file, a read-only file
system, a full disk. Each is refused before Ray starts, in one line, with exit status 2.

The read-only and full file systems are real: small tmpfs mounts in a private mount namespace
(``unshare --mount``, which needs root, as CI has).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

BIN = Path(sys.executable).parent


def _sr_dist() -> str:
    script = BIN / "sr-dist"
    return str(script) if script.exists() else f"{sys.executable} -m sr_dist"


def _can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", "mount -t tmpfs none /mnt"],
                           capture_output=True)
    return probe.returncode == 0


def _refused(done: subprocess.CompletedProcess[str], why: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("sr-dist: configuration error: results.path")
    assert why in lines[0], lines[0]
    assert "Traceback" not in done.stdout + done.stderr and "Ray" not in done.stdout


def test_a_results_path_that_is_a_file_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("not a folder")
    done = subprocess.run([*_sr_dist().split(), "results.path=out"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    _refused(done, "is a file, not a directory")


@pytest.mark.skipif(not _can_mount(), reason="needs root and unshare --mount for tmpfs mounts")
@pytest.mark.parametrize("mount, prepare, why", [
    ("ro,size=1m", "", "is on a read-only file system"),
    ("size=1m", "dd if=/dev/zero of=$D/fill bs=64k 2>/dev/null;", "is on a full disk"),
], ids=["read-only", "full"])
def test_a_results_path_on_a_bad_file_system_is_refused_before_ray(
        tmp_path: Path, mount: str, prepare: str, why: str) -> None:
    target = tmp_path / "mnt"
    target.mkdir()
    script = (f"D={target}; mount -t tmpfs -o {mount} none $D && {prepare} "
              f"{_sr_dist()} results.path=$D")
    done = subprocess.run(["unshare", "--mount", "sh", "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    _refused(done, why)


CHECK = """
import json, sys
from sr_dist.results import duckdb_connection
con = duckdb_connection(sys.argv[1])
(status, reason, error, candidates), = con.sql(
    "SELECT status, stop_reason, error, candidates FROM runs").fetchall()
rows, distinct = con.sql("SELECT count(*), count(DISTINCT candidate_id) FROM candidates").fetchall()[0]
print("CHECK " + json.dumps([status, reason, error, candidates, rows, distinct]))
"""


@pytest.mark.slow
@pytest.mark.skipif(not _can_mount(), reason="needs root and unshare --mount for tmpfs mounts")
def test_a_disk_that_fills_during_the_run_stops_it_failed_and_keeps_what_was_written(
        tmp_path: Path) -> None:
    """A real 1.1 MiB tmpfs: room to start, filled by the fast scripted proposer's rows."""
    target = tmp_path / "mnt"
    target.mkdir()
    script = (
        f"ip link set lo up && D={target} && mount -t tmpfs -o size=1100k none $D && "
        f"RAY_AUTH_MODE=disabled {_sr_dist()} model=scripted dataset.source=feynman:I.6.2 "
        "search.agents=2 search.max_seconds=240 search.target_nmse=null "
        "evaluator.warmup=false results.flush_s=0.5 results.path=$D; echo RC=$?; "
        f"{sys.executable} -c '{CHECK}' $D")
    done = subprocess.run(["unshare", "--net", "--mount", "sh", "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=400)
    out = done.stdout
    assert "RC=1" in out, out[-3000:] + done.stderr[-3000:]
    assert "the results disk refused the rows" in out
    status, reason, error, candidates, rows, distinct = json.loads(
        out.split("CHECK ", 1)[1])
    assert (status, reason) == ("failed", "write_failed"), error
    assert "No space left on device" in error
    assert candidates == rows == distinct > 0  # what was written is whole and counted
