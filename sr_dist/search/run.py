"""``run_search(cfg) -> RunSummary``: one search on Ray, from config to Parquet results.

Three steps, each a function with a value out:

1. :func:`prepare`: settings validated (a resumed run's stored config merged in), MCP launch
   configs checked, the dataset loaded, the model built once (a bad config fails here, before
   Ray starts), the results folder made, a resumed run's state read: a :class:`Prepared`.
2. :func:`drive`: Ray started (or joined), the ``running`` row written, the evaluator, the
   writer and the agent actors started and polled by the :class:`~sr_dist.search.driver.Driver`
   until a stop rule fires (``max_seconds``, ``max_candidates``, ``target_nmse``, all agents
   done, SIGINT/SIGTERM/SIGHUP, the results disk failing), then stopped, the writer closed and the final ``runs`` row written:
   a :class:`Driven`.
3. :func:`finalize`: the :class:`RunSummary`, and the report printed.

Faults (docs/reliability.md): the evaluator replicas and the result writer are restarted by Ray
and the agents resend what they lost; a lost agent is started again from its rows on disk; a
results path that cannot work is refused before Ray starts (:mod:`.preflight`); a signal
flushes the results and marks the run ``interrupted``; ``run.resume=RUN_ID`` continues a run
(:mod:`.resume`). How a run can end is the closed table ``RUN_OUTCOMES``.
Ray start-up is :mod:`.ray_setup`, the pure decisions :mod:`.decisions`, the report :mod:`.report`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from sr_dist.candidate import Candidate
from sr_dist.data import Dataset, DatasetError, DatasetUnitsError, load_dataset, resolve_units
from sr_dist.models import ModelConfigError, build_model
from sr_dist.results import RunRecord, pareto_front, summarize_run, utc_now, write_run
from sr_dist.search.agent_run import AgentOutcome
from sr_dist.search.decisions import (
    decide_stop,
    final_outcome,
    final_status,
    is_failure_reason,
    new_run_id,
)
from sr_dist.search.errors import SearchError
from sr_dist.search.pool_stats import stats_for_record
from sr_dist.search.preflight import Ballast, check_results_path
from sr_dist.search.progress import ProgressReporter
from sr_dist.search.ray_setup import (
    agent_actor_name,
    evaluator_actor_name,
    init_ray,
    keep_cluster,
    shutdown_cluster,
)
from sr_dist.search.report import (
    FrontReport,
    best_candidate,
    front_report,
    preload_report_imports,
    print_report,
)
from sr_dist.search.resume import ResumeState, load_resume, resolve_settings, resumed_record
from sr_dist.search.settings import Settings, SettingsError

__all__ = [
    "BestFormula",
    "Driven",
    "Prepared",
    "RunSummary",
    "SearchError",
    "agent_actor_name",
    "decide_stop",
    "drive",
    "evaluator_actor_name",
    "final_status",
    "finalize",
    "is_failure_reason",
    "new_run_id",
    "prepare",
    "resolve_settings",
    "run_search",
]

log = logging.getLogger(__name__)

#: The run's best formula is a :class:`~sr_dist.candidate.Candidate` (this name is kept for
#: scripts written against earlier versions).
BestFormula = Candidate


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """What a finished (or interrupted) run reports."""

    run_id: str
    status: str
    stop_reason: str
    #: The lowest-NMSE ``ok`` candidate (``recovered``: checked against the ground truth).
    best: Candidate | None
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


@dataclasses.dataclass(frozen=True)
class Prepared:
    """Everything checked and loaded before Ray starts."""

    settings: Settings
    run_id: str | None
    dataset: Any
    model_label: str
    path: Path
    resume: ResumeState | None


@dataclasses.dataclass(frozen=True)
class Driven:
    """How the Ray part of a run went, as :func:`finalize` needs it."""

    run_id: str
    stop_reason: str
    status: str
    error: str | None
    writer_error: str | None
    #: Why the result writer gave up (a full or read-only disk; stop reason ``write_failed``).
    write_error: str | None
    candidates: int
    best_row: Mapping[str, Any] | None
    outcomes: tuple[AgentOutcome, ...]
    lost: tuple[int, ...]
    evaluator: Mapping[str, Any]
    writer: Mapping[str, Any]
    signal: int | None
    wall_s: float
    search_s: float


def model_label(model_cfg: Mapping[str, Any]) -> str:
    """Build the model once, before Ray starts (a bad config fails here, not in the actors),
    and return its label for the results' ``model`` column."""
    cfg = dict(model_cfg)
    try:
        model = build_model(cfg)
    except ModelConfigError as exc:
        raise SettingsError("model", f"is not usable: {exc}") from exc
    name = getattr(model, "name", None) or cfg.get("model") or cfg.get("provider")
    provider = cfg.get("provider")
    return str(name) if provider in (None, name) else f"{provider}:{name}"


