"""The driver of one run: start the actors, poll them until a stop rule fires, stop them.

A thin stateful shell on Ray around the pure decisions (:mod:`sr_dist.search.decisions`).
Ray is imported with this module: only :func:`sr_dist.search.run.run_search` imports it, once it
has exported ``RAY_AUTH_MODE`` (:func:`sr_dist.search.ray_setup.set_auth_mode`).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

import ray
from ray.exceptions import GetTimeoutError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from sr_dist.search.actors import AgentActor, EvaluatorActor, ResultWriter
from sr_dist.search.decisions import decide_stop, new_run_id
from sr_dist.search.episode import AgentOutcome, AgentSpec, agent_seed
from sr_dist.search.errors import SearchError
from sr_dist.search.progress import ProgressReporter, ProgressSnapshot, TallySnapshot
from sr_dist.search.ray_setup import agent_actor_name, cpu_env, evaluator_actor_name
from sr_dist.search.resume import ResumeState, session_seed
from sr_dist.search.settings import Settings

__all__ = ["Driver", "Interrupts"]

log = logging.getLogger(__name__)

#: Seconds between polls of the actors.
POLL_S = 0.5
#: Seconds between evaluator stats polls (fits/s is measured over this window).
STATS_EVERY_S = 2.0
#: Longest wait for the evaluator actor to start and warm up (a cold compile, a GPU node).
EVALUATOR_START_S = 900.0
#: Longest wait for a call to the writer or the evaluator during shutdown.
SHUTDOWN_CALL_S = 60.0
#: Ray's own resends of an evaluator call that was in flight when the actor died (the agents'
#: ``EvaluatorClient`` resends on top of this, with backoff).
EVALUATOR_TASK_RETRIES = 2


class Interrupts:
    """Turns the first SIGINT/SIGTERM into a flag the poll loop reads; a second one raises
    ``KeyboardInterrupt`` (the clean-up in ``finally`` blocks still runs)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: dict[signal.Signals, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = signum

    @contextlib.contextmanager
    def installed(self, enabled: bool) -> Iterator[Interrupts]:
        if not enabled or threading.current_thread() is not threading.main_thread():
            yield self
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        try:
            yield self
        finally:
            for signum, previous in self._previous.items():
                signal.signal(signum, previous)
            self._previous.clear()


class Driver:
    """The driver's state for one run: starts the actors, polls them, stops them (a shell
    around the pure decisions in :mod:`sr_dist.search.decisions`)."""

    def __init__(self, settings: Settings, stream: TextIO, interrupts: Interrupts,
                 run_id: str | None = None, resume: ResumeState | None = None) -> None:
        self.settings = settings
        self.resume = resume
        self.stream = stream
        self.interrupts = interrupts
        self.run_id = run_id or new_run_id()
        self.started = time.monotonic()
        self.search_started: float | None = None
        self.search_ended: float | None = None
        self.evaluator: Any = None
        self.writer: Any = None
        self.agents: dict[int, Any] = {}
        self.pending: dict[Any, int] = {}
        self.outcomes: dict[int, AgentOutcome] = {}
        self.lost: list[int] = []
        self.tally = TallySnapshot(0, {}, {}, None)
        self.eval_stats: dict[str, Any] = {}
        self.writer_stats: dict[str, Any] = {}
        self.fits_per_s = 0.0
        self._last_stats: tuple[float, int] | None = None
        self.evaluator_instances: list[str] = []

    def say(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    # -- start --------------------------------------------------------------------------------

    def start_actors(self, dataset: Any, model_label: str) -> None:
        s = self.settings
        dataset_ref = ray.put(dataset)
        here = ray.get_runtime_context().get_node_id()
        self.writer = ResultWriter.options(  # type: ignore[attr-defined]
            num_cpus=0, runtime_env=cpu_env(), name=None,
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=True),
        ).remote(str(s.results.path), self.run_id, dataset.name, model_label, s.results.flush_s)
        ev_options: dict[str, Any] = {
            "num_cpus": 0, "max_concurrency": 10_000, "name": evaluator_actor_name(self.run_id),
            "max_restarts": s.evaluator.max_restarts,
            "max_task_retries": EVALUATOR_TASK_RETRIES if s.evaluator.max_restarts else 0,
        }
        if s.evaluator.device == "gpu":
            ev_options["num_gpus"] = s.evaluator.num_gpus
        else:
            ev_options["runtime_env"] = cpu_env()
        evaluator_cls: Any = EvaluatorActor
        self.evaluator = evaluator_cls.options(**ev_options).remote(dataset_ref, s.evaluator)
        self._start_evaluator()
        self._prefit()
        ray.get(self.evaluator.expect.remote(list(range(s.search.agents))))
        for agent_id in range(s.search.agents):
            offset = self.resume.step_offset(agent_id) if self.resume else 0
            spec = AgentSpec(
                run_id=self.run_id, agent_id=agent_id,
                seed=session_seed(agent_seed(s.search.seed, agent_id), offset),
                model=dict(s.model),
                model_label=model_label, dataset_name=dataset.name,
                max_turns=s.search.max_turns, max_tool_calls=s.search.max_tool_calls,
                failure_budget=s.search.failure_budget, target_nmse=s.search.target_nmse,
                deadline_s=s.search.max_seconds, servers=s.servers,
                step_offset=offset,
                prior=self.resume.prior_of(agent_id) if self.resume else (),
                tools=s.search.tools,
            )
            actor = AgentActor.options(  # type: ignore[attr-defined]
                name=agent_actor_name(self.run_id, agent_id),
                num_cpus=0, max_concurrency=16, runtime_env=cpu_env(),
                scheduling_strategy="SPREAD",
            ).remote(spec, dataset_ref, self.evaluator, self.writer)
            self.agents[agent_id] = actor
            self.pending[actor.run.remote()] = agent_id
        self.search_started = time.monotonic()

    def _prefit(self) -> None:
        """A resumed run: fit the old run's best structures first, so re-proposals are hits."""
        if self.resume is None or not self.resume.warm:
            return
        self.say(f"sr-dist: resuming run {self.run_id} ({self.resume.candidates_before:,} earlier "
                 f"candidates); warming the evaluator with {len(self.resume.warm):,} of its "
                 "best formulas ...")
        done = ray.get(self.evaluator.prefit.remote(list(self.resume.warm)),
                       timeout=EVALUATOR_START_S)
        self.say(f"sr-dist: evaluator warmed in {done['seconds']:.1f} s")

    def _start_evaluator(self) -> None:
        """Wait for the evaluator actor (and its warm-up); a clear error if it cannot start."""
        s = self.settings.evaluator
        if s.device == "gpu":
            gpus = float(ray.cluster_resources().get("GPU", 0.0))
            if gpus < s.num_gpus:
                self.say(f"sr-dist: the cluster has {gpus:g} GPU(s) and the evaluator needs "
                         f"{s.num_gpus:g}; waiting up to {EVALUATOR_START_S:.0f} s for a GPU node")
        call = self.evaluator.warmup.remote() if s.warmup else self.evaluator.stats.remote()
        if s.warmup:
            self.say("sr-dist: warming up the evaluator (compiling; cached across runs) ...")
        try:
            result = ray.get(call, timeout=EVALUATOR_START_S)
        except GetTimeoutError:
            raise SearchError(
                f"the evaluator actor did not start within {EVALUATOR_START_S:.0f} s "
                f"(evaluator.device={s.device}, num_gpus={s.num_gpus:g}): does the cluster "
                "have the resources?") from None
        except RayError as exc:
            cause = str(exc).strip().splitlines()
            raise SearchError("the evaluator actor could not start: "
                              + (cause[-1] if cause else type(exc).__name__)) from exc
        if s.warmup:
            self.say(f"sr-dist: evaluator ready in {result['seconds']:.1f} s "
                     f"({result['compiles']} compiles, {result['compile_s']:.1f} s compiling)")

    # -- poll ---------------------------------------------------------------------------------

    def collect(self, timeout: float) -> None:
        if not self.pending:
            time.sleep(timeout)
            return
        ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=timeout)
        if ready and self.evaluator is not None:
            running = sorted(i for i in self.pending.values())
            finished = {self.pending[ref] for ref in ready}
            self.evaluator.expect.remote([i for i in running if i not in finished])
        for ref in ready:
            agent_id = self.pending.pop(ref)
            try:
                self.outcomes[agent_id] = ray.get(ref)
            except RayError as exc:
                self.lost.append(agent_id)
                self.outcomes[agent_id] = AgentOutcome(agent_id, "lost", error=str(exc)[:500])
                log.warning("agent %d was lost: %s", agent_id, str(exc).splitlines()[0])

    def note_evaluator(self, stats: Mapping[str, Any]) -> None:
        """Count evaluator restarts by its instance token; tell a new instance who is running
        (a restarted actor has lost that)."""
        instance = stats.get("instance")
        if not instance or instance in self.evaluator_instances:
            return
        self.evaluator_instances.append(str(instance))
        if len(self.evaluator_instances) > 1:
            self.say(f"sr-dist: the evaluator actor was restarted (restart "
                     f"{len(self.evaluator_instances) - 1}); in-flight fits are being resent")
            self.evaluator.expect.remote(sorted(self.pending.values()))

    @property
    def evaluator_restarts(self) -> int:
        return max(0, len(self.evaluator_instances) - 1)

    def refresh(self, now: float, with_stats: bool) -> None:
        self.tally = ray.get(self.writer.progress.remote(), timeout=SHUTDOWN_CALL_S)
        if with_stats:
            try:
                stats = ray.get(self.evaluator.stats.remote(), timeout=SHUTDOWN_CALL_S)
            except (RayError, GetTimeoutError) as exc:  # restarting: keep the last figures
                log.warning("evaluator stats unavailable: %s", str(exc).splitlines()[0]
                            if str(exc) else type(exc).__name__)
                return
            self.note_evaluator(stats)
            self.eval_stats = stats
            fits = int(self.eval_stats.get("search_fits", 0))
            if self._last_stats is not None and now > self._last_stats[0]:
                self.fits_per_s = (fits - self._last_stats[1]) / (now - self._last_stats[0])
            self._last_stats = (now, fits)

    def snapshot(self, now: float) -> ProgressSnapshot:
        best = self.tally.best
        return ProgressSnapshot(
            elapsed_s=now - (self.search_started or self.started),
            candidates=self.tally.candidates,
            fits=int(self.eval_stats.get("search_fits", 0)),
            fits_per_s=self.fits_per_s,
            best_val_nmse=best.val_nmse if best else None,
            best_expression=best.expression if best else None,
            agents_running=len(self.pending),
            agents_total=len(self.agents),
            queue_depth=int(self.eval_stats.get("queue_depth", 0)),
        )

    def search(self, reporter: ProgressReporter) -> str:
        """Poll until a stop rule fires; returns the stop reason."""
        last_stats = 0.0
        while True:
            if self.interrupts.signal is not None:
                return "interrupted"
            self.collect(POLL_S)
            now = time.monotonic()
            with_stats = now - last_stats >= STATS_EVERY_S or not self.pending
            if with_stats:
                last_stats = now
            self.refresh(now, with_stats)
            snap = self.snapshot(now)
            reporter.update(snap, now)
            reason = decide_stop(
                self.settings.search, elapsed_s=snap.elapsed_s, candidates=snap.candidates,
                best_val_nmse=snap.best_val_nmse, agents_running=len(self.pending),
                agent_reasons=[o.stop_reason for o in self.outcomes.values()],
            )
            if reason is not None:
                reporter.update(snap, now, force=True)
                return reason

    # -- stop ---------------------------------------------------------------------------------

    def stop_agents(self) -> None:
        for agent_id, actor in self.agents.items():
            if agent_id not in self.outcomes:
                with contextlib.suppress(Exception):
                    actor.stop.remote()
        deadline = time.monotonic() + self.settings.search.stop_grace_s
        while self.pending and time.monotonic() < deadline:
            self.collect(min(POLL_S, max(0.0, deadline - time.monotonic())))
        for ref, agent_id in list(self.pending.items()):
            log.warning("agent %d did not stop within %.0f s; killing it", agent_id,
                        self.settings.search.stop_grace_s)
            with contextlib.suppress(Exception):
                ray.kill(self.agents[agent_id])
            self.pending.pop(ref)
            self.outcomes[agent_id] = AgentOutcome(agent_id, "killed",
                                                   error="did not stop within the grace period")

    def close_writer(self) -> str | None:
        if self.writer is None:
            return None
        try:
            self.writer_stats = ray.get(self.writer.close.remote(), timeout=SHUTDOWN_CALL_S)
        except Exception as exc:  # noqa: BLE001 - the files on disk still tell the story
            log.error("closing the result writer failed: %s", exc)
            return f"closing the result writer failed: {type(exc).__name__}: {exc}"
        return None

    def final_stats(self) -> None:
        if self.evaluator is None:
            return
        with contextlib.suppress(Exception):
            stats = ray.get(self.evaluator.stats.remote(), timeout=SHUTDOWN_CALL_S)
            self.note_evaluator(stats)
            self.eval_stats = stats
        self.eval_stats = {**self.eval_stats, "restarts": self.evaluator_restarts}

    def kill_actors(self) -> None:
        for actor in [*self.agents.values(), self.evaluator, self.writer]:
            if actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
