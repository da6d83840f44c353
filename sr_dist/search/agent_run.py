"""One agent episode, assembled from plain parts: model, parser, formula tools, prompt, limits.

:func:`run_episode` is what an ``AgentActor`` runs; it has no Ray in it (the evaluator and the
recorder are whatever the caller passes), so it also runs in-process. It never raises for the
agent's own trouble: a model that cannot be built or an episode that crashes becomes an
:class:`AgentOutcome` with ``stop_reason`` ``error`` and the message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from sr_dist.agent import AgentLimits, StopReason
from sr_dist.models import build_model
from sr_dist.models.circuit import DEFAULT_FAILURES
from sr_dist.models.factory import NETWORK_PROVIDERS
from sr_dist.sr import build_agent as wire_agent
from sr_dist.sr.formula_tools import FORMULA_TOOLS, OPT_IN_TOOLS
from sr_dist.sr.sandbox import RunPythonLimits
from sr_dist.sr.state import EpisodeState
from sr_dist.tools.experience import ToolExperience, fold_experience

__all__ = ["AgentOutcome", "AgentSpec", "ExperienceSink", "PreparedEpisode", "agent_seed", "build_agent",
           "prepare_episode", "run_episode", "run_python_limits"]

log = logging.getLogger(__name__)

#: Training rows shared with the proposer in ``context.info["sample"]`` (evolve's data-driven
#: seeding reads them; LLM providers never see ``info``).
SAMPLE_ROWS = 500
#: Longest wait, after an episode ends, for fits its cut-off tool calls still record.
SETTLE_FITS_S = 60.0


def agent_seed(run_seed: int, agent_id: int) -> int:
    """A per-agent seed: distinct for each agent, reproducible from ``search.seed``."""
    digest = hashlib.blake2b(f"{int(run_seed)}:{int(agent_id)}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """Everything an agent needs besides the dataset and the shared actors."""

    run_id: str
    agent_id: int
    seed: int
    model: Mapping[str, Any]
    model_label: str
    dataset_name: str
    max_turns: int | None
    max_tool_calls: int | None = None
    failure_budget: int | None = 5
    target_nmse: float | None = None
    deadline_s: float | None = None
    #: Trusted MCP server launch configs; each agent starts its own servers (MCP tools are
    #: process-local: they hold pipes to their server processes).
    servers: tuple[Mapping[str, Any], ...] = ()
    #: A resumed agent's last step in the earlier session(s) (its new steps come after it).
    step_offset: int = 0
    #: A resumed agent's best earlier candidates (result rows as plain dicts), best first.
    prior: tuple[Mapping[str, Any], ...] = ()
    #: The formula tools the model sees (``search.tools``; None: all of them).
    tools: tuple[str, ...] | None = None
    #: ``search.dimensionless_constants_only``: how the dimensional check treats constants.
    dimensionless_constants_only: bool = True
    #: Limits of the opt-in ``run_python`` tool (:func:`run_python_limits`; None: defaults).
    run_python: Mapping[str, Any] | None = None
    #: ``search.tool_experience``: ``on``, ``read_only`` or ``off`` (docs/tool-experience.md).
    tool_experience: str = "off"
    #: How many agents search the run (``search.agents``; evolve agents split their library).
    agents: int = 1


def run_python_limits(search: Any) -> dict[str, Any]:
    """``RunPythonLimits`` keywords from the ``search`` settings' ``run_python_*`` keys."""
    return {"cpu_s": search.run_python_cpu_s, "memory_mb": search.run_python_memory_mb,
            "wall_s": search.run_python_wall_s, "file_mb": search.run_python_file_mb,
            "output_chars": search.run_python_output_chars}


