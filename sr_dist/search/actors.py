"""The Ray actors of a run: thin shells that hold state and forward to plain modules.

* :class:`EvaluatorActor` (async; one per run; ``num_gpus`` when the device is a GPU) holds the
  ``Evaluator`` and the :class:`~sr_dist.search.service.BatchingEvaluator` that micro-batches
  every agent's requests into it.
* :class:`ResultWriter` (one per run, placed on the driver's node) holds the
  ``CandidateWriter`` and a :class:`~sr_dist.search.progress.RunTally` the driver polls.
* :class:`AgentActor` (async; ``search.agents`` of them) runs one agent episode
  (:func:`sr_dist.search.episode.run_episode`) and stops when told.

Actors that do not fit constants get ``JAX_PLATFORMS=cpu`` in their runtime env: Ray gives an
actor with ``num_gpus=0`` a view of every GPU, and a JAX import there would grab GPU memory.

The evaluator actor is restartable (``max_restarts``): a restarted one rebuilds itself from the
dataset reference (the persistent compilation cache makes its compiles cheap) and
:class:`EvaluatorClient` resends the fits that were in flight when it died (fitting is
idempotent, and the rows are made by the agent after the fit returns, so each candidate is
still recorded once). Its ``stats()`` carry an ``instance`` token, so the driver counts
restarts.

Each actor imports what it runs inside its own methods: every actor is a process of its own,
and a writer that imported the agent kit, or an agent that imported the evaluator, would pay
for it in start-up time on every node (seconds per run on a small machine).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import secrets
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray

from sr_dist.search.progress import RunTally, TallySnapshot
from sr_dist.search.settings import EvaluatorSettings

__all__ = [
    "AgentActor",
    "EvaluatorActor",
    "EvaluatorClient",
    "ResultWriter",
    "WriterSink",
    "canonical_key",
]

log = logging.getLogger(__name__)

#: Row batches an agent may have on their way to the writer before it waits for one.
MAX_ROWS_IN_FLIGHT = 8
#: How long an agent keeps resending a fit while the evaluator actor restarts.
EVALUATOR_RETRY_S = 300.0
#: First and longest pause between those resends.
EVALUATOR_RETRY_BASE_S = 0.5
EVALUATOR_RETRY_MAX_S = 8.0


def canonical_key(variables: Sequence[str], text: str) -> str:
    """The canonical form of ``text`` (or the text itself when it does not parse)."""
    from sr_dist.formula import FormulaError, parse_formula

    try:
        return parse_formula(text, list(variables)).canonical
    except (FormulaError, RecursionError, ValueError):
        return text


@ray.remote
class EvaluatorActor:
    """The shared evaluator (see the module docstring)."""

    def __init__(self, dataset: Any, settings: EvaluatorSettings) -> None:
        from sr_dist.evaluator import Evaluator
        from sr_dist.search.service import BatchingEvaluator

        options = dict(settings.options)
        if settings.compilation_cache_dir:
            options["compilation_cache_dir"] = settings.compilation_cache_dir
        self._evaluator = Evaluator(dataset, **options)
        self._features = tuple(dataset.feature_names)
        self._const_buckets = tuple(self._evaluator.options.const_buckets)
        variables = self._features

        def key(text: str) -> str:
            return canonical_key(variables, text)

        self._service = BatchingEvaluator(self._evaluator, settings.max_batch,
                                          settings.max_wait_s, key)
        self._instance = f"{os.getpid()}-{secrets.token_hex(3)}"
        self._restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)
        if self._restarted:
            log.warning("evaluator actor restarted (instance %s); resuming service", self._instance)

    async def fit_many(self, expressions: list[str], agent_id: int = 0) -> list[Any]:
        """One ``FitResult`` per expression, batched with the other agents' requests."""
        return await self._service.fit_many(expressions, agent_id)

    async def warmup(self) -> dict[str, Any]:
        """Compile the small-program buckets up to 8 constants before the agents start."""
        from sr_dist.search.service import search_warmup

        return await self._service.warmup(search_warmup(self._features, self._const_buckets))

    async def prefit(self, expressions: list[str]) -> dict[str, Any]:
        """Fit a resumed run's old structures so re-proposals are cache hits."""
        return await self._service.prefit(expressions)

    async def expect(self, agent_ids: list[int]) -> None:
        """The agents still running (see ``MicroBatcher.expect``)."""
        self._service.expect(agent_ids)

    async def stats(self) -> dict[str, Any]:
        merged = self._service.stats()
        merged["instance"] = self._instance
        merged["restarted"] = self._restarted
        return merged

    async def close(self) -> None:
        await self._service.close()


