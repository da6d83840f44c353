"""Several CPU devices (``host_devices``): which device takes each batch, and an evaluator
spread over two devices answering exactly as one on one device.

JAX's CPU device count can only be set before its backends start, and this test process has
started them, so the evaluator runs in a fresh interpreter (``SCRIPT``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from sr_dist.conf.schema import EvaluatorConfig
from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator, devices
from sr_dist.evaluator.devices import BackgroundQueue, DeviceRing

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("seed", range(6))
def test_the_ring_gives_each_batch_to_the_device_with_the_fewest_queued_formulas(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5))
    ring = DeviceRing([f"d{i}" for i in range(n)])
    queued = [0] * n
    open_batches: list[tuple[int, int]] = []
    given = [0] * n
    for _ in range(60):
        if open_batches and rng.random() < 0.4:
            index, size = open_batches.pop(int(rng.integers(len(open_batches))))
            ring.release(index, size)
            queued[index] -= size
        else:
            size = int(rng.integers(1, 17))
            expected = min(range(n), key=lambda i: (queued[i], i))
            assert ring.take(size) == expected
            queued[expected] += size
            given[expected] += 1
            open_batches.append((expected, size))
        assert ring.queued() == tuple(queued)
    assert ring.batches() == tuple(given)


def test_the_ring_counts_batches_and_never_goes_below_zero() -> None:
    ring = DeviceRing(["a", "b"])
    assert (ring.take(4), ring.take(1), ring.take(2)) == (0, 1, 1)
    assert ring.batches() == (1, 2)
    ring.release(1, 100)  # a release larger than what is queued (a failed read) clamps at 0
    assert ring.queued() == (4, 0)
    with pytest.raises(ValueError, match="at least one device"):
        DeviceRing([])


def test_the_ring_keeps_to_the_devices_allowed() -> None:
    ring = DeviceRing(["a", "b", "c"])
    assert ring.take(5, allowed=[0]) == 0
    assert ring.take(5, allowed=[0, 2]) == 2
    assert ring.take(1, allowed=[]) == 0  # none allowed: the first device (it compiles)
    assert ring.take(1) == 1


def test_background_jobs_run_in_order_and_a_failure_stops_none() -> None:
    queue = BackgroundQueue("test-background")
    done: list[int] = []

    def fail() -> None:
        raise RuntimeError("this job fails")

    for job in (lambda: done.append(1), fail, lambda: done.append(2)):
        queue.submit(job)
    assert queue.wait(30)
    assert done == [1, 2]
    assert queue.wait(0)  # nothing open


def test_an_idle_background_thread_ends_and_the_next_job_starts_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "IDLE_S", 0.05)
    queue = BackgroundQueue("test-idle")
    done: list[int] = []
    queue.submit(lambda: done.append(1))
    assert queue.wait(30)
    for _ in range(200):
        if not queue.alive():
            break
        threading.Event().wait(0.01)
    assert not queue.alive()
    queue.submit(lambda: done.append(2))
    assert queue.wait(30) and done == [1, 2]


def test_closing_the_background_queue_drops_what_has_not_started() -> None:
    queue = BackgroundQueue("test-close")
    started, release = threading.Event(), threading.Event()
    done: list[str] = []

    def slow() -> None:
        started.set()
        release.wait(30)
        done.append("slow")

    queue.submit(slow)
    queue.submit(lambda: done.append("queued"))
    assert started.wait(30)
    threading.Timer(0.2, release.set).start()
    assert queue.close(30)
    assert done == ["slow"]


def test_host_devices_is_checked_and_one_device_is_used_where_jax_has_started(
        target_dataset: Dataset) -> None:
    with pytest.raises(ValueError, match="host_devices must be >= 1"):
        Evaluator(target_dataset, host_devices=0)
    import jax

    jax.devices()  # this process's backends have started: one CPU device, whatever is asked
    ev = Evaluator(target_dataset, host_devices=2)
    assert ev.stats()["host_devices"] == len(jax.devices("cpu")[:2])


def test_a_run_sets_host_devices_only_where_its_config_does() -> None:
    # Each device compiles its own executables, so a cold start costs twice the compiles:
    # host_devices is the user's choice, not derived from cpus_per_replica (docs/evaluator.md).
    assert "host_devices" not in EvaluatorConfig(cpus_per_replica=3).evaluator_options()
    assert EvaluatorConfig(options={"host_devices": 2}).evaluator_options()["host_devices"] == 2


#: Fits a generated stream of calls (full fits and local searches, begun two at a time) with an
#: evaluator on two CPU devices and one on one device, in a fresh process; prints both answers.
SCRIPT = r"""
import json, sys
from pathlib import Path
import numpy as np
from sr_dist.data import dataset_from_arrays
from sr_dist.evaluator import Evaluator
from sr_dist.evaluator.devices import cpu_devices

