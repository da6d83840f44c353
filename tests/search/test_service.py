"""The batching service over the real Evaluator (no Ray): concurrent agents, one fit per
canonical formula, constants under each caller's own names, failures isolated per batch."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import numpy as np
import pytest

from sr_dist.data import load_dataset
from sr_dist.evaluator import Evaluator
from sr_dist.evaluator.evaluator import SIZE_CLASSES, Bucket, bucket_for
from sr_dist.evaluator.program import lower
from sr_dist.formula import free_constant_prefix, parse_formula
from sr_dist.search.actors import canonical_key
from sr_dist.search.service import (
    BatchingEvaluator,
    EvaluationFailed,
    search_warmup,
    warmup_formulas,
)


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    dataset = load_dataset("feynman:I.12.11", n=10_000)
    return Evaluator(dataset, compilation_cache_dir=_cache_dir())


def _cache_dir() -> str:
    import os

    return os.environ.get("SR_DIST_JAX_CACHE_DIR", os.path.expanduser("~/.cache/sr-dist/jax"))


def _service(evaluator: Evaluator, **kw: Any) -> BatchingEvaluator:
    variables = list(evaluator.dataset.feature_names)
    return BatchingEvaluator(evaluator, key=lambda t: canonical_key(variables, t), **kw)


def test_two_agents_share_a_batch_and_a_fit(evaluator: Evaluator) -> None:
    evaluator.clear_cache()
    service = _service(evaluator, max_batch=64, max_wait_s=0.5)
    fits_before = evaluator.stats()["fits"]

    async def scenario() -> tuple[list[Any], list[Any]]:
        return tuple(await asyncio.gather(  # type: ignore[return-value]
            service.fit_many(["a*q*(Ef + B*v*sin(theta))", "k*q"], 0),
            service.fit_many(["q*(B*v*sin(theta) + Ef)*b", "not a formula ("], 1),
        ))

    first, second = asyncio.run(scenario())
    # The same structure from two agents: one fit, each caller sees its own constant name.
    assert first[0].status == second[0].status == "ok"
    assert set(first[0].constants) == {"a"} and set(second[0].constants) == {"b"}
    assert first[0].constants["a"] == pytest.approx(second[0].constants["b"])
    assert first[0].canonical == second[0].canonical
    assert first[0].val_nmse < 1e-8
    assert first[1].status == "ok" and second[1].status == "invalid"
    stats = service.stats()
    assert stats["fits"] - fits_before == 2  # two distinct fitted structures for four requests
    batching = stats["batching"]
    assert batching["batches"] == 1 and batching["mixed_agent_batches"] == 1
    assert batching["cross_agent_duplicates"] == 1
    assert batching["batch_sizes"] == {4: 1}
    assert stats["search_fits"] == stats["fits"]  # no warm-up here


def test_batching_off_fits_one_formula_per_batch(evaluator: Evaluator) -> None:
    service = _service(evaluator, max_batch=1, max_wait_s=0.0)

    async def scenario() -> list[Any]:
        return await service.fit_many(["c*q*Ef", "c*q*B", "c*q*v"], 0)

    results = asyncio.run(scenario())
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert service.stats()["batching"]["batch_sizes"] == {1: 3}


def test_warmup_compiles_then_forgets(evaluator: Evaluator) -> None:
    service = _service(evaluator, max_batch=8, max_wait_s=0.0)
    formulas = warmup_formulas("q", [2, 4])
    assert formulas == ["c0 + c1*q", "c0 + c1*q + c2*q**2 + c3*q**3"]
    report = asyncio.run(service.warmup(formulas))
    assert report["formulas"] == 2 and report["fits"] == 2
    stats = service.stats()
    assert stats["warmup"]["fits"] == 2 and stats["cache_entries"] == 0
    assert stats["search_fits"] == stats["fits"] - 2
    # With local searches too: each formula is fitted again from a start, then forgotten.
    local = asyncio.run(service.warmup(formulas, local=True))
    assert local["fits"] == 4
    assert evaluator.stats()["local_fits"] >= 2 and service.stats()["cache_entries"] == 0


# Variables that the old text rewriting (every "w" replaced by a longer prefix) mangled, and
# one that a constant named "w0" would shadow.
WARMUP_FEATURES = [("wavelength",), ("w0",), ("wavelength", "w0"), ("w0", "ww1", "wavelength"),
                   ("c0", "k1", "a2", "w3", "cst4")]


@pytest.mark.parametrize("features", WARMUP_FEATURES, ids="-".join)
def test_warmup_formulas_keep_the_variable_and_hit_their_buckets(
        features: tuple[str, ...]) -> None:
    const_buckets = (2, 4, 8, 16)
    formulas = search_warmup(features, const_buckets)
    assert len(formulas) == 3  # the buckets up to 8 constants
    for k, text in zip((2, 4, 8), formulas):
        f = parse_formula(text, features)
        assert f.variables == (features[0],), text
        assert len(f.constants) == k, text
        assert not set(f.constants) & set(features), text
        prog = lower(f.canonical_tree, features, [f"c{j}" for j in range(k)])
        assert bucket_for(prog, const_buckets) == Bucket(k, SIZE_CLASSES[0]), text


def test_warmup_formulas_text_and_constant_names() -> None:
    assert warmup_formulas("wavelength", [2], avoid=["wavelength", "w0"]) == ["c0 + c1*wavelength"]
    assert warmup_formulas("c0", [2]) == ["k0 + k1*c0"]
    assert warmup_formulas("q", [1, 0]) == ["c0", "q"]
    assert free_constant_prefix(["c", "c_0", "cc0", "wavelength"]) == "c"
    assert free_constant_prefix(["c0", "k1", "a2", "w3", "cst4"]) == "cstcst"
    assert free_constant_prefix(["x"], preferred=("w",)) == "w"
    assert free_constant_prefix(["w0", "ww1"], preferred=("w",)) == "www"


def test_warmup_on_a_wavelength_dataset_compiles_the_intended_buckets(tmp_path: Any) -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(1.0, 3.0, size=(500, 2))
    y = 1.5 + 0.5 * X[:, 0] - 0.25 * X[:, 0] ** 2 + X[:, 1]
    path = tmp_path / "wave.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header="wavelength,w0,y",
               comments="", fmt="%.17g")
    dataset = load_dataset(f"csv:{path}", seed=0)
    ev = Evaluator(dataset, compilation_cache_dir=_cache_dir())
    service = _service(ev, max_batch=8, max_wait_s=0.0)
    formulas = search_warmup(dataset.feature_names, ev.options.const_buckets)
    report = asyncio.run(service.warmup(formulas))
    assert report["formulas"] == 3 and report["fits"] == 3
    stats = service.stats()
    assert stats["buckets"] == {"k2-small": 1, "k4-small": 1, "k8-small": 1}
    assert stats["invalid"] == 0 and stats["errors"] == 0


class _FlakyEvaluator:
    """Fails its first batch (as a crashed device would), then works."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def fit_many(self, formulas: list[str]) -> list[str]:
        with self.lock:
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("device lost")
        return [f"fit:{f}" for f in formulas]

    def stats(self) -> dict[str, Any]:
        return {"fits": 0}


