"""A short, bounded atheris session over the formula parser and the tool-call parsers.

Skipped when atheris is not installed (it is optional; see fuzz_atheris.py for long runs).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")
pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")]

HARNESS = Path(__file__).with_name("fuzz_atheris.py")
ROOT = HARNESS.parents[2]


def test_bounded_atheris_session_finds_nothing(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, str(HARNESS), "-runs=3000", "-max_len=512", "-max_total_time=8",
         "-seed=1", f"-artifact_prefix={tmp_path}/"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    tail = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0, tail
    assert "Done" in tail and "crash-" not in " ".join(p.name for p in tmp_path.iterdir()), tail
    print(tail.strip().splitlines()[-1])
