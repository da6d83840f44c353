"""The Ray actors of a run: thin shells that hold state and forward to plain modules.

* :class:`EvaluatorActor` (async; ``evaluator.replicas`` of them, one placement-group bundle
  each; ``num_gpus`` when the device is a GPU) holds an ``Evaluator`` and the
  :class:`~sr_dist.search.service.BatchingEvaluator` that micro-batches the requests routed to
  it (:mod:`sr_dist.search.pool`: each formula goes to one replica, by its canonical key).
* :class:`ResultWriter` (one per run, placed on the driver's node) holds the
  ``CandidateWriter`` and a :class:`~sr_dist.search.progress.RunTally` the driver polls.
* :class:`AgentActor` (async; one per ``search.agents_per_actor`` agents) runs its agents'
  episodes (:func:`sr_dist.search.agent_run.run_episode`) side by side and stops them when told.

Actors that do not fit constants get ``JAX_PLATFORMS=cpu`` in their runtime env: Ray gives an
actor with ``num_gpus=0`` a view of every GPU, and a JAX import there would grab GPU memory.

Evaluator replicas are restartable (``max_restarts``): a restarted one rebuilds itself from the
dataset reference (the persistent compilation cache makes its compiles cheap) and the agents'
:class:`~sr_dist.search.pool.EvaluatorPool` resends the fits that were in flight when it died
(to another replica while it restarts, when there is one). Fitting is idempotent, and rows are
made by the agent after the fit returns, so each candidate is still recorded once. Its
``stats()`` carry an ``instance`` token, so the driver counts restarts.

Each actor imports what it runs inside its own methods: every actor is a process of its own,
and a writer that imported the agent kit, or an agent that imported the evaluator, would pay
for it in start-up time and memory on every node.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import secrets
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from sr_dist.search.gc_tuning import tune_worker_gc
from sr_dist.search.pool import canonical_key
from sr_dist.search.progress import RunTally, TallySnapshot
from sr_dist.search.quiet import setup_actor_logging
from sr_dist.search.run_front import RunFront
from sr_dist.search.sink import WriterSink

if TYPE_CHECKING:  # the settings module imports Hydra, which agent processes do not need
    from sr_dist.search.settings import EvaluatorSettings

__all__ = [
    "AgentActor",
    "DatasetHolder",
    "EvaluatorActor",
    "HeldDataset",
    "ResultWriter",
    "WriterSink",
    "canonical_key",
    "fetch_dataset",
]

log = logging.getLogger(__name__)

#: Worker threads of an agent actor beyond one per hosted episode (model calls of remote
#: providers run on the event loop's default executor, one thread per waiting call).
SPARE_THREADS = 8
#: How much lower a priority an episode's preparation runs at (Linux nice, per thread) while
#: the evaluator starts beside it: the evaluator's start is what the search waits for.
PREPARE_NICE = 10
#: How long ``best_formulas`` waits for the run's front from the result writer before it
#: answers with the episode's own front.
RUN_FRONT_TIMEOUT_S = 5.0


@ray.remote
class DatasetHolder:
    """Holds the run's dataset on the driver's node, for every actor that needs it.

    Restartable actors (evaluator replicas, replacement agents) fetch the dataset from here in
    their constructor instead of taking it as an argument: Ray does not keep an actor's
    object-store arguments alive for its restarts (ray-project/ray#53727), and a dataset of
    more than 100 KB would be one. The holder is not restarted: it lives as long as the
    driver's node, which the run cannot outlive anyway.
    """

    def __init__(self, dataset: Any) -> None:
        setup_actor_logging()
        self._dataset = dataset

    def get(self) -> Any:
        return self._dataset


def was_restarted() -> bool:
    """Whether the calling actor is a restart (Ray's property, quietened: it reads Ray's own
    deprecated ``actor_id`` and warns about that in every actor)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return bool(ray.get_runtime_context().was_current_actor_reconstructed)


@dataclasses.dataclass(frozen=True)
class HeldDataset:
    """The name of the run's :class:`DatasetHolder`: what actors get instead of the dataset (a
    name, not a handle: a handle is an object reference too, and would bring the warning back)."""

    holder: str


def fetch_dataset(dataset: Any) -> Any:
    """The dataset an actor was given: the value itself, or fetched from the holder a
    :class:`HeldDataset` names (through a future, not ``ray.get``: an async actor must not
    block its event loop)."""
    if isinstance(dataset, HeldDataset):
        return ray.get_actor(dataset.holder).get.remote().future().result()
    return dataset


@ray.remote
class EvaluatorActor:
    """The shared evaluator (see the module docstring)."""

    def __init__(self, dataset: Any, settings: EvaluatorSettings, replica: int = 0) -> None:
        setup_actor_logging()
        from sr_dist.search.pool_plan import replica_cores

        dataset = fetch_dataset(dataset)
        pin = settings.device == "cpu" and hasattr(os, "sched_setaffinity")  # Linux only
        cores = (replica_cores(replica, settings.cpus_per_replica, sorted(os.sched_getaffinity(0)))
                 if pin else None)
        if cores is not None:  # before JAX starts: XLA sizes its thread pool from this
            os.sched_setaffinity(0, cores)
        self._cores = cores

        from sr_dist.evaluator import Evaluator
        from sr_dist.search.service import BatchingEvaluator

        options = dict(settings.options)
        if settings.compilation_cache_dir:
            options["compilation_cache_dir"] = settings.compilation_cache_dir
        self._evaluator = Evaluator(dataset, **options)
        self._features = tuple(dataset.feature_names)
        self._const_buckets = tuple(self._evaluator.options.const_buckets)
        variables, parse = self._features, self._evaluator.parse

        def key(text: str) -> str:
            return canonical_key(variables, text, parse=parse)

        self._service = BatchingEvaluator(self._evaluator, settings.max_batch,
                                          settings.max_wait_s, key, max_queue=settings.max_queue,
                                          max_queue_s=settings.max_queue_s,
                                          pipeline=settings.pipeline)
        self._replica = int(replica)
        self._instance = f"{os.getpid()}-{secrets.token_hex(3)}"
        context = ray.get_runtime_context()
        self._node = context.get_node_id()
        self._restarted = was_restarted()
        if self._restarted:
            log.warning("evaluator replica %d restarted (instance %s); resuming service",
                        self._replica, self._instance)
        tune_worker_gc()

    async def fit_many(self, expressions: list[Any], agent_id: int = 0,
                       starts: list[Any] | None = None) -> list[Any]:
        """One ``FitResult`` per expression (a text, or a ``PreparedFormula`` an agent parsed
        and lowered), batched with the other agents' requests; ``starts``: one start (constant
        values for a local search, or None) per expression."""
        return await self._service.fit_many(expressions, agent_id, starts)

    async def warmup(self, local: bool = False) -> dict[str, Any]:
        """Compile the small-program buckets up to 8 constants before the agents start;
        ``local``: their local-search executables too (a proposer that inherits constants)."""
        from sr_dist.search.service import search_warmup

        return await self._service.warmup(search_warmup(self._features, self._const_buckets),
                                          local=local)

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
        merged["replica"] = self._replica
        merged["node_id"] = self._node
        merged["xla_flags"] = os.environ.get("XLA_FLAGS", "")
        merged["cores"] = list(self._cores) if self._cores else None
        return merged

    async def close(self) -> None:
        await self._service.close()


@ray.remote(concurrency_groups={"control": 4, "front": 4})  # type: ignore[call-overload]
class ResultWriter:
    """Writes a run's candidate rows (``CandidateWriter``) and tallies them for the driver.

    A threaded actor (the driver gives it ``max_concurrency``): each ``add`` waits for the
    flush that makes its rows durable, many at once, so an answer is an acknowledgement; the
    driver's calls (progress, flush, close) have threads of their own (the ``control``
    group), so a thousand waiting adds never hold up a progress poll. Ray
    restarts it when it dies (``max_restarts``); a restarted one rebuilds its dedup and its
    tally from the files on disk, and the agents' sinks resend what was not acknowledged.
    ``base_count``: rows earlier sessions of a resumed run wrote (not this session's).
    """

    def __init__(self, path: str, run_id: str, dataset: str, model: str, flush_s: float, *,
                 base_count: int = 0, roll_files: int = 32, roll_s: float | None = 120.0,
                 target_file_mb: float = 256.0, compact: bool = True,
                 max_rows: int = 50_000) -> None:
        from sr_dist.results import CandidateWriter

        setup_actor_logging()
        self._path, self._run_id, self._dataset, self._model = Path(path), run_id, dataset, model
        self._writer = CandidateWriter(Path(path), run_id, dataset, model, flush_s=flush_s,
                                       max_rows=max_rows, roll_files=roll_files, roll_s=roll_s,
                                       target_file_mb=target_file_mb, compact=compact)
        self._lock = threading.Lock()
        self._tally = RunTally()
        #: The run's Pareto front over every agent's rows (``best_formulas`` reads it; a
        #: restarted writer starts it again from the rows that arrive).
        self._front = RunFront()
        self._rejected: list[str] = []
        self._resent_batches = 0
        self._resent_rows = 0
        self._restarted = was_restarted()
        if self._restarted:
            disk = self._writer.on_disk
            self._tally.restore(count=disk.rows - int(base_count), by_agent=disk.by_agent,
                                by_status=disk.by_status, contenders=disk.contenders)
            log.warning("result writer restarted: %d row(s) of this run on disk, resends will "
                        "be deduplicated", disk.rows)

    def add(self, rows: list[dict[str, Any]], resend: bool = False) -> int:
        """Write ``rows``; returns once they are durably on disk (the count accepted).
        Raises ``ResultsWriteError`` when the writer has failed (they were not written)."""
        if resend:
            with self._lock:
                self._resent_batches += 1
                self._resent_rows += len(rows)
        result = self._writer.add(rows, wait=True)
        with self._lock:
            if result.rejected:
                self._rejected.extend(result.rejected[: max(0, 20 - len(self._rejected))])
            self._tally.add(result.rows)
        self._front.add(result.rows)
        return result.accepted

    @ray.method(concurrency_group="front")
    def front(self) -> tuple[Any, ...]:
        """The run's Pareto front (``Candidate``s, simplest first): every agent's rows. Threads
        of its own, so an agent's ``best_formulas`` never waits behind a flush or a poll."""
        return self._front.front()

    @ray.method(concurrency_group="control")
    def progress(self) -> TallySnapshot:
        stats = self._writer.stats()
        with self._lock:
            return self._tally.snapshot(write_error=stats.write_error)

    @ray.method(concurrency_group="control")
    def last_steps(self) -> dict[int, int]:
        """The highest step on disk or accepted per agent (a restarted agent goes on after)."""
        return self._writer.last_steps()

    @ray.method(concurrency_group="control")
    def add_experience(self, agent_id: int, rows: list[dict[str, Any]]) -> int:
        """Write one finished episode's tool experience (``ToolExperience.row()`` dicts) to the
        ``experience`` table; returns the rows written."""
        from sr_dist.results.experience import write_experience

        write_experience(self._path, self._run_id, rows, dataset=self._dataset,
                         model=self._model, agent_id=agent_id)
        return len(rows)

    @ray.method(concurrency_group="control")
    def experience(self) -> list[dict[str, Any]]:
        """The latest rows of the ``experience`` table of every run on this results path (read
        here, on the driver's node, where the results path is)."""
        from sr_dist.results.experience import read_experience

        return read_experience(self._path)

    @ray.method(concurrency_group="control")
    def flush(self) -> int:
        return self._writer.flush()

    @ray.method(concurrency_group="control")
    def stop_batching(self) -> None:
        """The search has stopped: flush now and on every add (``CandidateWriter.stop_batching``)."""
        self._writer.stop_batching()

    @ray.method(concurrency_group="control")
    def stats(self) -> dict[str, Any]:
        return self._stats()

    def _stats(self) -> dict[str, Any]:
        from sr_dist.results.layout import data_files

        stats = self._writer.stats()
        with self._lock:
            return {
                "rows_written": stats.rows_written, "files_written": stats.files_written,
                "duplicates": stats.duplicates, "rejected": stats.rejected,
                "last_error": stats.last_error, "write_error": stats.write_error,
                "rejected_examples": list(self._rejected[:5]),
                "resent_batches": self._resent_batches, "resent_rows": self._resent_rows,
                "restarted": self._restarted, "rolls": stats.rolls,
                "files_merged": stats.files_merged, "seen_entries": stats.seen_entries,
                "files": len(data_files(self._writer.directory)),
            }

    @ray.method(concurrency_group="control")
    def close(self) -> dict[str, Any]:
        """Final flush and compaction; returns the writer's counters (raises if the disk
        refuses). ``rows_written`` and the other counters are this writer instance's."""
        self._writer.close()
        return self._stats()


class _Hosted:
    """One episode an agent actor hosts: its spec, stop flag, row sink and recorder."""

    __slots__ = ("spec", "cancel", "sink", "recorder", "client", "prepared")

    def __init__(self, spec: Any, writer: Any, pool: Any, max_in_flight: int) -> None:
        from sr_dist.search.recording import CandidateRecorder

        self.spec = spec
        self.cancel = threading.Event()
        self.sink = WriterSink(writer)
        self.recorder = CandidateRecorder(spec.run_id, spec.agent_id, spec.model_label,
                                          spec.dataset_name, self.sink,
                                          step_offset=spec.step_offset)
        self.client = pool.client(spec.agent_id, max_in_flight)
        #: The episode being built before its run (``AgentActor.prepare``), or None.
        self.prepared: asyncio.Task[Any] | None = None


@ray.remote
class AgentActor:
    """Hosts ``search.agents_per_actor`` agent episodes as concurrent asyncio tasks against the
    evaluator pool: ``run(agent_id)`` runs one to its end, ``stop(agent_id)`` ends it early.

    The episodes share the process (its imports, the dataset, one HTTP connection pool and one
    :class:`~sr_dist.search.pool.EvaluatorPool`), which is what lets one process carry hundreds
    of agents that wait on a remote model.
    """

    def __init__(self, specs: Sequence[Any], dataset: Any, evaluators: Sequence[Any],
                 writer: Any, max_in_flight: int = 4) -> None:
        # The episode's imports (the loop, the tools, the model providers) happen here, while
        # the evaluator starts, not when the search has begun.
        import sr_dist.search.agent_run  # noqa: F401
        from sr_dist.search.pool import EvaluatorPool

        setup_actor_logging()
        dataset = fetch_dataset(dataset)
        self._dataset = dataset
        self._pool = EvaluatorPool(evaluators, dataset.feature_names)
        self._writer = writer
        self._hosted = {int(spec.agent_id): _Hosted(spec, writer, self._pool, max_in_flight)
                        for spec in specs}
        tune_worker_gc()
        self._executor: Any = None

    def _ensure_threads(self) -> None:
        """One default-executor thread per hosted episode: a remote model's call blocks a
        thread while it waits, and the default pool (``cpu_count() + 4``) would queue them."""
        if self._executor is None:
            from concurrent.futures import ThreadPoolExecutor

            self._executor = ThreadPoolExecutor(max_workers=len(self._hosted) + SPARE_THREADS,
                                                thread_name_prefix="sr-dist-agent")
            asyncio.get_running_loop().set_default_executor(self._executor)

    async def prepare(self, agent_id: int | None = None) -> None:
        """Build a hosted episode and let its model prepare (evolve's seed library: seconds of
        CPU) before its run: the driver asks while the evaluator starts and starts the search
        once the agents are prepared, so the first proposals go out at once. Its run uses what
        this built; a run not prepared builds its episode itself."""
        await asyncio.shield(self._preparation(self._pick(agent_id), PREPARE_NICE))

    def _preparation(self, hosted: _Hosted, nice: int) -> asyncio.Task[Any]:
        """The task building ``hosted``'s episode: the one under way, or a new one."""
        if hosted.prepared is None:
            hosted.prepared = asyncio.get_running_loop().create_task(self._prepare(hosted, nice))
        return hosted.prepared

    async def _prepare(self, hosted: _Hosted, nice: int) -> Any:
        from sr_dist.search.agent_run import prepare_episode

        self._ensure_threads()
        mode = getattr(hosted.spec, "tool_experience", "off")
        notes = await self._experience_notes(hosted.spec.agent_id) if mode in ("on", "read_only") else None
        return await prepare_episode(hosted.spec, self._dataset, hosted.client, hosted.recorder,
                                     hosted.cancel, experience=notes, nice=nice,
                                     run_front=self._run_front)

    def _run_front(self) -> tuple[Any, ...]:
        """The run's Pareto front, from the result writer (``best_formulas`` calls this on a
        tool thread; a failure there falls back to the episode's own front)."""
        front: tuple[Any, ...] = ray.get(self._writer.front.remote(), timeout=RUN_FRONT_TIMEOUT_S)
        return front

    async def run(self, agent_id: int | None = None) -> Any:
        """Run one hosted episode (the only one when ``agent_id`` is None) to its end; returns
        an ``AgentOutcome`` (never raises for the agent's own failures: they are in it)."""
        from sr_dist.search.agent_run import run_episode

        self._ensure_threads()
        hosted = self._pick(agent_id)
        mode = getattr(hosted.spec, "tool_experience", "off")
        sink = self._experience_sink(hosted.spec.agent_id) if mode == "on" else None
        try:  # an agent not prepared (a restart) builds its episode at full priority
            prepared = await asyncio.shield(self._preparation(hosted, 0))
            outcome = await run_episode(hosted.spec, self._dataset, hosted.client,
                                        hosted.recorder, hosted.cancel,
                                        experience_sink=sink, prepared=prepared)
        finally:
            await asyncio.to_thread(hosted.sink.drain)
        host = f"{ray.get_runtime_context().get_node_id()[:8]}:{os.getpid()}"
        return (outcome.with_lost_rows(hosted.sink.errors)
                .with_rows_sent(hosted.recorder.recorded).with_host(host))

    async def _experience_notes(self, agent_id: int) -> dict[str, str] | None:
        """What earlier agents learned, per tool, read at this episode's start (None when it
        cannot be read: the agent starts without it)."""
        from sr_dist.tools.experience import summarize_experience

        try:
            rows = await self._writer.experience.remote()
        except Exception as exc:  # noqa: BLE001 - experience is advice; the agent still runs
            log.warning("agent %d: no tool experience (%s)", agent_id, exc)
            return None
        return summarize_experience(rows, dataset=self._dataset.name)

    def _experience_sink(self, agent_id: int) -> Any:
        writer = self._writer

        async def send(records: tuple[Any, ...]) -> None:
            await writer.add_experience.remote(agent_id, [r.row() for r in records])

        return send

    def stop(self, agent_id: int | None = None) -> None:
        """Ask an episode (every hosted one when ``agent_id`` is None) to end after its
        current step."""
        for key, hosted in self._hosted.items():
            if agent_id is None or key == int(agent_id):
                hosted.cancel.set()

    def _pick(self, agent_id: int | None) -> _Hosted:
        if agent_id is None:
            if len(self._hosted) != 1:
                raise ValueError(f"this actor hosts agents {sorted(self._hosted)}: name one")
            return next(iter(self._hosted.values()))
        try:
            return self._hosted[int(agent_id)]
        except KeyError:
            raise ValueError(f"agent {agent_id} is not hosted here "
                             f"(hosted: {sorted(self._hosted)})") from None