def test_a_failed_batch_fails_its_callers_only() -> None:
    flaky = _FlakyEvaluator()
    service = BatchingEvaluator(flaky, max_batch=4, max_wait_s=0.0)

    async def scenario() -> list[str]:
        with pytest.raises(EvaluationFailed, match="device lost"):
            await service.fit_many(["x"], 0)
        return await service.fit_many(["y", "z"], 1)

    assert asyncio.run(scenario()) == ["fit:y", "fit:z"]
    assert service.stats()["failed_batches"] == 1


def test_cancelled_caller_and_close() -> None:
    service = BatchingEvaluator(_FlakyEvaluator(), max_batch=4, max_wait_s=10.0)

    async def scenario() -> None:
        task = asyncio.ensure_future(service.fit_many(["x"], 0))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert service.stats()["batching"]["queue_depth"] == 0
        pending = asyncio.ensure_future(service.fit_many(["y"], 1))
        await asyncio.sleep(0.05)
        await service.close()
        with pytest.raises(EvaluationFailed, match="shut down"):
            await pending

    asyncio.run(scenario())


# --- backpressure (max_queue) and the latency stats ----------------------------------------------

class _SlowEvaluator:
    """The service's evaluator protocol (``fit_many``, ``stats``), taking a while per batch so
    requests pile up behind it; it keeps the batches it was given."""

    def __init__(self, seconds: float = 0.01) -> None:
        self.seconds = seconds
        self.fits = 0
        self.batches: list[list[str]] = []

    def fit_many(self, formulas: list[str]) -> list[str]:
        time.sleep(self.seconds)
        self.batches.append(list(formulas))
        self.fits += len(formulas)
        return [f"fit:{f}" for f in formulas]

    def stats(self) -> dict[str, Any]:
        return {"fits": self.fits}