def prepare(cfg: Any, *, base_dir: str | os.PathLike[str] | None = None,
            run_id: str | None = None, dataset: Dataset | None = None) -> Prepared:
    """Validate and load everything a run needs; :class:`SettingsError` for what cannot work.

    ``dataset``: a ready :class:`~sr_dist.data.Dataset` (arrays in memory, the Python
    estimator's) searched instead of loading ``dataset.source``; ``dataset.units`` still applies.
    """
    settings = resolve_settings(cfg, base_dir)
    if settings.resume is not None:
        if run_id is not None and run_id != settings.resume:
            raise SettingsError("run.resume", f"is {settings.resume!r} but run_id={run_id!r} "
                                "was passed too; a resumed run keeps its id")
        run_id = settings.resume
    if settings.servers:
        # Here, not at the top: the MCP SDK takes about a second to import (runs without
        # servers never need it).
        from sr_dist.tools.mcp import MCPConfigError, parse_servers

        try:  # refuse a bad launch config before any actor starts
            parse_servers(settings.servers)
        except MCPConfigError as exc:
            raise SettingsError("servers", str(exc)) from exc
    d = settings.dataset
    try:
        if dataset is None:
            dataset = load_dataset(d.source, n=d.n, seed=d.seed, noise=d.noise, target=d.target,
                                   split=d.split, units=d.units, split_kind=d.split_kind,
                                   split_variable=d.split_variable, weight=d.weight)
        elif not isinstance(dataset, Dataset):
            raise TypeError(f"dataset must be a sr_dist.data.Dataset, got {type(dataset).__name__}")
        elif d.units is not None:
            dataset = dataset.with_units(resolve_units(d.units, dataset))
    except DatasetUnitsError as exc:
        raise SettingsError("dataset.units", f"do not fit the dataset: {exc}") from exc
    except DatasetError as exc:
        raise SettingsError("dataset.source", f"could not be loaded: {exc}") from exc
    label = model_label(settings.model)
    path = settings.results.path
    check_results_path(path)  # a file, a read-only directory, a full disk: before Ray starts
    resume = load_resume(path, run_id, dataset.name) if settings.resume and run_id else None
    if resume is not None and resume.record.status == "running":
        log.warning("run %s is marked running: resuming it as if its driver were gone (it must "
                    "be: two drivers on one run would race)", run_id)
    return Prepared(settings, run_id, dataset, label, path, resume)


def drive(prepared: Prepared, out: TextIO, *, handle_signals: bool = True,
          keep: bool = False, before_shutdown: Callable[[str, int], None] | None = None) -> Driven:
    """Run the search on Ray; the final ``runs`` row is written whatever happens. ``keep``:
    leave a local cluster this call started running for the process's next run.
    ``before_shutdown(run_id, candidates)``: called once the final row is written, before Ray
    is shut down (``run_search`` starts the report's slow part there, beside the shutdown)."""
    from sr_dist.search.driver import Driver, Interrupts

    settings, dataset, path, resume = prepared.settings, prepared.dataset, prepared.path, prepared.resume
    interrupts = Interrupts()
    with interrupts.installed(handle_signals):
        started_cluster = init_ray(settings)
        interrupts.reinstall()  # ray.init replaced the SIGTERM handler with a bare sys.exit
        run = Driver(settings, out, interrupts, prepared.run_id, resume)
        record = resumed_record(resume.record, prepared.model_label, settings) if resume else RunRecord(
            run_id=run.run_id, dataset=dataset.name, model=prepared.model_label, started_at=utc_now(),
            agents=settings.search.agents, config=settings.config_yaml)
        stop_reason = "error"
        error: str | None = None
        writer_error: str | None = None
        status = "failed"
        count, best_row = 0, None
        reporter = ProgressReporter(out, interval_s=settings.search.progress_interval_s)
        ballast = Ballast(path, run.run_id)
        try:
            write_run(path, record)
            run.say(f"sr-dist: run {run.run_id}: {dataset.name} ({len(dataset.feature_names)} "
                    f"variables, {dataset.n} rows), model {prepared.model_label}, "
                    f"{settings.search.agents} agent(s), evaluator on {settings.evaluator.device}")
            run.start_actors(dataset, prepared.model_label)
            preload_report_imports()
            stop_reason = run.search(reporter)
        except KeyboardInterrupt:
            stop_reason = "interrupted"
            interrupts.signal = interrupts.signal or int(signal.SIGINT)
        except SystemExit as exc:  # a handler other than ours (Ray's) turned a signal into exit
            log.warning("the run was asked to exit (%s); stopping it as interrupted", exc.code)
            stop_reason = "interrupted"
            interrupts.signal = interrupts.signal or int(signal.SIGTERM)
        except Exception as exc:  # noqa: BLE001 - recorded in the runs row, then raised
            error = f"{type(exc).__name__}: {exc}"
            log.debug("run failed", exc_info=True)
        finally:
            reporter.finish()
            run.search_ended = time.monotonic()
            try:
                if interrupts.signal is not None:
                    # Marked at once: a SIGKILL after the stop signal (``ray job stop`` waits
                    # 3 s by default) still leaves a row that says interrupted, ready to resume.
                    run.say(f"sr-dist: {interrupts.name} received: stopping the agents (a "
                            "second signal stops them at once; what was written is kept)")
                    with contextlib.suppress(Exception):
                        write_run(path, record.finished("interrupted", "interrupted",
                                                        signal=interrupts.name))
                if run.agents:
                    run.stop_agents()
                writer_error = run.close_writer()
                run.final_stats()
                if interrupts.signal is not None:
                    stop_reason = "interrupted"
                count, best_row = summarize_run(path, run.run_id, settings.search.rank_by)
                status, stop_reason = final_outcome(stop_reason, signal_number=interrupts.signal,
                                                    error=error)
                final = record.with_best(best_row, count).finished(
                    status, stop_reason, error=error or run.write_error or writer_error,
                    signal=interrupts.name).with_evaluator_stats(stats_for_record(run.eval_stats))
                ballast.release()  # the final row fits even on a disk the rows filled
                write_run(path, final)
                if before_shutdown is not None:
                    with contextlib.suppress(Exception):
                        before_shutdown(run.run_id, count)
            finally:
                ballast.release()
                if started_cluster and not keep:
                    shutdown_cluster()
                else:
                    run.kill_actors()
                    if started_cluster:
                        keep_cluster(settings)
    searched = (run.search_ended - run.search_started
                if run.search_started is not None and run.search_ended is not None else 0.0)
    return Driven(
        run_id=run.run_id, stop_reason=stop_reason, status=status, error=error,
        writer_error=writer_error, write_error=run.write_error, candidates=count,
        best_row=best_row,
        outcomes=tuple(run.outcomes[i] for i in sorted(run.outcomes)),
        lost=tuple(sorted(run.lost)), evaluator=run.eval_stats, writer=run.writer_stats,
        signal=interrupts.signal, wall_s=time.monotonic() - run.started, search_s=searched,
    )


