"""The log-bucketed latency histogram (sr_dist.search.latency): percentiles read back within a
bucket of the exact ones, and summaries that merge across replicas as if recorded together."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sr_dist.search.latency import PER_DECADE, LatencyHistogram

#: One bucket's width as a factor (about 12%), and half of it (the middle's largest error).
BUCKET = 10.0 ** (1.0 / PER_DECADE)
HALF_BUCKET = 10.0 ** (0.5 / PER_DECADE)
QUANTILES = (1, 10, 50, 90, 95, 99, 100)


def _histogram(samples: np.ndarray) -> LatencyHistogram:
    h = LatencyHistogram()
    for s in samples:
        h.record(float(s))
    return h


def _lognormal(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(mean=np.log(0.02), sigma=1.2, size=n)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_percentiles_are_within_a_bucket_of_the_exact_ones(seed: int) -> None:
    samples = _lognormal(5000, seed)
    h = _histogram(samples)
    for q in QUANTILES:
        got = h.percentile(q)
        assert got is not None
        exact = float(np.percentile(samples, q))
        assert exact / BUCKET <= got <= exact * BUCKET, (q, got, exact)
        # Against the nearest-rank sample the middle of its bucket is off by half a bucket.
        rank = float(np.percentile(samples, q, method="inverted_cdf"))
        assert rank / HALF_BUCKET * (1 - 1e-9) <= got <= rank * HALF_BUCKET * (1 + 1e-9)


def test_percentiles_are_clipped_to_the_smallest_and_largest_wait() -> None:
    h = LatencyHistogram()
    h.record(0.0123)
    assert {h.percentile(q) for q in (0, 50, 99, 100)} == {0.0123}
    h.record(0.0124)  # same bucket: no percentile may leave [min, max]
    for q in (0, 1, 50, 99, 100):
        value = h.percentile(q)
        assert value is not None and 0.0123 <= value <= 0.0124
    samples = _lognormal(1000, 7)
    h = _histogram(samples)
    top, bottom = h.percentile(100), h.percentile(0)
    assert top is not None and samples.max() / HALF_BUCKET <= top <= samples.max()
    assert bottom is not None and samples.min() <= bottom <= samples.min() * HALF_BUCKET
    # Out-of-range q is clamped, not an error.
    assert h.percentile(-5) == h.percentile(0) and h.percentile(150) == h.percentile(100)


def test_empty_histogram_has_no_percentiles() -> None:
    h = LatencyHistogram()
    assert h.percentile(50) is None
    summary = h.summary()
    assert summary["count"] == 0 and summary["counts"] == {}
    assert all(summary[k] is None for k in ("mean_s", "p50_s", "p95_s", "p99_s", "max_s", "min_s"))


def test_negative_waits_count_as_zero() -> None:
    h = LatencyHistogram()
    h.record(-0.5)
    h.record(-1e-9, count=2)
    assert h.total == 3 and h.sum_s == 0.0 and h.min_s == 0.0 and h.max_s == 0.0
    assert h.percentile(99) == 0.0
    assert h.summary()["counts"] == {"0": 3}


def test_record_with_a_count_is_that_many_waits() -> None:
    once, many = LatencyHistogram(), LatencyHistogram()
    many.record(0.25, count=4)
    for _ in range(4):
        once.record(0.25)
    assert many.summary() == once.summary()
    assert many.summary()["mean_s"] == 0.25


def test_summary_keys_and_json() -> None:
    h = _histogram(_lognormal(200, 3))
    summary = h.summary()
    assert set(summary) == {"count", "mean_s", "p50_s", "p95_s", "p99_s", "max_s", "min_s",
                            "sum_s", "counts"}
    assert summary["count"] == 200 == sum(summary["counts"].values())
    assert all(isinstance(k, str) for k in summary["counts"])
    assert summary["min_s"] <= summary["p50_s"] <= summary["p95_s"] <= summary["p99_s"] \
        <= summary["max_s"]
    assert json.loads(json.dumps(summary)) == summary


def test_merged_summaries_equal_a_histogram_of_the_union() -> None:
    a, b, c = _lognormal(700, 10), _lognormal(300, 11) * 3.0, _lognormal(50, 12) / 10.0
    union = _histogram(np.concatenate([a, b, c]))
    merged = LatencyHistogram.from_summaries(
        [_histogram(a).summary(), LatencyHistogram().summary(), {}, _histogram(b).summary(),
         _histogram(c).summary()])
    assert merged.counts == union.counts and merged.total == union.total == 1050
    got, want = merged.summary(), union.summary()
    assert got["counts"] == want["counts"] and got["count"] == want["count"]
    for key in ("mean_s", "p50_s", "p95_s", "p99_s", "max_s", "min_s", "sum_s"):
        assert got[key] == pytest.approx(want[key], rel=1e-5, abs=2e-6), key


def test_merging_nothing_is_empty() -> None:
    merged = LatencyHistogram.from_summaries([])
    assert merged.total == 0 and merged.percentile(50) is None
    assert LatencyHistogram.from_summaries([{}, {"count": 0}]).summary()["count"] == 0
