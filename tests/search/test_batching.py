"""The micro-batching core: batch formation, dedup and stats, driven by an explicit clock."""

from __future__ import annotations

from typing import Any

import pytest

from sr_dist.search.batching import MicroBatcher

# Conformance cases: requests (agent, expressions, time), then `take` at a time; expected
# batches as tuples of unique expressions, and which tickets complete after each batch.
CASES: list[dict[str, Any]] = [
    {
        "name": "full batch is due at once",
        "max_batch": 3, "max_wait_s": 10.0,
        "requests": [(0, ["a", "b"], 0.0), (1, ["c", "d"], 0.0)],
        "takes": [0.0, 0.0, 0.0],
        "batches": [("a", "b", "c"), None, None],
        "completed": [[0], [], []],
    },
    {
        "name": "a partial batch waits for max_wait_s",
        "max_batch": 8, "max_wait_s": 0.5,
        "requests": [(0, ["a"], 0.0), (1, ["b"], 0.2)],
        "takes": [0.1, 0.49, 0.5],
        "batches": [None, None, ("a", "b")],
        "completed": [[], [], [0, 1]],
    },
    {
        "name": "identical strings are fitted once, even across agents",
        "max_batch": 8, "max_wait_s": 0.0,
        "requests": [(0, ["x*y", "x"], 0.0), (1, ["x*y"], 0.0)],
        "takes": [0.0],
        "batches": [("x*y", "x")],
        "completed": [[0, 1]],
    },
    {
        "name": "max_batch=1 switches batching off and splits a request",
        "max_batch": 1, "max_wait_s": 0.0,
        "requests": [(0, ["a", "b"], 0.0), (1, ["c"], 0.0)],
        "takes": [0.0, 0.0, 0.0, 0.0],
        "batches": [("a",), ("b",), ("c",), None],
        "completed": [[], [0], [1], []],
    },
    {
        "name": "a duplicate does not use a batch slot",
        "max_batch": 2, "max_wait_s": 0.0,
        "requests": [(0, ["a", "a", "b", "c"], 0.0)],
        "takes": [0.0, 0.0],
        "batches": [("a", "b"), ("c",)],
        "completed": [[], [0]],
    },
]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_batch_formation(case: dict[str, Any]) -> None:
    batcher: MicroBatcher[str] = MicroBatcher(case["max_batch"], case["max_wait_s"])
    tickets = {}
    for agent, expressions, at in case["requests"]:
        ticket, done = batcher.submit(agent, expressions, at)
        assert done is None
        tickets[ticket] = expressions
    for at, expected, completed in zip(case["takes"], case["batches"], case["completed"]):
        batch = batcher.take(at)
        if expected is None:
            assert batch is None
            continue
        assert batch is not None and batch.expressions == expected
        finished = batcher.complete(batch, [f"fit({e})" for e in batch.expressions])
        assert [d.ticket for d in finished] == completed
        for d in finished:  # every request gets its own results, in its own order
            assert d.results == tuple(f"fit({e})" for e in tickets[d.ticket])


def test_stats_count_mixed_batches_and_cross_agent_duplicates() -> None:
    # The key says "b*a" and "a*b" are the same formula (as canonical forms would).
    batcher: MicroBatcher[str] = MicroBatcher(16, 0.0, key=lambda t: "".join(sorted(t)))
    batcher.submit(0, ["a*b", "c"], 0.0)
    batcher.submit(1, ["b*a"], 0.0)
    batch = batcher.take(0.0)
    assert batch is not None and batch.mixed and batch.agents == {0, 1}
    batcher.complete(batch, ["r1", "r2", "r3"])
    batcher.submit(0, ["d"], 1.0)
    solo = batcher.take(1.0)
    assert solo is not None and not solo.mixed
    batcher.complete(solo, ["r4"])
    stats = batcher.stats()
    assert stats.batches == 2
    assert stats.mixed_agent_batches == 1
    assert stats.cross_agent_duplicates == 1
    assert stats.duplicate_formulas == 0
    assert stats.batch_sizes == {1: 1, 3: 1}
    assert stats.mean_batch_size == 2.0
    assert stats.requests == 3 and stats.formulas == 4
    assert stats.queue_depth == 0 and stats.max_queue_depth == 3
    assert stats.in_flight_requests == 0


def test_wait_time_and_force() -> None:
    batcher: MicroBatcher[str] = MicroBatcher(4, 1.0)
    assert batcher.wait_time(0.0) is None
    batcher.submit(0, ["a"], 2.0)
    assert batcher.wait_time(2.25) == pytest.approx(0.75)
    assert batcher.take(2.25) is None
    forced = batcher.take(2.25, force=True)
    assert forced is not None and forced.expressions == ("a",)


def test_empty_request_completes_immediately() -> None:
    batcher: MicroBatcher[str] = MicroBatcher(4, 1.0)
    _, done = batcher.submit(3, [], 0.0)
    assert done is not None and done.results == () and done.agent_id == 3
    assert batcher.wait_time(0.0) is None


def test_cancelled_request_drops_its_queued_formulas() -> None:
    batcher: MicroBatcher[str] = MicroBatcher(8, 0.0)
    gone, _ = batcher.submit(0, ["a", "b"], 0.0)
    kept, _ = batcher.submit(1, ["c"], 0.0)
    batcher.cancel(gone)
    batch = batcher.take(0.0)
    assert batch is not None and batch.expressions == ("c",)
    assert [d.ticket for d in batcher.complete(batch, ["r"])] == [kept]


