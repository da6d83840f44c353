"""Fixtures shared across test packages, and the suite's process settings."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator

import pytest

# One BLAS thread in the test process and the processes it starts, as sr-dist gives its agent
# actors (sr_dist.search.ray_setup.cpu_env): the formula search's many small least-squares
# solves (the evolve proposer's seed library above all) run many times slower with OpenBLAS's
# worker threads spinning against each other and the XLA thread pool on a small, loaded
# machine (40 s instead of 2 s for one library, seen on 2 cores). OpenBLAS reads the variable
# when NumPy loads it, which is after this file: pytest and the modules above import no NumPy
# before the root conftest. A value already set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
if "numpy" in sys.modules:  # a plugin loaded it first: limit the loaded library instead
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        threadpool_limits(limits=int(os.environ["OPENBLAS_NUM_THREADS"]), user_api="blas")

# JAX's persistent compilation cache for every Evaluator of the suite, in this process and in
# the processes it starts (the sr-dist runs' default, evaluator.compilation_cache_dir, is the same
# folder): an XLA compile is paid once per machine, not once per test process and run of the
# suite. The Evaluator turns the cache on when this variable is set; a value already set wins.
os.environ.setdefault("SR_DIST_JAX_CACHE_DIR", os.path.expanduser("~/.cache/sr-dist/jax"))


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """A real local Ray cluster shared by the test modules that ask for it (token auth off: it
    is this machine's own); every test ends the actors of its runs."""
    import ray

    os.environ["RAY_AUTH_MODE"] = "disabled"
    from sr_dist.search.ray_setup import LOCAL_CLUSTER_CONFIG

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING,
             _system_config=dict(LOCAL_CLUSTER_CONFIG))
    try:
        yield
    finally:
        ray.shutdown()