@ray.remote
class ResultWriter:
    """Writes a run's candidate rows (``CandidateWriter``) and tallies them for the driver."""

    def __init__(self, path: str, run_id: str, dataset: str, model: str, flush_s: float) -> None:
        from sr_dist.results import CandidateWriter

        self._writer = CandidateWriter(Path(path), run_id, dataset, model, flush_s=flush_s)
        self._tally = RunTally()
        self._rejected: list[str] = []

    def add(self, rows: list[dict[str, Any]]) -> int:
        result = self._writer.add(rows)
        if result.rejected:
            bad = {text.split(":", 1)[0] for text in result.rejected}
            rows = [r for r in rows if str(r.get("candidate_id")) not in bad]
            self._rejected.extend(result.rejected[:20])
        self._tally.add(rows)
        return result.accepted

    def progress(self) -> TallySnapshot:
        return self._tally.snapshot()

    def flush(self) -> int:
        return self._writer.flush()

    def close(self) -> dict[str, Any]:
        """Final flush; returns the writer's counters (raises if the disk refuses)."""
        self._writer.close()
        stats = self._writer.stats()
        return {
            "rows_written": stats.rows_written, "files_written": stats.files_written,
            "duplicates": stats.duplicates, "rejected": stats.rejected,
            "last_error": stats.last_error, "rejected_examples": list(self._rejected[:5]),
        }


def retry_pause(attempt: int, base_s: float = EVALUATOR_RETRY_BASE_S,
                max_s: float = EVALUATOR_RETRY_MAX_S) -> float:
    """Seconds before resend number ``attempt`` (1-based) of a fit the evaluator lost."""
    return float(min(max_s, base_s * 2.0 ** max(attempt - 1, 0)))


class EvaluatorClient:
    """What the formula tools call as their ``evaluator``: the actor behind a blocking
    ``fit_many(list[str])``. Tools run in worker threads, so blocking there is fine; it waits on
    the reference's future rather than ``ray.get``, which Ray flags inside async actors.

    When the actor dies mid-call (``RayActorError``: it is restarting, or it is gone), the
    call is resent with backoff for up to ``retry_s`` seconds; after that the error goes to
    the tool, which reports a failed call to the agent. ``resends`` counts the resends.
    """

    def __init__(self, handle: Any, agent_id: int, timeout_s: float | None = None,
                 retry_s: float = EVALUATOR_RETRY_S,
                 sleep: Any = time.sleep, clock: Any = time.monotonic) -> None:
        self._handle = handle
        self._agent_id = int(agent_id)
        self._timeout_s = timeout_s
        self._retry_s = float(retry_s)
        self._sleep = sleep
        self._clock = clock
        self.resends = 0

    def fit_many(self, expressions: list[str]) -> list[Any]:
        from ray.exceptions import RayActorError

        start = self._clock()
        attempt = 0
        while True:
            attempt += 1
            ref = self._handle.fit_many.remote(list(expressions), self._agent_id)
            try:
                return list(ref.future().result(timeout=self._timeout_s))
            except RayActorError as exc:
                pause = retry_pause(attempt)
                if self._clock() - start + pause > self._retry_s:
                    raise
                log.warning("agent %d: the evaluator was lost mid-fit (%s); resending %d "
                            "formula(s) in %.1f s", self._agent_id,
                            str(exc).strip().splitlines()[0] if str(exc).strip() else
                            type(exc).__name__, len(expressions), pause)
                self.resends += 1
                self._sleep(pause)


class WriterSink:
    """Sends row batches to the writer actor without waiting, but with at most
    ``max_in_flight`` unacknowledged batches (so a slow disk slows the agent, not memory)."""

    def __init__(self, handle: Any, max_in_flight: int = MAX_ROWS_IN_FLIGHT) -> None:
        self._handle = handle
        self._max = max_in_flight
        self._lock = threading.Lock()
        self._refs: collections.deque[Any] = collections.deque()
        self.errors = 0

    def __call__(self, rows: list[dict[str, Any]]) -> None:
        ref = self._handle.add.remote(rows)
        with self._lock:
            self._refs.append(ref)
            oldest = self._refs.popleft() if len(self._refs) > self._max else None
        if oldest is not None:
            self._settle([oldest])

    def drain(self) -> None:
        """Wait until every batch sent so far has been accepted by the writer."""
        with self._lock:
            refs = list(self._refs)
            self._refs.clear()
        self._settle(refs)

    def _settle(self, refs: list[Any]) -> None:
        for ref in refs:
            try:
                ref.future().result()
            except Exception:  # noqa: BLE001 - counted; the run summary reports lost rows
                self.errors += 1
                log.exception("sending candidate rows to the result writer failed")


@ray.remote
class AgentActor:
    """Runs one agent episode against the shared evaluator; ``stop()`` ends it early."""

    def __init__(self, spec: Any, dataset: Any, evaluator: Any, writer: Any) -> None:
        from sr_dist.search.recording import CandidateRecorder

        self._spec = spec
        self._dataset = dataset
        self._cancel = threading.Event()
        self._sink = WriterSink(writer)
        self._recorder = CandidateRecorder(spec.run_id, spec.agent_id, spec.model_label,
                                           spec.dataset_name, self._sink,
                                           step_offset=spec.step_offset)
        self._client = EvaluatorClient(evaluator, spec.agent_id)

    async def run(self) -> Any:
        """Run the episode to its end; returns an ``AgentOutcome`` (never raises for the
        agent's own failures: those are in the outcome)."""
        from sr_dist.search.episode import run_episode

        try:
            outcome = await run_episode(self._spec, self._dataset, self._client, self._recorder,
                                        self._cancel)
        finally:
            await asyncio.to_thread(self._sink.drain)
        return outcome.with_lost_rows(self._sink.errors).with_rows_sent(self._recorder.recorded)

    def stop(self) -> None:
        """Ask the episode to end after the current step (sets its cancel event)."""
        self._cancel.set()
