"""The evaluator pool (sr_dist.search.pool) over real Ray actors: formulas routed to their
owners and back in order, a replica killed mid-call replaced by the survivor until it has
restarted, an agent's in-flight requests bounded, and an error once every replica is gone.

The replicas are small stand-in actors with the EvaluatorActor's ``fit_many(expressions,
agent_id)`` (the real one imports JAX and compiles, far too slow here); they answer
``(replica index, expression text)`` so each result says who fitted it, and keep the types of
what they were sent (prepared formulas, or text).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from sr_dist.search.pool import EvaluatorPool, EvaluatorUnavailable, canonical_key
from sr_dist.search.routing import owner

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]

ray = pytest.importorskip("ray")

VARIABLES = ("x", "y")
#: Distinct structures (their canonical keys differ), then the same ones renamed or reordered.
TEXTS = [f"x**{i} + c0*y" for i in range(2, 30)] + ["x*y", "y*x", "c0*x", "k*x", "c0*y + x**5"]


@ray.remote(num_cpus=0, max_restarts=1, max_task_retries=0, max_concurrency=16)
class StandIn:
    """A replica: answers ``(index, expression)``; can die mid-call; counts concurrent calls
    per agent (and can hold calls until ``target`` of one agent's are running together)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.dying = False
        self.cond = threading.Condition()
        self.running: Counter[int] = Counter()
        self.peak: Counter[int] = Counter()
        self.target: dict[int, int] = {}
        self.received: list[str] = []

    def ready(self) -> tuple[int, bool]:
        return self.index, bool(ray.get_runtime_context().was_current_actor_reconstructed)

    def die_on_next_fit(self) -> None:
        self.dying = True

    def die(self) -> None:
        os._exit(1)

    def hold_until(self, agent_id: int, target: int) -> None:
        self.target[agent_id] = target

    def peaks(self) -> dict[int, int]:
        return dict(self.peak)

    def received_types(self) -> list[str]:
        return list(self.received)

    def fit_many(self, expressions: list[Any], agent_id: int,
                 starts: list[Any] | None = None) -> list[tuple[Any, ...]]:
        if self.dying:
            os._exit(1)  # the process goes while the caller waits on this call
        self.received.extend(type(e).__name__ for e in expressions)
        expressions = [str(e) for e in expressions]  # a prepared formula's str is its text
        with self.cond:
            self.running[agent_id] += 1
            self.peak[agent_id] = max(self.peak[agent_id], self.running[agent_id])
            self.cond.notify_all()
            target = self.target.get(agent_id)
            if target:
                self.cond.wait_for(lambda: self.running[agent_id] >= target, timeout=2.0)
        time.sleep(0.02)
        with self.cond:
            self.running[agent_id] -= 1
        if starts is not None:
            return [(self.index, e, start) for e, start in zip(expressions, starts, strict=True)]
        return [(self.index, e) for e in expressions]


def _replicas(n: int, **options: Any) -> list[Any]:
    handles = [StandIn.options(**options).remote(i) for i in range(n)] if options else \
        [StandIn.remote(i) for i in range(n)]
    assert ray.get([h.ready.remote() for h in handles], timeout=120) == [(i, False)
                                                                        for i in range(n)]
    return handles


def _when_back(handle: Any, timeout_s: float = 120.0) -> tuple[int, bool]:
    """``handle.ready()`` once the actor answers again (while it restarts, calls fail)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return tuple(ray.get(handle.ready.remote(), timeout=timeout_s))  # type: ignore[return-value]
        except ray.exceptions.RayActorError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _owners(replicas: int) -> list[int]:
    return [owner(canonical_key(VARIABLES, t), replicas) for t in TEXTS]


class _Clock:
    """A clock the test moves (the pool's down windows pass when the test says so)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def pair(ray_cluster: None) -> Iterator[list[Any]]:
    handles = _replicas(2)
    yield handles
    for h in handles:
        ray.kill(h)


def test_results_come_back_in_order_from_each_keys_owner(pair: list[Any]) -> None:
    owners = _owners(2)
    assert set(owners) == {0, 1}  # both replicas own some of the keys
    pool = EvaluatorPool(pair, VARIABLES)
    for agent in (0, 5):
        assert pool.fit_many(TEXTS, agent) == list(zip(owners, TEXTS, strict=True))
    # A structure goes to one replica whatever its spelling.
    by_text = dict(zip(TEXTS, owners, strict=True))
    assert by_text["x*y"] == by_text["y*x"] and by_text["c0*x"] == by_text["k*x"]
    assert by_text["c0*y + x**5"] == by_text["x**5 + c0*y"]
    # One at a time, each formula still lands on its owner.
    assert [pool.fit_many([t], 1)[0][0] for t in TEXTS[::4]] == owners[::4]
    assert pool.sent == [2 * owners.count(0) + owners[::4].count(0),
                         2 * owners.count(1) + owners[::4].count(1)]
    assert pool.resends == 0
    assert pool.fit_many([], 0) == []


def test_starts_are_routed_with_their_formulas(pair: list[Any]) -> None:
    owners = _owners(2)
    starts = [{"c0": float(i)} if i % 3 else None for i in range(len(TEXTS))]
    pool = EvaluatorPool(pair, VARIABLES)
    assert pool.fit_many(TEXTS, 2, starts) == list(zip(owners, TEXTS, starts, strict=True))
    assert pool.client(2).fit_many(TEXTS[:2], starts[:2]) == list(
        zip(owners[:2], TEXTS[:2], starts[:2], strict=True))
    with pytest.raises(ValueError, match="starts has 1 entries"):
        pool.fit_many(TEXTS[:2], 2, starts[:1])


def test_a_killed_replicas_keys_go_to_the_survivor_and_come_back(ray_cluster: None) -> None:
    handles = _replicas(2)
    owners = _owners(2)
    clock = _Clock()
    pool = EvaluatorPool(handles, VARIABLES, down_s=5.0, retry_s=60.0, clock=clock)
    assert pool.fit_many(TEXTS, 0) == list(zip(owners, TEXTS, strict=True))
    ray.get(handles[0].die_on_next_fit.remote())
    # Replica 0 dies during this call: its formulas are resent to replica 1, no error.
    assert pool.fit_many(TEXTS, 0) == [(1, t) for t in TEXTS]
    assert pool.resends == owners.count(0)
    # Ray restarts it; until the down window passes, the survivor keeps its keys.
    assert _when_back(handles[0]) == (0, True)
    assert pool.fit_many(TEXTS, 0) == [(1, t) for t in TEXTS]
    clock.now += 6.0
    assert pool.fit_many(TEXTS, 0) == list(zip(owners, TEXTS, strict=True))
    assert pool.resends == owners.count(0)  # nothing else was lost
    for h in handles:
        ray.kill(h)


def test_max_in_flight_bounds_one_agents_concurrent_calls(pair: list[Any]) -> None:
    pool = EvaluatorPool(pair, VARIABLES)
    target = pair[owner(canonical_key(VARIABLES, "x*y"), 2)]

    def flood(agent: int, max_in_flight: int) -> int:
        ray.get(target.hold_until.remote(agent, max_in_flight))
        client = pool.client(agent, max_in_flight=max_in_flight)
        results: list[Any] = []
        threads = [threading.Thread(target=lambda: results.append(client.fit_many(["x*y"])))
                   for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(results) == 6 and all(r == [(r[0][0], "x*y")] for r in results)
        return int(ray.get(target.peaks.remote()).get(agent, 0))

    assert flood(7, 2) == 2
    # The control: the stand-in does run an agent's calls side by side when allowed to.
    assert flood(8, 6) >= 3


def test_max_in_flight_below_one_is_refused(pair: list[Any]) -> None:
    with pytest.raises(ValueError, match="max_in_flight must be at least 1, got 0"):
        EvaluatorPool(pair, VARIABLES).client(0, max_in_flight=0)
    with pytest.raises(ValueError, match="at least one replica"):
        EvaluatorPool([], VARIABLES)


def test_a_replica_gone_for_good_leaves_its_keys_on_the_survivor(ray_cluster: None) -> None:
    handles = _replicas(2, max_restarts=0)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(handles[1].die.remote(), timeout=60)
    owners = _owners(2)
    clock = _Clock()
    pool = EvaluatorPool(handles, VARIABLES, down_s=5.0, retry_s=60.0, clock=clock)
    for _ in range(2):  # each time its down window has passed it is tried, and passed over
        assert pool.fit_many(TEXTS, 0) == [(0, t) for t in TEXTS]
        clock.now += 10.0
    assert pool.resends == 2 * owners.count(1)
    ray.kill(handles[0])


def test_every_replica_dead_raises_after_retry_s(ray_cluster: None) -> None:
    handles = _replicas(2, max_restarts=0)
    for h in handles:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(h.die.remote(), timeout=60)
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        time.sleep(seconds)

    pool = EvaluatorPool(handles, VARIABLES, retry_s=2.0, down_s=0.1, sleep=sleep)
    with pytest.raises(EvaluatorUnavailable, match=r"kept failing for 2 s \(\d+ formula"):
        pool.fit_many(TEXTS[:6], 0)
    # It backed off between tries, and never slept past its retry window.
    assert pauses and sum(pauses) <= 2.0
    assert pool.resends > 0


def test_parsed_formulas_travel_prepared_and_the_rest_as_text(ray_cluster: None) -> None:
    [solo] = _replicas(1)
    texts = ["c0*x + y", "x +", "sin(k*y)"]
    assert EvaluatorPool([solo], VARIABLES).fit_many(texts, 0) == [(0, t) for t in texts]
    assert ray.get(solo.received_types.remote()) == ["PreparedFormula", "str", "PreparedFormula"]
    EvaluatorPool([solo], VARIABLES, prepare=False).fit_many(texts, 0)
    assert ray.get(solo.received_types.remote())[3:] == ["str"] * 3
    ray.kill(solo)
