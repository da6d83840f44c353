"""``run_search(cfg) -> RunSummary``: one search on Ray, from config to Parquet results.

The driver starts (or joins) Ray, loads the dataset once, starts the shared evaluator actor
(and warms it up), the result writer actor and ``search.agents`` agent actors, then polls: the
writer's tally (candidates, best validation NMSE), the evaluator's stats (fits/s) and the agents'
futures. It stops at the first of ``max_seconds``, ``max_candidates``, ``target_nmse`` or all
agents done, or on SIGINT/SIGTERM; asks the agents to stop, kills stragglers after a grace
period, closes the writer, writes the final ``runs`` row and prints the Pareto front.

The decisions (when to stop, what the run's status is) are the pure functions at the top.

Faults (docs/reliability.md): the evaluator actor is restarted by Ray and the agents resend the
fits it lost; a lost agent is reported and the others go on; SIGINT/SIGTERM flush the results
and mark the run ``interrupted``; ``run.resume=RUN_ID`` continues a run (:mod:`.resume`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from sr_dist.search.episode import AgentOutcome, AgentSpec, agent_seed
from sr_dist.search.resume import ResumeState, session_seed
from sr_dist.search.progress import (
    ProgressReporter,
    ProgressSnapshot,
    TallySnapshot,
    format_constants,
    format_pareto,
)
from sr_dist.search.settings import SearchSettings, Settings, SettingsError, settings_from_config

__all__ = [
    "BestFormula",
    "RunSummary",
    "SearchError",
    "agent_actor_name",
    "decide_stop",
    "evaluator_actor_name",
    "is_failure_reason",
    "resolve_settings",
    "final_status",
    "new_run_id",
    "run_search",
]

log = logging.getLogger(__name__)

#: Seconds between polls of the actors.
POLL_S = 0.5
#: Seconds between evaluator stats polls (fits/s is measured over this window).
STATS_EVERY_S = 2.0
#: Validation NMSE at or below which the best formula is checked against the ground truth.
RECOVERY_NMSE = 1e-8
#: Longest wait for the evaluator actor to start and warm up (a cold compile, a GPU node).
EVALUATOR_START_S = 900.0
#: Longest wait for a call to the writer or the evaluator during shutdown.
SHUTDOWN_CALL_S = 60.0
#: Ray's own resends of an evaluator call that was in flight when the actor died (the agents'
#: ``EvaluatorClient`` resends on top of this, with backoff).
EVALUATOR_TASK_RETRIES = 2
#: Agent stop reasons that mean the agent could not go on (not a budget or a finished search).
FAILURE_REASONS = ("error", "internal_error", "lost")


class SearchError(RuntimeError):
    """The run could not start or broke down (bad config, Ray unreachable, a dead actor)."""


@dataclasses.dataclass(frozen=True)
class BestFormula:
    """The run's best candidate (lowest validation NMSE among ``ok`` ones)."""

    expression: str
    constants: dict[str, float | None]
    complexity: int | None
    val_nmse: float | None
    test_nmse: float | None
    candidate_id: str
    recovered: bool | None = None

    def with_constants(self) -> str:
        """The expression followed by its fitted constants."""
        if not self.constants:
            return self.expression
        values = ", ".join(
            f"{k}={'nan' if v is None else format(v, '.6g')}" for k, v in self.constants.items()
        )
        return f"{self.expression}  [{values}]"


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """What a finished (or interrupted) run reports."""

    run_id: str
    status: str
    stop_reason: str
    best: BestFormula | None
    candidates: int
    wall_s: float
    results_path: Path
    dataset: str
    model: str
    agents: tuple[AgentOutcome, ...]
    lost_agents: tuple[int, ...]
    evaluator: Mapping[str, Any]
    writer: Mapping[str, Any]
    error: str | None = None
    signal: int | None = None
    #: Seconds from the agents' start to the stop (``wall_s`` adds Ray, warm-up, shutdown).
    search_s: float = 0.0
    #: This session continued an earlier one (``run.resume``) that had written this many rows.
    resumed: bool = False
    candidates_before: int = 0

    @property
    def rows_sent(self) -> int:
        """Candidate rows the agents that finished handed to the writer (lost agents' unknown)."""
        return sum(a.rows_sent for a in self.agents)

    @property
    def query_command(self) -> str:
        return f"sr-dist-query {self.results_path} --run {self.run_id}"

    @property
    def all_agents_failed(self) -> bool:
        return bool(self.agents) and all(
            a.failed or a.agent_id in self.lost_agents for a in self.agents
        )

    @property
    def exit_code(self) -> int:
        """0 for a run that searched (budget stops included); 128+N after signal N; 1 if the
        run failed or every agent failed."""
        if self.signal is not None:
            return 128 + int(self.signal)
        if self.status == "failed" or self.all_agents_failed:
            return 1
        return 0


