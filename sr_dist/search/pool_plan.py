"""How many evaluator replicas a run gets, what each reserves, and its XLA thread pool.

Plain functions over the cluster's resource totals (``ray.cluster_resources()``), so the rules
are tested without a cluster: ``evaluator.replicas=auto`` is one replica per GPU on ``gpu``
(``num_gpus`` each) and one per ``cpus_per_replica`` cores on ``cpu`` (agents reserve no CPUs:
they mostly wait). A CPU replica reserves its cores in a placement-group bundle and sizes XLA's
CPU thread pool to them, so replicas on one node do not oversubscribe it (on a 2-core machine
one replica fits about as fast on one thread as on two: the fit loop is sequential per
formula, see docs/scaling.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["replica_bundle", "resolve_replicas", "xla_env"]


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
    """Environment for a CPU replica: XLA's intra-op thread pool sized to ``cpus`` (one thread:
    Eigen's multi-threading off), after any ``XLA_FLAGS`` the user set (``inherited``)."""
    flags = [f"--xla_cpu_multi_thread_eigen={'true' if cpus > 1 else 'false'}",
             f"intra_op_parallelism_threads={int(cpus)}"]
    return {"XLA_FLAGS": " ".join([inherited.strip(), *flags]).strip()}
