"""Resuming a run (``run.resume=RUN_ID``): what the new session takes over from the old one.

A resumed session keeps the run's id, so its rows join the old ones under the same partition.
What it needs from disk is collected once, here, into a frozen :class:`ResumeState`:

* the old ``runs`` row (its status is rewritten to ``running`` and, at the end, to the final
  status; ``started_at`` stays the first session's);
* each agent's last step (``agent_progress``): a resumed agent numbers its steps after it, so
  new candidate ids (``run:agent:step:index``) never collide with old ones;
* each agent's best old candidates, given to the new episode as a synthetic
  ``evaluate_formulas`` result in ``context.tool_history`` (the ``evolve`` proposer rebuilds
  its population from it, so it neither starts cold nor re-proposes what it already tried) and
  as a note in the task message (LLM agents read that);
* the best distinct structures of the whole run, which the evaluator fits before the agents
  start, so a re-proposed formula is a cache hit, not a fit.

The configuration of a resumed session is the stored one, overridden by whatever the command
line changed from the defaults (:func:`merge_resumed_config`): ``sr-dist run.resume=ID`` alone
continues the run as it was; ``sr-dist run.resume=ID search.max_seconds=600`` gives it a new
budget. ``ray``, ``results`` and ``run`` always come from the command line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from sr_dist.candidate import record_fitness
from sr_dist.results import RunRecord, agent_progress, open_results, read_run, retry_on_swap
from sr_dist.search.settings import Settings, SettingsError, settings_from_config
from sr_dist.tools.types import ToolCall, ToolCallResult

__all__ = [
    "CURRENT_ONLY",
    "AgentRestart",
    "ResumeState",
    "agent_restarts",
    "default_config",
    "load_resume",
    "merge_resumed_config",
    "prior_history",
    "resolve_settings",
    "resume_note",
    "resumed_record",
    "session_seed",
]

#: Top-level groups a resumed session always takes from the current command line.
CURRENT_ONLY = frozenset({"run", "ray", "results", "hydra"})
#: Groups taken whole from one side (mixing two providers' keys would make neither work).
ATOMIC = frozenset({"model", "servers"})
#: Best old candidates handed to each resumed agent.
PRIOR_PER_AGENT = 32
#: Distinct old structures the evaluator fits before a resumed session's agents start.
WARM_LIMIT = 2000
#: Columns of the old rows a resumed session reads.
_COLUMNS = ["agent_id", "step", "expression", "canonical", "complexity", "constants", "status",
            "train_nmse", "val_nmse", "test_nmse", "r2", "dimensionally_consistent", "units_mismatch"]

_ABSENT = object()


@dataclasses.dataclass(frozen=True)
class ResumeState:
    """What a resumed session takes over (see the module docstring)."""

    run_id: str
    record: Any  # sr_dist.results.RunRecord (kept as Any so this module imports without Arrow)
    step_offsets: Mapping[int, int]
    prior: Mapping[int, tuple[Mapping[str, Any], ...]]
    warm: tuple[str, ...]
    candidates_before: int

    def step_offset(self, agent_id: int) -> int:
        return int(self.step_offsets.get(agent_id, 0))

    def prior_of(self, agent_id: int) -> tuple[Mapping[str, Any], ...]:
        return self.prior.get(agent_id, ())


# --- configuration -----------------------------------------------------------------------------

def _merge(stored: Any, current: Any, default: Any) -> Any:
    if isinstance(stored, Mapping) and isinstance(current, Mapping):
        defaults = default if isinstance(default, Mapping) else {}
        out: dict[str, Any] = {}
        for key in [*stored, *(k for k in current if k not in stored)]:
            if key not in current:
                out[key] = stored[key]
            elif key not in stored:
                out[key] = current[key]
            else:
                out[key] = _merge(stored[key], current[key], defaults.get(key, _ABSENT))
        return out
    if default is _ABSENT or current != default:
        return current
    return stored


def merge_resumed_config(stored: Mapping[str, Any], current: Mapping[str, Any],
                         defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The config of a resumed session: ``stored`` (the old run's), with every value the
    ``current`` command line changed from ``defaults`` laid over it. ``ray``, ``results`` and
    ``run`` come from ``current``; ``model`` and ``servers`` are taken whole from one side."""
    merged: dict[str, Any] = {}
    for key in [*stored, *(k for k in current if k not in stored)]:
        if key == "hydra":
            continue
        if key in CURRENT_ONLY or key not in stored:
            if key in current:
                merged[key] = current[key]
            continue
        if key not in current:
            merged[key] = stored[key]
        elif key in ATOMIC:
            changed = current[key] != defaults.get(key, _ABSENT)
            merged[key] = current[key] if changed else stored[key]
        else:
            merged[key] = _merge(stored[key], current[key], defaults.get(key, _ABSENT))
    return merged


