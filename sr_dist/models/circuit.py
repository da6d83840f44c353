"""A circuit breaker per model provider, shared by every agent in one process.

Retries (:mod:`sr_dist.models.retry`) ride out a short burst of 429s or 5xx replies inside one
call. A *storm* is longer: every call spends its retries and fails. The circuit counts those
failed calls per provider (``provider|base_url|model``); while it is closed a failed call starts
another round of retries after a pause, and when ``failures`` consecutive calls have failed the
circuit opens: the call ends with a :class:`~sr_dist.models.base.ModelError` of kind
``circuit_open`` that names the provider and the last error, and every later call in this
process fails fast with the same kind until ``recovery_s`` has passed, when one probe call may
try again (half-open). The agent loop ends an agent on any model error, so an agent whose model
is gone stops with ``stop_reason == "model_error:circuit_open"`` while agents with a working
model go on.

Only failures of the transient sort (``ModelError.retryable``) count: a wrong key or a bad
request is not the provider being down, and passes through at once. The state transitions are
the pure ``admit``/``settle`` functions of :mod:`sr_dist.tools.resilience`; this module is the
thread-safe shell and the process-wide registry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sr_dist.models.base import ModelConfigError, ModelError, ModelErrorKind
from sr_dist.tools.resilience import CircuitState, admit, circuit_phase, settle

__all__ = [
    "CIRCUIT_OPEN",
    "CircuitPolicy",
    "ProviderCircuit",
    "call_through_circuit",
    "circuit_policy",
    "provider_circuit",
    "reset_circuits",
]

T = TypeVar("T")

#: The ``ModelError.kind`` of a call refused or ended by an open circuit.
CIRCUIT_OPEN = ModelErrorKind.CIRCUIT_OPEN
#: Config keys of the ``model`` group this module reads (the adapters never see them).
CIRCUIT_KEYS = ("circuit_failures", "circuit_recovery_s")
#: Defaults of those keys.
DEFAULT_FAILURES = 3
DEFAULT_RECOVERY_S = 60.0


@dataclass(frozen=True, slots=True)
class CircuitPolicy:
    """``failures`` consecutive failed calls open the circuit; ``recovery_s`` later one probe
    may pass; ``pause_s`` is the wait between one failed call's retries and the next round."""

    failures: int = DEFAULT_FAILURES
    recovery_s: float = DEFAULT_RECOVERY_S
    pause_s: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.failures, bool) or not isinstance(self.failures, int) or self.failures < 1:
            raise ValueError(f"circuit failures must be a positive integer, got {self.failures!r}")
        if not self.recovery_s >= 0 or not self.pause_s >= 0:
            raise ValueError("circuit recovery_s and pause_s must not be negative")


def circuit_policy(cfg: Mapping[str, Any], pause_s: float) -> CircuitPolicy:
    """The policy a ``model`` config asks for (``model.circuit_failures``,
    ``model.circuit_recovery_s``); :class:`ModelConfigError` naming the key when one is bad."""
    failures = cfg.get("circuit_failures", DEFAULT_FAILURES)
    recovery = cfg.get("circuit_recovery_s", DEFAULT_RECOVERY_S)
    if isinstance(failures, bool) or not isinstance(failures, int) or failures < 1:
        raise ModelConfigError(f"model.circuit_failures must be a positive integer, got {failures!r}")
    if isinstance(recovery, bool) or not isinstance(recovery, (int, float)) or not recovery >= 0:
        raise ModelConfigError(f"model.circuit_recovery_s must be a non-negative number, got {recovery!r}")
    return CircuitPolicy(failures=failures, recovery_s=float(recovery), pause_s=max(0.0, float(pause_s)))


class ProviderCircuit:
    """The thread-safe breaker of one provider (see the module docstring)."""

    def __init__(self, key: str, policy: CircuitPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.key = key
        self.policy = policy
        self._clock = clock
        self._lock = threading.Lock()
        self._state = CircuitState()
        self._last_error: str | None = None
        self.opened = 0

    @property
    def phase(self) -> str:
        with self._lock:
            return circuit_phase(self._state, self._clock(), self.policy.recovery_s)

    @property
    def last_error(self) -> str | None:
        with self._lock:
            return self._last_error

    def admit(self) -> bool:
        """Whether a call may go now; returns whether it is the half-open probe. Raises the
        ``circuit_open`` :class:`ModelError` when it may not."""
        with self._lock:
            admitted, probe, self._state = admit(self._state, self._clock(), self.policy.recovery_s)
            last = self._last_error
        if not admitted:
            raise self.open_error(last, refused=True)
        return probe

    def succeeded(self, probe: bool) -> None:
        with self._lock:
            self._state = settle(self._state, "success", self._clock(), self.policy.failures, probe)

    def failed(self, error: ModelError, probe: bool) -> bool:
        """Count a failed call; returns whether the circuit is now open."""
        with self._lock:
            was_open = self._state.opened_at is not None and not probe
            self._state = settle(self._state, "failure", self._clock(), self.policy.failures, probe)
            self._last_error = str(error)
            is_open = self._state.opened_at is not None
            if is_open and not was_open:
                self.opened += 1
            return is_open

    def inconclusive(self, probe: bool) -> None:
        with self._lock:
            self._state = settle(self._state, "inconclusive", self._clock(), self.policy.failures, probe)

    def open_error(self, last: str | None, *, refused: bool = False) -> ModelError:
        what = "is open; call refused" if refused else (
            f"opened after {self.policy.failures} consecutive failed call(s)")
        text = f"{self.key}: the provider's circuit {what}; last error: {last or 'unknown'}"
        return ModelError(text[:500], kind=CIRCUIT_OPEN, retryable=False)


def call_through_circuit(
    circuit: ProviderCircuit | None,
    call: Callable[[], T],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``call`` (one call with its retries) through ``circuit``: a retryable failure counts,
    and while the circuit stays closed another round is tried after ``policy.pause_s``; when it
    opens, the ``circuit_open`` error is raised (chained to the last failure)."""
    if circuit is None:
        return call()
    while True:
        probe = circuit.admit()
        try:
            result = call()
        except ModelError as err:
            if not err.retryable:
                circuit.inconclusive(probe)
                raise
            if circuit.failed(err, probe):
                raise circuit.open_error(str(err)) from err
            sleep(circuit.policy.pause_s)
            continue
        except BaseException:
            circuit.inconclusive(probe)
            raise
        circuit.succeeded(probe)
        return result


_REGISTRY: dict[str, ProviderCircuit] = {}
_REGISTRY_LOCK = threading.Lock()


def provider_circuit(key: str, policy: CircuitPolicy) -> ProviderCircuit:
    """The process's circuit for ``key`` (created with ``policy`` on first use; later callers
    share it, so every agent in a process sees one provider's storm once)."""
    with _REGISTRY_LOCK:
        circuit = _REGISTRY.get(key)
        if circuit is None or circuit.policy != policy:
            circuit = _REGISTRY[key] = ProviderCircuit(key, policy)
        return circuit


def reset_circuits() -> None:
    """Forget every circuit of this process (tests; a long-lived embedding program)."""
    with _REGISTRY_LOCK:
        _REGISTRY.clear()
