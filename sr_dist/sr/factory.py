"""``build_agent``: one formula-search episode wired up from a model, a dataset and an evaluator.

This is what an in-process run and the Ray ``AgentActor`` call: it picks the parser for the
model's tool mode, binds the formula tools to a fresh tool context, writes the system prompt
from the data summary, and fills ``context.info`` with what offline proposers read (the
variables, the seed, the dataset's name and a sample of training rows; ``info`` is never sent
to a provider).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from sr_dist.agent.history_window import CompactionPolicy
from sr_dist.agent.loop import Agent, AgentLimits
from sr_dist.conversation import Context
from sr_dist.models.base import ModelProtocol
from sr_dist.parsers import BaseParser, get_parser
from sr_dist.sr.catalog import build_formula_catalog
from sr_dist.sr.episode import DEFAULT_MAX_EXPRESSIONS, EpisodeContext
from sr_dist.sr.formula_tools import FORMULA_TOOLS, format_data_summary, summarize_data
from sr_dist.sr.prompt import LOOP_MESSAGES, system_prompt, task_message
from sr_dist.sr.sandbox import RunPythonLimits

__all__ = ["PARSER_FOR_TOOL_MODE", "build_agent", "parser_for", "problem_info"]

#: Which parser reads a model's replies, by ``model.tool_mode``.
PARSER_FOR_TOOL_MODE: Mapping[str, str] = {"native": "openai", "json": "json", "text": "text"}
#: Training rows handed to offline proposers in ``context.info["sample"]``.
DEFAULT_SAMPLE_ROWS = 500


def parser_for(model: ModelProtocol) -> BaseParser:
    """The parser for ``model.tool_mode``; ``ValueError`` for a mode no parser reads."""
    mode = getattr(model, "tool_mode", None)
    name = PARSER_FOR_TOOL_MODE.get(mode) if isinstance(mode, str) else None
    if name is None:
        raise ValueError(f"model {getattr(model, 'name', model)!r} has tool_mode {mode!r}; expected one of {', '.join(PARSER_FOR_TOOL_MODE)}")
    return get_parser(name)


def problem_info(dataset: Any, *, seed: int = 0, agent_id: int = 0, sample_rows: int = DEFAULT_SAMPLE_ROWS,
                 agents: int = 1) -> dict[str, Any]:
    """``context.info`` for a dataset: names, seed, the agent's id and the run's agent count,
    the first ``sample_rows`` training rows, and the units' exponent vectors when the dataset
    has units (never sent to a provider)."""
    X = np.asarray(dataset.X_train, dtype=float)
    y = np.asarray(dataset.y_train, dtype=float).ravel()
    rows = max(0, min(int(sample_rows), len(y)))
    units = getattr(dataset, "units", None)
    extra: dict[str, Any] = {} if units is None else {"units": {
        "variables": {name: [float(v) for v in unit.exponents] for name, unit in units.variables},
        "target": [float(v) for v in units.target.exponents],
    }}
    return {
        **extra,
        "variables": list(dataset.feature_names),
        "target": str(getattr(dataset, "target_name", "y")),
        "dataset": str(getattr(dataset, "name", "")),
        "seed": int(seed),
        "agent_id": int(agent_id),
        "agents": max(1, int(agents)),
        "sample": {"X": X[:rows].reshape(rows, -1).tolist(), "y": y[:rows].tolist()},
    }


def build_agent(
    model: ModelProtocol,
    dataset: Any,
    evaluator: Any,
    *,
    limits: AgentLimits | None = None,
    recorder: Any = None,
    agent_id: int = 0,
    seed: int = 0,
    parser: BaseParser | None = None,
    tools: Iterable[str] | None = None,
    compaction: CompactionPolicy | None = None,
    cancel_event: Any = None,
    max_expressions_per_call: int | None = None,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    extra_tools: Iterable[Any] = (),
    dimensionless_constants: bool = True,
    run_python: RunPythonLimits | None = None,
    experience: Mapping[str, str] | None = None,
    run_front: Callable[[], Sequence[Any]] | None = None,
    agents: int = 1,
) -> Agent:
    """A ready :class:`Agent` searching ``dataset`` with ``model``; ``agent.episode`` is the
    :class:`EpisodeContext`: archive, episode state, cancel event.

    ``tools`` names the formula tools the model sees (default: all of :data:`FORMULA_TOOLS`),
    as SRHarness exposes "only the tools enabled for the current run". With
    ``dataset.units``, ``dimensionless_constants`` says whether the dimensional check lets free
    constants carry units (``search.dimensionless_constants_only=false``). ``run_python``: the
    limits of the opt-in ``run_python`` tool. ``experience``: tool name -> a summary of what
    earlier agents learned with it, appended to that tool's description (Thea's Tool
    Experience; :mod:`sr_dist.tools.experience`). ``run_front``: the run's Pareto front over
    every agent (``best_formulas`` merges it with the episode's own); ``agents``: how many
    agents search the run (``context.info["agents"]``: evolve agents split their seed library)."""
    tool_context = EpisodeContext.create(
        dataset,
        evaluator,
        recorder=recorder,
        agent_id=agent_id,
        cancel_event=cancel_event,
        max_expressions_per_call=max_expressions_per_call or DEFAULT_MAX_EXPRESSIONS,
        dimensionless_constants=dimensionless_constants,
        run_python=run_python,
        run_front=run_front,
    )
    names = tuple(tools) if tools is not None else FORMULA_TOOLS
    # extra_tools: tools from elsewhere (MCP servers) in the same flat catalog.
    catalog = build_formula_catalog(tool_context, names, extra=extra_tools, notes=experience)
    parser = parser if parser is not None else parser_for(model)
    variables = list(dataset.feature_names)
    target = str(getattr(dataset, "target_name", "y"))
    system = system_prompt(
        variables=variables,
        target=target,
        data_text=format_data_summary(summarize_data(dataset)),
        tools_text=parser.format_tools(catalog.specs()),
        tool_names=catalog.names(),
    )
    context = Context(
        system=system,
        messages=[{"role": "user", "content": task_message(variables=variables, target=target)}],
        info=problem_info(dataset, seed=seed, agent_id=agent_id, sample_rows=sample_rows,
                          agents=agents),
    )
    return Agent(
        model, parser, catalog, context, limits,
        episode=tool_context, compaction=compaction, messages=LOOP_MESSAGES,
    )
