"""Sizing the evaluator pool (sr_dist.search.pool_plan): replica counts from the cluster's
resources, what each replica reserves, and the XLA flags that size a CPU replica's threads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sr_dist.search.pool_plan import replica_bundle, replica_cores, resolve_replicas, xla_env


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_an_integer_is_kept_whatever_the_cluster(device: str) -> None:
    assert resolve_replicas(3, device, {}) == 3
    assert resolve_replicas(2, device, {"CPU": 64.0, "GPU": 8.0}, cpus_per_replica=16) == 2
    assert resolve_replicas("2", device, {"CPU": 1.0}) == 2  # a digit string, as YAML may give


@pytest.mark.parametrize("cpus, per_replica, expected", [
    (16.0, 4, 4),
    (7.0, 2, 3),     # leftover cores are not a replica
    (2.0, 1, 2),
    (2.0, 4, 1),     # fewer cores than one replica wants: still one
    (0.0, 1, 1),
])
def test_auto_on_cpu_is_one_replica_per_cpus_per_replica_cores(cpus: float, per_replica: int,
                                                              expected: int) -> None:
    resources = {"CPU": cpus, "GPU": 4.0, "memory": 1e9}
    assert resolve_replicas("auto", "cpu", resources, cpus_per_replica=per_replica) == expected


def test_auto_on_cpu_without_a_cpu_total_is_one() -> None:
    assert resolve_replicas("auto", "cpu", {}) == 1


@pytest.mark.parametrize("gpus, num_gpus, expected", [
    (4.0, 1.0, 4),
    (4.0, 0.5, 8),
    (0.9, 0.3, 3),   # float shares that divide exactly must not lose a replica to rounding
    (1.0, 0.1, 10),
    (3.0, 2.0, 1),
    (0.0, 1.0, 1),
])
def test_auto_on_gpu_is_gpus_over_num_gpus(gpus: float, num_gpus: float, expected: int) -> None:
    resources = {"CPU": 64.0, "GPU": gpus}
    assert resolve_replicas("auto", "gpu", resources, num_gpus=num_gpus,
                            cpus_per_replica=1) == expected


def test_the_bundle_reserves_cores_on_cpu_and_a_gpu_share_on_gpu() -> None:
    assert replica_bundle("cpu") == {"CPU": 1.0}
    assert replica_bundle("cpu", cpus_per_replica=4, num_gpus=1.0) == {"CPU": 4.0}
    assert replica_bundle("gpu", num_gpus=0.5, cpus_per_replica=4) == {"GPU": 0.5}
    assert replica_bundle("gpu") == {"GPU": 1.0}


def test_one_thread_turns_eigen_multithreading_off() -> None:
    flags = xla_env(1)["XLA_FLAGS"].split()
    assert flags == ["--xla_cpu_multi_thread_eigen=false"]  # only flags XLA knows
    assert set(xla_env(1)) == {"XLA_FLAGS"}


def test_several_threads_keep_eigen_multithreading() -> None:
    flags = xla_env(4)["XLA_FLAGS"].split()
    assert flags == ["--xla_cpu_multi_thread_eigen=true"]


def test_replicas_on_one_node_pin_disjoint_cores() -> None:
    cores = list(range(8))
    assert replica_cores(0, 2, cores) == (0, 1) and replica_cores(1, 2, cores) == (2, 3)
    assert replica_cores(3, 2, cores) == (6, 7) and replica_cores(4, 2, cores) == (0, 1)
    assert replica_cores(1, 3, [4, 5, 6, 7]) == (7, 4, 5)  # wraps round the node's cores
    assert replica_cores(0, 1, cores) is None  # one thread: free to move to an idle core
    assert replica_cores(0, 4, [0, 1, 2, 3]) is None  # the whole node: nothing to pin


def test_user_flags_stay_in_front() -> None:
    user = "--xla_dump_to=/tmp/dump  --xla_force_host_platform_device_count=2"
    flags = xla_env(2, inherited=f"  {user} ")["XLA_FLAGS"]
    assert flags.startswith(user)
    assert flags.split()[-1:] == ["--xla_cpu_multi_thread_eigen=true"]
    assert not xla_env(1, inherited="   ")["XLA_FLAGS"].startswith(" ")


def test_jax_starts_under_the_replica_flags() -> None:
    # XLA aborts the process on a flag it does not know; a replica must not die of its flags.
    env = {**os.environ, **xla_env(1, inherited=os.environ.get("XLA_FLAGS", ""))}
    env["JAX_PLATFORMS"] = "cpu"
    code = "import jax.numpy as jnp; print(float(jnp.arange(4.0).sum()))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "6.0"
