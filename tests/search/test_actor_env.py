"""The CPU actors' runtime environment: JAX on the CPU, one BLAS thread unless the user says."""

from __future__ import annotations

import pytest

from sr_dist.search.ray_setup import cpu_env


def test_cpu_actors_get_one_blas_thread_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert cpu_env() == {"env_vars": {"JAX_PLATFORMS": "cpu", "OPENBLAS_NUM_THREADS": "1"}}


def test_the_users_blas_threads_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert cpu_env()["env_vars"]["OPENBLAS_NUM_THREADS"] == "4"
