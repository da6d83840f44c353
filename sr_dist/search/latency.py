"""Latency percentiles from a log-bucketed histogram: bounded memory, mergeable across replicas.

A run can queue millions of requests; keeping every wait to compute p99 would grow without
bound, and percentiles cannot be averaged across replicas. Counting waits in logarithmic
buckets (20 per decade, about 12% wide, as HdrHistogram-style recorders do) fixes both: the
counts are a small dict that sums across replicas, and a percentile is read back to within a
bucket. Reported values are the bucket's geometric middle, clipped to the smallest and largest
wait seen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["LatencyHistogram"]

#: Buckets per factor of ten.
PER_DECADE = 20
#: Waits below this (seconds) share bucket 0.
FLOOR_S = 1e-6


def _bucket(seconds: float) -> int:
    if not seconds > FLOOR_S:
        return 0
    return int(math.floor(PER_DECADE * math.log10(seconds / FLOOR_S))) + 1


def _middle(bucket: int) -> float:
    if bucket <= 0:
        return FLOOR_S
    return float(FLOOR_S * 10.0 ** ((bucket - 0.5) / PER_DECADE))


class LatencyHistogram:
    """Counts of waits (seconds) per log bucket; ``percentile`` reads them back."""

    __slots__ = ("counts", "total", "sum_s", "min_s", "max_s")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0
        self.sum_s = 0.0
        self.min_s = math.inf
        self.max_s = 0.0

    def record(self, seconds: float, count: int = 1) -> None:
        """Count ``count`` waits of ``seconds`` (negative waits, a clock's jitter, count as 0)."""
        s = max(0.0, float(seconds))
        b = _bucket(s)
        self.counts[b] = self.counts.get(b, 0) + count
        self.total += count
        self.sum_s += s * count
        self.min_s = min(self.min_s, s)
        self.max_s = max(self.max_s, s)

    def percentile(self, q: float) -> float | None:
        """The ``q``-th percentile (0-100) in seconds; ``None`` when nothing was recorded."""
        if not self.total:
            return None
        rank = max(1, math.ceil(self.total * min(max(q, 0.0), 100.0) / 100.0))
        seen = 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                return min(max(_middle(bucket), self.min_s), self.max_s)
        return self.max_s  # pragma: no cover - rank never exceeds total

    def summary(self) -> dict[str, Any]:
        """``count``, ``mean_s``, ``p50_s``, ``p95_s``, ``p99_s``, ``max_s`` and the raw
        ``counts`` (what :meth:`from_summaries` merges)."""
        def q(p: float) -> float | None:
            value = self.percentile(p)
            return None if value is None else round(value, 6)

        return {
            "count": self.total,
            "mean_s": round(self.sum_s / self.total, 6) if self.total else None,
            "p50_s": q(50), "p95_s": q(95), "p99_s": q(99),
            "max_s": round(self.max_s, 6) if self.total else None,
            "min_s": round(self.min_s, 6) if self.total else None,
            "sum_s": round(self.sum_s, 6),
            "counts": {str(k): v for k, v in sorted(self.counts.items())},
        }

    @classmethod
    def from_summaries(cls, summaries: Iterable[Mapping[str, Any]]) -> LatencyHistogram:
        """One histogram holding every summary's counts (the pool's total from its replicas)."""
        merged = cls()
        for s in summaries:
            if not s or not s.get("count"):
                continue
            for key, count in dict(s.get("counts", {})).items():
                merged.counts[int(key)] = merged.counts.get(int(key), 0) + int(count)
            merged.total += int(s["count"])
            merged.sum_s += float(s.get("sum_s", 0.0))
            merged.min_s = min(merged.min_s, float(s.get("min_s") or 0.0))
            merged.max_s = max(merged.max_s, float(s.get("max_s") or 0.0))
        return merged