def _flood(service: BatchingEvaluator,
           requests: list[tuple[int, list[str]]]) -> tuple[list[list[Any]], int]:
    """Send every request at once; return their results and the deepest queue sampled."""
    deepest = 0

    async def sample(stop: asyncio.Event) -> None:
        nonlocal deepest
        while not stop.is_set():
            deepest = max(deepest, service.stats()["queue_depth"])
            # A look every millisecond (hundreds over a flood); back to back, the full stats
            # snapshots held the GIL from the batches' threads and the flood took seconds.
            await asyncio.sleep(0.001)

    async def scenario() -> list[list[Any]]:
        stop = asyncio.Event()
        sampler = asyncio.ensure_future(sample(stop))
        results = await asyncio.gather(*(service.fit_many(texts, agent)
                                         for agent, texts in requests))
        stop.set()
        await sampler
        return list(results)

    return asyncio.run(scenario()), deepest


def _requests(n: int, size: int) -> list[tuple[int, list[str]]]:
    return [(i % 5, [f"c*x{i}_{j}" for j in range(size)]) for i in range(n)]


def test_max_queue_bounds_the_queue_and_every_request_still_gets_its_results() -> None:
    service = BatchingEvaluator(_SlowEvaluator(), max_batch=4, max_wait_s=0.0, max_queue=6)
    requests = _requests(40, 3)
    results, deepest = _flood(service, requests)
    assert results == [[f"fit:{t}" for t in texts] for _, texts in requests]
    stats = service.stats()
    batching = stats["batching"]
    assert 0 < deepest <= 6
    assert 3 <= batching["max_queue_depth"] <= 6
    assert batching["formulas"] == 120 and batching["requests"] == 40
    held = stats["held_back"]
    assert held["requests"] > 0
    assert held["wait"]["count"] == held["requests"]
    # Every formula's queue wait and every request's latency were counted once.
    assert stats["queue_wait"]["count"] == batching["queue_wait"]["count"] == 120
    assert stats["latency"]["count"] == 40
    assert stats["queue_depth"] == 0 and batching["in_flight_requests"] == 0


def test_without_max_queue_the_same_flood_queues_everything() -> None:
    # The control for the test above: unbounded, the whole flood sits in the queue at once.
    service = BatchingEvaluator(_SlowEvaluator(), max_batch=4, max_wait_s=0.0)
    requests = _requests(40, 3)
    results, _ = _flood(service, requests)
    assert results == [[f"fit:{t}" for t in texts] for _, texts in requests]
    stats = service.stats()
    assert stats["batching"]["max_queue_depth"] > 6
    assert stats["held_back"]["requests"] == 0 and stats["held_back"]["wait"]["count"] == 0


def test_a_request_larger_than_max_queue_goes_through_alone() -> None:
    slow = _SlowEvaluator()
    service = BatchingEvaluator(slow, max_batch=4, max_wait_s=0.0, max_queue=3)
    big = [f"c*q{j}" for j in range(10)]
    requests = [(0, ["c*a", "c*b"]), (1, big), (2, ["c*d", "c*e"])]
    results, _ = _flood(service, requests)
    assert results == [[f"fit:{t}" for t in texts] for _, texts in requests]
    stats = service.stats()
    assert stats["batching"]["max_queue_depth"] == len(big)  # it went in on its own
    assert stats["held_back"]["requests"] >= 1
    # No batch mixed the big request's formulas with another request's.
    for batch in slow.batches:
        assert set(batch) <= set(big) or not set(batch) & set(big)
    assert stats["queue_wait"]["count"] == 14 and stats["latency"]["count"] == 3


