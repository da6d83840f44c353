"""Fixtures shared across test packages."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """A real local Ray cluster shared by the test modules that ask for it (token auth off: it
    is this machine's own); every test ends the actors of its runs."""
    import ray

    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()
