"""Ray start-up for a run: the auth environment, connecting or starting a cluster, actor names.

sr-dist always sets ``RAY_AUTH_MODE`` itself (``ray.auth_mode``) instead of leaving Ray's
default to chance; Ray is imported only when a run connects.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from sr_dist.search import quiet
from sr_dist.search.errors import SearchError
from sr_dist.search.pool_plan import xla_env
from sr_dist.search.settings import Settings

__all__ = [
    "actor_runtime_env",
    "agent_actor_name",
    "cluster_action",
    "cpu_env",
    "evaluator_actor_name",
    "evaluator_env",
    "init_ray",
    "keep_cluster",
    "set_auth_mode",
    "shutdown_cluster",
    "worker_env",
    "writer_actor_name",
]

log = logging.getLogger(__name__)

#: The ``ray`` settings of the local cluster this process started and keeps for its next run
#: (a Hydra sweep's runs, one after another: ``keep_cluster``); ``None`` when none is kept.
_kept: Any = None
#: The variables every worker process of the connected cluster has from its start, because this
#: process started that cluster with them (:func:`worker_env`); empty for a cluster sr-dist
#: joined or the caller started.
_inherited: Mapping[str, str] = MappingProxyType({})


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

    global _kept, _inherited
    action = cluster_action(ray.is_initialized(), _kept, settings.ray)
    if action == "reuse":
        if _kept is None:  # the caller's own connection: its workers have none of ours
            _inherited = MappingProxyType({})
        return False
    if action == "replace":
        log.info("the ray settings changed between runs; starting a new local cluster")
        shutdown_cluster()
    _kept = None
    _inherited = MappingProxyType({})
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
    inherit = worker_env(settings) if settings.ray.starts_cluster else {}
    try:
        with quiet.native_stderr_to(None if loud else quiet.log_file()), environment(inherit):
            ray.init(**kwargs)
    except Exception as exc:  # noqa: BLE001 - a clear message instead of a Ray traceback
        where = settings.ray.address or "a new local cluster"
        raise SearchError(f"could not start Ray ({where}): {type(exc).__name__}: {exc}") from exc
    # Without a job log (run_search from Python) nothing would keep the actors' other
    # lines: Ray prints them as usual.
    if quiet.keeps_worker_output() and not quiet.route_worker_output():
        log.debug("Ray's printer of the actors' output is not where sr-dist expects it; the "
                  "actors' lines go to the console unfiltered")
    _inherited = MappingProxyType(dict(inherit))
    return True


def shutdown_cluster() -> None:
    """``ray.shutdown()`` of the cluster this process started, without its wait on Ray's
    autoscaler monitor. ``ray.shutdown`` gives each of the cluster's processes a second to exit
    on SIGTERM; the monitor, which a cluster of one machine does not use, takes all of it (1.0
    of the 1.35 s a shutdown took on 2 cores; the raylet, GCS, dashboard and log monitor 0.2 s
    together). It is stopped with SIGKILL first, through Ray's own record of the processes it
    started; where that record is not as expected, the shutdown is as Ray does it."""
    import ray

    worker_module = getattr(getattr(ray, "_private", None), "worker", None)
    processes = getattr(getattr(worker_module, "_global_node", None), "all_processes", None)
    if isinstance(processes, dict):
        for info in processes.get("monitor", ()):
            with contextlib.suppress(Exception):
                info.process.kill()
    ray.shutdown()


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """``env`` in ``os.environ`` for the block (the processes a local ``ray.init`` starts copy
    it, and the raylet hands it to every worker it starts), then the caller's values again."""
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def worker_env(settings: Settings) -> dict[str, str]:
    """The variables a local cluster this run starts gives all its workers: the CPU actors'
    (:func:`cpu_env`) and, with the evaluator on the CPU, the evaluator's
    (:func:`evaluator_env`). Ray starts a worker whose actor asks for a runtime environment of
    its own through an extra setup process (about a second more for five actors on 2 cores:
    3.0 s against 1.8-2.0 s to start them, measured); a worker that inherits the variables
    needs none (:func:`actor_runtime_env`). With the evaluator on a GPU it is empty: the
    agents' ``JAX_PLATFORMS=cpu`` must not reach it."""
    if settings.evaluator.device != "cpu":
        return {}
    return {**cpu_env()["env_vars"], **evaluator_env(settings.evaluator.cpus_per_replica)}


def actor_runtime_env(env_vars: Mapping[str, str],
                      inherited: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The ``runtime_env`` option for an actor that needs ``env_vars``: ``None`` where every
    worker of the cluster already has them, else those variables. ``inherited``: what the
    cluster's workers have (default: what :func:`init_ray` gave the cluster it started,
    :func:`worker_env`; nothing for a cluster it joined)."""
    have = _inherited if inherited is None else inherited
    if all(have.get(name) == value for name, value in env_vars.items()):
        return None
    return {"env_vars": dict(env_vars)}


def evaluator_env(cpus_per_replica: int) -> dict[str, str]:
    """The variables of a CPU evaluator replica: JAX on the CPU, XLA's threads for its cores
    (:func:`~sr_dist.search.pool_plan.xla_env`, after any ``XLA_FLAGS`` the user set)."""
    return {"JAX_PLATFORMS": "cpu", **xla_env(cpus_per_replica, os.environ.get("XLA_FLAGS", ""))}


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
