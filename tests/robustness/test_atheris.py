"""A short, bounded atheris session over the formula parser and the tool-call parsers.

Skipped when atheris is not installed (it is optional; see fuzz_atheris.py for long runs).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")
pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")]

HARNESS = Path(__file__).with_name("fuzz_atheris.py")
ROOT = HARNESS.parents[2]


#: What libFuzzer prints where a session goes wrong: the report from there on is the cause.
FAILURE_MARKS = ("=== Uncaught Python exception", "==ERROR", "Traceback (most recent call last)",
                 "ERROR: libFuzzer", "out-of-memory", "timeout after")


def failure_report(output: str, artifacts: Path) -> str:
    """The part of a session's output that says why it failed (from libFuzzer's first error
    mark on, else its last lines) and each artifact it left, with its first bytes: a bare tail
    can hide the cause behind thousands of lines of statistics."""
    starts = [output.find(mark) for mark in FAILURE_MARKS if mark in output]
    report = output[min(starts):][:4000] if starts else output[-3000:]
    for path in sorted(artifacts.iterdir()):
        if path.is_file():
            report += f"\nartifact {path.name}: {path.read_bytes()[:200]!r}"
    return report


def test_the_failure_report_leads_with_the_cause(tmp_path: Path) -> None:
    (tmp_path / "crash-abc").write_bytes(b"1/(")
    noise = "#1024 pulse cov: 12 ft: 30\n" * 500
    output = noise + "=== Uncaught Python exception: ===\nValueError: boom\n" + noise
    report = failure_report(output, tmp_path)
    assert report.startswith("=== Uncaught Python exception") and "ValueError: boom" in report
    assert "artifact crash-abc: b'1/('" in report
    assert failure_report("just statistics", tmp_path).startswith("just statistics")


#: The memory a session may use beyond what it starts with (libFuzzer's default limit).
RSS_BUDGET_MB = 2048


def rss_limit_mb() -> int:
    """libFuzzer's ``-rss_limit_mb`` for a session started from this process. It reads the
    peak resident size, which Linux carries from a parent into a child it spawns: a pytest
    worker that has grown past 2 GB (JAX, earlier tests) would otherwise start the fuzzer
    "out of memory" before its first input. So the budget counts from this process's peak."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 + RSS_BUDGET_MB


def test_bounded_atheris_session_finds_nothing(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, str(HARNESS), "-runs=3000", "-max_len=512", "-max_total_time=8",
         "-seed=1", f"-rss_limit_mb={rss_limit_mb()}", f"-artifact_prefix={tmp_path}/"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    output = done.stdout + done.stderr
    crashed = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "oom-", "timeout-", "leak-"))]
    assert done.returncode == 0 and not crashed, failure_report(output, tmp_path)
    assert "Done" in output[-3000:], failure_report(output, tmp_path)
    print(output.strip().splitlines()[-1])


def test_a_session_started_from_a_grown_process_is_not_out_of_memory(tmp_path: Path) -> None:
    """Started from a process that once held 2.5 GB (as a pytest worker may), a session runs:
    the inherited peak is not counted against its budget (a no-op target: libFuzzer's memory
    check is what is tested, not the parsers)."""
    target = "import atheris, sys; atheris.Setup(sys.argv, lambda data: None); atheris.Fuzz()"
    script = (
        "import numpy, subprocess, sys\n"
        "block = numpy.ones(int(2.5e9 // 8)); del block\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from test_atheris import rss_limit_mb\n"
        f"done = subprocess.run([sys.executable, '-c', {target!r}, '-max_total_time=2',\n"
        "                       f'-rss_limit_mb={rss_limit_mb()}', f'-artifact_prefix={sys.argv[2]}/'],\n"
        "                      capture_output=True, text=True)\n"
        "print(done.returncode, 'out-of-memory' in done.stdout + done.stderr)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.stdout.split() == ["0", "False"], done.stdout + done.stderr[-3000:]
