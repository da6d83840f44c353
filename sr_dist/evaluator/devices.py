"""The CPU devices an evaluator spreads its batches over, and which one takes the next batch.

JAX runs the executions of one CPU device one at a time, on one thread, so an evaluator whose
batches all go to one device fits on one core however many the machine has. JAX can present
the host as several CPU devices (its ``jax_num_cpu_devices`` setting), and executions on
different devices run at once, each on a thread of its own: two devices ran two fit kernels in
the time of one on the 2-core development machine (docs/benchmarks.md, "Throughput"). Each
device holds its own copy of the data (a few MB at 1e5 rows) and compiles its own executables.

The setting must be made before JAX starts its backends, so it takes effect only in a process
where nothing has asked JAX for a device yet (a fresh evaluator actor). Elsewhere the evaluator
uses the CPU devices JAX already has, which is one unless the process asked for more.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import Any

__all__ = ["BackgroundQueue", "DeviceRing", "cpu_devices"]

log = logging.getLogger(__name__)


def cpu_devices(wanted: int) -> list[Any]:
    """Up to ``wanted`` JAX CPU devices: JAX is asked for that many where its backends have
    not started yet; otherwise (or where JAX refuses) the ones it already has."""
    import jax

    if wanted > 1 and int(getattr(jax.config, "jax_num_cpu_devices", -1)) < wanted:
        try:
            # jax.config.update is unannotated in jax 0.10, hence the ignore.
            jax.config.update("jax_num_cpu_devices", wanted)  # type: ignore[no-untyped-call]
        except RuntimeError:
            pass  # the backends started already: keep the devices they have
    return list(jax.devices("cpu")[:max(wanted, 1)])


class DeviceRing:
    """Picks the device for each batch: the one with the fewest formulas dispatched to it and
    not yet read back (ties: the lowest index), so a long batch on one device sends the next
    ones to the others. ``take`` and ``release`` are called from the evaluator's threads."""

    def __init__(self, devices: Sequence[Any]) -> None:
        if not devices:
            raise ValueError("DeviceRing needs at least one device")
        self.devices = tuple(devices)
        self._queued = [0] * len(self.devices)
        self._batches = [0] * len(self.devices)
        self._lock = threading.Lock()

    def take(self, formulas: int, allowed: Collection[int] | None = None) -> int:
        """The index of the device the next batch of ``formulas`` goes to (counted queued),
        among ``allowed`` (default: every device; an empty collection means device 0)."""
        with self._lock:
            choices = sorted(allowed) if allowed else (
                range(len(self._queued)) if allowed is None else [0])
            index = min(choices, key=self._queued.__getitem__)
            self._queued[index] += formulas
            self._batches[index] += 1
            return index

    def release(self, index: int, formulas: int) -> None:
        """A batch of ``formulas`` on device ``index`` has been read back (or failed)."""
        with self._lock:
            self._queued[index] = max(self._queued[index] - formulas, 0)

    def queued(self) -> tuple[int, ...]:
        """Formulas dispatched to each device and not yet read back."""
        with self._lock:
            return tuple(self._queued)

    def batches(self) -> tuple[int, ...]:
        """Batches each device has been given."""
        with self._lock:
            return tuple(self._batches)


#: Seconds a background thread waits for a job before it ends (the next submit starts one).
IDLE_S = 5.0


class BackgroundQueue:
    """Runs submitted jobs one at a time on a daemon thread (the other devices' compiles, so
    the evaluator's own thread never waits for them). A job that raises is logged and dropped:
    what it would have prepared is simply not used. The thread ends after :data:`IDLE_S`
    without work, so evaluators that are done with leave no thread behind."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: deque[Callable[[], None]] = deque()
        self._open = 0  # submitted and not finished
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._at_exit = False

    def submit(self, job: Callable[[], None]) -> None:
        with self._cond:
            self._jobs.append(job)
            self._open += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            if not self._at_exit:
                # A compile still running when the interpreter exits aborts it from C++:
                # at exit, drop what is queued and let the running job finish.
                atexit.register(self.close)
                self._at_exit = True
            self._cond.notify_all()

    def close(self, timeout: float | None = 120.0) -> bool:
        """Drop the jobs not started and wait (up to ``timeout`` s) for the running one."""
        with self._cond:
            self._open -= len(self._jobs)
            self._jobs.clear()
            self._cond.notify_all()
        return self.wait(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every submitted job has finished; ``False`` if ``timeout`` ran out."""
        with self._cond:
            return self._cond.wait_for(lambda: self._open == 0, timeout)

    def alive(self) -> bool:
        """Whether the background thread is running (it ends when idle)."""
        with self._cond:
            return self._thread is not None

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: bool(self._jobs), IDLE_S):
                    self._thread = None  # idle: end; the next submit starts another
                    return
                job = self._jobs.popleft()
            try:
                job()
            except Exception:  # noqa: BLE001 - a failed preparation costs only its use
                log.warning("background job of %s failed", self._name, exc_info=True)
            finally:
                with self._cond:
                    self._open -= 1
                    self._cond.notify_all()