def finalize(prepared: Prepared, driven: Driven) -> RunSummary:
    """The run's summary: its best candidate (checked against the ground truth) and tallies."""
    resume = prepared.resume
    return RunSummary(
        run_id=driven.run_id, status=driven.status, stop_reason=driven.stop_reason,
        best=best_candidate(driven.best_row, prepared.dataset), candidates=driven.candidates,
        wall_s=driven.wall_s, results_path=prepared.path, dataset=prepared.dataset.name,
        model=prepared.model_label, agents=driven.outcomes, lost_agents=driven.lost,
        evaluator=driven.evaluator, writer=driven.writer,
        error=driven.error or driven.write_error or driven.writer_error, signal=driven.signal,
        search_s=driven.search_s,
        resumed=resume is not None,
        candidates_before=resume.candidates_before if resume is not None else 0,
    )


def run_search(
    cfg: Any,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    stream: TextIO | None = None,
    handle_signals: bool = True,
    run_id: str | None = None,
    keep_cluster: bool = False,
    dataset: Dataset | None = None,
) -> RunSummary:
    """Run one search as ``cfg`` (a Hydra config, a mapping, or :class:`Settings`) says.

    Returns the :class:`RunSummary` for completed and interrupted runs alike (``status`` and
    ``exit_code`` tell them apart). Raises :class:`SettingsError` for bad configuration and
    :class:`SearchError` when the run cannot start; once the ``running`` row is written, a
    failure still leaves a ``failed`` row before it is raised.

    ``base_dir``: what relative paths are relative to (default: the current directory).
    ``stream``: where progress and the report go (default: stdout). ``handle_signals``: turn
    SIGINT/SIGTERM/SIGHUP into a clean, ``interrupted`` stop (main thread only). ``run_id``: use this
    id instead of a new one (agent actors are named ``sr-dist:<run_id>:agent-<i>``).
    ``keep_cluster``: leave the local cluster this call started running, for the next call in
    this process (``sr-dist --multirun`` sets it; a next run with other ``ray`` settings gets a
    new cluster).
    ``dataset``: search this ready dataset (built in memory, e.g. by
    :func:`sr_dist.data.dataset_from_arrays`) instead of loading ``dataset.source``; it reaches
    the actors through Ray's object store like a loaded one.
    ``run.resume=ID`` in the config continues run ``ID`` (docs/reliability.md).
    """
    prepared = prepare(cfg, base_dir=base_dir, run_id=run_id, dataset=dataset)
    out = stream if stream is not None else sys.stdout
    # The report's front (read back, simplified with sympy: about a second) is made in a
    # thread while Ray shuts down, which is mostly waiting for processes to end.
    pending: list[Future[FrontReport]] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sr-dist-report") as pool:

        def start_report(run: str, candidates: int) -> None:
            if candidates:
                pending.append(pool.submit(front_report, prepared.path, run, prepared.dataset,
                                           pareto_front))

        driven = drive(prepared, out, handle_signals=handle_signals, keep=keep_cluster,
                       before_shutdown=start_report)
        summary = finalize(prepared, driven)
        if driven.error is not None:
            raise SearchError(f"run {driven.run_id} failed: {driven.error} (its runs row says so)")
        front = pending[0].result() if pending else None
    print_report(out, summary, prepared.dataset, pareto_front if summary.candidates else None,
                 front=front)
    return summary
