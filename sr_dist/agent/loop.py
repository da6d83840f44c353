"""The agent loop: model call → parse → run the calls → result messages, until a limit stops it.

``Agent(model, parser, catalog, context, limits).run()`` (or ``await arun()``) returns an
:class:`AgentResult`; it never raises for anything the model, the provider or a tool does. A
model error (after the adapter's own retries) ends the run with ``stop_reason ==
"model_error:<kind>"``; malformed calls and tool failures go back to the model as messages;
the conversation is kept bounded by :mod:`sr_dist.agent.history_window`.

The loop itself is a thin stateful shell: what a limit means (:func:`stop_before_turn`,
:func:`stop_after_turn`), how calls are grouped (:func:`call_groups`) and how the conversation
is compacted are plain functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sr_dist.agent.episode import Episode, NoEpisode
from sr_dist.agent.history_window import (
    COMPACTED,
    CompactionPolicy,
    TurnLog,
    history_result,
    render_conversation,
    summarize_result,
    summarize_results,
)
from sr_dist.agent.messages import LoopMessages
from sr_dist.conversation import Context
from sr_dist.models.base import ModelError, ModelProtocol, ModelResponse, Usage
from sr_dist.parsers.base import BaseParser
from sr_dist.tools.execution import await_in_thread, run_coroutine_blocking
from sr_dist.tools.experience import CallRecord, call_record
from sr_dist.tools.outcomes import failure_result
from sr_dist.tools.registry import ToolCatalog
from sr_dist.tools.types import ToolCall, ToolCallResult, ToolRunAbort

__all__ = [
    "STOP_REASONS",
    "Agent",
    "AgentLimits",
    "AgentResult",
    "Counters",
    "StopReason",
    "call_groups",
    "history_limit",
    "stop_after_turn",
    "stop_before_turn",
]

log = logging.getLogger(__name__)

class StopReason(StrEnum):
    """Why an episode ended (``AgentResult.stop_reason``; a model error is
    ``model_error:<kind>``, see :func:`model_error_reason`)."""

    MAX_TURNS = "max_turns"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_TOKENS = "max_tokens"
    DEADLINE = "deadline"
    FAILURE_BUDGET = "failure_budget"
    TARGET_NMSE = "target_nmse"
    SUBMITTED = "submitted"
    MODEL_ERROR = "model_error"
    CANCELLED = "cancelled"
    NO_TOOL_CALLS = "no_tool_calls"
    ABORTED = "aborted"
    INTERNAL_ERROR = "internal_error"

    @classmethod
    def of(cls, reason: str) -> StopReason | None:
        """The member a stop reason belongs to (``model_error:<kind>`` is ``MODEL_ERROR``), or
        None for a reason the loop does not give (the driver's ``lost``, ``killed``, ...)."""
        head = str(reason).split(":", 1)[0]
        try:
            return cls(head)
        except ValueError:
            return None


def model_error_reason(kind: str) -> str:
    """The stop reason of a run ended by a ``ModelError`` of ``kind``: ``model_error:<kind>``."""
    return f"{StopReason.MODEL_ERROR}:{kind}"


#: Every ``AgentResult.stop_reason`` (``model_error:<kind>`` carries the ``ModelError`` kind).
STOP_REASONS: tuple[str, ...] = tuple(
    "model_error:<kind>" if r is StopReason.MODEL_ERROR else str(r) for r in StopReason
)


@dataclass(frozen=True)
class AgentLimits:
    """When a run stops; ``None`` means no limit.

    ``failure_budget`` counts consecutive failed turns (a reply cut at the token limit, or a
    turn whose calls all failed or could not be read); ``max_prose_turns`` consecutive replies
    without any tool call end the run (each earlier one gets a nudge); ``max_tokens`` bounds the
    total tokens the provider reported; ``deadline_s`` is wall time from the start of the run,
    enforced around model and tool calls too.
    """

    max_turns: int | None = 50
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    deadline_s: float | None = None
    failure_budget: int | None = 5
    target_nmse: float | None = None
    max_prose_turns: int = 3

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_tool_calls", "max_tokens", "failure_budget"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"AgentLimits.{name} must be a positive integer or None, got {value!r}")
        if self.deadline_s is not None and not (isinstance(self.deadline_s, (int, float)) and self.deadline_s > 0):
            raise ValueError(f"AgentLimits.deadline_s must be a positive number or None, got {self.deadline_s!r}")
        if self.target_nmse is not None and not (isinstance(self.target_nmse, (int, float)) and self.target_nmse >= 0):
            raise ValueError(f"AgentLimits.target_nmse must be a non-negative number or None, got {self.target_nmse!r}")
        if isinstance(self.max_prose_turns, bool) or not isinstance(self.max_prose_turns, int) or self.max_prose_turns < 1:
            raise ValueError(f"AgentLimits.max_prose_turns must be a positive integer, got {self.max_prose_turns!r}")

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any] | None) -> AgentLimits:
        """From a config mapping (e.g. the Hydra ``search`` group); unknown keys are an error."""
        cfg = dict(cfg or {})
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ValueError(f"unknown agent limit(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**cfg)


def _plain(value: Any) -> Any:
    """A report value as plain data: its ``to_dict()`` where it has one."""
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else value


@dataclass(frozen=True)
class AgentResult:
    """How an episode ended. Equal for a run and its replay: ``model`` (a replay is named
    ``replay:<recorded>``) and ``elapsed_s`` take no part in equality.

    ``best``, ``submitted``, ``candidates`` and ``recording_errors`` are the episode's
    :class:`~sr_dist.agent.episode.EpisodeReport` (for symbolic regression, ``best`` and
    ``submitted`` are :class:`sr_dist.candidate.Candidate` values)."""

    stop_reason: str
    best: Any
    submitted: Any
    turns: int
    tool_calls: int
    failed_tool_calls: int
    usage: Usage
    candidates: int
    error: str | None = None
    model: str = field(default="", compare=False)
    recording_errors: int = 0
    elapsed_s: float = field(default=0.0, compare=False)

    @property
    def tokens(self) -> int:
        return self.usage.total_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "stop_reason": self.stop_reason,
            "best": _plain(self.best),
            "submitted": _plain(self.submitted),
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "failed_tool_calls": self.failed_tool_calls,
            "usage": self.usage.to_dict(),
            "candidates": self.candidates,
            "error": self.error,
            "model": self.model,
            "recording_errors": self.recording_errors,
            "elapsed_s": self.elapsed_s,
        }


