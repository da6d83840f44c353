"""Where Hydra keeps its record of a run (``hydra.run.dir``, ``hydra.sweep.dir``).

The record goes under ``results.path`` (``config.yaml`` says ``${sr_dist_record_dir:...}``).
Hydra makes that folder before sr-dist's own code runs, so a results path that is a file, is
read-only or sits on a full disk would end in Hydra's traceback instead of sr-dist's one-line
error. The resolver checks first and, when the path cannot take the record, puts it in the
system's temporary folder instead; sr-dist's check of ``results.path`` then says what is wrong.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

from omegaconf import OmegaConf

__all__ = ["RESOLVER", "probe_write", "record_dir", "register_resolver"]

RESOLVER = "sr_dist_record_dir"


def probe_write(path: Path) -> OSError | None:
    """Make ``path`` and write (and fsync, and remove) a small file there; the error if any.

    sr-dist's own check of ``results.path`` (``sr_dist.search.preflight``) uses it too."""
    probe = path / f".sr-dist-probe-{uuid.uuid4().hex[:8]}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as fh:
            fh.write(b"sr-dist")
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        return exc
    finally:
        try:
            probe.unlink(missing_ok=True)
        except OSError:  # a read-only file system refuses even the unlink of nothing
            pass
    return None


def record_dir(results_path: str) -> str:
    """``results_path`` if a folder can be made and written there, else a temporary folder."""
    if probe_write(Path(str(results_path))) is not None:
        return str(Path(tempfile.gettempdir()) / "sr-dist-hydra")
    return str(results_path)


def register_resolver() -> None:
    """Register ``${sr_dist_record_dir:PATH}`` with OmegaConf (idempotent)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, record_dir)
