"""A sweep's runs share the local Ray cluster the first started, unless their ``ray`` settings
differ (``cluster_action``); the sweep itself is tests/cli/test_cli.py's multirun test, which
counts Ray's session folders."""

from __future__ import annotations

import pytest

from sr_dist.conf.schema import RayConfig
from sr_dist.search.ray_setup import cluster_action

LOCAL = RayConfig()
TWO_CPUS = RayConfig(num_cpus=2)

# (Ray connected already, the kept cluster's settings, this run's settings, what happens)
CASES = [
    (False, None, LOCAL, "start"),  # nothing running: start (or connect to ray.address)
    (False, LOCAL, LOCAL, "start"),  # the kept cluster was shut down by someone else
    (True, None, LOCAL, "reuse"),  # the caller connected: its cluster, never shut down here
    (True, LOCAL, RayConfig(), "reuse"),  # a sweep's next run, same settings
    (True, LOCAL, TWO_CPUS, "replace"),  # the sweep varies ray.num_cpus
    (True, LOCAL, RayConfig(address="auto"), "replace"),  # or points at a real cluster
]


@pytest.mark.parametrize("initialized, kept, wanted, action", CASES)
def test_a_run_reuses_only_a_cluster_kept_with_its_own_settings(
        initialized: bool, kept: RayConfig | None, wanted: RayConfig, action: str) -> None:
    assert cluster_action(initialized, kept, wanted) == action
