"""SeenIds: exact for every id that can be resent, bounded however long the run."""

from __future__ import annotations

import pytest

from sr_dist.results import candidate_id
from sr_dist.results.dedup import SeenIds


def _ids(run: str, agent: int, steps: range, per_step: int = 3) -> list[str]:
    return [candidate_id(run, agent, s, i) for s in steps for i in range(per_step)]


def test_new_ids_are_accepted_and_repeats_dropped() -> None:
    seen = SeenIds("run:1")  # a run id with ':' parses from the right
    first = _ids("run:1", 0, range(5)) + _ids("run:1", 1, range(5))
    assert all(seen.add(cid) for cid in first)
    assert not any(seen.add(cid) for cid in first)
    assert all(cid in seen for cid in first)
    assert candidate_id("run:1", 0, 2, 99) not in seen
    assert seen.add(candidate_id("run:1", 0, 2, 99))  # a new index of an old step is new
    assert seen.last_steps() == {0: 4, 1: 4}


def test_resends_inside_the_window_are_dropped_and_new_rows_accepted() -> None:
    seen = SeenIds("r", window_steps=8)
    for step in range(100):
        for cid in _ids("r", 0, range(step, step + 1)):
            assert seen.add(cid)
        # What a sink can resend: its last few batches (fewer than the window's steps).
        for back in range(min(step + 1, 8)):
            for cid in _ids("r", 0, range(step - back, step - back + 1)):
                assert not seen.add(cid), (step, back)
    # Far behind the window: counts as written (a sink never sends that far back).
    assert candidate_id("r", 0, 3, 0) in seen and not seen.add(candidate_id("r", 0, 3, 7))
    # Steps only grow: the next ones are new.
    assert seen.add(candidate_id("r", 0, 100, 0)) and seen.add(candidate_id("r", 0, 250, 0))


def test_steps_that_skip_numbers_stay_exact_inside_the_window() -> None:
    # The window counts distinct steps seen, not step numbers: an agent whose turns jump
    # (turns without rows, a resumed agent's offset) keeps its recent ids exact.
    seen = SeenIds("r", window_steps=4)
    steps = [0, 10, 500, 501, 10_000]
    for step in steps:
        assert seen.add(candidate_id("r", 7, step, 0))
    for step in steps[1:]:
        assert candidate_id("r", 7, step, 0) in seen
        assert candidate_id("r", 7, step, 1) not in seen  # exact: same step, other index
    assert candidate_id("r", 7, 0, 1) in seen  # step 0 fell below the floor


def test_memory_is_bounded_after_200k_rows() -> None:
    seen = SeenIds("run-big", window_steps=256)
    agents, steps, per_step = 4, 10_000, 5  # 200,000 ids
    for step in range(steps):
        for agent in range(agents):
            for index in range(per_step):
                assert seen.add(f"run-big:{agent}:{step}:{index}")
    assert seen.entries == agents * 256 * per_step  # 5,120 entries, not 200,000
    # Every id counts as seen (those below the floor as well) and a resend changes nothing.
    assert not seen.add("run-big:3:9999:4") and not seen.add("run-big:0:17:2")
    assert seen.entries == agents * 256 * per_step
    assert seen.last_steps() == dict.fromkeys(range(agents), steps - 1)


@pytest.mark.parametrize("cid", ["hand-made-1", "other-run:0:1:2", "r:0:1", "r:0:1:2:3",
                                 "r:01:1:2", "r:0:+1:2", "r:0:1: 2", "r:a:b:c"])
def test_ids_of_another_shape_fall_back_to_an_exact_set(cid: str) -> None:
    seen = SeenIds("r", window_steps=1)
    for step in range(50):  # push the floor of agent 0 high
        seen.add(candidate_id("r", 0, step, 1))
    assert cid not in seen and seen.add(cid)
    assert cid in seen and not seen.add(cid)


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window_steps must be a positive integer"):
        SeenIds("r", window_steps=0)


def test_a_step_of_many_batches_costs_one_range() -> None:
    # The scripted soak proposer's turns: 16 calls of 64 formulas, 1,024 rows in one step.
    seen = SeenIds("r", window_steps=8)
    for step in range(40):
        for call in reversed(range(16)):  # batches may land out of order
            for index in range(call * 64, call * 64 + 64):
                assert seen.add(candidate_id("r", 0, step, index))
    assert seen.ranges == 8 and seen.entries == 8 * 1024
    assert candidate_id("r", 0, 39, 1023) in seen and candidate_id("r", 0, 39, 1024) not in seen
    assert not seen.add(candidate_id("r", 0, 35, 500))


def test_ranges_merge_and_split_exactly() -> None:
    seen = SeenIds("r")
    for index in (5, 3, 4, 10, 0, 1, 2, 9, 6):
        assert seen.add(candidate_id("r", 1, 0, index))
    assert all(candidate_id("r", 1, 0, i) in seen for i in (0, 1, 2, 3, 4, 5, 6, 9, 10))
    assert all(candidate_id("r", 1, 0, i) not in seen for i in (7, 8, 11))
    assert seen.ranges == 2  # [0, 7) and [9, 11)
