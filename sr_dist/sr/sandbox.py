"""``run_python``'s sandbox: the model's Python in a separate, confined, bounded process.

:func:`run_sandboxed` copies the training split (never validation or test) into a fresh
scratch directory, starts ``python -I`` on :mod:`sr_dist.sr._sandbox_child` there, and gives it
a wall-clock budget. The child confines itself before the code runs (docs/run-python.md):
resource limits (CPU time, address space, file size, processes, open files), a network
namespace with no interfaces, and Landlock (writes only in the scratch directory, reads only
there and in the Python installation, no TCP). The parent reads at most ``output_chars`` of each
stream and kills the whole process group when the wall clock runs out.

It is for trusted models on a trusted machine: these limits stop accidents and runaway code,
not a determined attacker (kernel bugs, what the Python installation itself allows).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LIMIT_KINDS", "SETUP_FAILED", "RunPythonLimits", "SandboxResult", "run_sandboxed"]

#: Values ``SandboxResult.limit_hit`` may take.
LIMIT_KINDS: tuple[str, ...] = ("cpu", "memory", "wall", "file_size", "processes", "output")
#: Exit statuses the child uses (see ``_sandbox_child``).
_EXIT_MEMORY = 86
#: The exit status of a sandbox that could not be set up (the code did not run).
SETUP_FAILED = 87
_CHILD = Path(__file__).with_name("_sandbox_child.py")
#: Paths the code may read besides the scratch directory and ``sys.path`` (shared libraries,
#: the dynamic loader's cache, time zones): enough for numpy, pandas and scipy.
_READABLE = ("/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/localtime", "/dev/urandom",
             sys.prefix, sys.base_prefix, sys.exec_prefix)


def _positive(value: Any, name: str, *, integer: bool = True) -> None:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
        raise ValueError(f"run_python {name} must be a positive {'integer' if integer else 'number'}, "
                         f"got {value!r}")


@dataclass(frozen=True)
class RunPythonLimits:
    """What one ``run_python`` call may use (``search.run_python_*`` in the config)."""

    #: CPU seconds (RLIMIT_CPU; the code is killed past it).
    cpu_s: int = 10
    #: Address space in MiB (RLIMIT_AS; allocations past it raise MemoryError).
    memory_mb: int = 2048
    #: Wall-clock seconds before the process group is killed.
    wall_s: float = 20.0
    #: Largest file the code may write, MiB (RLIMIT_FSIZE).
    file_mb: int = 16
    #: Characters kept of stdout and of stderr each (the rest is counted and dropped).
    output_chars: int = 8000
    #: Processes and threads the sandbox's user may have (RLIMIT_NPROC, counted in the
    #: sandbox's own user namespace); low so a fork bomb ends at once.
    processes: int = 32
    #: Open file descriptors (RLIMIT_NOFILE).
    open_files: int = 64

    def __post_init__(self) -> None:
        for name in ("cpu_s", "memory_mb", "file_mb", "output_chars", "processes", "open_files"):
            _positive(getattr(self, name), name)
        _positive(self.wall_s, "wall_s", integer=False)


@dataclass(frozen=True)
class SandboxResult:
    """How one run went: exit status, bounded output, which limit ended it, what confined it."""

    exit: int | None
    stdout: str
    stderr: str
    limit_hit: str | None = None
    #: What held: ``network``, ``files``, ``tcp``, ``signals``, ``limits`` -> ``ok`` or why not.
    isolation: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit == 0 and self.limit_hit in (None, "output")


class _Reader(threading.Thread):
    """Drains one pipe, keeping the first ``limit`` characters and counting the rest."""

    def __init__(self, stream: Any, limit: int) -> None:
        super().__init__(daemon=True)
        self._stream, self._limit = stream, limit
        self.kept = bytearray()
        self.dropped = 0

    def run(self) -> None:
        while chunk := self._stream.read(65536):
            room = max(self._limit * 4 - len(self.kept), 0)  # bytes: up to 4 per character
            self.kept += chunk[:room]
            self.dropped += max(len(chunk) - room, 0)
        self._stream.close()

    def text(self) -> tuple[str, bool]:
        text = self.kept.decode("utf-8", errors="replace")
        cut = self.dropped > 0 or len(text) > self._limit
        text = text[: self._limit]
        if cut:
            text += f"\n[output truncated at {self._limit} characters]"
        return text, cut


def _limit_from_status(code: int, stderr: str) -> str | None:
    """Which limit ended a child that exited by itself (the wall clock is the parent's)."""
    if code in (-signal.SIGXCPU, -signal.SIGKILL):  # the soft, then the hard CPU limit
        return "cpu"
    if code == -signal.SIGXFSZ:
        return "file_size"
    if code == _EXIT_MEMORY or "MemoryError" in stderr:
        return "memory"
    if "BlockingIOError" in stderr and "Resource temporarily unavailable" in stderr:
        return "processes"
    if "[Errno 27] File too large" in stderr:  # Python ignores SIGXFSZ: the write fails instead
        return "file_size"
    return None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_sandboxed(code: str, X: np.ndarray, y: np.ndarray, names: Sequence[str], target: str,
                  limits: RunPythonLimits | None = None) -> SandboxResult:
    """Run ``code`` confined (see the module docstring) with ``X``, ``y``, ``df``, ``names``
    and ``target`` defined; never raises for what the code does."""
    limits = limits if limits is not None else RunPythonLimits()
    scratch = Path(tempfile.mkdtemp(prefix="sr-dist-run-python-"))
    start = time.monotonic()
    try:
        np.save(scratch / "X.npy", np.asarray(X, dtype=float))
        np.save(scratch / "y.npy", np.asarray(y, dtype=float).ravel())
        (scratch / "code.py").write_text(code)
        settings = {"scratch": str(scratch), "names": list(names), "target": str(target),
                    "readable": [str(p) for p in _READABLE],
                    "cpu_s": limits.cpu_s, "memory_mb": limits.memory_mb,
                    "file_mb": limits.file_mb, "processes": limits.processes,
                    "open_files": limits.open_files}
        report_r, report_w = os.pipe()
        settings["report_fd"] = report_w
        settings_file = scratch / "settings.json"
        settings_file.write_text(json.dumps(settings))
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", str(_CHILD), str(settings_file)],
                cwd=scratch, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, pass_fds=(report_w,), start_new_session=True,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch),
                     "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
            )
        except BaseException:
            os.close(report_r)
            raise
        finally:
            os.close(report_w)
        readers = [_Reader(proc.stdout, limits.output_chars), _Reader(proc.stderr, limits.output_chars)]
        for reader in readers:
            reader.start()
        wall_hit = False
        try:
            proc.wait(timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            wall_hit = True
            _kill_group(proc)
            proc.wait()
        _kill_group(proc)  # stragglers the code left behind (a fork bomb's children)
        with os.fdopen(report_r) as fh:
            lines = [json.loads(line) for line in fh.read().splitlines() if line.strip()]
        isolation_line = lines[:1]
        code_pid = next((int(x["code_pid"]) for x in lines if "code_pid" in x), None)
        ended = [x for x in lines if "exit" in x]
        if code_pid is not None and not ended:
            # The code's process outlived the sandbox's (killed at the wall clock): it may have
            # left the process group (setsid). Killing it ends its whole PID namespace.
            try:
                os.kill(code_pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for reader in readers:
            reader.join(timeout=5.0)
        lines = isolation_line + ended
        isolation: dict[str, Any] = lines[0] if lines else {
            "network": "unknown: the sandbox ended before it reported", "files": "unknown"}
        stdout, cut_out = readers[0].text()
        stderr, cut_err = readers[1].text()
        # The code's own status (its process is the sandbox's child), else the sandbox's.
        code_rc = int(lines[1]["exit"]) if len(lines) > 1 and "exit" in lines[1] else proc.returncode
        limit = "wall" if wall_hit else _limit_from_status(code_rc, stderr)
        if limit is None and code_rc == 0 and (cut_out or cut_err):
            limit = "output"
        return SandboxResult(
            exit=None if wall_hit else code_rc, stdout=stdout, stderr=stderr, limit_hit=limit,
            isolation=isolation, truncated=cut_out or cut_err, elapsed_s=time.monotonic() - start)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