@dataclasses.dataclass(frozen=True)
class AgentOutcome:
    """How an agent ended, as the driver and the run summary see it."""

    agent_id: int
    stop_reason: str
    turns: int = 0
    tool_calls: int = 0
    failed_tool_calls: int = 0
    candidates: int = 0
    best_expression: str | None = None
    best_val_nmse: float | None = None
    submitted: str | None = None
    error: str | None = None
    recording_errors: int = 0
    lost_row_batches: int = 0
    elapsed_s: float = 0.0
    #: Candidate rows the agent handed to the result writer (what "sent" means in the
    #: exactly-once accounting: rows written == rows sent, no duplicates).
    rows_sent: int = 0
    #: The process that ran the episode (``<node id prefix>:<pid>``; agents an actor hosts
    #: together share it).
    host: str | None = None
    #: Times the driver started this agent again after it was lost (search.restart_lost_agents);
    #: ``rows_sent`` then counts the rows of every incarnation.
    restarts: int = 0

    @property
    def failed(self) -> bool:
        """The agent could not search at all (its model or episode broke)."""
        return self.stop_reason in ("error", StopReason.INTERNAL_ERROR) or (
            StopReason.of(self.stop_reason) is StopReason.MODEL_ERROR and self.candidates == 0
        )

    def with_lost_rows(self, batches: int) -> AgentOutcome:
        return dataclasses.replace(self, lost_row_batches=int(batches))

    def with_rows_sent(self, rows: int) -> AgentOutcome:
        return dataclasses.replace(self, rows_sent=int(rows))

    def with_host(self, host: str) -> AgentOutcome:
        return dataclasses.replace(self, host=host)

    def after_restarts(self, restarts: int, earlier_rows: int) -> AgentOutcome:
        """This outcome of a replacement episode, counting the lost incarnations' rows too."""
        return dataclasses.replace(self, restarts=int(restarts),
                                   rows_sent=self.rows_sent + int(earlier_rows))


def _model_config(spec: AgentSpec) -> dict[str, Any]:
    """The agent's model config: evolve seeded per agent, every network provider (Thea's named
    ones included) with a circuit."""
    cfg = dict(spec.model)
    if cfg.get("provider") == "evolve":
        cfg["seed"] = spec.seed  # evolve's own seed wins over context.info, so set it here
    if cfg.get("provider") in NETWORK_PROVIDERS:
        # A search run always has a provider circuit: a throttling storm ends the agent with
        # model_error:circuit_open instead of retrying forever (docs/reliability.md).
        cfg.setdefault("circuit_failures", DEFAULT_FAILURES)
    return cfg


def _warm_start(agent: Any, prior: tuple[Mapping[str, Any], ...]) -> None:
    """Give a resumed episode its earlier best: a synthetic ``evaluate_formulas`` result in
    ``tool_history`` (proposers such as ``evolve`` read it) and a note in the task message."""
    # Here, not at the top: resume reads Parquet and composes Hydra configs, which an agent
    # process (hundreds of agents each, on every node) should not pay for at import.
    from sr_dist.search.resume import prior_history, resume_note

    agent.context.tool_history.extend(prior_history(prior))
    note = resume_note(prior)
    messages = agent.context.messages
    if note and messages and isinstance(messages[0].get("content"), str):
        messages[0] = {**messages[0], "content": messages[0]["content"] + "\n\n" + note}


def build_agent(spec: AgentSpec, dataset: Any, evaluator: Any, recorder: Any,
                cancel_event: threading.Event, extra_tools: Any = (),
                experience: Mapping[str, str] | None = None,
                run_front: Callable[[], Sequence[Any]] | None = None) -> Any:
    """The ``Agent`` for one episode (raises ``ModelConfigError``/``ValueError`` on bad config);
    ``experience``: tool name -> what earlier agents learned, appended to its description;
    ``run_front``: reads the run's Pareto front over every agent (``best_formulas``)."""
    limits = AgentLimits(
        max_turns=spec.max_turns, max_tool_calls=spec.max_tool_calls,
        deadline_s=spec.deadline_s, failure_budget=spec.failure_budget,
        target_nmse=spec.target_nmse,
    )
    agent = wire_agent(
        build_model(_model_config(spec)), dataset, evaluator, limits=limits, recorder=recorder,
        agent_id=spec.agent_id, seed=spec.seed, cancel_event=cancel_event,
        sample_rows=SAMPLE_ROWS, extra_tools=extra_tools, tools=spec.tools,
        dimensionless_constants=spec.dimensionless_constants_only,
        run_python=RunPythonLimits(**spec.run_python) if spec.run_python else None,
        experience=experience, run_front=run_front, agents=spec.agents,
    )
    if spec.prior:
        _warm_start(agent, spec.prior)
    return agent


async def _settle_fits(agent: Any, agent_id: int) -> None:
    """Wait for fits the loop stopped waiting for (a tool call cut off by the deadline still
    records its candidates when its fit returns), so the rows the episode's outcome counts are
    all the rows it sent."""
    state = getattr(getattr(agent, "episode", None), "episode", None)
    if not isinstance(state, EpisodeState) or not state.fits_in_progress:
        return
    if not await asyncio.to_thread(state.wait_for_fits, SETTLE_FITS_S):
        log.warning("agent %d: %d fit(s) still under way %.0f s after the episode ended; rows "
                    "they record later are written but not counted in rows_sent", agent_id,
                    state.fits_in_progress, SETTLE_FITS_S)


