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
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

from sr_dist.search.actors import (
    AgentActor,
    DatasetHolder,
    EvaluatorActor,
    HeldDataset,
    ResultWriter,
)
from sr_dist.search.agent_run import AgentOutcome, AgentSpec, agent_seed, run_python_limits
from sr_dist.search.decisions import decide_stop, new_run_id
from sr_dist.search.errors import SearchError
from sr_dist.search.pool_plan import replica_bundle, resolve_replicas
from sr_dist.search.pool_stats import merge_replica_stats
from sr_dist.search.progress import ProgressReporter, ProgressSnapshot, TallySnapshot
from sr_dist.search.ray_setup import (
    actor_runtime_env,
    agent_actor_name,
    cpu_env,
    evaluator_actor_name,
    evaluator_env,
    writer_actor_name,
)
from sr_dist.search.resume import ResumeState, session_seed
from sr_dist.search.routing import route
from sr_dist.search.settings import Settings

__all__ = ["STOP_SIGNALS", "Driver", "Interrupts", "reports_restart"]

log = logging.getLogger(__name__)

#: Seconds between polls of the actors.
POLL_S = 0.5
#: Seconds between evaluator stats polls (fits/s is measured over this window).
STATS_EVERY_S = 2.0
#: Longest wait for the evaluator actor to start and warm up (a cold compile, a GPU node).
EVALUATOR_START_S = 900.0
#: Longest wait for a call to the writer or the evaluator during shutdown.
SHUTDOWN_CALL_S = 60.0
#: Longest wait for the evaluator replicas' final stats (one that cannot come back, its node
#: lost and no room elsewhere, must not hold up the end of the run).
FINAL_STATS_S = 10.0
#: The result writer's allocators. Its ~1,000 threads (one per acknowledgement in flight)
#: would each get a glibc arena, and Arrow's jemalloc pool keeps what a merge used: both grew
#: the writer's memory with the run in the million-row soak (bench/soak.py); two arenas and
#: the system pool keep it at the size of one merge.
WRITER_ENV = {"MALLOC_ARENA_MAX": "2", "ARROW_DEFAULT_MEMORY_POOL": "system"}
#: Ray's own resends of an evaluator call that was in flight when a lone evaluator died (the
#: agents' ``EvaluatorPool`` resends on top of this, with backoff). With several replicas Ray
#: does not resend: the pool reroutes the call to a live replica at once instead of waiting
#: for the dead one to restart.
EVALUATOR_TASK_RETRIES = 2


#: The signals that stop a run cleanly: Ctrl-C, what ``ray job stop``, Kubernetes and Slurm send,
#: and a closed terminal (where the platform has them).
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def reports_restart(exc: BaseException) -> bool:
    """Whether a failed call says the actor's process is gone and Ray is bringing it back:
    Ray's ``ActorUnavailableError``, whether it says "restarting" (the process died) or that
    the actor's address refuses connections (its node died: Ray restarts it elsewhere). A
    slow actor times out instead, and one Ray gave up on raises ``RayActorError``. The count
    stays right if the actor was only unreachable: when it next answers, its instance token
    decides (``Driver.note_evaluator``)."""
    return isinstance(exc, ActorUnavailableError)


