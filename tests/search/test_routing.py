"""Rendezvous routing of canonical keys to evaluator replicas (sr_dist.search.routing): a stable,
even, process-independent assignment in which a down replica's keys, and only those, move."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from sr_dist.search.routing import NoReplicaUp, owner, rendezvous_order, route

KEYS = [f"c0*x{i} + sin(c1*y{i % 7})" for i in range(4000)]


@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 7])
def test_rendezvous_order_is_a_deterministic_permutation(replicas: int) -> None:
    for key in KEYS[:200]:
        order = rendezvous_order(key, replicas)
        assert sorted(order) == list(range(replicas))
        assert rendezvous_order(key, replicas) == order
        assert owner(key, replicas) == order[0]


def test_the_order_differs_between_keys() -> None:
    # Not one fixed ranking for every key (that would send everything to one replica).
    assert len({rendezvous_order(key, 4) for key in KEYS[:200]}) > 12


def test_adding_a_replica_moves_keys_only_to_the_new_one() -> None:
    # The rendezvous property: growing the pool from 4 to 5 never moves a key between old ones.
    for key in KEYS[:1000]:
        before, after = owner(key, 4), owner(key, 5)
        assert after in (before, 4)


def test_routing_is_the_same_in_another_process() -> None:
    # Every agent process must route alike: a hash seeded per process would break the sharding.
    sample = KEYS[:50]
    code = ("import json, sys; from sr_dist.search.routing import rendezvous_order; "
            "keys = json.loads(sys.stdin.read()); "
            "print(json.dumps([list(rendezvous_order(k, 5)) for k in keys]))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(sample), text=True,
                         capture_output=True, check=True, env=env, timeout=60)
    assert json.loads(out.stdout) == [list(rendezvous_order(k, 5)) for k in sample]


def test_owner_spreads_keys_evenly() -> None:
    counts = Counter(owner(key, 4) for key in KEYS)
    assert set(counts) == {0, 1, 2, 3}
    for replica, n in counts.items():
        assert 0.20 * len(KEYS) <= n <= 0.30 * len(KEYS), (replica, counts)


@pytest.mark.parametrize("dead", [0, 1, 2, 3])
def test_a_down_replica_moves_only_its_keys_and_gets_them_back(dead: int) -> None:
    before = {key: owner(key, 4) for key in KEYS}
    during = {key: owner(key, 4, down={dead}) for key in KEYS}
    moved = {key for key in KEYS if during[key] != before[key]}
    assert moved == {key for key in KEYS if before[key] == dead}
    assert moved  # the dead replica did own something
    for key in moved:
        assert during[key] != dead
        assert during[key] == rendezvous_order(key, 4)[1]  # its next-ranked replica
    # The moved keys spread over the survivors rather than piling onto one.
    assert len(Counter(during[key] for key in moved)) == 3
    assert {key: owner(key, 4, down=()) for key in KEYS} == before


def test_two_down_replicas_send_keys_to_the_first_live_one() -> None:
    down = {0, 2}
    for key in KEYS[:500]:
        expected = next(r for r in rendezvous_order(key, 4) if r not in down)
        assert owner(key, 4, down=down) == expected


@pytest.mark.parametrize("replicas", [1, 3])
def test_no_replica_up_when_all_are_down(replicas: int) -> None:
    with pytest.raises(NoReplicaUp, match=f"all {replicas} evaluator replicas are down"):
        owner("x*y", replicas, down=set(range(replicas)))
    with pytest.raises(NoReplicaUp):
        route(["x", "y"], replicas, down=set(range(replicas)))


def test_one_replica_owns_everything() -> None:
    assert {owner(key, 1) for key in KEYS[:100]} == {0}
    assert route(KEYS[:5], 1) == {0: [0, 1, 2, 3, 4]}


def test_route_groups_positions_in_order() -> None:
    keys = KEYS[:300] + KEYS[:20]  # repeated keys go where their first copies went
    groups = route(keys, 3, down={1})
    assert set(groups) <= {0, 2}
    assert sorted(p for positions in groups.values() for p in positions) == list(range(len(keys)))
    for replica, positions in groups.items():
        assert positions == sorted(positions)
        assert all(owner(keys[p], 3, down={1}) == replica for p in positions)
    assert route([], 3) == {}


@pytest.mark.parametrize("replicas", [0, -1])
def test_fewer_than_one_replica_is_refused(replicas: int) -> None:
    with pytest.raises(ValueError, match=f"replicas must be at least 1, got {replicas}"):
        rendezvous_order("x", replicas)
    with pytest.raises(ValueError, match="replicas must be at least 1"):
        owner("x", replicas)
    with pytest.raises(ValueError, match="replicas must be at least 1"):
        route(["x"], replicas)
