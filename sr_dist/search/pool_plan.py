"""How many evaluator replicas a run gets, what each reserves, and its XLA thread pool.

Plain functions over the cluster's resource totals (``ray.cluster_resources()``), so the rules
are tested without a cluster: ``evaluator.replicas=auto`` is one replica per GPU on ``gpu``
(``num_gpus`` each) and one per ``cpus_per_replica`` cores on ``cpu`` (agents reserve no CPUs:
they mostly wait). A CPU replica reserves its cores in a placement-group bundle and keeps XLA
to them (:func:`xla_env`, :func:`replica_cores`), so replicas on one node do not oversubscribe
it (on a 2-core machine one replica fits about as fast on one thread as on two: the fit loop is
sequential per formula, see docs/scaling.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = ["replica_bundle", "replica_cores", "resolve_replicas", "xla_env"]


def resolve_replicas(replicas: int | str, device: str, resources: Mapping[str, float], *,
                     num_gpus: float = 1.0, cpus_per_replica: int = 1) -> int:
    """The replica count: ``replicas`` itself, or for ``auto`` what the cluster holds (at
    least one)."""
    if replicas != "auto":
        return int(replicas)
    if device == "gpu":
        return max(1, math.floor(float(resources.get("GPU", 0.0)) / max(num_gpus, 1e-9) + 1e-9))
    return max(1, int(float(resources.get("CPU", 0.0)) // max(cpus_per_replica, 1)))


def replica_bundle(device: str, *, num_gpus: float = 1.0,
                   cpus_per_replica: int = 1) -> dict[str, float]:
    """What one replica reserves: its GPU share on ``gpu``, its cores on ``cpu``."""
    if device == "gpu":
        return {"GPU": float(num_gpus)}
    return {"CPU": float(cpus_per_replica)}


def xla_env(cpus: int, inherited: str = "") -> dict[str, str]:
    """Environment for a CPU replica of ``cpus`` cores, after any ``XLA_FLAGS`` the user set
    (``inherited``): one core turns Eigen's multi-threading off (XLA then fits on the calling
    thread); more keep it, and the replica pins itself to its cores (:func:`replica_cores`),
    which is what XLA sizes its intra-op thread pool from (the CPUs the process may run on)."""
    flag = f"--xla_cpu_multi_thread_eigen={'true' if cpus > 1 else 'false'}"
    return {"XLA_FLAGS": " ".join([inherited.strip(), flag]).strip()}


def replica_cores(replica: int, cpus: int, available: Sequence[int]) -> tuple[int, ...] | None:
    """The cores replica ``replica`` pins itself to: ``cpus`` of ``available`` (the node's
    schedulable CPUs), consecutive from ``replica * cpus`` (wrapping), so replicas sharing a
    node take disjoint cores when it has enough. ``None`` (do not pin) for one core, where the
    single XLA thread should stay free to move to an idle core, or when the node has no more
    cores than that."""
    cores = sorted(available)
    if cpus <= 1 or cpus >= len(cores):
        return None
    start = (replica * cpus) % len(cores)
    return tuple(cores[(start + i) % len(cores)] for i in range(cpus))