class Interrupts:
    """Turns SIGINT, SIGTERM and SIGHUP into flags the driver reads.

    The first signal asks for a clean stop (``signal``); a second one during the stop skips
    what is left of the agents' grace period (``hurry``: agents are killed, the writer still
    flushes and the runs row is still written); a third raises ``KeyboardInterrupt``.
    ``ray.init`` installs its own SIGTERM handler (a bare ``sys.exit``), so the driver calls
    :meth:`reinstall` once Ray is up.
    """

    def __init__(self) -> None:
        self.signal: int | None = None
        self.count = 0
        self._previous: dict[signal.Signals, Any] = {}
        self._enabled = False

    @property
    def hurry(self) -> bool:
        return self.count >= 2

    @property
    def name(self) -> str | None:
        """``SIGTERM`` and the like, for the runs row."""
        return signal.Signals(self.signal).name if self.signal is not None else None

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.signal is None:
            self.signal = signum
        if self.count >= 3:
            raise KeyboardInterrupt

    def reinstall(self) -> None:
        """Take the signals back (from ``ray.init``, which replaces the SIGTERM handler)."""
        if self._enabled:
            for signum in STOP_SIGNALS:
                signal.signal(signum, self._handle)

    @contextlib.contextmanager
    def installed(self, enabled: bool) -> Iterator[Interrupts]:
        if not enabled or threading.current_thread() is not threading.main_thread():
            yield self
            return
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        self._enabled = True
        try:
            yield self
        finally:
            self._enabled = False
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
        #: The evaluator replicas (index = replica number).
        self.evaluators: list[Any] = []
        self.placement: Any = None
        #: The evaluator replicas' start answers still awaited while the search runs (the
        #: search started before them), and since when.
        self._starting: list[Any] = []
        self._starting_since = 0.0
        self.writer: Any = None
        #: Agent id -> the actor hosting it (several ids share one with agents_per_actor > 1).
        self.agents: dict[int, Any] = {}
        self.pending: dict[Any, int] = {}
        self.outcomes: dict[int, AgentOutcome] = {}
        self.lost: list[int] = []
        #: Restarts per agent (search.restart_lost_agents) and the rows its lost incarnations
        #: had written (counted into its outcome's rows_sent).
        self.restarts: dict[int, int] = {}
        self.earlier_rows: dict[int, int] = {}
        self.stopping = False
        #: Elapsed seconds at which a candidate first reached ``search.target_nmse`` (the
        #: polish window, ``search.polish_s``, counts from it).
        self.target_reached_s: float | None = None
        #: Why the writer gave up (a full or read-only disk): the run stops ``write_failed``.
        self.write_error: str | None = None
        self._dataset: Any = None
        self._dataset_holder: Any = None
        self._held: Any = None
        self._model_label = ""
        self.tally = TallySnapshot(0, {}, {}, None)
        self.eval_stats: dict[str, Any] = {}
        self.writer_stats: dict[str, Any] = {}
        self.fits_per_s = 0.0
        self._last_stats: tuple[float, int] | None = None
        self.replica_stats: dict[int, dict[str, Any]] = {}
        #: Instance tokens seen per replica (a new token is a restart).
        self.evaluator_instances: dict[int, list[str]] = {}
        #: Replicas Ray said were restarting whose new instance has not answered yet (a run
        #: that ends first still counts their restart).
        self.restarting: set[int] = set()
        self._variables: tuple[str, ...] = ()

    @property
    def evaluator(self) -> Any:
        """Replica 0 (the only one unless ``evaluator.replicas`` > 1)."""
        return self.evaluators[0] if self.evaluators else None

    def say(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    # -- start --------------------------------------------------------------------------------

    def start_actors(self, dataset: Any, model_label: str) -> None:
        s = self.settings
        self._variables = tuple(dataset.feature_names)
        self._dataset, self._model_label = dataset, model_label
        here = ray.get_runtime_context().get_node_id()
        # The dataset lives in a holder on this node for the whole run; restartable actors
        # fetch it from there (``fetch_dataset``), so none has constructor arguments in the
        # object store, which Ray would not keep for its restart.
        held = HeldDataset(f"sr-dist:{self.run_id}:dataset")
        self._dataset_holder = DatasetHolder.options(  # type: ignore[attr-defined]
            num_cpus=0, runtime_env=actor_runtime_env(cpu_env()["env_vars"]), name=held.holder,
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
        ).remote(dataset)
        self._held = held
        # Threaded (each add waits for the flush that makes it durable), restarted by Ray
        # when it dies, and never retried by Ray: the agents' sinks resend unacknowledged rows.
        self.writer = ResultWriter.options(  # type: ignore[attr-defined]
            num_cpus=0, runtime_env={"env_vars": {**cpu_env()["env_vars"], **WRITER_ENV}},
            name=writer_actor_name(self.run_id),
            # Pinned: results.path is the driver's disk (a restart elsewhere would write to
            # another machine's), and soft affinity may spill to another node under load.
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
            max_concurrency=1000, max_restarts=-1, max_task_retries=0, enable_task_events=False,
        ).remote(str(s.results.path), self.run_id, dataset.name, model_label, s.results.flush_s,
                 base_count=self.resume.candidates_before if self.resume else 0,
                 roll_files=s.results.roll_files, roll_s=s.results.roll_s,
                 target_file_mb=s.results.target_file_mb, compact=s.results.compact)
        self._start_pool(self._held)
        # The agent actors' processes start (Ray worker, imports, the dataset) and build
        # their episodes (evolve's seed library) while the evaluator starts; when the
        # episodes begin, and the search's clock with them, is decided below.
        per_actor = s.search.agents_per_actor
        hosts = [self._create_agents([self._spec(agent_id) for agent_id in
                                      range(first, min(first + per_actor, s.search.agents))],
                                     agent_actor_name(self.run_id, first))
                 for first in range(0, s.search.agents, per_actor)]
        prepared = [actor.prepare.remote(spec.agent_id) for actor, specs in hosts
                    for spec in specs]
        starting = self._start_evaluator()
        # Without a warm-up (or a resumed run's pre-fit) nothing needs the evaluator before
        # the search: the clock starts once the agents are prepared and the evaluator has its
        # place on the cluster, and the evaluator's start (JAX's import, the compiles its first
        # requests need, loaded from the persistent cache) overlaps the first proposals,
        # which wait in its actor until it is up. The poll loop confirms it came up
        # (:meth:`_check_started`), so the driver keeps polling, and hears a signal, meanwhile.
        early = not s.evaluator.warmup and (self.resume is None or not self.resume.warm)
        if early:
            self._await_placement()
            ray.wait(prepared, num_returns=len(prepared), timeout=EVALUATOR_START_S)
        else:
            self._await_evaluator(starting)
            self._prefit()
        self._expect(list(range(s.search.agents)))
        for actor, specs in hosts:
            self._run_agents(actor, specs)
        self.search_started = time.monotonic()
        if early:
            self._starting, self._starting_since = starting, self.search_started

    def _start_agents(self, specs: list[AgentSpec], name: str) -> None:
        """One agent actor hosting ``specs``; their ``run`` references join ``pending``."""
        self._run_agents(*self._create_agents(specs, name))

    def _create_agents(self, specs: list[AgentSpec], name: str) -> tuple[Any, list[AgentSpec]]:
        """The actor that will host ``specs`` (known to :meth:`kill_actors` from now on)."""
        actor = AgentActor.options(  # type: ignore[attr-defined]
            name=name, num_cpus=0, max_concurrency=len(specs) + 16,
            runtime_env=actor_runtime_env(cpu_env()["env_vars"]),
            scheduling_strategy="SPREAD",
        ).remote(specs, self._held, self.evaluators, self.writer,
                 self.settings.evaluator.max_in_flight)
        for spec in specs:
            self.agents[spec.agent_id] = actor
        return actor, specs

    def _run_agents(self, actor: Any, specs: list[AgentSpec]) -> None:
        for spec in specs:
            self.pending[actor.run.remote(spec.agent_id)] = spec.agent_id

    def _spec(self, agent_id: int, offset: int | None = None,
              prior: tuple[Mapping[str, Any], ...] | None = None) -> AgentSpec:
        """Agent ``agent_id``'s episode: a resumed run's (or a replacement's, with ``offset``
        and ``prior`` from its rows) continues after its last step with a fresh seed."""
        s, dataset = self.settings, self._dataset
        if offset is None:
            offset = self.resume.step_offset(agent_id) if self.resume else 0
        if prior is None:
            prior = self.resume.prior_of(agent_id) if self.resume else ()
        return AgentSpec(
            run_id=self.run_id, agent_id=agent_id,
            seed=session_seed(agent_seed(s.search.seed, agent_id), offset),
            model=dict(s.model),
            model_label=self._model_label, dataset_name=dataset.name,
            max_turns=s.search.max_turns, max_tool_calls=s.search.max_tool_calls,
            failure_budget=s.search.failure_budget,
            # with a polish window the driver stops the run on the target, not each agent
            target_nmse=s.search.target_nmse if s.search.polish_s <= 0 else None,
            deadline_s=s.search.max_seconds, servers=s.servers,
            step_offset=offset, prior=prior, tools=s.search.tools,
            dimensionless_constants_only=s.search.dimensionless_constants_only,
            run_python=run_python_limits(s.search), tool_experience=s.search.tool_experience,
            agents=s.search.agents,
        )

    def _start_pool(self, dataset: Any) -> None:
        """The evaluator replicas, one placement-group bundle each, spread across nodes."""
        s = self.settings.evaluator
        resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call,unused-ignore]
        count = resolve_replicas(s.replicas, s.device, resources, num_gpus=s.num_gpus,
                                 cpus_per_replica=s.cpus_per_replica)
        bundle = replica_bundle(s.device, num_gpus=s.num_gpus, cpus_per_replica=s.cpus_per_replica)
        need = {k: v * count for k, v in bundle.items()}
        short = {k: v for k, v in need.items() if float(resources.get(k, 0.0)) < v}
        if short and self.settings.ray.starts_cluster:
            what, amount = next(iter(short.items()))
            fix = ("lower evaluator.replicas (or evaluator.cpus_per_replica), or raise "
                   "ray.num_cpus" if what == "CPU" else "lower evaluator.replicas or "
                   "evaluator.num_gpus, or join a cluster with GPUs (ray.address)")
            raise SearchError(
                f"evaluator.replicas={count} needs {amount:g} {what} in all (per replica: "
                f"{bundle}) and this machine's cluster has {float(resources.get(what, 0)):g}: "
                + fix)
        if short:
            self.say(f"sr-dist: the cluster has {dict(resources)} and {count} evaluator "
                     f"replica(s) need {need}; waiting up to {EVALUATOR_START_S:.0f} s for nodes")
        self.placement = placement_group([dict(bundle) for _ in range(count)], strategy="SPREAD",
                                         name=f"sr-dist:{self.run_id}:evaluators")
        retries = EVALUATOR_TASK_RETRIES if s.max_restarts and count == 1 else 0
        for replica in range(count):
            options: dict[str, Any] = {
                "num_cpus": bundle.get("CPU", 0), "max_concurrency": 10_000,
                "name": evaluator_actor_name(self.run_id, replica),
                "max_restarts": s.max_restarts, "max_task_retries": retries,
                "scheduling_strategy": PlacementGroupSchedulingStrategy(
                    self.placement, placement_group_bundle_index=replica),
            }
            if s.device == "gpu":
                options["num_gpus"] = s.num_gpus
            else:
                options["runtime_env"] = actor_runtime_env(evaluator_env(s.cpus_per_replica))
            evaluator_cls: Any = EvaluatorActor
            self.evaluators.append(evaluator_cls.options(**options).remote(dataset, s, replica))

    def _expect(self, agent_ids: list[int]) -> None:
        for handle in self.evaluators:
            handle.expect.remote(agent_ids)

    def _prefit(self) -> None:
        """A resumed run: fit the old run's best structures first, so re-proposals are hits."""
        if self.resume is None or not self.resume.warm:
            return
        self.say(f"sr-dist: resuming run {self.run_id} ({self.resume.candidates_before:,} earlier "
                 f"candidates); warming the evaluator with {len(self.resume.warm):,} of its "
                 "best formulas ...")
        from sr_dist.search.pool import EvaluatorPool

        warm = list(self.resume.warm)
        keys = EvaluatorPool(self.evaluators, self._variables).keys(warm)
        calls = [self.evaluators[r].prefit.remote([warm[i] for i in positions])
                 for r, positions in route(keys, len(self.evaluators)).items()]
        done = ray.get(calls, timeout=EVALUATOR_START_S)
        self.say(f"sr-dist: evaluator warmed in {max(d['seconds'] for d in done):.1f} s")

    def _start_evaluator(self) -> list[Any]:
        """Ask the evaluator replicas for their warm-up (without one, for their stats: they
        answer once started); :meth:`_await_evaluator` waits for the answers."""
        s = self.settings.evaluator
        # The offline proposer asks for local searches (inherited constants, on by default):
        # compile those executables before the search too, not in its first seconds.
        model = self.settings.model
        local = (model.get("provider") == "evolve"
                 and model.get("inherit_constants", True) is not False)
        calls = [h.warmup.remote(local=local) if s.warmup else h.stats.remote()
                 for h in self.evaluators]
        if s.warmup:
            replicas = f"{len(calls)} evaluator replicas" if len(calls) > 1 else "the evaluator"
            self.say(f"sr-dist: warming up {replicas} (compiling; cached across runs) ...")
        return calls

    def _not_started(self) -> SearchError:
        s = self.settings.evaluator
        return SearchError(
            f"the evaluator actor did not start within {EVALUATOR_START_S:.0f} s "
            f"(evaluator.device={s.device}, num_gpus={s.num_gpus:g}): does the cluster "
            "have the resources?")

    def _await_placement(self) -> None:
        """Wait until the cluster has reserved the evaluator replicas' resources (at once on a
        machine's own cluster; a cluster that must add a node for them takes longer)."""
        ready, _ = ray.wait([self.placement.ready()], timeout=EVALUATOR_START_S)
        if not ready:
            raise self._not_started()

    @staticmethod
    def _could_not_start(exc: RayError) -> SearchError:
        cause = str(exc).strip().splitlines()
        return SearchError("the evaluator actor could not start: "
                           + (cause[-1] if cause else type(exc).__name__))

    def _check_started(self) -> None:
        """During the search: take the evaluator replicas' start answers that have come (a
        clear error if one could not start, or none came within ``EVALUATOR_START_S``)."""
        if not self._starting:
            return
        ready, self._starting = ray.wait(self._starting, num_returns=len(self._starting),
                                         timeout=0)
        for ref in ready:
            try:
                ray.get(ref)
            except RayError as exc:
                raise self._could_not_start(exc) from exc
        if self._starting and time.monotonic() - self._starting_since > EVALUATOR_START_S:
            raise self._not_started()

    def _await_evaluator(self, calls: list[Any]) -> None:
        """Wait for the evaluator replicas' answers; a clear error if one cannot start."""
        s = self.settings.evaluator
        try:
            results = ray.get(calls, timeout=EVALUATOR_START_S)
        except GetTimeoutError:
            raise self._not_started() from None
        except RayError as exc:
            raise self._could_not_start(exc) from exc
        if s.warmup:
            slowest = max(results, key=lambda r: float(r["seconds"]))
            self.say(f"sr-dist: evaluator ready in {slowest['seconds']:.1f} s "
                     f"({slowest['compiles']} compiles, {slowest['compile_s']:.1f} s compiling)")

    # -- poll ---------------------------------------------------------------------------------

    def collect(self, timeout: float) -> None:
        if not self.pending:
            time.sleep(timeout)
            return
        ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=timeout)
        if ready and self.evaluators:
            finished = {self.pending[ref] for ref in ready}
            self._expect(sorted(i for i in self.pending.values() if i not in finished))
        lost: list[int] = []
        for ref in ready:
            agent_id = self.pending.pop(ref)
            try:
                outcome = ray.get(ref)
            except RayError as exc:
                log.warning("agent %d was lost: %s", agent_id, str(exc).splitlines()[0])
                if self._may_restart(agent_id):
                    lost.append(agent_id)
                    continue
                self.lost.append(agent_id)
                outcome = AgentOutcome(agent_id, "lost", error=str(exc)[:500])
            if agent_id in self.restarts:
                outcome = outcome.after_restarts(self.restarts[agent_id],
                                                 self.earlier_rows.get(agent_id, 0))
            self.outcomes[agent_id] = outcome
        if lost:
            self._restart(lost)

    def _may_restart(self, agent_id: int) -> bool:
        s = self.settings.search
        return (s.restart_lost_agents and not self.stopping
                and self.interrupts.signal is None
                and self.restarts.get(agent_id, 0) < s.max_agent_restarts)

    def _restart(self, agent_ids: list[int]) -> None:
        """Start lost agents again (``search.agents_per_actor`` to a new actor, as at the start),
        each from its rows on disk: its steps continue after its last one, its best rows are
        its warm start."""
        from sr_dist.search.resume import agent_restarts

        last_steps: dict[int, int] = {}
        try:  # the lost agents' buffered rows on disk first; the writer knows their last steps
            ray.get(self.writer.flush.remote(), timeout=SHUTDOWN_CALL_S)
            last_steps = ray.get(self.writer.last_steps.remote(), timeout=SHUTDOWN_CALL_S)
        except Exception as exc:  # noqa: BLE001 - the disk still says where each agent was
            log.warning("the result writer could not say where the lost agents were: %s", exc)
        specs = []
        states = agent_restarts(self.settings.results.path, self.run_id, agent_ids)
        for agent_id in agent_ids:
            self.restarts[agent_id] = self.restarts.get(agent_id, 0) + 1
            state = states[agent_id]
            self.earlier_rows[agent_id] = state.rows
            last = max(state.last_step, int(last_steps.get(agent_id, -1)))
            specs.append(self._spec(agent_id, offset=max(0, last), prior=state.prior))
        counts = ", ".join(f"{i} ({self.restarts[i]}/{self.settings.search.max_agent_restarts})"
                           for i in agent_ids)
        self.say(f"sr-dist: restarting lost agent(s) {counts} from their rows on disk")
        per_actor = self.settings.search.agents_per_actor  # as many per process as before
        for first in range(0, len(specs), per_actor):
            group = specs[first:first + per_actor]
            lead = group[0].agent_id
            self._start_agents(group, f"{agent_actor_name(self.run_id, lead)}"
                                      f"-restart-{self.restarts[lead]}")
        self._expect(sorted(self.pending.values()))

    def note_evaluator(self, stats: Mapping[str, Any]) -> None:
        """Count a replica's restarts by its instance token; tell a new instance who is running
        (a restarted actor has lost that)."""
        instance = stats.get("instance")
        replica = int(stats.get("replica", 0))
        self.restarting.discard(replica)  # it answers: its tokens say whether it restarted
        seen = self.evaluator_instances.setdefault(replica, [])
        if not instance or instance in seen:
            return
        seen.append(str(instance))
        if len(seen) > 1:
            which = f"evaluator replica {replica}" if len(self.evaluators) > 1 else "the evaluator actor"
            self.say(f"sr-dist: {which} was restarted (restart {len(seen) - 1}); in-flight fits "
                     "are being resent")
            self.evaluators[replica].expect.remote(sorted(self.pending.values()))

    @property
    def evaluator_restarts(self) -> int:
        return (sum(max(0, len(seen) - 1) for seen in self.evaluator_instances.values())
                + len(self.restarting))

    def poll_replicas(self, timeout_s: float) -> None:
        """Ask every replica for its stats; a replica that does not answer (restarting) keeps
        its last figures."""
        refs = {handle.stats.remote(): i for i, handle in enumerate(self.evaluators)}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
        for ref in ready:
            try:
                stats = ray.get(ref)
            except RayError as exc:
                log.warning("evaluator replica %d stats unavailable: %s", refs[ref],
                            str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                if reports_restart(exc):
                    self.restarting.add(refs[ref])
                continue
            self.note_evaluator(stats)
            self.replica_stats[refs[ref]] = stats
        if len(ready) < len(refs):
            log.warning("%d evaluator replica(s) did not answer within %.0f s (restarting?)",
                        len(refs) - len(ready), timeout_s)

    def refresh(self, now: float, with_stats: bool) -> None:
        try:  # a writer Ray is restarting answers once it is back; keep the last tally
            self.tally = ray.get(self.writer.progress.remote(), timeout=10.0)
        except RayError as exc:
            log.warning("the result writer did not report progress (restarting?): %s",
                        str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__)
        if with_stats and self.evaluators:
            self.poll_replicas(SHUTDOWN_CALL_S)
            if not self.replica_stats:
                return
            self.eval_stats = merge_replica_stats(
                [self.replica_stats[i] for i in sorted(self.replica_stats)])
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
            queue_p99_s=dict(self.eval_stats.get("queue_wait", {})).get("p99_s"),
            replicas=max(1, len(self.evaluators)),
            busy_share=self.busy_share(now),
        )

    def busy_share(self, now: float) -> float | None:
        """The evaluator pool's busy seconds (from its last stats) over the replicas' seconds
        since the search began; ``None`` before the search or any stats."""
        busy = self.eval_stats.get("busy_s")
        if self.search_started is None or not isinstance(busy, (int, float)):
            return None
        span = (now - self.search_started) * max(1, len(self.evaluators))
        return float(busy) / span if span > 1.0 else None

    def search(self, reporter: ProgressReporter) -> str:
        """Poll until a stop rule fires; returns the stop reason."""
        last_stats = 0.0
        while True:
            if self.interrupts.signal is not None:
                return "interrupted"
            self._check_started()
            self.collect(POLL_S)
            now = time.monotonic()
            with_stats = now - last_stats >= STATS_EVERY_S or not self.pending
            if with_stats:
                last_stats = now
            self.refresh(now, with_stats)
            snap = self.snapshot(now)
            reporter.update(snap, now)
            if self.tally.write_error:
                self.write_error = self.tally.write_error
                reporter.update(snap, now, force=True)
                self.say(f"sr-dist: the results disk refused the rows: {self.write_error}; "
                         "stopping the run (what was written stays readable)")
                return "write_failed"
            target = self.settings.search.target_nmse
            if self.target_reached_s is None and target is not None \
                    and snap.best_val_nmse is not None and snap.best_val_nmse <= target:
                self.target_reached_s = snap.elapsed_s
            reason = decide_stop(
                self.settings.search, elapsed_s=snap.elapsed_s, candidates=snap.candidates,
                best_val_nmse=snap.best_val_nmse, agents_running=len(self.pending),
                agent_reasons=[o.stop_reason for o in self.outcomes.values()],
                target_reached_s=self.target_reached_s,
            )
            if reason is not None:
                reporter.update(snap, now, force=True)
                return reason

    # -- stop ---------------------------------------------------------------------------------

    def stop_agents(self) -> None:
        self.stopping = True
        if self.writer is not None:  # the agents' last rows are acknowledged without waiting
            with contextlib.suppress(Exception):
                self.writer.stop_batching.remote()
        for agent_id, actor in self.agents.items():
            if agent_id not in self.outcomes:
                with contextlib.suppress(Exception):
                    actor.stop.remote(agent_id)
        deadline = time.monotonic() + self.settings.search.stop_grace_s
        while self.pending and time.monotonic() < deadline and not self.interrupts.hurry:
            self.collect(min(POLL_S, max(0.0, deadline - time.monotonic())))
        for ref, agent_id in list(self.pending.items()):
            log.warning("agent %d did not stop %s; killing it", agent_id,
                        "(a second signal)" if self.interrupts.hurry
                        else f"within {self.settings.search.stop_grace_s:.0f} s")
            with contextlib.suppress(Exception):
                ray.kill(self.agents[agent_id])
            self.pending.pop(ref)
            self.outcomes[agent_id] = AgentOutcome(agent_id, "killed",
                                                   error="did not stop within the grace period")

    def close_writer(self) -> str | None:
        if self.writer is None:
            return None
        for attempt in range(3):  # a writer that died in the call is restarted by Ray: ask again
            try:
                self.writer_stats = ray.get(self.writer.close.remote(), timeout=SHUTDOWN_CALL_S)
                return None
            except Exception as exc:  # noqa: BLE001 - the files on disk still tell the story
                if isinstance(exc, ray.exceptions.RayActorError) and attempt < 2:
                    log.warning("the result writer died while closing; asking its restart again")
                    continue
                log.error("closing the result writer failed: %s", exc)
                return f"closing the result writer failed: {type(exc).__name__}: {exc}"
        return None

    def final_stats(self) -> None:
        if not self.evaluators:
            return
        with contextlib.suppress(Exception):  # a replica still restarting keeps its last figures
            self.poll_replicas(FINAL_STATS_S)
        searched = ((self.search_ended or time.monotonic()) - self.search_started
                    if self.search_started is not None else 0.0)
        if self.replica_stats:
            self.eval_stats = merge_replica_stats(
                [self.replica_stats[i] for i in sorted(self.replica_stats)], search_s=searched)
        self.eval_stats = {**self.eval_stats, "restarts": self.evaluator_restarts}

    def kill_actors(self) -> None:
        hosts = {id(actor): actor for actor in self.agents.values()}
        for actor in [*hosts.values(), *self.evaluators, self.writer, self._dataset_holder]:
            if actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
        if self.placement is not None:
            with contextlib.suppress(Exception):
                remove_placement_group(self.placement)