def test_result_count_mismatch_is_an_error() -> None:
    batcher: MicroBatcher[str] = MicroBatcher(8, 0.0)
    batcher.submit(0, ["a", "b"], 0.0)
    batch = batcher.take(0.0)
    assert batch is not None
    with pytest.raises(ValueError, match="2 formulas but got 1"):
        batcher.complete(batch, ["only one"])


@pytest.mark.parametrize("max_batch, max_wait_s", [(0, 0.1), (4, -1.0)])
def test_bad_policy_is_refused(max_batch: int, max_wait_s: float) -> None:
    with pytest.raises(ValueError):
        MicroBatcher(max_batch, max_wait_s)


def test_idle_evaluator_waits_for_the_agent_it_just_served() -> None:
    batcher: MicroBatcher[str] = MicroBatcher(64, 0.5)
    batcher.submit(1, ["b"], 0.0)  # queued while the evaluator was busy with agent 0
    # The evaluator became idle at 10.0: agent 1 has waited long, but the batch still
    # gives agent 0 up to max_wait_s to send its next request.
    assert batcher.take(10.2, idle_since=10.0) is None
    assert batcher.wait_time(10.2, idle_since=10.0) == pytest.approx(0.3)
    batcher.submit(0, ["a"], 10.3)
    batch = batcher.take(10.5, idle_since=10.0)
    assert batch is not None and batch.mixed and batch.expressions == ("b", "a")


def test_batch_goes_once_every_expected_agent_is_queued() -> None:
    batcher: MicroBatcher[str] = MicroBatcher(64, 100.0)
    batcher.expect({0, 1})
    batcher.submit(0, ["a"], 0.0)
    assert batcher.take(0.0) is None
    batcher.submit(1, ["b"], 0.0)
    batch = batcher.take(0.0)
    assert batch is not None and batch.agents == {0, 1}
    batcher.expect({0})  # agent 1 finished
    batcher.submit(0, ["c"], 1.0)
    assert batcher.wait_time(1.0) == 0.0
    batcher.cancel(batcher.submit(1, ["late"], 1.0)[0])
    solo = batcher.take(1.0)
    assert solo is not None and solo.expressions == ("c",)


def test_starts_travel_with_their_formulas_and_a_full_fit_wins_a_duplicate() -> None:
    b: MicroBatcher[str] = MicroBatcher(max_batch=8, max_wait_s=0.0)
    b.submit(0, ["x", "x*y", "y"], 0.0, starts=[{"c0": 1.5}, None, {"c0": 2.0}])
    b.submit(1, ["y", "z"], 0.0, starts=[None, {"c1": 3.0}])
    batch = b.take(0.0)
    assert batch is not None
    assert batch.expressions == ("x", "x*y", "y", "z")
    # "y" came with a start from agent 0 and without one from agent 1: the full fit serves both.
    assert batch.starts == ({"c0": 1.5}, None, None, {"c1": 3.0})
    done = b.complete(batch, ["rx", "rxy", "ry", "rz"])
    assert sorted((d.agent_id, d.results) for d in done) == [(0, ("rx", "rxy", "ry")), (1, ("ry", "rz"))]


def test_a_batch_without_starts_has_none_and_a_short_starts_list_is_refused() -> None:
    b: MicroBatcher[str] = MicroBatcher(max_batch=8, max_wait_s=0.0)
    b.submit(0, ["x", "y"], 0.0, starts=[None, None])
    batch = b.take(0.0)
    assert batch is not None and batch.starts == ()
    with pytest.raises(ValueError, match="starts has 1 entries for 2 formulas"):
        b.submit(0, ["x", "y"], 0.0, starts=[None])


def test_prepared_formulas_reach_the_evaluator_and_bring_their_own_keys() -> None:
    from sr_dist.evaluator.prepared import prepare_text
    from sr_dist.formula import parse_formula

    names = ("x", "y")
    keyed: list[str] = []

    def key(text: str) -> str:  # only for the formulas that came as text
        keyed.append(text)
        return text

    b: MicroBatcher[str] = MicroBatcher(max_batch=8, max_wait_s=0.0, key=key)
    mine, theirs = prepare_text("a*x + y", names), prepare_text("y + b*x", names)
    b.submit(0, [mine, "sin(x)"], 0.0)
    b.submit(1, [theirs, mine], 0.0)  # theirs is mine up to names and order
    batch = b.take(0.0)
    assert batch is not None
    assert batch.expressions == ("a*x + y", "sin(x)", "y + b*x")
    assert batch.items == (mine, "sin(x)", theirs)  # what the evaluator gets
    assert keyed == ["sin(x)"]
    assert b.stats().cross_agent_duplicates == 1 and b.stats().duplicate_formulas == 1
    only_text = MicroBatcher[str](max_batch=8, max_wait_s=0.0)
    only_text.submit(0, ["x", parse_formula("b + a*x", names), 3], 0.0)  # anything else: text
    plain = only_text.take(0.0)
    assert plain is not None and plain.formulas == ()
    assert plain.items == ("x", "b + a*x", "3")
