"""CPU time of ``evolve``'s proposer per proposed candidate, on a recorded history.

``--record FILE`` runs the offline proposer against a real ``Evaluator`` on
``bench/throughput.py``'s target (4 variables, 1% noise; ``bench/evaluator_stream.py`` writes
it and drives the turns) for ``--turns`` turns and stores the
history (each turn's tool call and the evaluator's results). ``--replay FILE`` feeds that
history back turn by turn to a fresh ``EvolveModel`` (the same seed), times each ``call`` with
the process's CPU clock, and prints the median over ``--repeat`` replays of the CPU per
proposed candidate, with a SHA-256 of every proposal: a change meant to keep the search as it
was leaves the digest identical. Compare two checkouts by replaying one recorded file with
each, alternating (the proposals are the model's own, so the history stays valid for both).

    .venv/bin/python bench/propose.py --record /tmp/history.pkl
    .venv/bin/python bench/propose.py --replay /tmp/history.pkl --repeat 5
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.evaluator_stream import evaluate_turn, write_target  # noqa: E402
from sr_dist.conversation import Context  # noqa: E402
from sr_dist.data import load_dataset  # noqa: E402
from sr_dist.evaluator import Evaluator  # noqa: E402
from sr_dist.formula.memo import clear_memo  # noqa: E402
from sr_dist.sr.evolve.model import EvolveModel  # noqa: E402


def _info(dataset: Any, sample_rows: int) -> dict[str, Any]:
    info: dict[str, Any] = {"variables": list(dataset.feature_names), "seed": 0, "dataset": "propose-bench"}
    if sample_rows:  # what an agent is shown (500 rows by default); none: only the sources that read no rows
        info["sample"] = {"X": dataset.X_train[:sample_rows].tolist(), "y": dataset.y_train[:sample_rows].tolist()}
    return info


def record(path: Path, turns: int, rows: int, sample_rows: int = 500) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "target.csv"
        write_target(csv, rows)
        dataset = load_dataset(f"csv:{csv}", seed=0)
    evaluator = Evaluator(dataset)
    context = Context(info=_info(dataset, sample_rows))
    model = EvolveModel(seed=0, propose_ahead=False)  # see replay
    for _ in range(turns):
        evaluate_turn(model, context, evaluator)
    path.write_bytes(pickle.dumps({"info": context.info, "history": context.tool_history}))
    print(f"recorded {len(context.tool_history)} tool calls to {path}")


def replay(path: Path) -> tuple[float, int, str]:
    """One replay: (CPU seconds in ``call``, candidates proposed, digest of the proposals).
    The proposer's parse memo starts empty, as in a new agent."""
    clear_memo()
    stored = pickle.loads(path.read_bytes())
    history = stored["history"]
    context = Context(info=copy.deepcopy(stored["info"]))
    # Breeding in the foreground: with ``propose_ahead`` the same work runs in a background
    # thread between calls, outside the CPU clock's window around ``call``.
    model = EvolveModel(seed=0, propose_ahead=False)
    sha = hashlib.sha256()
    cpu = 0.0
    proposed = 0
    for turn, pair in enumerate(history):
        start = time.process_time()
        response = model.call(context, None)
        if turn:  # the first turn builds the seed library: not the per-turn cost
            cpu += time.process_time() - start
        for call in response.tool_calls:
            sha.update(call["function"]["arguments"].encode())
            if turn:
                proposed += len(json.loads(call["function"]["arguments"]).get("expressions", []))
        context.tool_history.append(pair)
    return cpu, proposed, sha.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path)
    mode.add_argument("--replay", type=Path)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample-rows", type=int, default=500,
                        help="training rows the proposer is shown (0: none, so only the seed sources "
                             "that read no rows: data_free and curves)")
    args = parser.parse_args(argv)
    if args.record:
        record(args.record, args.turns, args.rows, args.sample_rows)
        return 0
    runs = [replay(args.replay) for _ in range(args.repeat)]
    digests = {digest for _, _, digest in runs}
    per = [1e3 * cpu / max(n, 1) for cpu, n, _ in runs]
    print(f"| replays | candidates | ms CPU per candidate (median) | each | proposals digest | load |\n"
          f"|---:|---:|---:|---|---|---|\n"
          f"| {len(runs)} | {runs[0][1]:,} | {statistics.median(per):.3f} | "
          f"{', '.join(f'{v:.3f}' for v in per)} | {'/'.join(sorted(digests))} | "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} |")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
