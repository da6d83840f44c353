"""Ray start-up for a run: the auth environment, connecting or starting a cluster, actor names.

sr-dist always sets ``RAY_AUTH_MODE`` itself (``ray.auth_mode``) instead of leaving Ray's
default to chance; Ray is imported only when a run connects.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from sr_dist.search import quiet
from sr_dist.search.errors import SearchError
from sr_dist.search.settings import Settings

__all__ = [
    "agent_actor_name",
    "cluster_action",
    "cpu_env",
    "evaluator_actor_name",
    "init_ray",
    "keep_cluster",
    "set_auth_mode",
    "writer_actor_name",
]

log = logging.getLogger(__name__)

#: The ``ray`` settings of the local cluster this process started and keeps for its next run
#: (a Hydra sweep's runs, one after another: ``keep_cluster``); ``None`` when none is kept.
_kept: Any = None


def set_auth_mode(mode: str) -> None:
    """Export ``RAY_AUTH_MODE``. Ray 2.52+ turns token auth on for a new local cluster when it
    is unset (and warns); sr-dist always decides explicitly (``ray.auth_mode``).

    Ray reads the variable into its native config when it is first imported; if Ray is already
    imported (a sweep's second run, an embedding program), the config is re-read, as Ray itself
    does when it enables token auth.
    """
    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = mode
    if previous == mode or "ray" not in sys.modules:
        return
    try:
        from ray._raylet import Config  # type: ignore[attr-defined]

        Config.initialize("")
    except (ImportError, AttributeError):  # pragma: no cover - a Ray without the hook
        log.warning("could not refresh Ray's config; RAY_AUTH_MODE=%s applies to new processes",
                    mode)


#: Ray settings of the local cluster a run starts. Ray starts one idle worker process per CPU
#: for the first driver, but every sr-dist actor asks for its own environment (its thread and
#: JAX settings) and so a process of its own: the idle ones only cost start-up (measured on 2
#: cores: ``ray.init`` and a first task 7.6 CPU-s and 6.5 s with them, 4.7 CPU-s and 4.1 s
#: without).
LOCAL_CLUSTER_CONFIG: Mapping[str, Any] = MappingProxyType({"prestart_worker_first_driver": False})


def init_ray(settings: Settings) -> bool:
    """Connect to Ray; returns whether this call started (and so must shut down) a cluster."""
    set_auth_mode(settings.ray.auth_mode)
    import ray  # here: importing Ray is slow and needs RAY_AUTH_MODE set first

    global _kept
    action = cluster_action(ray.is_initialized(), _kept, settings.ray)
    if action == "reuse":
        return False
    if action == "replace":
        log.info("the ray settings changed between runs; starting a new local cluster")
        ray.shutdown()
    _kept = None
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING}
    if settings.ray.starts_cluster:
        kwargs.update(address="local", include_dashboard=settings.ray.include_dashboard,
                      _system_config=dict(LOCAL_CLUSTER_CONFIG))
        if settings.ray.num_cpus is not None:
            kwargs["num_cpus"] = settings.ray.num_cpus
    else:
        kwargs["address"] = settings.ray.address
    loud = quiet.verbose()
    if not loud:  # Ray's and JAX's lines go to the job log (sr_dist/search/quiet.py)
        quiet.route_ray_logging()
    try:
        with quiet.native_stderr_to(None if loud else quiet.log_file()):
            ray.init(**kwargs)
    except Exception as exc:  # noqa: BLE001 - a clear message instead of a Ray traceback
        where = settings.ray.address or "a new local cluster"
        raise SearchError(f"could not start Ray ({where}): {type(exc).__name__}: {exc}") from exc
    # Without a job log (run_search from Python) nothing would keep the actors' other
    # lines: Ray prints them as usual.
    if quiet.keeps_worker_output() and not quiet.route_worker_output():
        log.debug("Ray's printer of the actors' output is not where sr-dist expects it; the "
                  "actors' lines go to the console unfiltered")
    return True


def cluster_action(initialized: bool, kept: Any, wanted: Any) -> str:
    """What a run does about Ray: ``start`` one (or connect), ``reuse`` the connection it found
    (the caller's own, or a kept cluster with the same ``ray`` settings), or ``replace`` a kept
    cluster whose settings differ from this run's."""
    if not initialized:
        return "start"
    return "reuse" if kept is None or kept == wanted else "replace"


def keep_cluster(settings: Settings) -> None:
    """Keep the local cluster this process started for its next run (a sweep pays Ray's
    start-up once, not per run); a later run with other ``ray`` settings replaces it, and Ray's
    own exit hook stops it with the process."""
    global _kept
    _kept = settings.ray


def agent_actor_name(run_id: str, agent_id: int) -> str:
    """The Ray name of an agent actor (``ray list actors`` shows it; tests look it up). An actor
    hosting several agents (``search.agents_per_actor``) is named after the first of them."""
    return f"sr-dist:{run_id}:agent-{agent_id}"


def evaluator_actor_name(run_id: str, replica: int = 0) -> str:
    """The Ray name of a run's evaluator replica (fault-injection tests look it up): replica 0
    keeps the name the lone evaluator always had, ``sr-dist:<run_id>:evaluator``."""
    return f"sr-dist:{run_id}:evaluator" + (f"-{replica}" if replica else "")


def writer_actor_name(run_id: str) -> str:
    """The Ray name of a run's result writer (the soak bench reads its memory, fault tests kill
    it)."""
    return f"sr-dist:{run_id}:writer"


#: BLAS threads for the CPU actors unless the user's environment sets its own: the agents' numpy
#: fits are small (a 300x120 least squares) and each actor has its share of cores already;
#: OpenBLAS's own threads made that fit 2.7x slower on an idle 2-core machine (8.6 vs 3.2 ms
#: median) and up to 8x slower at its worst under load.
BLAS_THREADS_DEFAULT = "1"


def cpu_env() -> dict[str, Any]:
    """The runtime environment of the actors that need no accelerator (agents, writer, the
    dataset holder): JAX on the CPU and one BLAS thread each (``OPENBLAS_NUM_THREADS`` from the
    environment wins)."""
    threads = os.environ.get("OPENBLAS_NUM_THREADS", BLAS_THREADS_DEFAULT)
    return {"env_vars": {"JAX_PLATFORMS": "cpu", "OPENBLAS_NUM_THREADS": threads}}