@dataclass(frozen=True)
class Counters:
    """The run's progress, as the stop rules see it."""

    turns: int = 0
    tool_calls: int = 0
    failed_tool_calls: int = 0
    tokens: int = 0
    consecutive_failures: int = 0
    prose_streak: int = 0
    best_nmse: float = math.inf


def stop_before_turn(c: Counters, limits: AgentLimits, *, elapsed_s: float, cancelled: bool) -> str | None:
    """The reason not to start another turn, or None."""
    if cancelled:
        return StopReason.CANCELLED
    if limits.deadline_s is not None and elapsed_s >= limits.deadline_s:
        return StopReason.DEADLINE
    if limits.max_turns is not None and c.turns >= limits.max_turns:
        return StopReason.MAX_TURNS
    if limits.max_tool_calls is not None and c.tool_calls >= limits.max_tool_calls:
        return StopReason.MAX_TOOL_CALLS
    if limits.max_tokens is not None and c.tokens >= limits.max_tokens:
        return StopReason.MAX_TOKENS
    return None


def stop_after_turn(c: Counters, limits: AgentLimits, *, submitted: bool) -> str | None:
    """The reason to end the run after a completed turn, or None (checked in this order)."""
    if submitted:
        return StopReason.SUBMITTED
    if limits.target_nmse is not None and c.best_nmse <= limits.target_nmse:
        return StopReason.TARGET_NMSE
    if limits.failure_budget is not None and c.consecutive_failures >= limits.failure_budget:
        return StopReason.FAILURE_BUDGET
    if c.prose_streak >= limits.max_prose_turns:
        return StopReason.NO_TOOL_CALLS
    if limits.max_tool_calls is not None and c.tool_calls >= limits.max_tool_calls:
        return StopReason.MAX_TOOL_CALLS
    if limits.max_tokens is not None and c.tokens >= limits.max_tokens:
        return StopReason.MAX_TOKENS
    return None


def call_groups(parallel_ok: Sequence[bool]) -> list[list[int]]:
    """Indices of a turn's calls in run order: a run of consecutive parallel-safe calls forms
    one group (run together); every other call is a group of its own (run alone, in order)."""
    groups: list[list[int]] = []
    for index, ok in enumerate(parallel_ok):
        if ok and groups and parallel_ok[groups[-1][-1]]:
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