# --- pure decisions ----------------------------------------------------------------------------

def new_run_id(now: datetime | None = None, token: str | None = None) -> str:
    """``YYYYmmdd-HHMMSS-xxxxxx`` in UTC: sortable by start time, unique by the random tail."""
    now = now or datetime.now(timezone.utc)
    return f"{now.astimezone(timezone.utc):%Y%m%d-%H%M%S}-{token or secrets.token_hex(3)}"


def is_failure_reason(reason: str) -> bool:
    """An agent stop reason that means it could not go on (its model or episode broke)."""
    return reason in FAILURE_REASONS or reason.startswith("model_error")


def decide_stop(
    budget: SearchSettings,
    *,
    elapsed_s: float,
    candidates: int,
    best_val_nmse: float | None,
    agents_running: int,
    agent_reasons: Sequence[str] = (),
) -> str | None:
    """Why the run should stop now, or ``None`` to keep going (first match wins)."""
    if (budget.target_nmse is not None and best_val_nmse is not None
            and best_val_nmse <= budget.target_nmse):
        return "target_nmse"
    if candidates >= budget.max_candidates:
        return "max_candidates"
    if agents_running == 0:
        reasons = set(agent_reasons)
        if reasons and all(is_failure_reason(r) for r in reasons):
            return "agents_failed"
        if len(reasons) == 1:
            (only,) = reasons
            return only
        return "agents_done"
    if elapsed_s >= budget.max_seconds:
        return "max_seconds"
    return None


def final_status(stop_reason: str, *, signal_number: int | None, error: str | None) -> str:
    """The ``runs.status`` for how a run ended."""
    if signal_number is not None:
        return "interrupted"
    if error is not None or stop_reason == "agents_failed":
        return "failed"
    return "completed"


# --- Ray set-up --------------------------------------------------------------------------------

def set_auth_mode(mode: str) -> None:
    """Export ``RAY_AUTH_MODE``. Ray 2.52+ turns token auth on for a new local cluster when it
    is unset (and warns); sr-dist always decides explicitly (``ray.auth_mode``).

    Ray reads the variable into its native config when it is first imported; if Ray is already
    imported (a sweep's second run, an embedding program), the config is re-read, as Ray itself
    does when it enables token auth.
    """
    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = mode
    if previous == mode or "ray" not in sys.modules:
        return
    try:
        from ray._raylet import Config  # type: ignore[attr-defined]

        Config.initialize("")
    except (ImportError, AttributeError):  # pragma: no cover - a Ray without the hook
        log.warning("could not refresh Ray's config; RAY_AUTH_MODE=%s applies to new processes",
                    mode)


def _init_ray(settings: Settings) -> bool:
    """Connect to Ray; returns whether this call started (and so must shut down) a cluster."""
    set_auth_mode(settings.ray.auth_mode)
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING}
    if settings.ray.address is None:
        kwargs.update(address="local", include_dashboard=settings.ray.include_dashboard)
        if settings.ray.num_cpus is not None:
            kwargs["num_cpus"] = settings.ray.num_cpus
    else:
        kwargs["address"] = settings.ray.address
    try:
        ray.init(**kwargs)
    except Exception as exc:  # noqa: BLE001 - a clear message instead of a Ray traceback
        where = settings.ray.address or "a new local cluster"
        raise SearchError(f"could not start Ray ({where}): {type(exc).__name__}: {exc}") from exc
    return True


