"""GPU check of the batched evaluator: fits/s and value-only throughput per (rows, batch) cell.

For every n (rows of the Feynman I.29.16 dataset, as in bench/evaluator.py) and batch size B it
fits B formulas (bench/evaluator.py's seeded random trees plus its hand-written candidates) with
``Evaluator(device=..., layout="vmap", batch_size=B)`` and reports

* cold s: the first ``fit_many`` of a fresh evaluator, XLA compiles included,
* fits/s warm: the same call again with compiled buckets and an empty result cache, counted in
  unique structures (the random trees repeat some canonical forms, which are fitted once),
* value-only node-evaluations/s: ``evaluate_many`` of the ``ok`` formulas at their fitted
  constants on the train rows (tree nodes x rows per second, device-to-host copy included),
* local fits/s warm: the ``ok`` formulas again with ``starts`` (their fitted constants, each
  10% off), the path a genetic search's offspring take (``local_restarts`` lanes of at most
  ``local_iters`` LM passes, docs/evaluator.md), compiled first and timed on an empty cache,
* local fits/s pipelined: the same local fits as four calls, each begun before the last is
  finished (``Evaluator.begin``/``finish``, as the evaluator actor runs them with
  ``evaluator.pipeline``), so the device fits one call while the host packs the next.

Each cell runs in its own subprocess with a timeout, so a slow compile, a hang or an
out-of-memory crash costs one row of the table, not the run; cells stop being started once the
time budget is spent, and the output says which were left out. Run it through
``bench/gpu_check.sh`` (``--dry-run`` for the seconds-long CPU smoke run).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: Modules the GPU image lacks: the evaluator core must run without them.
ABSENT_ON_GPU_IMAGE: tuple[str, ...] = ("ray", "hydra", "omegaconf", "duckdb", "jsonschema")
CELL_PREFIX = "CELL "
TABLE_NAME = "gpu_check.md"
#: Calls the pipelined local fits are split into.
PIPELINED_CALLS = 4
JSON_NAME = "gpu_check.json"


@dataclass(frozen=True)
class Cell:
    """One measured (or failed) cell of the table."""

    device: str
    n: int
    n_train: int
    batch: int
    unique: int
    warm_s: float
    cold_s: float
    compile_s: float
    compiles: int
    node_evals_per_s: float
    statuses: dict[str, int]
    seconds: float
    #: Why the cell produced no figures (timeout, crash); empty when it ran.
    error: str = ""
    #: The first ``error`` status's message (e.g. out of device memory), for the table.
    first_error: str = ""
    #: Which of :data:`ABSENT_ON_GPU_IMAGE` the cell's process had loaded by its end.
    loaded_absent: str = ""
    #: Local fits from given starts: how many, and the warm call's seconds.
    local_fits: int = 0
    local_warm_s: float = 0.0
    #: The same local fits as :data:`PIPELINED_CALLS` calls begun before the last finished.
    local_pipelined_s: float = 0.0

    @property
    def local_fits_per_s(self) -> float:
        return self.local_fits / self.local_warm_s if self.local_warm_s > 0 else 0.0

    @property
    def local_pipelined_per_s(self) -> float:
        return self.local_fits / self.local_pipelined_s if self.local_pipelined_s > 0 else 0.0

    @property
    def fits_per_s(self) -> float:
        return self.unique / self.warm_s if self.warm_s > 0 else 0.0


def formulas_for(batch: int) -> list[str]:
    """``batch`` formula texts in bench/evaluator.py's mix: random trees + hand-written ones."""
    from bench.evaluator import HAND_WRITTEN, random_formulas

    n_hand = min(len(HAND_WRITTEN), batch // 2)
    variables = ("x1", "x2", "theta1", "theta2")
    return random_formulas(batch - n_hand, variables, seed=1) + list(HAND_WRITTEN[:n_hand])


def run_cell(device: str, layout: str, n: int, batch: int, value_reps: int,
             const_buckets: tuple[int, ...] | None = None, max_iters: int | None = None) -> Cell:
    """Measure one cell in this process (the child side of :func:`main`).

    ``const_buckets`` and ``max_iters`` default to the evaluator's buckets and
    bench/evaluator.py's iteration cap; the dry run narrows both to compile and fit less.
    """
    from bench.evaluator import DATASET, MAX_ITERS, RESTARTS
    from sr_dist.data import load_dataset
    from sr_dist.evaluator import Evaluator
    from sr_dist.formula import parse_formula

    t_cell = time.perf_counter()
    ds = load_dataset(DATASET, n=n, seed=0)
    texts = formulas_for(batch)
    t0 = time.perf_counter()
    extra = {"const_buckets": const_buckets} if const_buckets else {}
    ev = Evaluator(ds, device=device, layout=layout, batch_size=batch, restarts=RESTARTS,
                   max_iters=max_iters or MAX_ITERS, **extra)
    ev.fit_many(texts)
    cold = time.perf_counter() - t0
    stats = ev.stats()
    log(f"    cold {cold:.1f}s (compile {stats['compile_s']:.1f}s, {stats['compiles']} compiles, "
        f"buckets {stats['buckets']})")
    ev.clear_cache()
    fits_before = ev.stats()["fits"]
    t0 = time.perf_counter()
    results = ev.fit_many(texts)
    warm = time.perf_counter() - t0
    unique = ev.stats()["fits"] - fits_before
    log(f"    warm {warm:.2f}s for {unique} unique fits")

    names = ds.feature_names
    ok = [(parse_formula(t, names), r) for t, r in zip(texts, results) if r.status == "ok"]
    node_rate = 0.0
    if ok:
        parsed = [f for f, _ in ok]
        consts = [r.constants for _, r in ok]
        X = ds.X_train
        ev.evaluate_many(parsed, consts, X)  # compiles the predict buckets
        t0 = time.perf_counter()
        for _ in range(value_reps):
            ev.evaluate_many(parsed, consts, X)
        value_s = (time.perf_counter() - t0) / value_reps
        node_rate = sum(r.complexity or 0 for _, r in ok) * X.shape[0] / value_s
        log(f"    value-only {value_s:.3f}s per pass, {node_rate:.3g} node-evals/s")
    local_fits, local_warm, pipelined = _local_fits(
        ev, [t for t, r in zip(texts, results) if r.status == "ok"],
        [r for r in results if r.status == "ok"])
    statuses = {s: sum(r.status == s for r in results) for s in ("ok", "nonfinite", "invalid", "error")}
    first_error = next((r.error or "" for r in results if r.status == "error"), "")
    return Cell(device=device, n=n, n_train=len(ds.y_train), batch=batch, unique=unique,
                warm_s=warm, cold_s=cold, compile_s=float(stats["compile_s"]),
                compiles=int(stats["compiles"]), node_evals_per_s=node_rate,
                statuses=statuses, seconds=time.perf_counter() - t_cell,
                first_error=first_error[:160], loaded_absent=_loaded_absent(),
                local_fits=local_fits, local_warm_s=local_warm, local_pipelined_s=pipelined)


def _local_fits(ev: Any, texts: list[str], fits: list[Any]) -> tuple[int, float, float]:
    """Fit ``texts`` again from starts 10% off their fitted constants (compile first, then a
    timed call on an empty cache, then the same as :data:`PIPELINED_CALLS` pipelined calls);
    (local fits made, seconds of the timed call, seconds of the pipelined calls)."""
    starts = [{k: 1.1 * float(v) for k, v in (f.constants or {}).items()} or None for f in fits]
    if not any(starts):
        return 0, 0.0, 0.0
    ev.clear_cache()
    ev.fit_many(texts, starts=starts)  # compiles the local buckets
    ev.clear_cache()
    before = ev.stats()["local_fits"]
    t0 = time.perf_counter()
    ev.fit_many(texts, starts=starts)
    warm = time.perf_counter() - t0
    made = int(ev.stats()["local_fits"] - before)
    log(f"    local warm {warm:.2f}s for {made} local fits")
    ev.clear_cache()
    step = max(1, -(-len(texts) // PIPELINED_CALLS))
    t0 = time.perf_counter()
    last = None
    for i in range(0, len(texts), step):
        begun = ev.begin(texts[i:i + step], starts=starts[i:i + step])
        if last is not None:
            ev.finish(last)
        last = begun
    if last is not None:
        ev.finish(last)
    pipelined = time.perf_counter() - t0
    log(f"    local pipelined {pipelined:.2f}s in calls of {step}")
    return made, warm, pipelined


def _loaded_absent() -> str:
    return ", ".join(m for m in ABSENT_ON_GPU_IMAGE if m in sys.modules)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def environment(device: str) -> tuple[list[str], bool]:
    """Lines describing the environment, and whether JAX sees the requested device."""
    import jax
    import numpy

    lines = [f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPU cores",
             f"jax {jax.__version__}, numpy {numpy.__version__}, "
             f"JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '(unset)')}"]
    for name in ("jaxlib", "scipy", "sympy", "pyarrow"):
        lines.append(f"{name}: {_version(name)}")
    devices = jax.devices()
    lines.append(f"jax devices: {', '.join(f'{d.platform}:{d.device_kind}' for d in devices)} "
                 f"(default backend {jax.default_backend()})")
    importable = {name: _importable(name) for name in ABSENT_ON_GPU_IMAGE}
    lines.append("importable: " + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in importable.items()))
    want = {"gpu", "cuda"} if device in ("gpu", "cuda") else {device}
    return lines, any(d.platform in want for d in devices)


def _importable(name: str) -> bool:
    """Whether ``import name`` would find a module (nothing is imported)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _version(name: str) -> str:
    if not _importable(name):
        return "not installed"
    try:
        module = __import__(name)
    except Exception as exc:  # noqa: BLE001 - report, the check goes on without it
        return f"import failed ({type(exc).__name__}: {exc})"
    return str(getattr(module, "__version__", "?"))


def render(cells: Sequence[Cell], skipped: Sequence[str]) -> str:
    lines = ["| device | n (train rows) | batch (unique) | fits/s warm | warm s | cold s (incl. compile) "
             "| compiles | value-only node-evals/s | local fits/s warm (fits) | local fits/s pipelined "
             "| statuses | cell s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        if c.error:
            lines.append(f"| {c.device} | {c.n} ({c.n_train or '?'}) | {c.batch} | - | - | - | - | - | - "
                         f"| - | {c.error} | {c.seconds:.0f} |")
            continue
        lines.append(f"| {c.device} | {c.n} ({c.n_train}) | {c.batch} ({c.unique}) | {c.fits_per_s:.1f} "
                     f"| {c.warm_s:.2f} | {c.cold_s:.1f} | {c.compiles} | {c.node_evals_per_s:.3g} "
                     f"| {c.local_fits_per_s:.1f} ({c.local_fits}) | {c.local_pipelined_per_s:.1f} "
                     f"| {_statuses(c.statuses, c.first_error)} | {c.seconds:.0f} |")
    if skipped:
        lines.append("")
        lines.append(f"Time budget spent: not run: {', '.join(skipped)}.")
    return "\n".join(lines)


def _statuses(counts: dict[str, int], first_error: str) -> str:
    text = " ".join(f"{k} {v}" for k, v in counts.items() if v) or "none"
    why = first_error.replace("|", "/").replace("\n", " ")
    return f"{text} (first error: {why})" if why else text


def _child(args: argparse.Namespace) -> int:
    n, batch = (int(v) for v in args.cell.split(","))
    buckets = tuple(int(v) for v in args.const_buckets.split(",")) if args.const_buckets else None
    cell = run_cell(args.device, args.layout, n, batch, args.value_reps, buckets, args.max_iters)
    print(CELL_PREFIX + json.dumps(asdict(cell)), flush=True)
    return 0


def _spawn(args: argparse.Namespace, n: int, batch: int, timeout: float,
           env: dict[str, str]) -> Cell:
    """Run one cell in a subprocess; a timeout or crash becomes an error row."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cell", f"{n},{batch}",
           "--device", args.device, "--layout", args.layout, "--value-reps", str(args.value_reps)]
    if args.const_buckets:
        cmd += ["--const-buckets", args.const_buckets]
    if args.max_iters:
        cmd += ["--max-iters", str(args.max_iters)]
    t0 = time.perf_counter()

    def failed(why: str) -> Cell:
        return Cell(args.device, n, 0, batch, 0, 0.0, 0.0, 0.0, 0, 0.0, {},
                    time.perf_counter() - t0, why)

    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=timeout, env=env,
                              check=False)
    except subprocess.TimeoutExpired:
        return failed(f"timed out after {timeout:.0f}s (raise --cell-timeout-s or lower the batch)")
    found = [line for line in done.stdout.splitlines() if line.startswith(CELL_PREFIX)]
    if done.returncode != 0 or not found:
        tail = done.stdout.strip().splitlines()[-1:] or ["no output"]
        return failed(f"exit {done.returncode} ({tail[0][:120]}; the log above says why)")
    return Cell(**json.loads(found[-1][len(CELL_PREFIX):]))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="gpu", choices=("gpu", "cpu"))
    ap.add_argument("--layout", default="vmap", choices=("vmap", "map", "auto"))
    ap.add_argument("--rows", default="", help="comma-separated n, 1e4 allowed (default 1e4,1e5)")
    ap.add_argument("--batches", default="", help="comma-separated batch sizes (default 256,1024,4096)")
    ap.add_argument("--budget-s", type=float, default=400.0,
                    help="stop starting cells once this many seconds are spent")
    ap.add_argument("--cell-timeout-s", type=float, default=150.0, help="hard limit per cell")
    ap.add_argument("--value-reps", type=int, default=3)
    ap.add_argument("--const-buckets", default="",
                    help="e.g. 8: one constant bucket, fewer compiles (default: the evaluator's)")
    ap.add_argument("--max-iters", type=int, default=0,
                    help="LM iteration cap (default: bench/evaluator.py's MAX_ITERS)")
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU smoke run: device=cpu, n=200, batches 8,16, one constant bucket, "
                    "8 LM iterations (takes seconds)")
    ap.add_argument("--cell", help=argparse.SUPPRESS)  # internal: run one "n,batch" cell
    args = ap.parse_args(argv)
    if args.dry_run:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        args.device = "cpu"
        args.rows, args.batches = args.rows or "200", args.batches or "8,16"
        args.budget_s = min(args.budget_s, 120.0)
        args.value_reps = 1
        args.const_buckets, args.max_iters = args.const_buckets or "8", args.max_iters or 8
    args.rows, args.batches = args.rows or "10000,100000", args.batches or "256,1024,4096"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cell:
        return _child(args)
    rows = [int(float(v)) for v in args.rows.split(",")]
    batches = [int(float(v)) for v in args.batches.split(",")]
    t_all = time.perf_counter()
    # The cells get the environment as given; this process only lists the devices, so it must
    # not preallocate most of the GPU's memory (JAX's default) under the cells' feet.
    cell_env = dict(os.environ)
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    env, has_device = environment(args.device)
    print("## Environment\n")
    print("\n".join(f"- {line}" for line in env))
    if not has_device:
        print(f"\nERROR: JAX sees no {args.device} device (see 'jax devices' above). Run this on a "
              "machine with a GPU and a CUDA build of jaxlib, or pass --dry-run for the CPU smoke "
              "run.", file=sys.stderr)
        return 2
    # The core the cells import, checked here too: none of the GPU image's absent modules.
    import bench.evaluator  # noqa: F401
    import sr_dist.data  # noqa: F401
    import sr_dist.evaluator  # noqa: F401
    import sr_dist.formula  # noqa: F401

    print(f"- loaded by the evaluator core: {_loaded_absent() or 'none'} of "
          f"{', '.join(ABSENT_ON_GPU_IMAGE)}")
    from bench.evaluator import MAX_ITERS, RESTARTS

    print(f"- cells: rows {rows} x batches {batches}, layout {args.layout}, {RESTARTS} restarts, "
          f"at most {args.max_iters or MAX_ITERS} LM iterations, constant buckets "
          f"{args.const_buckets or 'default'}; budget {args.budget_s:.0f}s, at most "
          f"{args.cell_timeout_s:.0f}s per cell\n", flush=True)

    cells: list[Cell] = []
    skipped: list[str] = []
    for n in rows:
        for batch in batches:
            left = args.budget_s - (time.perf_counter() - t_all)
            if left < 10:
                skipped.append(f"n={n} batch={batch}")
                continue
            log(f"cell n={n} batch={batch} (limit {min(args.cell_timeout_s, left):.0f}s) ...")
            cell = _spawn(args, n, batch, min(args.cell_timeout_s, left), cell_env)
            log(f"  n={n} batch={batch}: {cell.seconds:.1f}s"
                + (f" ({cell.error})" if cell.error else ""))
            cells.append(cell)
            _write_out(env, cells, skipped, time.perf_counter() - t_all)  # partial, if killed
    total = time.perf_counter() - t_all
    print("## Evaluator on " + args.device + "\n")
    print(render(cells, skipped))
    loaded = sorted({m for c in cells for m in c.loaded_absent.split(", ") if m})
    print(f"\nLoaded by the cells: {', '.join(loaded) or 'none'} of {', '.join(ABSENT_ON_GPU_IMAGE)}.")
    print(f"Whole check: {total:.0f}s.")
    written = _write_out(env, cells, skipped, total)
    if written:
        print(f"(table also written to {written})")
    return 0 if any(not c.error for c in cells) else 1


def _write_out(env: list[str], cells: list[Cell], skipped: list[str], total: float) -> Path | None:
    """The table (and the cells as JSON) under ``$OUT`` when it is set: the device runner
    returns what is written there."""
    out_dir = os.environ.get("OUT")
    if not out_dir:
        return None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / TABLE_NAME).write_text("\n".join(f"- {line}" for line in env) + "\n\n"
                                  + render(cells, skipped) + f"\n\nWhole check: {total:.0f}s.\n")
    (out / JSON_NAME).write_text(json.dumps(
        {"environment": env, "cells": [asdict(c) for c in cells], "skipped": skipped,
         "total_s": total}, indent=1) + "\n")
    return out / TABLE_NAME


if __name__ == "__main__":
    raise SystemExit(main())