def default_config() -> dict[str, Any]:
    """sr-dist's default configuration (``conf/config.yaml`` with no overrides), resolved."""
    if GlobalHydra.instance().is_initialized():  # inside the sr-dist app: Hydra is set up
        cfg = compose("config")
    else:
        with initialize_config_module("sr_dist.conf", version_base="1.3"):
            cfg = compose("config")
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    return {str(k): v for k, v in container.items() if k != "hydra"}


# --- what the old session left -----------------------------------------------------------------

def best_distinct(rows: Sequence[Mapping[str, Any]], limit: int) -> list[Mapping[str, Any]]:
    """Up to ``limit`` ``ok`` rows with distinct canonical forms, best first (dimensionally
    inconsistent rows after the others, then lowest NMSE, as ``rank_key`` orders)."""
    ok = [r for r in rows if r.get("status") == "ok" and math.isfinite(record_fitness(r))]
    ok.sort(key=lambda r: (r.get("dimensionally_consistent") is False, record_fitness(r),
                           r.get("complexity") or 0, str(r.get("expression"))))
    seen: set[str] = set()
    out: list[Mapping[str, Any]] = []
    for row in ok:
        key = str(row.get("canonical") or row.get("expression"))
        if key in seen:
            continue
        seen.add(key)
        out.append(row)
        if len(out) >= limit:
            break
    return out


def resumed_run(path: Path, run_id: str) -> RunRecord:
    """The runs row of the run to resume; :class:`SettingsError` (``run.resume``) when none."""
    record = read_run(path, run_id) if path.is_dir() else None
    if record is None:
        raise SettingsError("run.resume", f"names no run under {path}: there is no runs row for "
                            f"{run_id!r} (sr-dist-query {path} lists the runs)")
    return record


def load_resume(path: Path, run_id: str, dataset_name: str, *,
                prior_per_agent: int = PRIOR_PER_AGENT, warm_limit: int = WARM_LIMIT) -> ResumeState:
    """Read what ``run_id`` left under ``path``; :class:`SettingsError` (key ``run.resume``)
    when there is no such run or it searched another dataset."""
    record = resumed_run(path, run_id)
    if record.dataset != dataset_name:
        raise SettingsError("run.resume", f"run {run_id!r} searched dataset {record.dataset!r}, "
                            f"but this config loads {dataset_name!r}; resume it with its dataset")
    table = open_results(path).candidates.to_table(
        columns=_COLUMNS, filter=ds.field("run_id") == run_id)
    rows = table.to_pylist()
    by_agent: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_agent.setdefault(int(row["agent_id"]), []).append(row)
    prior = {agent: tuple(best_distinct(agent_rows, prior_per_agent))
             for agent, agent_rows in by_agent.items()}
    warm = tuple(str(r["expression"]) for r in best_distinct(rows, warm_limit))
    return ResumeState(
        run_id=run_id, record=record,
        step_offsets={int(k): int(v) for k, v in agent_progress(path, run_id).items()},
        prior=prior, warm=warm, candidates_before=len(rows),
    )


@dataclasses.dataclass(frozen=True)
class AgentRestart:
    """What a lost agent's replacement takes over from the rows the lost one wrote."""

    agent_id: int
    #: The last step on disk (the replacement numbers its steps after it), -1 if none.
    last_step: int
    #: Rows of this agent on disk when it was restarted.
    rows: int
    #: Its best rows, best first (the replacement's warm start, as a resumed agent's).
    prior: tuple[Mapping[str, Any], ...]


def agent_restarts(path: Path, run_id: str, agent_ids: Sequence[int], *,
                   prior_per_agent: int = PRIOR_PER_AGENT) -> dict[int, AgentRestart]:
    """What each lost agent's replacement takes over (search.restart_lost_agents): their rows
    of ``run_id``, read in one scan however many agents a lost node took with it."""
    wanted = sorted({int(a) for a in agent_ids})

    def read() -> list[dict[str, Any]]:
        table = open_results(path).candidates.to_table(
            columns=_COLUMNS,
            filter=(ds.field("run_id") == run_id) & ds.field("agent_id").isin(wanted))
        rows: list[dict[str, Any]] = table.to_pylist()
        return rows

    by_agent: dict[int, list[Mapping[str, Any]]] = {a: [] for a in wanted}
    for row in retry_on_swap(read):  # the writer may be rolling the run's files meanwhile
        by_agent[int(row["agent_id"])].append(row)
    return {agent: AgentRestart(
        agent_id=agent, last_step=max((int(r["step"]) for r in rows), default=-1),
        rows=len(rows), prior=tuple(best_distinct(rows, prior_per_agent)))
        for agent, rows in by_agent.items()}


