"""Seed libraries kept on disk: a second run on the same data skips building its library, and
the agents of one machine build it once between them.

Building a library is the offline proposer's start-up cost: 2.8 CPU-seconds for the 4-variable
throughput target of ``bench/throughput.py`` (1,000 rows, one BLAS thread), paid by every agent
process of every run, on the same cores as the evaluator's start. The build is deterministic
(the same rows, settings and code give the same seeds on one machine), so its result can be kept
like an XLA executable in JAX's persistent compilation cache.

An entry is keyed by the library's inputs (the variables, the sample rows and units, the
library settings) and by what could change its result on the same inputs: a digest of the
source of :data:`LIBRARY_PACKAGES`, the NumPy version and the machine's architecture. Seeds are
stored as JSON, node by node (a rendered formula would not always parse back to the same tree),
written to a temporary file and renamed, so a reader sees a whole entry or none. While one
process builds an entry it holds a lock on it; the others wait for it and read. A cache that
cannot be read or written costs a build, never a run.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import platform
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.seed import Seed

__all__ = ["LIBRARY_PACKAGES", "LibraryCache", "code_digest", "node_from_json", "node_to_json"]

log = logging.getLogger(__name__)

_SR = Path(__file__).resolve().parents[3]
#: The packages a library is built from: the search domain (sources, structure searches,
#: analyses) and the formula language. A change to any module there starts new entries.
LIBRARY_PACKAGES = (_SR / "sr", _SR / "formula")
#: The entry format; bumped when :func:`node_to_json` changes.
FORMAT = 1


@functools.cache
def code_digest() -> str:
    """A digest of every module of :data:`LIBRARY_PACKAGES`, the NumPy version and the machine's
    architecture (float kernels differ between them, and near-ties in a build with them)."""
    digest = hashlib.sha256(f"{FORMAT} numpy {np.__version__} {platform.machine()}".encode())
    for package in LIBRARY_PACKAGES:
        for path in sorted(package.rglob("*.py")):
            digest.update(str(path.relative_to(_SR)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def node_to_json(node: Node) -> list[Any]:
    """``[op, value, name, [args...]]``: the tree exactly (floats keep their repr)."""
    return [node.op, node.value, node.name, [node_to_json(arg) for arg in node.args]]


def node_from_json(data: Any) -> Node:
    """The tree :func:`node_to_json` wrote; ``ValueError`` for anything else."""
    if not isinstance(data, list) or len(data) != 4 or not isinstance(data[0], str):
        raise ValueError(f"not a stored node: {data!r:.80}")
    op, value, name, args = data
    if not isinstance(args, list) or (value is not None and not isinstance(value, (int, float))) \
            or (name is not None and not isinstance(name, str)):
        raise ValueError(f"not a stored node: {data!r:.80}")
    return Node(op, tuple(node_from_json(arg) for arg in args),
                None if value is None else float(value), name)


def _seeds_from_json(data: Any) -> tuple[Seed, ...]:
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("seeds"), list):
        raise ValueError("not a stored library")
    seeds = []
    for entry in data["seeds"]:
        error, source = entry["error"], entry["source"]
        if (error is not None and not isinstance(error, (int, float))) or not isinstance(source, str):
            raise ValueError(f"not a stored seed: {entry!r:.80}")
        seeds.append(Seed(node_from_json(entry["tree"]), None if error is None else float(error), source))
    return tuple(seeds)


class LibraryCache:
    """Seed libraries under ``root`` (``~`` expanded), one JSON file per library key."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.expanduser(os.fspath(root)))

    def path(self, key: str) -> Path:
        """Where the library of ``key`` (a digest of its inputs) is kept."""
        name = hashlib.sha256(f"{code_digest()} {key}".encode()).hexdigest()[:40]
        return self.root / f"{name}.json"

    def get(self, key: str, build: Callable[[], tuple[Seed, ...]]) -> tuple[Seed, ...]:
        """The library of ``key``: read from the cache, or ``build()`` and kept. A process that
        finds another building the same entry waits for it (a lock on the entry) and reads."""
        path = self.path(key)
        found = self._read(path)
        if found is not None:
            return found
        with self._locked(path) as locked:
            if locked:
                found = self._read(path)  # built by the process this one waited for
                if found is not None:
                    return found
            seeds = build()
            if locked:
                self._write(path, seeds)
            return seeds

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[bool]:
        """Hold ``path``'s lock file for the block; yields False (no lock, nothing written)
        where the folder cannot be made or locked."""
        handle: IO[str] | None = None
        try:
            import fcntl

            self.root.mkdir(parents=True, exist_ok=True)
            handle = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 - closed below
            fcntl.flock(handle, fcntl.LOCK_EX)
        except (ImportError, OSError) as exc:
            log.warning("the seed-library cache %s is unavailable (%s: %s); building in process",
                        self.root, type(exc).__name__, exc)
            if handle is not None:
                handle.close()
            handle = None
        try:
            yield handle is not None
        finally:
            if handle is not None:
                handle.close()  # releases the lock

    @staticmethod
    def _read(path: Path) -> tuple[Seed, ...] | None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return None
        try:
            return _seeds_from_json(json.loads(text))
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            log.warning("stored seed library %s could not be used (%s: %s); building it again",
                        path.name, type(exc).__name__, exc)
            return None

    def _write(self, path: Path, seeds: tuple[Seed, ...]) -> None:
        data = {"format": FORMAT, "seeds": [
            {"tree": node_to_json(seed.tree), "error": seed.error, "source": seed.source} for seed in seeds]}
        tmp: str | None = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, separators=(",", ":"))
            os.replace(tmp, path)
        except (OSError, ValueError) as exc:
            log.warning("could not keep seed library %s: %s", path.name, exc)
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