def test_empty_requests_are_answered_without_queueing() -> None:
    service = BatchingEvaluator(_SlowEvaluator(), max_batch=4, max_wait_s=0.0, max_queue=1)

    async def scenario() -> list[list[Any]]:
        return list(await asyncio.gather(service.fit_many([], 0), service.fit_many(["c*x"], 1)))

    assert asyncio.run(scenario()) == [[], ["fit:c*x"]]
    stats = service.stats()
    assert stats["queue_wait"]["count"] == 1 and stats["latency"]["count"] == 1


@pytest.mark.parametrize("max_queue", [0, -3])
def test_max_queue_below_one_is_refused(max_queue: int) -> None:
    with pytest.raises(ValueError, match=f"max_queue must be at least 1, got {max_queue}"):
        BatchingEvaluator(_SlowEvaluator(), max_batch=4, max_wait_s=0.0, max_queue=max_queue)


def test_latency_summaries_over_the_real_evaluator(evaluator: Evaluator) -> None:
    evaluator.clear_cache()
    service = _service(evaluator, max_batch=8, max_wait_s=0.01, max_queue=4)
    requests = [(0, ["c*q*Ef", "c*q*B"]), (1, ["c*q*v", "c*q*Ef"]), (2, ["c*B*v"]),
                (0, ["c*q + B"]), (1, ["q*Ef*c", "c*v"])]

    async def scenario() -> list[list[Any]]:
        return list(await asyncio.gather(*(service.fit_many(t, a) for a, t in requests)))

    results = asyncio.run(scenario())
    assert [len(r) for r in results] == [2, 2, 1, 1, 2]
    assert all(r.status == "ok" for rs in results for r in rs)
    stats = service.stats()
    assert stats["batching"]["max_queue_depth"] <= 4
    assert stats["queue_wait"]["count"] == sum(len(t) for _, t in requests) == 8
    assert stats["latency"]["count"] == len(requests)
    for key in ("queue_wait", "latency"):
        summary = stats[key]
        assert 0.0 <= summary["p50_s"] <= summary["p99_s"] <= summary["max_s"]
    # A request's latency includes its formulas' queue wait.
    assert stats["latency"]["max_s"] >= stats["queue_wait"]["max_s"]


def test_a_held_back_request_is_not_overtaken_by_later_ones() -> None:
    service = BatchingEvaluator(_SlowEvaluator(0.005), max_batch=2, max_wait_s=0.0, max_queue=4)
    order: list[str] = []

    async def stream(agent: int) -> None:
        for i in range(6):
            await service.fit_many([f"c*x{agent}_{i}", f"c*y{agent}_{i}"], agent)
            order.append(f"stream{agent}-{i}")

    async def big() -> None:
        await asyncio.sleep(0)  # after both streams' first requests are queued
        await service.fit_many([f"c*z{j}" for j in range(4)], 9)  # fits max_queue exactly
        order.append("big")

    async def scenario() -> None:
        await asyncio.gather(stream(0), stream(1), big())

    asyncio.run(scenario())
    assert service.stats()["held_back"]["requests"] >= 1
    # It arrived third: with first-come admission it goes once the first two leave the queue.
    assert order.index("big") <= 4, order


def test_memo_key_remembers_the_latest_texts_up_to_its_size() -> None:
    from sr_dist.search.service import memo_key

    seen: list[str] = []

    def key(text: str) -> str:
        seen.append(text)
        return text.upper()

    cached = memo_key(key, size=2)
    assert [cached(t) for t in ("a", "b", "a", "c", "a", "b")] == ["A", "B", "A", "C", "A", "B"]
    assert seen == ["a", "b", "c", "b"]  # "a" stayed (used recently), "b" was dropped for "c"
    with pytest.raises(ValueError, match="at least 1"):
        memo_key(key, size=0)


def test_starts_reach_the_evaluator_and_come_back_local(evaluator: Evaluator) -> None:
    evaluator.clear_cache()
    service = _service(evaluator, max_batch=64, max_wait_s=0.5)

    async def scenario() -> tuple[list[Any], list[Any]]:
        return tuple(await asyncio.gather(  # type: ignore[return-value]
            service.fit_many(["a*q*Ef + b", "k*q*v"], 0, [{"a": 1.0, "b": 0.0}, None]),
            service.fit_many(["m*q*B*v*sin(theta)"], 1, [{"m": 0.9}]),
        ))

    first, second = asyncio.run(scenario())
    assert [r.local for r in first] == [True, False] and second[0].local
    assert second[0].status == "ok" and set(second[0].constants) == {"m"}