def agent_actor_name(run_id: str, agent_id: int) -> str:
    """The Ray name of an agent actor (``ray list actors`` shows it; tests look it up)."""
    return f"sr-dist:{run_id}:agent-{agent_id}"


def evaluator_actor_name(run_id: str) -> str:
    """The Ray name of a run's evaluator actor (fault-injection tests look it up)."""
    return f"sr-dist:{run_id}:evaluator"


def _cpu_env() -> dict[str, Any]:
    return {"env_vars": {"JAX_PLATFORMS": "cpu"}}


# --- signals -----------------------------------------------------------------------------------

class _Interrupts:
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
    def installed(self, enabled: bool) -> Iterator[_Interrupts]:
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


# --- the run -----------------------------------------------------------------------------------

def _model_label(model_cfg: Mapping[str, Any]) -> str:
    """Build the model once in the driver (a bad config fails here, before any actor starts)
    and return its label for the results' ``model`` column."""
    from sr_dist.models import ModelConfigError, build_model

    cfg = dict(model_cfg)
    try:
        model = build_model(cfg)
    except ModelConfigError as exc:
        raise SettingsError("model", f"is not usable: {exc}") from exc
    name = getattr(model, "name", None) or cfg.get("model") or cfg.get("provider")
    provider = cfg.get("provider")
    return str(name) if provider in (None, name) else f"{provider}:{name}"


def _best_from_row(row: Mapping[str, Any] | None, dataset: Any) -> BestFormula | None:
    if row is None:
        return None
    constants: dict[str, float | None] = {}
    if row.get("constants"):
        with contextlib.suppress(TypeError, ValueError):
            constants = dict(json.loads(row["constants"]))
    recovered: bool | None = None
    truth = getattr(dataset, "ground_truth", None)
    val = row.get("val_nmse")
    # The symbolic check (sympy) is only worth running, and only reliably quick, for a
    # candidate that fits essentially exactly; anything else is not a recovery anyway.
    if truth and (val is None or val > RECOVERY_NMSE):
        recovered = False
    elif truth:
        try:
            from sr_dist.sr.evolve.recovery import exact_recovery

            finite = {k: v for k, v in constants.items() if v is not None}
            recovered = bool(exact_recovery(row["expression"], finite, truth,
                                            list(dataset.feature_names)))
        except Exception:  # noqa: BLE001 - a check for the report, never a reason to fail
            log.debug("recovery check failed", exc_info=True)
    return BestFormula(
        expression=str(row["expression"]),
        constants=constants,
        complexity=row.get("complexity"),
        val_nmse=row.get("val_nmse"),
        test_nmse=row.get("test_nmse"),
        candidate_id=str(row.get("candidate_id")),
        recovered=recovered,
    )


