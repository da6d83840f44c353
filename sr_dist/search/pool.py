"""The evaluator pool as the agents see it: one blocking ``fit_many`` over every replica.

:class:`EvaluatorPool` (one per agent process, shared by the episodes it hosts) routes each
formula to a replica by its canonical key (:mod:`sr_dist.search.routing`), sends every
replica its share at once and puts the results back in order. :class:`EvaluatorClient` is what
one agent's formula tools call: the pool under that agent's id, with at most
``max_in_flight`` requests of that agent at a time (backpressure: a saturated pool makes agents
wait, it does not grow their queues).

When a replica dies mid-call (``RayActorError``), its formulas are resent: to the next-ranked
replica that is up when there is one (the dead one is marked down for a few seconds while Ray
restarts it, then gets its keys back), otherwise to the same replica after a backoff. Fitting
is idempotent and rows are made after a fit returns, so each candidate is still recorded once.
After ``retry_s`` seconds of failures the error goes to the tool, which reports a failed call
to the agent.

Tools run in worker threads, so blocking is fine here; calls wait on the reference's future
rather than ``ray.get``, which Ray flags inside async actors.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from sr_dist.evaluator.prepared import PreparedFormula, prepare_text
from sr_dist.search.routing import NoReplicaUp, route

__all__ = [
    "EVALUATOR_RETRY_S",
    "EvaluatorClient",
    "EvaluatorPool",
    "EvaluatorUnavailable",
    "canonical_key",
    "retry_pause",
]

log = logging.getLogger(__name__)

#: How long a fit keeps being resent while replicas restart.
EVALUATOR_RETRY_S = 300.0
#: First and longest pause between resends to the same replica.
EVALUATOR_RETRY_BASE_S = 0.5
EVALUATOR_RETRY_MAX_S = 8.0
#: How long a replica that failed a call is passed over (its keys go to the others meanwhile).
REPLICA_DOWN_S = 5.0


class EvaluatorUnavailable(RuntimeError):
    """No replica could fit a request within the retry window."""


def canonical_key(variables: Sequence[str], text: str, *,
                  parse: Callable[[str], Any] | None = None) -> str:
    """The canonical form of ``text`` (or the text itself when it does not parse).

    ``parse`` (text -> ``Formula``, e.g. a cached ``Evaluator.parse``) replaces a fresh
    ``parse_formula(text, variables)``, so a process that also fits the text parses it once."""
    from sr_dist.formula import FormulaError, parse_formula

    try:
        if parse is not None:
            return str(parse(text).canonical)
        return parse_formula(text, list(variables)).canonical
    except (FormulaError, RecursionError, ValueError):
        return text


def retry_pause(attempt: int, base_s: float = EVALUATOR_RETRY_BASE_S,
                max_s: float = EVALUATOR_RETRY_MAX_S) -> float:
    """Seconds before resend number ``attempt`` (1-based) of a fit the evaluator lost."""
    return float(min(max_s, base_s * 2.0 ** max(attempt - 1, 0)))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class EvaluatorPool:
    """The replicas' handles behind one blocking ``fit_many`` (see the module docstring).

    Args:
        handles: the replica actors, in replica order (index ``i`` is replica ``i``).
        variables: the dataset's feature names, in column order (canonical keys and
            prepared formulas need them).
        prepare: send formulas parsed and lowered here (``sr_dist.evaluator.prepared``), so
            the shared evaluator does neither; text that does not parse is sent as text.
        timeout_s: the longest one call may take (``None``: no limit).
        retry_s: how long failed fits are resent before the error is raised.
        down_s: how long a failed replica is passed over.
        sleep, clock: injectable for tests.
    """

    def __init__(self, handles: Sequence[Any], variables: Sequence[str], *,
                 prepare: bool = True, timeout_s: float | None = None, retry_s: float = EVALUATOR_RETRY_S,
                 down_s: float = REPLICA_DOWN_S, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not handles:
            raise ValueError("an evaluator pool needs at least one replica")
        self._handles = list(handles)
        self._variables = tuple(variables)
        self._prepare = bool(prepare)
        self._timeout_s = timeout_s
        self._retry_s = float(retry_s)
        self._down_s = float(down_s)
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._down_until: dict[int, float] = {}
        self._failures: dict[int, int] = {}
        #: Formulas resent after a replica failed them.
        self.resends = 0
        #: Formulas sent to each replica.
        self.sent = [0] * len(self._handles)

    @property
    def replicas(self) -> int:
        return len(self._handles)

    def keys(self, expressions: Sequence[Any]) -> list[str]:
        """Routing keys (a prepared formula's own canonical key, a text's from a parse); with
        one replica there is nothing to route, so no parsing."""
        if len(self._handles) == 1:
            return [""] * len(expressions)
        return [item.canonical if isinstance(item, PreparedFormula)
                else canonical_key(self._variables, str(item)) for item in expressions]

    def _down(self) -> set[int]:
        now = self._clock()
        with self._lock:
            return {r for r, until in self._down_until.items() if until > now}

    def _mark_down(self, replica: int) -> float:
        with self._lock:
            failures = self._failures[replica] = self._failures.get(replica, 0) + 1
            pause = retry_pause(failures)
            self._down_until[replica] = self._clock() + max(pause, self._down_s)
        return pause

    def _mark_up(self, replica: int) -> None:
        with self._lock:
            self._failures.pop(replica, None)
            self._down_until.pop(replica, None)

    def fit_many(self, expressions: Sequence[str], agent_id: int = 0,
                 starts: Sequence[Any] | None = None) -> list[Any]:
        """One ``FitResult`` per expression, in order (resent as the module docstring says).
        ``starts``: one start (constant values for a local search, or None) per expression,
        routed with its formula."""
        from ray.exceptions import RayActorError

        texts = [str(e) for e in expressions]
        if starts is not None and len(starts) != len(texts):
            raise ValueError(f"starts has {len(starts)} entries for {len(texts)} formulas")
        items: list[Any] = ([prepare_text(text, self._variables) for text in texts]
                            if self._prepare else list(texts))
        keys = self.keys(items)
        results: list[Any] = [None] * len(texts)
        todo = list(range(len(texts)))
        start = self._clock()
        while todo:
            down = self._down()
            try:
                groups = route([keys[i] for i in todo], len(self._handles), down)
            except NoReplicaUp:  # every replica failed lately: try their owners again
                groups = route([keys[i] for i in todo], len(self._handles))
            calls = []
            for replica, positions in groups.items():
                share = [todo[p] for p in positions]
                method = self._handles[replica].fit_many
                part = [items[i] for i in share]
                ref = (method.remote(part, int(agent_id)) if starts is None
                       else method.remote(part, int(agent_id), [starts[i] for i in share]))
                self.sent[replica] += len(share)
                calls.append((replica, share, ref))
            failed: list[int] = []
            pause = 0.0
            for replica, share, ref in calls:
                try:
                    out = list(ref.future().result(timeout=self._timeout_s))
                except RayActorError as exc:
                    pause = self._mark_down(replica)
                    failed.extend(share)
                    log.warning("agent %d: evaluator replica %d was lost mid-fit (%s); resending "
                                "%d formula(s)", agent_id, replica, _first_line(exc), len(share))
                    continue
                self._mark_up(replica)
                for i, result in zip(share, out, strict=True):
                    results[i] = result
            if not failed:
                break
            survivors = len(self._handles) - len(self._down())
            wait = 0.0 if survivors > 0 else pause
            if self._clock() - start + wait > self._retry_s:
                raise EvaluatorUnavailable(
                    f"the evaluator replicas kept failing for {self._retry_s:g} s "
                    f"({len(failed)} formula(s) unfitted); is the cluster short of resources?")
            self.resends += len(failed)
            if wait:
                self._sleep(wait)
            todo = sorted(failed)
        return results

    def client(self, agent_id: int, max_in_flight: int = 4) -> EvaluatorClient:
        """What one agent's formula tools call as their ``evaluator``."""
        return EvaluatorClient(self, agent_id, max_in_flight)


class EvaluatorClient:
    """One agent's view of the pool: ``fit_many(list[str])`` under its id, at most
    ``max_in_flight`` requests at a time (more calls wait for one to finish)."""

    def __init__(self, pool: EvaluatorPool, agent_id: int, max_in_flight: int = 4) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight!r}")
        self._pool = pool
        self._agent_id = int(agent_id)
        self._slots = threading.BoundedSemaphore(max_in_flight)

    def fit_many(self, expressions: list[str], starts: Sequence[Any] | None = None) -> list[Any]:
        with self._slots:
            return self._pool.fit_many(expressions, self._agent_id, starts)