rng = np.random.default_rng(int(sys.argv[1]))
X = rng.uniform(0.5, 3.0, (160, 3))
y = 1.7 * X[:, 0] * np.sin(0.8 * X[:, 1]) + X[:, 2] ** 2 / (1.0 + X[:, 0])
ds = dataset_from_arrays(X, y, ["x0", "x1", "x2"])
cpu_devices(2)  # before JAX starts: this process has two CPU devices
one = Evaluator(ds, host_devices=1, batch_size=4)
two = Evaluator(ds, host_devices=2, batch_size=4)
# One constant bucket (2), full fits and local searches: two executables a device.
shapes = ["a*x0*sin(k*x1)", "a*x2**2/(b + x0)", "a*x0 + b*x1", "a*exp(k*x2)",
          "a*log(x0) + b*x1**2", "a*tanh(k*x1)", "a*x1 + b*x2/x0", "a*sqrt(x2) + b*x0"]
calls = []
for _ in range(6):
    texts = [shapes[int(i)] for i in rng.integers(0, len(shapes), int(rng.integers(3, 9)))]
    starts = [({"a": float(rng.uniform(0.5, 2.0))} if "a" in t and rng.random() < 0.5 else None)
              for t in texts]
    calls.append((texts, starts))

def answers(ev):
    out, pending = [], []
    for texts, starts in calls:
        pending.append(ev.begin(texts, starts=starts))
        if len(pending) == 2:
            out.extend(ev.finish(pending.pop(0)))
    for p in pending:
        out.extend(ev.finish(p))
    return [[r.canonical, r.status, sorted(r.constants.items()), r.train_nmse, r.val_nmse,
             r.local, r.iterations] for r in out]

traced = Path(sys.argv[2]) / "traced"
on_one = answers(one)
stored_by_one = sorted(p.name for p in traced.glob("*.jaxexport"))
first = answers(two)  # device 0 only: the second compiles in the background meanwhile
cold = two.stats()["device_batches"]
assert two.wait_for_compiles(300)
two.clear_cache()
on_two = answers(two)
stored_by_both = sorted(p.name for p in traced.glob("*.jaxexport"))
# Local searches only (every formula with a start), with every executable compiled: spread
# over both devices, or (spread_local=False) all on device 0.
local_calls = [([t for t in texts], [{"a": 1.5} for _ in texts]) for texts, _ in calls]
spread = {}
for flag in (True, False):
    ev = Evaluator(ds, host_devices=2, batch_size=4, spread_local=flag)
    for texts, starts in local_calls:  # device 0 first; device 1 loads its executables
        ev.fit_many(texts, starts=starts)
    assert ev.wait_for_compiles(300)
    before = ev.stats()["device_batches"]
    ev.clear_cache()
    for texts, starts in local_calls:
        ev.fit_many(texts, starts=starts)
    spread[str(flag)] = [b - a for a, b in zip(before, ev.stats()["device_batches"])]
print(json.dumps({"two": on_two, "first": first, "one": on_one, "stats": two.stats(),
                  "cold": cold, "traced": [stored_by_one, stored_by_both], "spread": spread}))
"""


def test_two_devices_answer_exactly_as_one_and_trace_nothing_again(tmp_path: Path) -> None:
    # One generated stream: the script compiles two executables cold, twice (about 14 s).
    seed = 0
    cache = tmp_path / "jax"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT),
           "SR_DIST_JAX_CACHE_DIR": str(cache)}
    env.pop("XLA_FLAGS", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(seed), str(cache)], env=env,
                          cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    stats = out["stats"]
    assert stats["host_devices"] == 2
    # Cold, the second device had no executable of its own, so it was given no batch; once
    # its background compiles were done, it took its share.
    assert out["cold"][1] == 0 and stats["device_compiles"] > 0
    assert all(n > 0 for n in stats["device_batches"]), stats["device_batches"]
    assert out["two"] == out["one"] == out["first"]
    # Local searches go to both devices, or to device 0 alone with spread_local=False.
    assert out["spread"]["True"][1] > 0 and out["spread"]["False"][1] == 0
    # The second device compiled the buckets the first had traced, without tracing them again.
    stored_by_one, stored_by_both = out["traced"]
    assert stored_by_one and stored_by_both == stored_by_one
    assert sum(row[1] == "ok" for row in out["two"]) >= len(out["two"]) // 2
