"""The evaluator on the request stream of a real offline search, replayed under variants.

A default search sends the evaluator small, mixed batches: some library seeds and fresh trees
(full multi-start fits), mostly offspring with inherited constants (local searches), a few
formulas per (bucket, local) group. ``bench/evaluator.py`` times large uniform batches; this
script times that stream. It records one by driving ``EvolveModel`` (default settings) against an
``Evaluator`` for ``--record`` seconds on the noisy 4-variable target of ``bench/throughput.py``,
then replays the recorded requests through ``fit_many`` once per ``--variant`` (evaluator options
as JSON), alternating the variants ``--repeat`` times in one process after a warm-up pass each,
and prints a table: milliseconds per candidate (median), local and full fits, and the ratio to
the first variant::

    .venv/bin/python bench/evaluator_stream.py --variant '{"local_subsample": 0}' --variant '{}'
    .venv/bin/python bench/evaluator_stream.py --host-devices 2 --variant '{}' \
        --variant '{"host_devices": 2}'
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sr_dist.conversation import Context
from sr_dist.data import load_dataset
from sr_dist.evaluator import Evaluator
from sr_dist.evaluator.devices import cpu_devices
from sr_dist.evaluator.prepared import prepare_text
from sr_dist.sr.evolve.model import EvolveModel
from sr_dist.tools.types import ToolCall, ToolCallResult

Request = tuple[list[Any], list[dict[str, float] | None] | None]  # texts, or PreparedFormula
_SHOWN = ("expression", "canonical", "status", "constants", "train_nmse", "val_nmse",
          "complexity", "error")


def write_target(path: Path, rows: int, seed: int = 0) -> None:
    """``1.3*x0*sin(x1) + x2**2/(1 + x3) + 0.4*x0*exp(-x3)`` with 1% noise, as a CSV."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.5, 3.0, (rows, 4))
    y = 1.3 * X[:, 0] * np.sin(X[:, 1]) + X[:, 2] ** 2 / (1 + X[:, 3]) + 0.4 * X[:, 0] * np.exp(-X[:, 3])
    y = y + 0.01 * np.std(y) * rng.standard_normal(rows)
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header="x0,x1,x2,x3,y",
               comments="", fmt="%.17g")


def record(dataset: Any, seconds: float, seed: int = 1) -> list[Request]:
    """The ``evaluate_formulas`` requests of one ``evolve`` agent searching for ``seconds``."""
    evaluator = Evaluator(dataset)
    model = EvolveModel(seed=seed)
    info = {"variables": list(dataset.feature_names), "seed": seed, "dataset": "stream",
            "sample": {"X": dataset.X_train[:256].tolist(), "y": dataset.y_train[:256].tolist()}}
    context = Context(info=info)
    requests: list[Request] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        requests.extend(evaluate_turn(model, context, evaluator))
    return requests


def evaluate_turn(model: Any, context: Context, evaluator: Evaluator) -> list[Request]:
    """One turn of ``model`` without the agent loop: its ``evaluate_formulas`` calls fitted by
    ``evaluator`` and recorded in ``context`` with what the tool shows a model; returns those
    calls' requests. Other tool calls are recorded as answered."""
    requests: list[Request] = []
    for call in model.call(context, None).tool_calls:
        name = call["function"]["name"]
        args = json.loads(call["function"]["arguments"])
        if name != "evaluate_formulas":
            context.tool_history.append((ToolCall(name, args, call["id"]), ToolCallResult(True, {}, "", {})))
            continue
        requests.append((args["expressions"], args.get("starts")))
        fits = evaluator.fit_many(args["expressions"], starts=args.get("starts"))
        shown = [{k: f.to_dict()[k] for k in _SHOWN} for f in fits]
        context.tool_history.append((ToolCall(name, args, call["id"]),
                                     ToolCallResult(True, {"results": shown}, "", {})))
    return requests


def replay(evaluator: Evaluator, requests: Sequence[Request]) -> float:
    evaluator.clear_cache()
    t0 = time.perf_counter()
    for expressions, starts in requests:
        evaluator.fit_many(expressions, starts=starts)
    return time.perf_counter() - t0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--record", type=float, default=25.0, help="seconds of search recorded")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--variant", action="append", default=[],
                        help="evaluator options as JSON; the first is the baseline")
    parser.add_argument("--host-devices", type=int, default=1,
                        help="JAX CPU devices this process asks for before its first fit, so a "
                             'variant can set "host_devices" up to that many')
    parser.add_argument("--prepared", action="store_true",
                        help="replay the formulas parsed and lowered, as agents send them "
                             "(PreparedFormula), instead of as text")
    args = parser.parse_args(argv)
    cpu_devices(args.host_devices)
    variants = [json.loads(v) for v in args.variant] or [{"local_subsample": 0}, {}]
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "stream.csv"
        write_target(csv, args.rows)
        dataset = load_dataset(f"csv:{csv}", seed=0)
        requests = record(dataset, args.record)
        if args.prepared:
            names = tuple(dataset.feature_names)
            requests = [([prepare_text(e, names) for e in ex], st) for ex, st in requests]
        evaluators = [Evaluator(dataset, **v) for v in variants]
        for evaluator in evaluators:
            replay(evaluator, requests)  # compiles
        times: list[list[float]] = [[] for _ in evaluators]
        for _ in range(args.repeat):
            for i, evaluator in enumerate(evaluators):
                times[i].append(replay(evaluator, requests))
    n = sum(len(e) for e, _ in requests)
    local = sum(1 for _, s in requests for x in (s or []) if x is not None)
    print(f"{len(requests)} requests, {n} candidates ({local} with a start), {args.rows} rows, "
          f"{'prepared' if args.prepared else 'text'}, median of {args.repeat} replays")
    print("| variant | ms / candidate | x baseline |")
    print("|---|---:|---:|")
    base = float(np.median(times[0]))
    for v, t in zip(variants, times, strict=True):
        med = float(np.median(t))
        print(f"| `{json.dumps(v)}` | {1000 * med / n:.3f} | {base / med:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