class _Run:
    """The driver's state for one run (a shell around the pure decisions above)."""

    def __init__(self, settings: Settings, stream: TextIO, interrupts: _Interrupts,
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
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from sr_dist.search.actors import AgentActor, EvaluatorActor, ResultWriter

        s = self.settings
        dataset_ref = ray.put(dataset)
        here = ray.get_runtime_context().get_node_id()
        self.writer = ResultWriter.options(  # type: ignore[attr-defined]
            num_cpus=0, runtime_env=_cpu_env(), name=None,
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
            ev_options["runtime_env"] = _cpu_env()
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
            )
            actor = AgentActor.options(  # type: ignore[attr-defined]
                name=agent_actor_name(self.run_id, agent_id),
                num_cpus=0, max_concurrency=16, runtime_env=_cpu_env(),
                scheduling_strategy="SPREAD",
            ).remote(spec, dataset_ref, self.evaluator, self.writer)
            self.agents[agent_id] = actor
            self.pending[actor.run.remote()] = agent_id
        self.search_started = time.monotonic()

    def _prefit(self) -> None:
        """A resumed run: fit the old run's best structures first, so re-proposals are hits."""
        import ray

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
        import ray
        from ray.exceptions import GetTimeoutError, RayError

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
        import ray
        from ray.exceptions import RayError

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
        import ray
        from ray.exceptions import GetTimeoutError, RayError

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
        import ray

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
        import ray

        if self.writer is None:
            return None
        try:
            self.writer_stats = ray.get(self.writer.close.remote(), timeout=SHUTDOWN_CALL_S)
        except Exception as exc:  # noqa: BLE001 - the files on disk still tell the story
            log.error("closing the result writer failed: %s", exc)
            return f"closing the result writer failed: {type(exc).__name__}: {exc}"
        return None

    def final_stats(self) -> None:
        import ray

        if self.evaluator is None:
            return
        with contextlib.suppress(Exception):
            stats = ray.get(self.evaluator.stats.remote(), timeout=SHUTDOWN_CALL_S)
            self.note_evaluator(stats)
            self.eval_stats = stats
        self.eval_stats = {**self.eval_stats, "restarts": self.evaluator_restarts}

    def kill_actors(self) -> None:
        import ray

        for actor in [*self.agents.values(), self.evaluator, self.writer]:
            if actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(actor)


def _yaml_mapping(text: str) -> dict[str, Any]:
    from omegaconf import OmegaConf

    container = OmegaConf.to_container(OmegaConf.create(text), resolve=False)
    return {str(k): v for k, v in container.items()} if isinstance(container, dict) else {}


def resolve_settings(cfg: Any, base_dir: str | os.PathLike[str] | None = None) -> Settings:
    """``cfg`` validated; for ``run.resume=ID``, the stored config of run ``ID`` with what this
    command line changed from the defaults laid over it (see :mod:`sr_dist.search.resume`)."""
    from sr_dist.results import read_run
    from sr_dist.search.resume import default_config, merge_resumed_config

    settings = cfg if isinstance(cfg, Settings) else settings_from_config(cfg, base_dir)
    if settings.resume is None or isinstance(cfg, Settings):
        return settings
    path = settings.results.path
    record = read_run(path, settings.resume) if path.is_dir() else None
    if record is None:
        raise SettingsError("run.resume", f"names no run under {path}: there is no runs row for "
                            f"{settings.resume!r} (sr-dist-query {path} lists the runs)")
    if not record.config:
        return settings
    try:
        stored = _yaml_mapping(record.config)
    except Exception as exc:  # noqa: BLE001 - a runs row written by something else
        raise SettingsError("run.resume", f"run {settings.resume!r} has a config that cannot be "
                            f"read: {exc}") from exc
    merged = merge_resumed_config(stored, _yaml_mapping(settings.config_yaml), default_config())
    return settings_from_config(merged, base_dir)


def _resumed_record(old: Any, model_label: str, settings: Settings) -> Any:
    """The runs row of a resumed session: the old one, running again, with this config."""
    return dataclasses.replace(
        old, status="running", stop_reason=None, error=None, ended_at=None, updated_at=None,
        model=model_label, agents=settings.search.agents, config=settings.config_yaml)


def run_search(
    cfg: Any,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    stream: TextIO | None = None,
    handle_signals: bool = True,
    run_id: str | None = None,
) -> RunSummary:
    """Run one search as ``cfg`` (a Hydra config, a mapping, or :class:`Settings`) says.

    Returns the :class:`RunSummary` for completed and interrupted runs alike (``status`` and
    ``exit_code`` tell them apart). Raises :class:`SettingsError` for bad configuration and
    :class:`SearchError` when the run cannot start; once the ``running`` row is written, a
    failure still leaves a ``failed`` row before it is raised.

    ``base_dir``: what relative paths are relative to (default: the current directory).
    ``stream``: where progress and the report go (default: stdout). ``handle_signals``: turn
    SIGINT/SIGTERM into a clean, ``interrupted`` stop (main thread only). ``run_id``: use this
    id instead of a new one (agent actors are named ``sr-dist:<run_id>:agent-<i>``).
    ``run.resume=ID`` in the config continues run ``ID`` (docs/reliability.md).
    """
    from sr_dist.data import DatasetError, load_dataset
    from sr_dist.results import RunRecord, pareto_front, summarize_run, utc_now, write_run

    from sr_dist.search.resume import load_resume

    settings = resolve_settings(cfg, base_dir)
    if settings.resume is not None:
        if run_id is not None and run_id != settings.resume:
            raise SettingsError("run.resume", f"is {settings.resume!r} but run_id={run_id!r} "
                                "was passed too; a resumed run keeps its id")
        run_id = settings.resume
    out = stream if stream is not None else sys.stdout
    if settings.servers:
        from sr_dist.tools.mcp import MCPConfigError, parse_servers

        try:  # refuse a bad launch config before any actor starts
            parse_servers(settings.servers)
        except MCPConfigError as exc:
            raise SettingsError("servers", str(exc)) from exc
    d = settings.dataset
    try:
        dataset = load_dataset(d.source, n=d.n, seed=d.seed, noise=d.noise, target=d.target,
                               split=d.split)
    except DatasetError as exc:
        raise SettingsError("dataset.source", f"could not be loaded: {exc}") from exc
    model_label = _model_label(settings.model)
    path = settings.results.path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SettingsError("results.path", f"cannot be created: {exc}") from exc
    resume = load_resume(path, run_id, dataset.name) if settings.resume and run_id else None
    if resume is not None and resume.record.status == "running":
        log.warning("run %s is marked running: resuming it as if its driver were gone (it must "
                    "be: two drivers on one run would race)", run_id)

    import ray

    interrupts = _Interrupts()
    with interrupts.installed(handle_signals):
        started_cluster = _init_ray(settings)
        run = _Run(settings, out, interrupts, run_id, resume)
        record = _resumed_record(resume.record, model_label, settings) if resume else RunRecord(
            run_id=run.run_id, dataset=dataset.name, model=model_label, started_at=utc_now(),
            agents=settings.search.agents, config=settings.config_yaml)
        stop_reason = "error"
        error: str | None = None
        writer_error: str | None = None
        status = "failed"
        count, best_row = 0, None
        reporter = ProgressReporter(out, interval_s=settings.search.progress_interval_s)
        try:
            write_run(path, record)
            run.say(f"sr-dist: run {run.run_id}: {dataset.name} ({len(dataset.feature_names)} "
                    f"variables, {dataset.n} rows), model {model_label}, "
                    f"{settings.search.agents} agent(s), evaluator on {settings.evaluator.device}")
            run.start_actors(dataset, model_label)
            stop_reason = run.search(reporter)
        except KeyboardInterrupt:
            stop_reason = "interrupted"
            interrupts.signal = interrupts.signal or int(signal.SIGINT)
        except Exception as exc:  # noqa: BLE001 - recorded in the runs row, then raised
            error = f"{type(exc).__name__}: {exc}"
            log.debug("run failed", exc_info=True)
        finally:
            reporter.finish()
            run.search_ended = time.monotonic()
            try:
                if run.agents:
                    run.stop_agents()
                writer_error = run.close_writer()
                run.final_stats()
                if interrupts.signal is not None:
                    stop_reason = "interrupted"
                count, best_row = summarize_run(path, run.run_id)
                status = final_status(stop_reason, signal_number=interrupts.signal, error=error)
                final = record.with_best(best_row, count).finished(
                    status, stop_reason, error=error or writer_error)
                write_run(path, final)
            finally:
                if started_cluster:
                    ray.shutdown()
                else:
                    run.kill_actors()
    wall = time.monotonic() - run.started
    summary = RunSummary(
        run_id=run.run_id, status=status, stop_reason=stop_reason,
        best=_best_from_row(best_row, dataset), candidates=count, wall_s=wall,
        results_path=path, dataset=dataset.name, model=model_label,
        agents=tuple(run.outcomes[i] for i in sorted(run.outcomes)),
        lost_agents=tuple(sorted(run.lost)), evaluator=run.eval_stats,
        writer=run.writer_stats, error=error or writer_error, signal=interrupts.signal,
        search_s=(run.search_ended - run.search_started)
        if run.search_started is not None and run.search_ended is not None else 0.0,
        resumed=resume is not None,
        candidates_before=resume.candidates_before if resume is not None else 0,
    )
    if error is not None:
        raise SearchError(f"run {run.run_id} failed: {error} (its runs row says so)")
    _print_report(out, summary, dataset, pareto_front if count else None)
    return summary


def _parsimony_lines(front: list[dict[str, Any]], best: BestFormula | None) -> list[str]:
    """The ``parsimony`` pick when it is not the lowest-NMSE formula (on noisy data it is
    usually the law, and the best is a longer formula fitting the noise)."""
    import pyarrow as pa

    from sr_dist.results import select_candidate

    if not front or best is None:
        return []
    try:
        pick = select_candidate(pa.Table.from_pylist(front), rule="parsimony")
    except (ValueError, TypeError, KeyError, pa.ArrowException):
        return []
    if pick is None or pick.get("candidate_id") == best.candidate_id:
        return []
    val = pick.get("val_nmse")
    shown = "-" if val is None else f"{val:.4g}"
    lines = ["", f"parsimony pick: {pick.get('expression')}  (val NMSE {shown}, complexity "
                 f"{pick.get('complexity')}; the simplest formula at the best formula's error "
                 "level, `sr-dist-query --score --select parsimony`)"]
    if pick.get("constants"):
        lines.append(f"   constants: {format_constants(pick['constants'])}")
    return lines


def _print_report(out: TextIO, summary: RunSummary, dataset: Any, front_fn: Any) -> None:
    lines = ["", f"sr-dist: run {summary.run_id} {summary.status} ({summary.stop_reason}) after "
             f"{summary.wall_s:.1f} s: {summary.candidates:,} candidates"]
    if summary.resumed:
        lines.append(f"resumed: {summary.candidates_before:,} candidates came from earlier "
                     f"sessions, {summary.candidates - summary.candidates_before:,} from this one")
    model_errors = [a for a in summary.agents if a.stop_reason.startswith("model_error")]
    if summary.stop_reason == "agents_failed" and model_errors:
        first = model_errors[0]
        lines.append(f"every agent lost its model ({len(model_errors)} of {len(summary.agents)} "
                     f"stopped on a model error); first: {first.stop_reason}: {first.error}")
    ev = summary.evaluator
    if ev:
        batching = ev.get("batching", {})
        lines.append(
            f"evaluator: {ev.get('search_fits', 0):,} fits, {ev.get('cache_hits', 0):,} cache hits, "
            f"{batching.get('batches', 0):,} batches (mean {batching.get('mean_batch_size', 0.0):.1f} "
            f"formulas, {batching.get('mixed_agent_batches', 0):,} mixing agents)"
        )
    for outcome in summary.agents:
        best = "" if outcome.best_val_nmse is None else f", best val NMSE {outcome.best_val_nmse:.3g}"
        extra = f": {outcome.error}" if outcome.error else ""
        lines.append(f"agent {outcome.agent_id}: {outcome.stop_reason} after {outcome.turns} turns, "
                     f"{outcome.candidates} candidates{best}{extra}")
    if summary.lost_agents:
        lines.append(f"lost agents: {', '.join(map(str, summary.lost_agents))}")
    restarts = int(ev.get("restarts", 0) or 0) if ev else 0
    if restarts:
        lines.append(f"evaluator restarts: {restarts} (in-flight fits were resent)")
    if front_fn is not None:
        try:
            rows = front_fn(summary.results_path, run_id=summary.run_id).to_pylist()
        except Exception as exc:  # noqa: BLE001
            rows = []
            lines.append(f"(could not read the Pareto front: {exc})")
        lines += ["", "Pareto front (complexity vs validation NMSE):", format_pareto(rows)]
        lines += _parsimony_lines(rows, summary.best)
    lines.append("")
    top = summary.best
    if top is None:
        lines.append("best formula: none (no candidate was fitted successfully)")
    else:
        lines.append(f"best formula: {top.expression}")
        if top.constants:
            lines.append(f"   constants: {format_constants(json.dumps(top.constants))}")
        val = "-" if top.val_nmse is None else f"{top.val_nmse:.4g}"
        test = "-" if top.test_nmse is None else f"{top.test_nmse:.4g}"
        lines.append(f"   val NMSE {val}, test NMSE {test}, complexity {top.complexity}")
        truth = getattr(dataset, "ground_truth", None)
        if truth:
            verdict = ("not checked" if top.recovered is None
                       else "recovered" if top.recovered else "not recovered")
            lines.append(f"   ground truth: {truth} ({verdict})")
    lines += ["", f"results: {summary.results_path}", f"query:   {summary.query_command}", ""]
    out.write("\n".join(lines))
    out.flush()
