"""Micro-batching of fit requests from many agents: the pure core of the evaluator actor.

Agents send small requests (one tool call's formulas); the evaluator is fastest on large
batches. :class:`MicroBatcher` queues the formulas of every request and hands out a batch when

* ``max_batch`` formulas are waiting, or
* every agent it expects (``expect``) has a request waiting: nobody else is coming, or
* ``max_wait_s`` has passed since the oldest formula arrived *or the evaluator became idle*,
  whichever is later.

The last rule is what makes agents share batches: while the evaluator fits one agent's batch,
the others queue up; when it finishes, the agent it just served gets ``max_wait_s`` to send its
next request before the batch goes without it. So ``max_wait_s`` bounds how long the evaluator
idles waiting for batch-mates, never how long a request waits behind a busy evaluator.

A request may be split over several batches (with ``max_batch=1`` every formula is its own
batch, which is how batching is switched off); it completes when all of its formulas have
results.

A request's formulas are texts or formulas an agent prepared (``PreparedFormula``:
``sr_dist.evaluator.prepared``); the evaluator gets the prepared ones as they are, counted by
their own canonical key instead of by ``key``, and anything else as its ``str``.

A formula may come with a start (constant values an offspring inherited, for a local search:
``Evaluator.fit_many``'s ``starts``). Within a batch, identical expression strings are sent to the
evaluator once; if one copy has no start, the batch asks for the full fit, which serves every
copy (the first copy's start is kept otherwise). Formulas that are
the same up to constant names or term order (the same *canonical* key) are left to the
evaluator, which fits each canonical structure once and maps constants back to each caller's
names; the batcher only counts them (``cross_agent_duplicates``) for the stats.

No Ray, no threads, no clock: callers pass ``now`` (monotonic seconds), so tests drive time.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from sr_dist.evaluator.prepared import PreparedFormula
from sr_dist.search.latency import LatencyHistogram

__all__ = ["Batch", "BatchingStats", "Completion", "MicroBatcher"]

R = TypeVar("R")


@dataclasses.dataclass(frozen=True)
class _Item:
    ticket: int
    position: int
    agent_id: int
    expression: str
    enqueued_at: float
    start: Any = None
    #: What the evaluator fits: the text itself, or a formula the caller prepared.
    formula: Any = None


@dataclasses.dataclass(frozen=True)
class Batch:
    """Formulas to fit together. ``expressions`` are unique; ``slots[i]`` says where the
    result for ``expressions[slot]`` goes: ``(ticket, position, slot)`` triples."""

    number: int
    expressions: tuple[str, ...]
    slots: tuple[tuple[int, int, int], ...]
    agents: frozenset[int]
    #: One start per expression (a mapping of constant values, or None), or empty when no
    #: formula of the batch has one.
    starts: tuple[Any, ...] = ()
    #: What to fit, one per expression: its text or the prepared formula a caller sent
    #: (empty: the texts themselves).
    formulas: tuple[Any, ...] = ()

    @property
    def items(self) -> tuple[Any, ...]:
        """What the evaluator fits, one per expression."""
        return self.formulas or self.expressions

    @property
    def mixed(self) -> bool:
        """Formulas from more than one agent."""
        return len(self.agents) > 1


@dataclasses.dataclass(frozen=True)
class Completion(Generic[R]):
    """A request whose formulas all have results (in the order they were submitted)."""

    ticket: int
    agent_id: int
    results: tuple[R, ...]


@dataclasses.dataclass(frozen=True)
class BatchingStats:
    """Counters of a :class:`MicroBatcher` (the actor's ``stats()`` merges them in)."""

    requests: int
    formulas: int
    batches: int
    batched_formulas: int
    mixed_agent_batches: int
    duplicate_formulas: int
    cross_agent_duplicates: int
    queue_depth: int
    max_queue_depth: int
    in_flight_requests: int
    batch_sizes: dict[int, int]
    #: How long formulas waited in the queue before their batch was taken (a
    #: :meth:`LatencyHistogram.summary`: count, p50_s, p95_s, p99_s, ...).
    queue_wait: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def mean_batch_size(self) -> float:
        return self.batched_formulas / self.batches if self.batches else 0.0

    def as_dict(self) -> dict[str, object]:
        out = dataclasses.asdict(self)
        out["mean_batch_size"] = self.mean_batch_size
        return out


class _Pending(Generic[R]):
    __slots__ = ("agent_id", "results", "missing")

    def __init__(self, agent_id: int, size: int) -> None:
        self.agent_id = agent_id
        self.results: list[R | None] = [None] * size
        self.missing = size


class MicroBatcher(Generic[R]):
    """Queues formulas from many requests and forms batches (see the module docstring).

    Args:
        max_batch: the most unique formulas in one batch (1 switches batching off).
        max_wait_s: the longest the oldest queued formula waits for batch-mates.
        key: the canonical key of an expression, used only to count cross-agent duplicates;
            it must not raise (return the text itself for formulas that do not parse).
    """

    def __init__(
        self,
        max_batch: int,
        max_wait_s: float,
        key: Callable[[str], str] | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch!r}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must not be negative, got {max_wait_s!r}")
        self.max_batch = int(max_batch)
        self.max_wait_s = float(max_wait_s)
        self._key = key or (lambda text: text)
        self._queue: deque[_Item] = deque()
        self._pending: dict[int, _Pending[R]] = {}
        self._next_ticket = 0
        self._next_batch = 0
        self._requests = 0
        self._formulas = 0
        self._batches = 0
        self._batched = 0
        self._mixed = 0
        self._duplicates = 0
        self._cross_duplicates = 0
        self._max_depth = 0
        self._sizes: Counter[int] = Counter()
        self._expected: frozenset[int] = frozenset()
        self._queued_by_agent: Counter[int] = Counter()
        self._waits = LatencyHistogram()

    def expect(self, agent_ids: frozenset[int] | set[int] | Sequence[int]) -> None:
        """The agents that may still send requests (a batch is due once all have one queued)."""
        self._expected = frozenset(int(a) for a in agent_ids)

    # -- requests -----------------------------------------------------------------------------

    def submit(self, agent_id: int, expressions: Sequence[str], now: float,
               starts: Sequence[Any] | None = None) -> tuple[int, Completion[R] | None]:
        """Queue a request that arrived at ``now``; returns its ticket, and its completion at
        once if it is empty. Queue waits are measured from ``now``. ``starts``: one start (or
        None) per expression, or None for none."""
        ticket = self._next_ticket
        self._next_ticket += 1
        self._requests += 1
        items = [e if isinstance(e, PreparedFormula) else str(e) for e in expressions]
        texts = [e.text if isinstance(e, PreparedFormula) else e for e in items]
        if starts is not None and len(starts) != len(texts):
            raise ValueError(f"starts has {len(starts)} entries for {len(texts)} formulas")
        if not texts:
            return ticket, Completion(ticket, agent_id, ())
        self._pending[ticket] = _Pending(agent_id, len(texts))
        for position, text in enumerate(texts):
            start = starts[position] if starts is not None else None
            self._queue.append(_Item(ticket, position, agent_id, text, now, start,
                                     items[position]))
        self._queued_by_agent[agent_id] += len(texts)
        self._formulas += len(texts)
        self._max_depth = max(self._max_depth, len(self._queue))
        return ticket, None

    def cancel(self, ticket: int) -> None:
        """Forget a request (its caller went away); its queued formulas are dropped."""
        if self._pending.pop(ticket, None) is not None:
            dropped = [item for item in self._queue if item.ticket == ticket]
            self._queue = deque(item for item in self._queue if item.ticket != ticket)
            for item in dropped:
                self._forget(item)

    # -- batching -----------------------------------------------------------------------------

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    def wait_time(self, now: float, idle_since: float | None = None,
                  limit: int | None = None) -> float | None:
        """Seconds until a batch is due (0: due now); ``None`` when nothing is queued.

        ``idle_since``: when the evaluator finished its last batch (``None``: long ago).
        ``limit``: a batch size below ``max_batch`` the caller wants for now (see ``take``).
        """
        if not self._queue:
            return None
        if len(self._queue) >= self._limit(limit):
            return 0.0
        if self._expected and all(self._queued_by_agent[a] > 0 for a in self._expected):
            return 0.0
        start = self._queue[0].enqueued_at
        if idle_since is not None:
            start = max(start, idle_since)
        return max(0.0, start + self.max_wait_s - now)

    def _forget(self, item: _Item) -> None:
        self._queued_by_agent[item.agent_id] -= 1
        if self._queued_by_agent[item.agent_id] <= 0:
            del self._queued_by_agent[item.agent_id]

    def _limit(self, limit: int | None) -> int:
        return self.max_batch if limit is None else max(1, min(self.max_batch, int(limit)))

    def take(self, now: float, force: bool = False, idle_since: float | None = None,
             limit: int | None = None) -> Batch | None:
        """The next batch if one is due (or anything queued, with ``force``), else ``None``.

        ``limit`` caps this batch below ``max_batch`` (the service keeps batches short enough
        that a formula queued behind one waits at most its latency target).
        """
        wait = self.wait_time(now, idle_since, limit)
        if wait is None or (wait > 0 and not force):
            return None
        cap = self._limit(limit)
        unique: dict[str, int] = {}
        formulas: list[Any] = []
        starts: list[Any] = []
        slots: list[tuple[int, int, int]] = []
        agents: set[int] = set()
        keys_by_agent: dict[str, set[int]] = {}
        while self._queue:
            item = self._queue[0]
            slot = unique.get(item.expression)
            if slot is None:
                if len(unique) >= cap:
                    break
                slot = unique[item.expression] = len(unique)
                starts.append(item.start)
                formulas.append(item.formula)
            else:
                self._duplicates += 1
                if item.start is None:  # the full fit serves the copies with a start too
                    starts[slot] = None
            self._forget(self._queue.popleft())
            self._waits.record(now - item.enqueued_at)
            slots.append((item.ticket, item.position, slot))
            agents.add(item.agent_id)
            canonical = (item.formula.canonical if isinstance(item.formula, PreparedFormula)
                         else self._key(item.expression))
            owners = keys_by_agent.setdefault(canonical, set())
            if owners and item.agent_id not in owners:
                self._cross_duplicates += 1
            owners.add(item.agent_id)
        prepared = any(isinstance(f, PreparedFormula) for f in formulas)
        batch = Batch(self._next_batch, tuple(unique), tuple(slots), frozenset(agents),
                      tuple(starts) if any(s is not None for s in starts) else (),
                      tuple(formulas) if prepared else ())
        self._next_batch += 1
        self._batches += 1
        self._batched += len(batch.expressions)
        self._sizes[len(batch.expressions)] += 1
        if batch.mixed:
            self._mixed += 1
        return batch

    def complete(self, batch: Batch, results: Sequence[R]) -> list[Completion[R]]:
        """Deliver a batch's results (one per ``batch.expressions``); returns finished requests."""
        if len(results) != len(batch.expressions):
            raise ValueError(
                f"batch {batch.number} has {len(batch.expressions)} formulas but got "
                f"{len(results)} results"
            )
        done: list[Completion[R]] = []
        for ticket, position, slot in batch.slots:
            pending = self._pending.get(ticket)
            if pending is None:
                continue  # cancelled meanwhile
            pending.results[position] = results[slot]
            pending.missing -= 1
            if pending.missing == 0:
                del self._pending[ticket]
                done.append(Completion(ticket, pending.agent_id, tuple(pending.results)))  # type: ignore[arg-type]
        return done

    def fail(self, batch: Batch, make_result: Callable[[str], R]) -> list[Completion[R]]:
        """Deliver a failed batch: each formula gets ``make_result(expression)``."""
        return self.complete(batch, [make_result(text) for text in batch.expressions])

    # -- stats --------------------------------------------------------------------------------

    def stats(self) -> BatchingStats:
        return BatchingStats(
            requests=self._requests,
            formulas=self._formulas,
            batches=self._batches,
            batched_formulas=self._batched,
            mixed_agent_batches=self._mixed,
            duplicate_formulas=self._duplicates,
            cross_agent_duplicates=self._cross_duplicates,
            queue_depth=len(self._queue),
            max_queue_depth=self._max_depth,
            in_flight_requests=len(self._pending),
            batch_sizes=dict(sorted(self._sizes.items())),
            queue_wait=self._waits.summary(),
        )
