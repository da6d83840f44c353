"""Several JAX CPU devices for the evaluator (``host_devices``): what they cost and give.

Three measurements, each against its baseline in the same run, printed as one table:

* **kernels**: one fit-interpreter kernel (19 instructions, 8 constants, 256 rows, repeated
  2,000 times) twice on one device, against once on each of two devices, dispatched together;
* **dispatch**: a compiled call given its five batch arrays placed by ``jax.device_put`` first,
  against the host arrays handed to the executable as they are (microseconds a batch);
* **cold start**: the first ``--calls`` calls of a recorded ``evolve`` stream (1,000 rows,
  formulas prepared as agents send them) in a fresh process with an empty compilation cache,
  with one device and with two (the second device compiles in the background).

JAX's CPU device count is fixed when its backends start, so each part runs in a process that
asks for its devices first (the cold starts in fresh subprocesses)::

    .venv/bin/python bench/devices.py            # about two minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sr_dist.evaluator.devices import cpu_devices  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: One cold start: the stream's first calls fitted by an evaluator on N devices, timed.
COLD = r"""
import json, pickle, sys, time
from sr_dist.evaluator.devices import cpu_devices
n = int(sys.argv[1]); cpu_devices(n)
from sr_dist.data import load_dataset
from sr_dist.evaluator import Evaluator
csv, stream, calls = sys.argv[2], sys.argv[3], int(sys.argv[4])
requests = pickle.load(open(stream, "rb"))[:calls]
ev = Evaluator(load_dataset(f"csv:{csv}", seed=0), host_devices=n)
t0 = time.perf_counter()
for texts, starts in requests:
    ev.fit_many(texts, starts=starts)
s = ev.stats()
print(json.dumps({"seconds": time.perf_counter() - t0, "compiles": s["compiles"],
                  "device_compiles": s["device_compiles"]}))
"""


def kernels(repeat: int) -> tuple[float, float]:
    """Milliseconds for two kernels on one device and on two (medians of ``repeat``)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    from sr_dist.evaluator.interpreter import run_duals
    from sr_dist.evaluator.program import FLAG_DEP_A, FLAG_DEP_B, OPCODE_INDEX

    ops = ("mul", "add", "sin", "mul", "exp", "add", "sub", "mul", "div", "cos")
    regs_n, k, rows = 30, 8, 256
    code = np.array([[OPCODE_INDEX[ops[i % len(ops)]], regs_n - 1 - i % 5, i % 12, (i * 7) % 12,
                      FLAG_DEP_A | FLAG_DEP_B] for i in range(19)], dtype=np.int32)
    regs = np.full((regs_n, 1 + k, rows), 0.5, dtype=np.float32)

    def body(code: jax.Array, regs: jax.Array) -> jax.Array:
        return lax.fori_loop(0, 2000, lambda i, r: run_duals(code, jnp.int32(19), r), regs)

    fn = jax.jit(body)
    d0, d1 = jax.devices("cpu")[:2]
    a0, a1 = jax.device_put((code, regs), d0), jax.device_put((code, regs), d1)
    fn(*a0).block_until_ready()
    fn(*a1).block_until_ready()
    one, two = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        x, y = fn(*a0), fn(*a0)
        x.block_until_ready(), y.block_until_ready()
        one.append(time.perf_counter() - t)
        t = time.perf_counter()
        x, y = fn(*a0), fn(*a1)
        x.block_until_ready(), y.block_until_ready()
        two.append(time.perf_counter() - t)
    return 1e3 * statistics.median(one), 1e3 * statistics.median(two)


def dispatch(calls: int) -> tuple[float, float]:
    """Microseconds a batch: ``device_put`` then the call, against host arrays to the call."""
    import jax
    import numpy as np

    dev = jax.devices("cpu")[0]
    arrays = (np.zeros((16, 48, 5), np.int32), np.zeros((16, 4), np.int32),
              np.zeros((16, 10), np.float32), np.zeros((16, 1, 8), np.float32), np.int32(5))
    data = jax.device_put(np.ones((4, 1024), np.float32), dev)
    fn = jax.jit(lambda a, b, c, d, e, x: a.sum() + b.sum() + c.sum() + d.sum() + e + x.sum())
    exe = fn.lower(*jax.device_put(arrays, dev), data).compile()
    out = {}
    for name, call in (("placed", lambda: exe(*jax.device_put(arrays, dev), data)),
                       ("host", lambda: exe(*arrays, data))):
        for _ in range(50):
            call().block_until_ready()
        t = time.perf_counter()
        for _ in range(calls):
            result = call()
        result.block_until_ready()
        out[name] = 1e6 * (time.perf_counter() - t) / calls
    return out["placed"], out["host"]


def cold_starts(calls: int, record_s: float) -> dict[int, dict[str, float]]:
    """The first ``calls`` calls of a recorded stream, cold, with one device and with two."""
    sys.path.insert(0, str(ROOT / "bench"))
    from evaluator_stream import record, write_target

    from sr_dist.data import load_dataset
    from sr_dist.evaluator.prepared import prepare_text

    out: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        csv, stream = Path(tmp) / "stream.csv", Path(tmp) / "stream.pkl"
        write_target(csv, 1000)
        dataset = load_dataset(f"csv:{csv}", seed=0)
        names = tuple(dataset.feature_names)
        requests = [([prepare_text(e, names) for e in texts], starts)
                    for texts, starts in record(dataset, record_s)]
        stream.write_bytes(pickle.dumps(requests))
        for n in (1, 2):
            env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT),
                   "SR_DIST_JAX_CACHE_DIR": str(Path(tmp) / f"cache{n}")}
            done = subprocess.run([sys.executable, "-c", COLD, str(n), str(csv), str(stream),
                                   str(calls)], env=env, capture_output=True, text=True,
                                  check=True)
            out[n] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="kernel pairs timed")
    parser.add_argument("--calls", type=int, default=12, help="stream calls in a cold start")
    parser.add_argument("--record", type=float, default=40.0, help="seconds of search recorded")
    args = parser.parse_args(argv)
    cpu_devices(2)  # before JAX starts: this process has two CPU devices
    one, two = kernels(args.repeat)
    placed, host = dispatch(2000)
    load = os.getloadavg()[0]
    cold = cold_starts(args.calls, args.record)
    print(f"load average (1 min) before the cold starts: {load:.2f}")
    print("| measurement | baseline | with the change | x baseline |")
    print("|---|---:|---:|---:|")
    print(f"| two kernels: one device, then one on each of two (ms) | {one:.1f} | {two:.1f} | "
          f"{one / two:.2f} |")
    print(f"| a batch's arrays: device_put then call, then host arrays to the call (us) | "
          f"{placed:.1f} | {host:.1f} | {placed / host:.2f} |")
    print(f"| cold start, first {args.calls} calls: one device, then two (s) | "
          f"{cold[1]['seconds']:.1f} | {cold[2]['seconds']:.1f} | "
          f"{cold[1]['seconds'] / cold[2]['seconds']:.2f} |")
    print(f"compiles: {cold[1]['compiles']} with one device; {cold[2]['compiles']} on device 0 "
          f"and {cold[2]['device_compiles']} in the background with two")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
