"""The CPU actors' runtime environment: JAX on the CPU, one BLAS thread unless the user says, given
to every worker of a local cluster sr-dist starts (no per-actor runtime environment there)."""

from __future__ import annotations

import os

import pytest

from sr_dist.estimator.config import compose_config
from sr_dist.search.ray_setup import actor_runtime_env, cpu_env, environment, evaluator_env, worker_env
from sr_dist.search.settings import settings_from_config


def test_cpu_actors_get_one_blas_thread_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert cpu_env() == {"env_vars": {"JAX_PLATFORMS": "cpu", "OPENBLAS_NUM_THREADS": "1"}}


def test_the_users_blas_threads_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert cpu_env()["env_vars"]["OPENBLAS_NUM_THREADS"] == "4"


def test_a_local_cluster_gives_its_workers_the_actors_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    env = worker_env(settings_from_config(compose_config([])))
    assert env == {"JAX_PLATFORMS": "cpu", "OPENBLAS_NUM_THREADS": "1",
                   "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
    assert env.items() >= cpu_env()["env_vars"].items()
    assert env.items() >= evaluator_env(1).items()
    # With the evaluator on a GPU the agents' JAX_PLATFORMS=cpu must not reach it.
    assert worker_env(settings_from_config(compose_config(["evaluator=gpu"]))) == {}


def test_the_variables_are_set_only_while_ray_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLA_FLAGS", "--mine")
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    with environment({"XLA_FLAGS": "--theirs", "JAX_PLATFORMS": "cpu"}):
        assert os.environ["XLA_FLAGS"] == "--theirs" and os.environ["JAX_PLATFORMS"] == "cpu"
    assert os.environ["XLA_FLAGS"] == "--mine" and "JAX_PLATFORMS" not in os.environ


def test_actors_ask_for_the_variables_their_workers_lack(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    wanted = evaluator_env(1)
    # A cluster sr-dist joined (or the caller started): the variables go with each actor.
    assert actor_runtime_env(wanted, inherited={}) == {"env_vars": wanted}
    # One it started with worker_env: nothing more is asked for ...
    inherited = worker_env(settings_from_config(compose_config([])))
    assert actor_runtime_env(wanted, inherited=inherited) is None
    assert actor_runtime_env(cpu_env()["env_vars"], inherited=inherited) is None
    # ... unless a later run of the kept cluster wants other values (another core count).
    assert actor_runtime_env(evaluator_env(2), inherited=inherited) == {"env_vars": evaluator_env(2)}
