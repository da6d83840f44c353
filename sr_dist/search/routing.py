"""Which evaluator replica fits a formula: rendezvous (highest-random-weight) hashing.

Every formula is routed by its canonical key, so a structure goes to the same replica whichever
agent proposes it, and each replica's result cache holds its own share of the structures (a
sharded cache, not copies). Rendezvous hashing (Thaler and Ravishankar, "Using name-based
mappings to increase hit rates", IEEE/ACM ToN 1998) ranks the replicas by a hash of
``(replica, key)``; the owner is the top-ranked replica that is up. When a replica is down,
only its keys move (each to its own next-ranked replica), and they come back when it does.

Plain functions, no Ray: the hash is ``blake2b``, not Python's ``hash`` (which differs between
processes), so every agent process routes alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence

__all__ = ["NoReplicaUp", "owner", "rendezvous_order", "route"]


class NoReplicaUp(RuntimeError):
    """Every replica is marked down (the caller waits and tries again)."""


def _weight(replica: int, key: str) -> int:
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8,
                             salt=replica.to_bytes(8, "little")).digest()
    return int.from_bytes(digest, "little")


def rendezvous_order(key: str, replicas: int) -> tuple[int, ...]:
    """The replicas ``0..replicas-1`` ranked for ``key``, owner first."""
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas!r}")
    return tuple(sorted(range(replicas), key=lambda r: _weight(r, key), reverse=True))


def owner(key: str, replicas: int, down: Collection[int] = ()) -> int:
    """The replica that fits ``key``: the top-ranked one not in ``down``."""
    if replicas == 1 and not down:
        return 0
    for replica in rendezvous_order(key, replicas):
        if replica not in down:
            return replica
    raise NoReplicaUp(f"all {replicas} evaluator replicas are down")


def route(keys: Sequence[str], replicas: int, down: Collection[int] = ()) -> dict[int, list[int]]:
    """Positions of ``keys`` grouped by owning replica (in the order the keys came)."""
    groups: dict[int, list[int]] = {}
    for position, key in enumerate(keys):
        groups.setdefault(owner(key, replicas, down), []).append(position)
    return groups