@dataclass(frozen=True)
class _Slot:
    """One call of a turn: what was asked, and why it cannot run if it cannot."""

    call: ToolCall
    error: str | None = None


class _Stop(Exception):
    """Ends the run from inside a turn (deadline during a call, a tool's ToolRunAbort)."""

    def __init__(self, reason: str, message: str | None = None) -> None:
        super().__init__(message or reason)
        self.reason = reason
        self.message = message


def _not_run(call: ToolCall, why: str) -> ToolCallResult:
    return failure_result(call.name, "cancelled", f"not run: {why}", elapsed_s=0.0, max_chars=2000, call_id=call.id)


def _unreadable(call: ToolCall, reason: str) -> ToolCallResult:
    return failure_result(
        call.name or "unknown", "invalid_tool_call", reason, elapsed_s=0.0, max_chars=4000, model_visible=True, call_id=call.id
    )


def _episode_of(tool_context: Any) -> Episode:
    """The episode for ``tool_context``, the loop's earlier way in: an ``Episode`` itself, or a
    mapping whose ``cancel_event`` the loop honours."""
    if isinstance(tool_context, Episode):
        return tool_context
    cancel = tool_context.get("cancel_event") if isinstance(tool_context, Mapping) else None
    return NoEpisode(cancel_event=cancel)


def history_limit(model: Any) -> int | None:
    """How many of the latest tool calls ``context.tool_history`` keeps for ``model``: its
    ``history_calls`` (a model that reads none of it, such as ``scripted``, says 0, so a long
    episode's memory does not grow with every call), or ``None`` (all of them: ``evolve``
    rebuilds its population from the whole history, and a model that says nothing may too)."""
    value = getattr(model, "history_calls", None)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if value < 0:
        raise ValueError(f"model {getattr(model, 'name', model)!r} has history_calls={value}; "
                         "it must be a count of tool calls (0 or more) or None")
    return value