#: Where an episode's folded tool experience goes (the result writer, in a Ray run).
ExperienceSink = Callable[[tuple[ToolExperience, ...]], Awaitable[None]]


async def _send_experience(spec: AgentSpec, agent: Any, sink: ExperienceSink) -> None:
    records = fold_experience(agent.call_log)
    if not records:
        return
    try:
        await sink(records)
    except Exception as exc:  # noqa: BLE001 - advice lost, never the agent's outcome
        log.warning("agent %d: its tool experience was not written: %s", spec.agent_id, exc)


@dataclasses.dataclass(frozen=True)
class PreparedEpisode:
    """An episode built before its run (:func:`prepare_episode`): the agent, with its model
    warmed, and the MCP toolset it holds open (closed when the episode ends)."""

    agent: Any
    toolset: Any = None


async def prepare_episode(spec: AgentSpec, dataset: Any, evaluator: Any, recorder: Any,
                          cancel_event: threading.Event, *,
                          experience: Mapping[str, str] | None = None,
                          nice: int = 0,
                          run_front: Callable[[], Sequence[Any]] | None = None,
                          ) -> PreparedEpisode | AgentOutcome:
    """Build one episode's agent and let its model prepare (``Agent.aprepare``: evolve's seed
    library; ``nice``: at that lower priority), which a host does while the evaluator warms
    up; a broken config comes back as an outcome with ``stop_reason`` ``error``, never
    raised."""
    toolset = None
    try:
        extra_tools: Any = ()
        if spec.servers:
            # Here, not at the top: the MCP SDK takes about a second to import, and only an
            # agent with MCP servers needs it.
            from sr_dist.tools.mcp import astart_mcp_tools

            toolset = await astart_mcp_tools(spec.servers)
            extra_tools = toolset.tools(reserved=(*FORMULA_TOOLS, *OPT_IN_TOOLS))
        agent = build_agent(spec, dataset, evaluator, recorder, cancel_event,
                            extra_tools=extra_tools, experience=experience, run_front=run_front)
    except Exception as exc:  # noqa: BLE001 - a broken config ends this agent with a reason
        log.error("agent %d could not start: %s", spec.agent_id, exc)
        if toolset is not None:
            await toolset.aclose()
        return AgentOutcome(spec.agent_id, "error", error=f"{type(exc).__name__}: {exc}")
    await agent.aprepare(nice=nice)
    return PreparedEpisode(agent, toolset)


async def run_episode(spec: AgentSpec, dataset: Any, evaluator: Any, recorder: Any,
                      cancel_event: threading.Event | None = None, *,
                      experience: Mapping[str, str] | None = None,
                      experience_sink: ExperienceSink | None = None,
                      prepared: PreparedEpisode | AgentOutcome | None = None) -> AgentOutcome:
    """Run one episode to its end; every failure is reported in the outcome, never raised.

    ``experience`` (tool name -> note) extends the tools' descriptions; ``experience_sink``
    receives the episode's folded tool experience once it has ended (a failure there is
    logged: experience is advice, and losing it must not fail the agent). ``prepared``: what
    :func:`prepare_episode` built for this episode with the same arguments (``cancel_event``
    and ``experience`` are then already in it); without it the episode is built here."""
    cancel = cancel_event if cancel_event is not None else threading.Event()
    if prepared is None:
        prepared = await prepare_episode(spec, dataset, evaluator, recorder, cancel,
                                         experience=experience)
    if isinstance(prepared, AgentOutcome):
        return prepared
    agent, toolset = prepared.agent, prepared.toolset
    try:
        result = await agent.arun()
    except Exception as exc:  # noqa: BLE001 - the loop promises not to raise; belt and braces
        log.exception("agent %d crashed", spec.agent_id)
        return AgentOutcome(spec.agent_id, "error", error=f"{type(exc).__name__}: {exc}")
    finally:
        if toolset is not None:
            await toolset.aclose()
        await _settle_fits(agent, spec.agent_id)
        if experience_sink is not None:
            await _send_experience(spec, agent, experience_sink)
    best = result.best
    return AgentOutcome(
        agent_id=spec.agent_id,
        stop_reason=result.stop_reason,
        turns=result.turns,
        tool_calls=result.tool_calls,
        failed_tool_calls=result.failed_tool_calls,
        candidates=result.candidates,
        best_expression=best.expression if best is not None else None,
        best_val_nmse=best.val_nmse if best is not None else None,
        submitted=result.submitted.expression if result.submitted is not None else None,
        error=result.error,
        recording_errors=result.recording_errors,
        elapsed_s=result.elapsed_s,
    )
