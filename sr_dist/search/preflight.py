"""Checks of the results path before Ray starts: what can be known early fails early.

A results path that is a file, a read-only directory or a full disk would otherwise be found
out by the writer, after the cluster and the evaluator's warm-up, as a run that fails with
nothing written. :func:`check_results_path` finds those with a probe write and the free space
the file system reports, and says what to do in one line. What only shows up later (a disk that
fills during the run) stops the run ``failed`` with ``write_failed`` (docs/reliability.md).

:class:`Ballast` is the other half: a small file the driver keeps under the results path for
the run and removes just before it writes the final ``runs`` row, so that row still fits on a
disk the candidate rows filled up.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from sr_dist.conf.record_dir import probe_write
from sr_dist.search.settings import SettingsError

__all__ = ["BALLAST_BYTES", "MIN_FREE_BYTES", "Ballast", "check_results_path"]

#: Free space below which a run is refused before it starts (a runs row and a few flushes).
MIN_FREE_BYTES = 1 << 20
#: Space held back for the final ``runs`` row (a few kilobytes, with room to spare).
BALLAST_BYTES = 256 << 10


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def check_results_path(path: Path, min_free_bytes: int = MIN_FREE_BYTES) -> None:
    """Make ``path`` (and its parents) and check it takes files and has room; raises
    :class:`SettingsError` (key ``results.path``) with the fix otherwise."""
    if path.exists() and not path.is_dir():
        raise SettingsError("results.path", f"{path} is a file, not a directory: point it at a "
                            "directory (it is created if it does not exist)")
    if not path.exists():
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SettingsError("results.path", f"cannot be created: {exc.strerror or exc} "
                                f"({path}); pick a directory you can write to") from exc
    refusal = probe_write(path)
    if refusal is not None:
        why = {errno.EROFS: "is on a read-only file system", errno.EACCES: "is not writable",
               errno.EPERM: "is not writable", errno.ENOSPC: "is on a full disk",
               errno.EDQUOT: "is over its disk quota"}.get(refusal.errno or 0, f"refused a test "
                                                                         f"write ({refusal})")
        fix = ("free some space or pick another directory"
               if refusal.errno in (errno.ENOSPC, errno.EDQUOT) else "pick a directory you can write to")
        raise SettingsError("results.path", f"{path} {why}: {fix}") from refusal
    try:
        stat = os.statvfs(path)
    except (OSError, AttributeError):  # no statvfs (Windows): the probe write has to do
        return
    free = stat.f_bavail * stat.f_frsize
    if free < min_free_bytes:
        raise SettingsError("results.path", f"{path} has {_mib(free)} free, less than the "
                            f"{_mib(min_free_bytes)} a run needs to start: free some space or "
                            "pick another directory")


class Ballast:
    """A file of ``size`` bytes under the results path, held for the final ``runs`` row."""

    def __init__(self, path: Path, run_id: str, size: int = BALLAST_BYTES) -> None:
        self.file = path / f".sr-dist-ballast-{run_id}"
        self.size = size
        try:
            with open(self.file, "wb") as fh:
                fh.write(b"\0" * size)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:  # no room even for this: the final row may not fit either
            self.file.unlink(missing_ok=True)

    def release(self) -> None:
        """Give the space back (before the final row is written); safe to call twice."""
        self.file.unlink(missing_ok=True)
