"""The evaluator pool's stats: each replica's, and the pool's total, from their ``stats()``.

The total has the keys one evaluator always reported (``search_fits``, ``cache_hits``,
``batching``, ``warmup``, ``prefit``, ...), summed over the replicas, so readers written for
one evaluator read a pool the same way; latency percentiles are merged from the replicas'
histograms (:mod:`sr_dist.search.latency`), never averaged. ``per_replica`` lists a compact
row per replica: where it ran, what it fitted, its queue waits. This is what the runs table's
``evaluator_stats`` column stores (:func:`stats_for_record`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sr_dist.search.latency import LatencyHistogram

__all__ = ["merge_replica_stats", "replica_row", "stats_for_record"]

#: Evaluator counters that add up across replicas.
_SUMMED = ("compiles", "compile_s", "fits", "local_fits", "cache_hits", "submitted", "invalid", "errors",
           "nonfinite", "refined", "batches", "fit_s", "evaluations", "cache_entries", "queue_depth",
           "busy_s", "failed_batches", "search_fits", "fits_per_s", "recent_formulas_per_s",
           "host_devices", "device_compiles", "device_compile_s")
_BATCHING_SUMMED = ("requests", "formulas", "batches", "batched_formulas", "mixed_agent_batches",
                    "duplicate_formulas", "cross_agent_duplicates", "queue_depth",
                    "in_flight_requests")
#: Latency summaries (histograms) that merge across replicas.
_LATENCIES = ("queue_wait", "latency")


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _sum(rows: Sequence[Mapping[str, Any]], key: str) -> int | float:
    total = sum(_num(r.get(key)) for r in rows)
    return int(total) if all(isinstance(r.get(key, 0), int) for r in rows) else round(total, 4)


def _percentiles(summary: Mapping[str, Any]) -> dict[str, Any]:
    return {k: summary.get(k) for k in ("count", "p50_s", "p95_s", "p99_s", "max_s")}


def replica_row(stats: Mapping[str, Any], search_s: float | None = None) -> dict[str, Any]:
    """One replica's line of ``per_replica``."""
    batching = dict(stats.get("batching", {}))
    fits = int(_num(stats.get("search_fits")))
    row: dict[str, Any] = {
        "replica": int(_num(stats.get("replica"))),
        "node_id": stats.get("node_id"),
        "instance": stats.get("instance"),
        "restarted": bool(stats.get("restarted", False)),
        "search_fits": fits,
        "cache_hits": int(_num(stats.get("cache_hits"))),
        "batches": int(_num(batching.get("batches"))),
        "mean_batch_size": round(_num(batching.get("mean_batch_size")), 2),
        "busy_s": round(_num(stats.get("busy_s")), 3),
        "queue_wait": _percentiles(dict(stats.get("queue_wait", {}))),
        "xla_flags": stats.get("xla_flags", ""),
        "host_devices": int(_num(stats.get("host_devices")) or 1),
        "device_batches": list(stats.get("device_batches") or []),
    }
    if search_s:
        row["fits_per_s"] = round(fits / search_s, 2)
    return row


def merge_replica_stats(replicas: Sequence[Mapping[str, Any]],
                        search_s: float | None = None) -> dict[str, Any]:
    """The pool's stats from its replicas' (see the module docstring). ``search_s``: the
    search's length, for fits/s per replica and in total."""
    rows = [dict(r) for r in replicas if r]
    if not rows:
        return {}
    merged: dict[str, Any] = {k: v for k, v in rows[0].items()
                              if k in ("layout", "device", "rows", "buckets")}
    for key in _SUMMED:
        merged[key] = _sum(rows, key)
    # Batches given to each replica's first, second, ... device (host_devices), summed.
    per_device = [list(r.get("device_batches") or []) for r in rows]
    merged["device_batches"] = [sum(d[i] for d in per_device if i < len(d))
                                for i in range(max(map(len, per_device)))]
    batchings = [dict(r.get("batching", {})) for r in rows]
    batching: dict[str, Any] = {key: _sum(batchings, key) for key in _BATCHING_SUMMED}
    sizes: Counter[int] = Counter()
    for b in batchings:
        sizes.update({int(k): int(v) for k, v in dict(b.get("batch_sizes", {})).items()})
    batching["batch_sizes"] = dict(sorted(sizes.items()))
    batching["mean_batch_size"] = (batching["batched_formulas"] / batching["batches"]
                                   if batching["batches"] else 0.0)
    # The deepest one replica's queue got (a sum would count depths of different moments).
    batching["max_queue_depth"] = max(int(_num(b.get("max_queue_depth"))) for b in batchings)
    merged["batching"] = batching
    # The evaluators' own mean (warm-up and pre-fit batches included), as one evaluator had it.
    own = sum(_num(r.get("mean_batch_size")) * _num(r.get("batches")) for r in rows)
    merged["mean_batch_size"] = own / merged["batches"] if merged["batches"] else 0.0
    for key in _LATENCIES:
        merged[key] = LatencyHistogram.from_summaries(
            dict(r.get(key, {})) for r in rows).summary()
    batching["queue_wait"] = merged["queue_wait"]
    held = [dict(r.get("held_back", {})) for r in rows]
    merged["held_back"] = {
        "requests": int(sum(_num(h.get("requests")) for h in held)),
        "wait": LatencyHistogram.from_summaries(dict(h.get("wait", {})) for h in held).summary(),
    }
    for key in ("warmup", "prefit"):
        parts = [dict(r.get(key, {})) for r in rows if r.get(key)]
        if not parts:
            merged[key] = {}
            continue
        merged[key] = {k: (max(_num(p.get(k)) for p in parts) if k == "seconds" else _sum(parts, k))
                       for k in parts[0]}
    merged["replicas"] = len(rows)
    merged["per_replica"] = [replica_row(r, search_s) for r in rows]
    if search_s:
        merged["search_s"] = round(search_s, 3)
        merged["search_fits_per_s"] = round(int(merged["search_fits"]) / search_s, 2)
    return merged


def stats_for_record(merged: Mapping[str, Any]) -> dict[str, Any]:
    """The pool's stats as the runs table stores them: everything but raw histogram counts
    and the compile-bucket table (kept small: one JSON value per run)."""
    def strip(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: strip(v) for k, v in value.items() if k not in ("counts", "buckets")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return dict(strip(merged))
