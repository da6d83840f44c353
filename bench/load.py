"""The whole pipeline under load: N simulated LLM agents on Ray against the evaluator pool.

A loopback OpenAI-compatible server (``bench/load_server.py``, in a process of its own) plays
the LLM: after a latency (default 2 s ± 0.5 s) it answers every agent with an
``evaluate_formulas`` tool call proposing formulas from a generated pool, a share of them
shared across agents (as LLMs repeat the textbook forms). ``run_search`` runs over it with
``model=openai`` pointed at the server, so requests go through the real OpenAI adapter, the
real tool-call parser, the formula tools, the evaluator pool and the result writer. Each agent
runs ``--turns`` turns; ``search.agents_per_actor`` packs the agents into at most
``--processes`` agent processes.

One row per N (default 100, 1,000 and 10,000): agents, agent processes, peak resident memory
of the run's processes (the driver, Ray's daemons and workers, not the simulated LLM), rows
per second, distinct structures fitted per second, the evaluator queue's wait percentiles
(from admission to the batch; ``evaluator.max_queue_s`` bounds it), the 99th percentile of the
wait to be admitted (where a saturated pool makes agents wait) and of a whole fit request,
rows the agents sent against rows written, and what gave out first when something did.

First the evaluator-bound pair: unique formulas, no model latency, a dataset large enough that
fitting dominates, run with ``evaluator.replicas=1`` and ``2`` in this process (after an
unreported warm-up run that fills the JAX compilation cache), and the ratio of their fits/s.

Usage:
    .venv/bin/python bench/load.py                        # all rows; ~25 minutes on 2 cores
    .venv/bin/python bench/load.py --agents 100 --no-bound --markdown out.md
    .venv/bin/python bench/load.py --agents --bound-seconds 30   # only the replicas ratio

Run it where Ray may bind 127.0.0.1 (``unshare --net`` then ``ip link set lo up``, as root).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from hydra import compose, initialize_config_module  # noqa: E402

from sr_dist.data import load_dataset  # noqa: E402
from sr_dist.search import run_search  # noqa: E402

# --------------------------------------------------------------------------- processes

def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _descendants(root: int) -> list[int]:
    kids, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class MemorySampler:
    """Samples, every ``every_s``, the resident memory of this process and its descendants
    (Ray's daemons and workers), leaving out ``exclude`` (the simulated LLM's process), and
    counts the agent actor processes; keeps the peaks."""

    def __init__(self, exclude: set[int], every_s: float = 1.0) -> None:
        self.exclude = exclude
        self.every_s = every_s
        self.peak_kib = 0
        self.peak_agent_processes = 0
        self.peak_by_kind: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        total, agents = 0, 0
        kinds: dict[str, int] = {}
        for pid in _descendants(os.getpid()):
            if pid in self.exclude:
                continue
            rss = _rss_kib(pid)
            line = _cmdline(pid)
            kind = ("agent" if "AgentActor" in line else "evaluator" if "EvaluatorActor" in line
                    else "writer" if "ResultWriter" in line else "driver" if pid == os.getpid()
                    else "ray")
            agents += kind == "agent"
            total += rss
            kinds[kind] = kinds.get(kind, 0) + rss
        if total > self.peak_kib:
            self.peak_kib, self.peak_by_kind = total, kinds
        self.peak_agent_processes = max(self.peak_agent_processes, agents)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()


# --------------------------------------------------------------------------- the simulated LLM

class SimulatedLLM:
    """``bench/load_server.py`` in a process of its own (it must not share the GIL with the
    driver); ``base_url`` once it listens, ``stats()`` over HTTP, stopped by closing stdin."""

    def __init__(self, variables: list[str], agents: int, turns: int, formulas: int,
                 duplicate_share: float, latency: float, spread: float, seed: int) -> None:
        command = [sys.executable, str(HERE / "load_server.py"), "--variables", ",".join(variables),
                   "--agents", str(agents), "--turns", str(turns), "--formulas-per-call",
                   str(formulas), "--duplicate-share", str(duplicate_share),
                   "--popular", str(max(64, formulas)), "--latency", str(latency),
                   "--spread", str(spread), "--seed", str(seed)]
        env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env=env)
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        if not first:
            raise RuntimeError("the simulated LLM server did not start")
        self.info = json.loads(first)
        self.base_url = str(self.info["base_url"])

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.base_url + "/stats", timeout=30) as reply:
            return dict(json.loads(reply.read()))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


# --------------------------------------------------------------------------- one run

@dataclass(frozen=True)
class Row:
    label: str
    agents: int
    agents_per_actor: int
    replicas: int
    agent_processes: int
    peak_rss_gib: float
    rss_by_kind_mib: dict[str, int]
    search_s: float
    wall_s: float
    candidates: int
    fits: int
    queue_p50_s: float | None
    queue_p99_s: float | None
    admission_p99_s: float | None
    latency_p99_s: float | None
    rows_sent: int
    rows_written: int
    status: str
    stop_reason: str
    gave_out: str
    llm: dict[str, Any] = field(default_factory=dict)

    @property
    def candidates_per_s(self) -> float:
        return self.candidates / self.search_s if self.search_s > 0 else 0.0

    @property
    def fits_per_s(self) -> float:
        return self.fits / self.search_s if self.search_s > 0 else 0.0


def _config(results: Path, base_url: str, problem: str, rows: int, agents: int, per_actor: int,
            turns: int, replicas: int, seconds: float, timeout_s: float,
            queue_s: float | None) -> Any:
    overrides = [
        f"results.path={results}", f"dataset.source={problem}", f"dataset.n={rows}",
        "model=openai", f"model.base_url={base_url}", "model.model=simulated",
        "model.api_key_env=null", f"model.timeout_s={timeout_s}", "model.max_retries=2",
        f"search.agents={agents}", f"search.agents_per_actor={per_actor}",
        f"search.max_turns={turns}", f"search.max_seconds={seconds}",
        "search.target_nmse=null", "search.max_candidates=100000000",
        "search.progress_interval_s=15", "search.stop_grace_s=30",
        f"evaluator.replicas={replicas}",
        f"evaluator.max_queue_s={'null' if queue_s is None else queue_s}",
    ]
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        return compose("config", overrides=overrides)


def _gave_out(summary: Any, llm: dict[str, Any], agents: int) -> str:
    """What ran out first, from the summary (``-``: nothing did)."""
    notes = []
    if summary.lost_agents:
        notes.append(f"{len(summary.lost_agents)} agent(s) lost")
    reasons: dict[str, int] = {}
    for outcome in summary.agents:
        reasons[outcome.stop_reason] = reasons.get(outcome.stop_reason, 0) + 1
    odd = {k: v for k, v in reasons.items() if k not in ("max_turns",)}
    if odd:
        notes.append("agents stopped: " + ", ".join(f"{v} {k}" for k, v in sorted(odd.items())))
    if summary.stop_reason == "max_seconds":
        notes.append("time budget hit")
    written = int(summary.writer.get("rows_written", 0))
    if written != summary.rows_sent:
        notes.append(f"rows sent {summary.rows_sent} != written {written}")
    if llm.get("errors"):
        notes.append(f"{llm['errors']} LLM-server errors")
    if len(summary.agents) != agents:
        notes.append(f"{agents - len(summary.agents)} agent(s) without an outcome")
    return "; ".join(notes) or "-"


def measure(label: str, *, agents: int, processes: int, turns: int, formulas: int,
            duplicate_share: float, latency: float, spread: float, problem: str, rows: int,
            replicas: int, seconds: float, seed: int, queue_s: float | None) -> Row:
    variables = list(load_dataset(problem, n=min(rows, 200), seed=0).feature_names)
    per_actor = max(1, math.ceil(agents / max(1, processes)))
    llm = SimulatedLLM(variables, agents, turns, formulas, duplicate_share, latency, spread, seed)
    try:
        with tempfile.TemporaryDirectory(prefix="sr-dist-load-") as tmp:
            cfg = _config(Path(tmp), llm.base_url, problem, rows, agents, per_actor, turns,
                          replicas, seconds, timeout_s=max(120.0, 4 * latency + 60),
                          queue_s=queue_s)
            out = io.StringIO()
            started = time.monotonic()
            with MemorySampler(exclude={llm.process.pid}) as memory:
                summary = run_search(cfg, stream=out, handle_signals=False)
                memory.sample()
            wall = time.monotonic() - started
        served = llm.stats()
    finally:
        llm.close()
    ev = dict(summary.evaluator)
    wait = dict(ev.get("queue_wait", {}))
    keep = ("requests", "errors", "repeats", "overruns", "agents", "formulas_proposed",
            "unique_formulas_proposed", "connections_peak")
    return Row(
        label=label, agents=agents, agents_per_actor=per_actor, replicas=int(ev.get("replicas", replicas)),
        agent_processes=max(memory.peak_agent_processes,
                            len({a.host for a in summary.agents if a.host})),
        peak_rss_gib=round(memory.peak_kib / 2**20, 2),
        rss_by_kind_mib={k: v // 1024 for k, v in sorted(memory.peak_by_kind.items())},
        search_s=round(summary.search_s, 2), wall_s=round(wall, 1),
        candidates=summary.candidates, fits=int(ev.get("search_fits", 0)),
        queue_p50_s=wait.get("p50_s"), queue_p99_s=wait.get("p99_s"),
        admission_p99_s=dict(dict(ev.get("held_back", {})).get("wait", {})).get("p99_s"),
        latency_p99_s=dict(ev.get("latency", {})).get("p99_s"),
        rows_sent=summary.rows_sent, rows_written=int(summary.writer.get("rows_written", 0)),
        status=summary.status, stop_reason=summary.stop_reason,
        gave_out=_gave_out(summary, served, agents),
        llm={k: served.get(k) for k in keep if k in served},
    )


# --------------------------------------------------------------------------- output

def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def table(rows: list[Row]) -> str:
    lines = [
        "| run | agents | agent processes | replicas | peak RSS GiB | candidates/s | fits/s "
        "| queue p50 ms | queue p99 ms | admission p99 ms | fit request p99 ms | rows sent "
        "| rows written | search s | what gave out |",
        "|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.label} | {r.agents:,} | {r.agent_processes} | {r.replicas} | {r.peak_rss_gib:.2f} "
            f"| {r.candidates_per_s:.1f} | {r.fits_per_s:.1f} | {_ms(r.queue_p50_s)} "
            f"| {_ms(r.queue_p99_s)} | {_ms(r.admission_p99_s)} | {_ms(r.latency_p99_s)} "
            f"| {r.rows_sent:,} | {r.rows_written:,} | {r.search_s:.1f} "
            f"| {r.gave_out} |")
    return "\n".join(lines)


def ratio_line(one: Row, two: Row) -> str:
    ratio = two.fits_per_s / one.fits_per_s if one.fits_per_s else float("nan")
    return (f"evaluator-bound: {one.fits_per_s:.1f} fits/s with 1 replica, {two.fits_per_s:.1f} "
            f"with 2: {ratio:.2f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="*", default=[100, 1000, 10000])
    parser.add_argument("--processes", type=int, default=16, help="most agent processes")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--formulas", type=int, default=8, help="formulas per tool call")
    parser.add_argument("--duplicate-share", type=float, default=0.3)
    parser.add_argument("--latency", type=float, default=2.0)
    parser.add_argument("--spread", type=float, default=0.5)
    parser.add_argument("--problem", default="feynman:I.6.2")
    parser.add_argument("--rows", type=int, default=2000, help="dataset rows of the load runs")
    parser.add_argument("--replicas", type=int, default=2, help="evaluator replicas of the load runs")
    parser.add_argument("--seconds", type=float, default=600, help="time budget per load run")
    parser.add_argument("--queue-target", type=float, default=0.25,
                        help="evaluator.max_queue_s of the load runs (0: none)")
    parser.add_argument("--no-bound", action="store_true", help="skip the evaluator-bound pair")
    parser.add_argument("--bound-agents", type=int, default=8)
    parser.add_argument("--bound-rows", type=int, default=30000)
    parser.add_argument("--bound-formulas", type=int, default=32)
    parser.add_argument("--bound-seconds", type=float, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    parser.add_argument("--markdown", type=Path, help="write the table here")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    logging.basicConfig(level=logging.WARNING)
    started = time.monotonic()
    load1 = os.getloadavg()[0]
    rows: list[Row] = []
    ratio = None

    def save() -> None:
        text = table(rows) + ("\n\n" + ratio if ratio else "") + "\n"
        if args.markdown:
            args.markdown.write_text(text)
        if args.json:
            args.json.write_text(json.dumps([asdict(r) | {"candidates_per_s": r.candidates_per_s,
                                                          "fits_per_s": r.fits_per_s}
                                             for r in rows], indent=2))

    if not args.no_bound:  # first: the most sensitive to a busy machine, and the acceptance
        bound = dict(agents=args.bound_agents, processes=2, turns=400,
                     formulas=args.bound_formulas, duplicate_share=0.0, latency=0.0, spread=0.0,
                     problem=args.problem, rows=args.bound_rows, seed=args.seed + 1,
                     queue_s=None)
        print("evaluator-bound: warm-up (not reported) ...", flush=True)
        measure("warm-up", replicas=2, seconds=min(20.0, args.bound_seconds), **bound)
        one = measure("evaluator-bound, 1 replica", replicas=1, seconds=args.bound_seconds, **bound)
        two = measure("evaluator-bound, 2 replicas", replicas=2, seconds=args.bound_seconds, **bound)
        rows += [one, two]
        ratio = ratio_line(one, two)
        print(table(rows) + "\n" + ratio, flush=True)
        save()
    for n in args.agents:
        print(f"load: {n:,} agents ...", flush=True)
        rows.append(measure(
            f"{n:,} agents", agents=n, processes=args.processes, turns=args.turns,
            formulas=args.formulas, duplicate_share=args.duplicate_share, latency=args.latency,
            spread=args.spread, problem=args.problem, rows=args.rows, replicas=args.replicas,
            seconds=args.seconds, seed=args.seed, queue_s=args.queue_target or None))
        print(table(rows[-1:]), flush=True)
        save()
    text = table(rows)
    print()
    print(text)
    if ratio:
        print(ratio)
    print(f"(load average {load1:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
          f"{time.monotonic() - started:.0f} s in all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