# --- pipelining (an evaluator with begin / running / finish) -------------------------------------

class _PipelinedEvaluator:
    """``begin`` "dispatches" a batch that the device is busy with for ``seconds``; ``wait``
    and ``finish`` wait for it. It logs the order of calls and fails batches holding ``bad``."""

    def __init__(self, seconds: float = 0.05) -> None:
        self.seconds = seconds
        self.log: list[tuple[str, tuple[str, ...]]] = []
        self.fits = 0
        self._lock = threading.Lock()

    def begin(self, formulas: list[str], starts: Any = None) -> dict[str, Any]:
        if "bad" in formulas:
            raise RuntimeError("device lost")
        with self._lock:
            self.log.append(("begin", tuple(formulas)))
        return {"formulas": tuple(formulas), "done_at": time.monotonic() + self.seconds}

    def wait(self, handle: dict[str, Any]) -> None:
        time.sleep(max(0.0, handle["done_at"] - time.monotonic()))

    def finish(self, handle: dict[str, Any]) -> list[str]:
        time.sleep(max(0.0, handle["done_at"] - time.monotonic()))
        with self._lock:
            self.log.append(("finish", handle["formulas"]))
            self.fits += len(handle["formulas"])
        return [f"fit:{f}" for f in handle["formulas"]]

    def fit_many(self, formulas: list[str], starts: Any = None) -> list[str]:
        return self.finish(self.begin(formulas, starts))

    def stats(self) -> dict[str, Any]:
        return {"fits": self.fits}


def _two_agents(service: BatchingEvaluator, first: list[str], second: list[str]) -> list[Any]:
    async def scenario() -> list[Any]:
        a = asyncio.ensure_future(service.fit_many(first, 0))
        await asyncio.sleep(0.01)  # the first batch is dispatched alone
        b = asyncio.ensure_future(service.fit_many(second, 1))
        return list(await asyncio.gather(a, b, return_exceptions=True))

    return asyncio.run(scenario())


def test_the_next_batch_is_dispatched_while_the_device_fits_the_last() -> None:
    fake = _PipelinedEvaluator(0.2)
    service = BatchingEvaluator(fake, max_batch=4, max_wait_s=0.0)
    first, second = _two_agents(service, ["x", "y"], ["z"])
    assert first == ["fit:x", "fit:y"] and second == ["fit:z"]
    assert [event for event, _ in fake.log] == ["begin", "begin", "finish", "finish"]
    assert fake.log[2] == ("finish", ("x", "y"))  # answered in the order they were begun
    assert service.stats()["busy_s"] < 0.2 * 2 + 0.15  # overlapping batches counted once


def test_without_pipelining_one_batch_at_a_time() -> None:
    fake = _PipelinedEvaluator(0.1)
    service = BatchingEvaluator(fake, max_batch=4, max_wait_s=0.0, pipeline=False)
    first, second = _two_agents(service, ["x"], ["z"])
    assert first == ["fit:x"] and second == ["fit:z"]
    assert [event for event, _ in fake.log] == ["begin", "finish", "begin", "finish"]


def test_a_batch_the_device_is_done_with_is_answered_before_the_next_is_packed() -> None:
    fake = _PipelinedEvaluator(0.0)
    service = BatchingEvaluator(fake, max_batch=4, max_wait_s=0.0)
    _two_agents(service, ["x"], ["z"])
    assert [event for event, _ in fake.log] == ["begin", "finish", "begin", "finish"]


def test_a_batch_that_fails_to_dispatch_fails_its_callers_only() -> None:
    fake = _PipelinedEvaluator(0.2)
    service = BatchingEvaluator(fake, max_batch=4, max_wait_s=0.0)

    async def scenario() -> list[Any]:
        a = asyncio.ensure_future(service.fit_many(["x"], 0))
        await asyncio.sleep(0.01)
        b = asyncio.ensure_future(service.fit_many(["bad"], 1))
        done = list(await asyncio.gather(a, b, return_exceptions=True))
        return [*done, await service.fit_many(["w"], 0)]

    first, second, again = asyncio.run(scenario())
    assert first == ["fit:x"] and again == ["fit:w"]
    assert isinstance(second, EvaluationFailed) and "device lost" in str(second)
    assert service.stats()["failed_batches"] == 1