class Agent:
    """One agent episode against one model, with one catalog of tools.

    ``context`` holds the system prompt and the starting messages (kept verbatim); the loop
    appends each turn and re-renders the conversation, compacted, before every model call.
    ``episode`` is the task side (:class:`~sr_dist.agent.episode.Episode`: turn and call
    bookkeeping, whether the task has its answer, the best score, the final report, the cancel
    event); the symbolic-regression episode context is one. ``tool_context`` is the earlier way
    in: an ``Episode``, or a mapping whose ``cancel_event`` is honoured. ``messages`` words the loop's own notes to the model. An agent runs
    once.
    """

    def __init__(
        self,
        model: ModelProtocol,
        parser: BaseParser,
        catalog: ToolCatalog,
        context: Context,
        limits: AgentLimits | None = None,
        *,
        episode: Episode | None = None,
        tool_context: Any = None,
        compaction: CompactionPolicy | None = None,
        messages: LoopMessages | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.parser = parser
        self.catalog = catalog
        self.context = context
        self.limits = limits if limits is not None else AgentLimits()
        self.compaction = compaction if compaction is not None else CompactionPolicy()
        self.messages = messages if messages is not None else LoopMessages()
        self.episode: Episode = episode if episode is not None else _episode_of(tool_context)
        self._clock = clock
        self._native = parser.answers_each_call
        self._tools = catalog.openai_tools()
        self._tool_names = catalog.names()
        tools_text = parser.format_tools(catalog.specs())
        if tools_text and tools_text not in context.system:
            context.system = (context.system.rstrip() + "\n\n" + tools_text) if context.system.strip() else tools_text
        self._history_calls = history_limit(model)
        #: Every call of the episode, bounded per entry (the tool experience is folded from it).
        self._call_log: list[CallRecord] = []
        self._improved: list[bool] = []
        self._head: list[dict[str, Any]] = []
        self._turn_logs: list[TurnLog] = []
        self._dropped = 0
        self._counters = Counters()
        self._usage = Usage()
        self._started = False
        self._start = 0.0

    @property
    def call_log(self) -> tuple[CallRecord, ...]:
        """The episode's tool calls so far, one bounded :class:`CallRecord` each (every call,
        unlike ``context.tool_history``, which a model may cap)."""
        return tuple(self._call_log)

    # ------------------------------------------------------------------ entry points

    def run(self) -> AgentResult:
        """Run to the end; works with or without an event loop running in this thread."""
        return run_coroutine_blocking(self.arun())

    async def aprepare(self, nice: int = 0) -> None:
        """Let the model do, before the run, the work its first call would do from the task
        alone (a model with a ``prepare(context)`` method: evolve builds its seed library
        there), so a host can do it while the evaluator warms up and the first proposals go
        out when the run starts. The run's clock and limits are untouched. ``nice``: on Linux,
        run it in a thread that much lower in priority (a host preparing beside the evaluator's
        start gives way to it). A failure is logged, never raised: the first call does the work
        itself."""
        prepare = getattr(self.model, "prepare", None)
        if self._started or not callable(prepare):
            return
        context = self.context

        def body() -> None:
            if nice > 0 and sys.platform.startswith("linux"):  # nice is per thread there
                with contextlib.suppress(OSError):
                    tid = threading.get_native_id()  # relative: Ray's workers already run niced
                    os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
            prepare(context)

        try:
            await await_in_thread(body, "sr-dist-prepare")
        except Exception as exc:  # noqa: BLE001 - preparing is an optimisation, never a failure
            log.warning("agent %s: preparing the model failed (%s: %s); its first call does "
                        "that work", self.episode.agent_id, type(exc).__name__, exc)

    async def arun(self) -> AgentResult:
        """Run to the end and return the result; never raises for model, provider or tool trouble."""
        if self._started:
            raise RuntimeError("this Agent has already run; build a new one for another episode")
        self._started = True
        self._start = self._clock()
        self._head = [dict(m) for m in self.context.messages]  # the task: always sent verbatim
        stop: str | None = None
        error: str | None = None
        while stop is None:
            stop = stop_before_turn(
                self._counters, self.limits, elapsed_s=self._elapsed(), cancelled=self._cancelled()
            )
            if stop is not None:
                break
            try:
                stop, error = await self._turn()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug somewhere below: end this agent, not the whole run
                log.exception("agent %s: internal error in turn %d", self.episode.agent_id, self._counters.turns)
                stop, error = StopReason.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"
        return self._result(stop, error)

    # ------------------------------------------------------------------ one turn

    async def _turn(self) -> tuple[str | None, str | None]:
        turn = self._counters.turns + 1
        self._bump(turns=turn)
        self.episode.begin_turn(turn)
        self._render()
        try:
            response = await self._within_deadline(self.model.acall(self.context, self._tools))
        except _Stop as timed_out:
            return timed_out.reason, timed_out.message
        except ModelError as err:
            log.warning("agent %s: model error ends the run: %s", self.episode.agent_id, err)
            return model_error_reason(err.kind), str(err)
        if not isinstance(response, ModelResponse):
            return StopReason.INTERNAL_ERROR, f"the model returned {type(response).__name__}, not a ModelResponse"
        self._usage = self._usage + response.usage
        self._bump(tokens=self._usage.total_tokens)

        slots, assistant, errors = self._read(response, turn)
        stop: _Stop | None = None
        results: list[ToolCallResult] = []
        if slots:
            results, stop = await self._run_calls(slots)
        self._log_turn(assistant, slots, results, errors, response)
        self._account(slots, results, errors, response)
        if stop is not None:
            if stop.reason == StopReason.ABORTED and self.episode.finished():
                return StopReason.SUBMITTED, None
            return stop.reason, stop.message
        return (
            stop_after_turn(self._counters, self.limits, submitted=self.episode.finished()),
            None,
        )

    def _read(self, response: ModelResponse, turn: int) -> tuple[list[_Slot], dict[str, Any], list[str]]:
        """The turn's calls (readable or not), the assistant message to keep, and reply-level problems.

        The parser returns one outcome per call the model made; an unreadable one becomes a slot
        answered, under its id, with its reason. Native calls without an id get one unique to
        the episode first, so the history and the answers name the same calls across turns.
        """
        raws: list[dict[str, Any]] = []
        for position, raw in enumerate(response.tool_calls):
            raw = dict(raw)
            given = raw.get("id")
            if not (isinstance(given, str) and given.strip()):
                raw["id"] = f"call_{turn}_{position}"
            raws.append(raw)
        parsed = self.parser.parse(response.text, native_calls=raws or None)
        slots = [
            _Slot(o) if isinstance(o, ToolCall) else _Slot(ToolCall(name=o.name or "unknown", id=o.id), o.reason)
            for o in parsed.outcomes
        ]
        assistant = self.parser.assistant_message(response.text, parsed.outcomes, native_calls=raws or None)
        return slots, assistant, list(parsed.problems)

    async def _run_calls(self, slots: Sequence[_Slot]) -> tuple[list[ToolCallResult], _Stop | None]:
        """Run the readable calls in order (parallel-safe neighbours together); answer every slot.

        Returns one result per slot and, when the run must end mid-turn (deadline, a tool's
        ``ToolRunAbort``), why; the calls not reached then get a "not run" result.
        """
        results: list[ToolCallResult | None] = [
            _unreadable(s.call, s.error) if s.error is not None else None for s in slots
        ]
        runnable = [i for i, s in enumerate(slots) if s.error is None]
        self._improved = [False] * len(slots)
        flags = [self._parallel_safe(slots[i].call.name) for i in runnable]
        stop: _Stop | None = None
        for group in call_groups(flags):
            if stop is not None:
                break
            todo: list[int] = []
            for i in (runnable[g] for g in group):
                why = self._why_not_run(pending=len(todo))
                if why is not None:
                    results[i] = _not_run(slots[i].call, why)
                else:
                    todo.append(i)
            if not todo:
                continue
            self._bump(tool_calls=self._counters.tool_calls + len(todo))
            self.episode.begin_call(slots[todo[0]].call.id if len(todo) == 1 else None)
            before = self.episode.score()
            outcomes = await asyncio.gather(*(self._invoke(slots[i].call) for i in todo))
            better = self.episode.score() < before  # the group's calls share the credit
            for i, (result, why_stop) in zip(todo, outcomes):
                results[i] = result
                self._improved[i] = better and result.ok
                stop = stop or why_stop
        why = "the run stopped before this call" if stop is None else f"the run stopped ({stop.reason})"
        return [r if r is not None else _not_run(s.call, why) for r, s in zip(results, slots)], stop

    async def _invoke(self, call: ToolCall) -> tuple[ToolCallResult, _Stop | None]:
        try:
            return await self._within_deadline(self.catalog.ainvoke(call)), None
        except ToolRunAbort as abort:
            reason = f"the tool ended the run: {abort}" if str(abort) else "the tool ended the run"
            result = failure_result(call.name, "cancelled", reason, elapsed_s=0.0, max_chars=2000, call_id=call.id)
            return result, _Stop(StopReason.ABORTED, str(abort) or f"tool {call.name!r} ended the run")
        except _Stop as stop:
            result = failure_result(
                call.name,
                "timeout",
                "the run's deadline passed while this tool ran; its result was discarded",
                elapsed_s=0.0,
                max_chars=2000,
                call_id=call.id,
            )
            return result, stop

    def _why_not_run(self, pending: int = 0) -> str | None:
        """Why the next call may not run (``pending`` calls of its group are already admitted)."""
        if self._cancelled():
            return "the run was cancelled"
        if self.limits.deadline_s is not None and self._elapsed() >= self.limits.deadline_s:
            return "the run's deadline passed"
        cap = self.limits.max_tool_calls
        if cap is not None and self._counters.tool_calls + pending >= cap:
            return f"the run's limit of {cap} tool calls was reached"
        return None

    def _parallel_safe(self, name: str) -> bool:
        tool = self.catalog.get(name)
        meta = getattr(tool, "metadata", None)
        return bool(meta is not None and meta.read_only and meta.idempotent)

    # ------------------------------------------------------------------ bookkeeping

    def _log_turn(
        self,
        assistant: dict[str, Any],
        slots: Sequence[_Slot],
        results: Sequence[ToolCallResult],
        errors: Sequence[str],
        response: ModelResponse,
    ) -> None:
        calls = [s.call for s in slots]
        history = self.context.tool_history
        for call, result in zip(calls, results):
            history.append((call, history_result(result, self.compaction)))
        improved = self._improved if len(self._improved) == len(results) else [False] * len(results)
        self._call_log.extend(call_record(call, result, improved=better)
                              for call, result, better in zip(calls, results, improved))
        self._improved = []
        if self._history_calls is not None and len(history) > self._history_calls:
            del history[: len(history) - self._history_calls]
        messages: list[dict[str, Any]] = [assistant]
        summaries: list[str | None] = [None]
        if calls or errors:
            answered = self.parser.result_messages(calls, results, errors=errors)
            messages.extend(answered)
            if self._native:
                by_id = {c.id: (c, r) for c, r in zip(calls, results)}
                for message in answered:
                    pair = by_id.get(message.get("tool_call_id")) if message.get("role") == "tool" else None
                    if pair is not None:
                        summaries.append(f"{COMPACTED} {summarize_result(*pair)}")
                    else:
                        summaries.append(summarize_results([], [], errors) if errors else None)
            else:
                summaries.extend(summarize_results(calls, results, errors) for _ in answered)
        notes = []
        if response.truncated:
            notes.append(self.messages.truncated())
        if not calls and not errors and not response.truncated:
            if self._counters.prose_streak + 1 < self.limits.max_prose_turns:
                notes.append(self.messages.nudge(self._tool_names))
        if notes:
            text = "\n\n".join(notes)
            last = messages[-1]
            if last.get("role") == "user" and isinstance(last.get("content"), str):
                messages[-1] = {**last, "content": last["content"] + "\n\n" + text}
            else:
                messages.append({"role": "user", "content": text})
                summaries.append(None)
        self._turn_logs.append(TurnLog(tuple(messages), tuple(summaries)))
        self._render()

    def _account(
        self, slots: Sequence[_Slot], results: Sequence[ToolCallResult], errors: Sequence[str], response: ModelResponse
    ) -> None:
        c = self._counters
        unreadable = sum(1 for s in slots if s.error is not None)
        failed = sum(1 for r in results if not r.ok)
        succeeded = len(results) - failed
        had_problem = bool(errors) or failed > 0
        failed_turn = response.truncated or (succeeded == 0 and had_problem)
        prose = not slots and not errors and not response.truncated
        self._bump(
            tool_calls=c.tool_calls + unreadable,
            failed_tool_calls=c.failed_tool_calls + sum(1 for r in results if not r.ok and r.error_kind != "cancelled"),
            consecutive_failures=c.consecutive_failures + 1 if failed_turn else 0,
            prose_streak=c.prose_streak + 1 if prose else 0,
            best_nmse=self.episode.score(),
        )

    def _render(self) -> None:
        messages, dropped = render_conversation(self._head, self._turn_logs, self.compaction, self._dropped)
        if dropped:
            del self._turn_logs[:dropped]
            self._dropped += dropped
        self.context.messages = messages

    def _bump(self, **changes: Any) -> None:
        self._counters = Counters(**{**self._counters.__dict__, **changes})

    def _elapsed(self) -> float:
        return self._clock() - self._start

    def _cancelled(self) -> bool:
        is_set = getattr(self.episode.cancel_event, "is_set", None)
        return bool(is_set()) if callable(is_set) else False

    async def _within_deadline(self, awaitable: Any) -> Any:
        if self.limits.deadline_s is None:
            return await awaitable
        remaining = self.limits.deadline_s - self._elapsed()
        if remaining <= 0:
            close = getattr(awaitable, "close", None)
            if callable(close):
                close()
            raise _Stop(StopReason.DEADLINE, f"the run's deadline of {self.limits.deadline_s:g}s passed")
        try:
            return await asyncio.wait_for(awaitable, timeout=remaining)
        except TimeoutError:
            raise _Stop(StopReason.DEADLINE, f"the run's deadline of {self.limits.deadline_s:g}s passed") from None

    def _result(self, stop: str, error: str | None) -> AgentResult:
        report = self.episode.report()
        c = self._counters
        return AgentResult(
            stop_reason=str(stop),
            best=report.best,
            submitted=report.submitted,
            turns=c.turns,
            tool_calls=c.tool_calls,
            failed_tool_calls=c.failed_tool_calls,
            usage=self._usage,
            candidates=report.candidates,
            error=error,
            model=str(getattr(self.model, "name", "")),
            recording_errors=report.recording_errors,
            elapsed_s=self._elapsed(),
        )

    def __repr__(self) -> str:
        return f"Agent(model={getattr(self.model, 'name', '?')!r}, parser={self.parser.name!r}, tools={list(self._tool_names)})"

