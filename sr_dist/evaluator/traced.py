"""Traced bucket programs kept on disk, so a new process skips tracing as well as compiling.

JAX's persistent compilation cache (``enable_persistent_cache``) stores XLA's executables, but
its key is the lowered program, so every new process still traces and lowers each bucket
first: about a second per bucket on a CPU core, most of a warm evaluator's start. This store
keeps each bucket's lowered program in JAX's own serialization (``jax.export``); a process
that finds it lowers only a thin wrapper around it, whose compile the persistent cache then
serves.

An entry is keyed by the bucket (its static key, its arguments' shapes, dtypes and placement),
the JAX version and a digest of the source it was traced from, so a changed kernel never loads an old
program. Buckets of a user's own loss function (``module:function``) are never stored: their
code is not part of the key. A store that cannot be read or written costs a trace, never a fit.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
from jax import export

__all__ = ["TRACED_PACKAGES", "TracedStore", "source_digest"]

log = logging.getLogger(__name__)

_registered = threading.Lock()
_NAMEDTUPLES: set[type] = set()


#: The packages whose code a bucket program is traced from: the kernels, and the formula
#: language whose operator tables number the interpreter's opcodes.
TRACED_PACKAGES = (Path(__file__).parent, Path(__file__).parent.parent / "formula")


@functools.cache
def source_digest() -> str:
    """A digest of every module of :data:`TRACED_PACKAGES` and the JAX version."""
    digest = hashlib.sha256(f"jax {jax.__version__}".encode())
    for package in TRACED_PACKAGES:
        for path in sorted(package.glob("*.py")):
            digest.update(f"{package.name}/{path.name}".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def _register(output_type: type) -> None:
    """Let ``jax.export`` serialize the bucket's output NamedTuple (once per process)."""
    with _registered:
        if output_type not in _NAMEDTUPLES:
            export.register_namedtuple_serialization(
                output_type, serialized_name=f"{output_type.__module__}.{output_type.__qualname__}")
            _NAMEDTUPLES.add(output_type)


class TracedStore:
    """Lowered bucket programs under ``root`` (a folder of the persistent compilation cache)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, signature: Any) -> Path:
        name = hashlib.sha256(f"{source_digest()} {signature!r}".encode()).hexdigest()
        return self.root / f"{name[:40]}.jaxexport"

    def lower(self, fn: Callable[..., Any], jitted: Any, key: Any, args: tuple[Any, ...],
              signature: Any, output_type: type | None = None) -> Any:
        """What ``jitted.lower(key, *args)`` gives (``jitted`` is ``jax.jit(fn,
        static_argnums=0)``), from the store when it holds the program; otherwise traced and
        stored. Any trouble with the store (an unreadable entry, no ``flatbuffers``, a full
        disk) falls back to ``jitted.lower``: the store saves time, it never decides a fit."""
        path = self._path(signature)
        try:
            if output_type is not None:
                _register(output_type)
            if path.exists():
                try:
                    program = export.deserialize(bytearray(path.read_bytes()))
                    return jax.jit(program.call).lower(*args)
                except Exception as exc:  # unreadable or stale: trace again, and replace it
                    log.warning("traced program %s could not be used (%s: %s); tracing again",
                                path.name, type(exc).__name__, exc)
            program = export.export(jax.jit(functools.partial(fn, key)))(*args)
            self._write(path, program.serialize())
            return jax.jit(program.call).lower(*args)
        except Exception as exc:
            log.warning("the traced-program store is unavailable (%s: %s); tracing in process",
                        type(exc).__name__, exc)
            return jitted.lower(key, *args)

    def _write(self, path: Path, data: bytes | bytearray) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)  # readers see a whole program or none
        except OSError as exc:
            log.warning("could not store traced program %s: %s", path.name, exc)