# --- handing the old results to a new episode --------------------------------------------------

def _record(row: Mapping[str, Any]) -> dict[str, Any]:
    constants: Any = row.get("constants")
    if isinstance(constants, str):
        try:
            constants = json.loads(constants)
        except ValueError:
            constants = None
    return {
        "expression": row.get("expression"), "canonical": row.get("canonical"),
        "status": row.get("status"), "complexity": row.get("complexity"),
        "constants": constants, "train_nmse": row.get("train_nmse"),
        "val_nmse": row.get("val_nmse"), "test_nmse": row.get("test_nmse"), "r2": row.get("r2"),
        **({} if row.get("dimensionally_consistent") is None else {
            "dimensionally_consistent": row.get("dimensionally_consistent"),
            "units_mismatch": row.get("units_mismatch")}),
    }


def prior_history(rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any]]:
    """One synthetic ``(evaluate_formulas call, result)`` pair holding ``rows``: what a fresh
    episode's ``tool_history`` starts with so proposers that read it start warm."""
    if not rows:
        return []
    records = [_record(r) for r in rows]
    call = ToolCall(name="evaluate_formulas",
                    arguments={"expressions": [r["expression"] for r in records]},
                    id="resumed-0")
    text = f"{len(records)} formula(s) from the earlier session of this run"
    result = ToolCallResult(ok=True, result={"results": records}, result_str=text,
                            meta_data={"tool": "evaluate_formulas", "elapsed_s": 0.0,
                                       "truncated": False, "resumed": True})
    return [(call, result)]


def resume_note(rows: Sequence[Mapping[str, Any]], shown: int = 8) -> str:
    """The paragraph a resumed LLM agent reads in its task: its best formulas so far."""
    if not rows:
        return ""
    lines = ["This search resumes an earlier session. Your best formulas so far "
             "(validation NMSE):"]
    for row in rows[:shown]:
        nmse = record_fitness(row)
        lines.append(f"- {row.get('expression')}  ({nmse:.3g})")
    lines.append("Build on them; formulas already tried are answered from the cache.")
    return "\n".join(lines)


def session_seed(base_seed: int, step_offset: int) -> int:
    """The seed of a resumed agent: its first session's for ``step_offset == 0``, otherwise a
    different (reproducible) one, so a resumed proposer does not replay its first session."""
    if step_offset <= 0:
        return int(base_seed)
    return (int(base_seed) * 1_000_003 + int(step_offset) * 7919) & 0x7FFFFFFF


# --- the settings and runs row of a resumed session ---------------------------------------------

def _yaml_mapping(text: str) -> dict[str, Any]:
    container = OmegaConf.to_container(OmegaConf.create(text), resolve=False)
    return {str(k): v for k, v in container.items()} if isinstance(container, dict) else {}


def resolve_settings(cfg: Any, base_dir: str | os.PathLike[str] | None = None) -> Settings:
    """``cfg`` validated; for ``run.resume=ID``, the stored config of run ``ID`` with what this
    command line changed from the defaults laid over it (see :mod:`sr_dist.search.resume`)."""
    settings = cfg if isinstance(cfg, Settings) else settings_from_config(cfg, base_dir)
    if settings.resume is None or isinstance(cfg, Settings):
        return settings
    record = resumed_run(settings.results.path, settings.resume)
    if not record.config:
        return settings
    try:
        stored = _yaml_mapping(record.config)
    except Exception as exc:  # noqa: BLE001 - a runs row written by something else
        raise SettingsError("run.resume", f"run {settings.resume!r} has a config that cannot be "
                            f"read: {exc}") from exc
    merged = merge_resumed_config(stored, _yaml_mapping(settings.config_yaml), default_config())
    return settings_from_config(merged, base_dir)


def resumed_record(old: RunRecord, model_label: str, settings: Settings) -> RunRecord:
    """The runs row of a resumed session: the old one, running again, with this config."""
    return dataclasses.replace(
        old, status="running", stop_reason=None, error=None, ended_at=None, updated_at=None,
        model=model_label, agents=settings.search.agents, config=settings.config_yaml)
