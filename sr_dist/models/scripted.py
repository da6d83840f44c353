"""``scripted``: a fast, seeded proposer for soak and load tests, not for finding formulas.

It exists so a run of a million candidate rows can go through the real pipeline (agent loop →
``evaluate_formulas`` → evaluator pool → recorder → result writer → Parquet) in minutes, with
the model costing almost nothing: every turn it answers with ``calls_per_turn`` native
``evaluate_formulas`` calls of ``formulas_per_call`` formulas each, drawn (seeded) from a
bounded pool of ``structures`` formula structures built from the dataset's variables. After
the pool's first fits nearly every formula is an evaluator cache hit, yet each proposal is
still a real candidate row. It never submits: a run of scripted agents ends on its budgets.

It reads only ``context.info`` (``variables``, and ``seed`` unless given): nothing of the
conversation or of ``context.tool_history``, which it says with ``history_calls = 0`` so the
agent loop keeps no tool history for it (a long episode's memory stays flat). Its draws come
from ``(seed, number of calls this instance has answered)``.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from sr_dist.conversation import Context
from sr_dist.formula import free_constant_prefix
from sr_dist.models.base import ModelConfigError, ModelError, ModelResponse, Usage
from sr_dist.models.options import COMMON_KEYS, as_plain_dict, check_keys

__all__ = ["EVALUATE_TOOL", "ScriptedModel", "build_scripted", "structure_pool"]

#: The one tool a scripted model calls.
EVALUATE_TOOL = "evaluate_formulas"
#: Keys a ``scripted`` config may hold besides the common ones.
_OWN_KEYS = frozenset({"formulas_per_call", "calls_per_turn", "structures", "seed", "variables"})
#: The most formulas per call a scripted model sends (the load it was sized for; the tool
#: takes up to ``DEFAULT_MAX_EXPRESSIONS`` a call).
MAX_FORMULAS_PER_CALL = 64

#: One-variable terms the structures are built from (``{v}``: the variable).
_TERMS = ("{v}", "sin({v})", "cos({v})", "exp(-{v})", "sqrt(abs({v}))", "{v}**2",
          "log(abs({v}) + 1)", "tanh({v})")


def structure_pool(variables: Sequence[str], size: int) -> tuple[str, ...]:
    """``size`` formula structures over ``variables`` (fewer when the grammar runs out),
    in a fixed order: ``a*t + b``, then ``a*t*u + b``, then ``a*t + b*u + c`` over the terms
    ``t, u`` of every variable, then ``a*sin(b*x + c) + d``, where ``a, b, ...`` are free
    constants named so no variable can be taken for one. Every agent of a run gets the same
    pool, so their fits share the evaluator's cache."""
    names = [str(v) for v in variables]
    if not names:
        raise ValueError("a structure pool needs at least one variable")
    if size < 1:
        raise ValueError(f"a structure pool needs a positive size, got {size}")
    p = free_constant_prefix(names)
    terms = [t.format(v=v) for v in names for t in _TERMS]
    pool: list[str] = [f"{p}0*{t} + {p}1" for t in terms]
    pairs = [(a, b) for i, a in enumerate(terms) for b in terms[i + 1:]]
    pool += [f"{p}0*{a}*{b} + {p}1" for a, b in pairs]
    pool += [f"{p}0*{a} + {p}1*{b} + {p}2" for a, b in pairs]
    pool += [f"{p}0*sin({p}1*{v} + {p}2) + {p}3" for v in names]
    return tuple(pool[:size])


class ScriptedModel:
    """The soak proposer; see the module docstring. Thread-safe (one lock around the counter)."""

    tool_mode = "native"
    #: Tool calls of ``context.tool_history`` this model reads: none (the loop keeps none).
    history_calls = 0

    def __init__(self, *, formulas_per_call: int = MAX_FORMULAS_PER_CALL, calls_per_turn: int = 1,
                 structures: int = 256, seed: int | None = None,
                 variables: Sequence[str] | None = None) -> None:
        for key, value, top in (("formulas_per_call", formulas_per_call, MAX_FORMULAS_PER_CALL),
                                ("calls_per_turn", calls_per_turn, None),
                                ("structures", structures, None)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ModelConfigError(f"model.{key} must be a positive integer, got {value!r}")
            if top is not None and value > top:
                raise ModelConfigError(f"model.{key} must be at most {top} (evaluate_formulas "
                                       f"refuses more per call), got {value}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ModelConfigError(f"model.seed must be a non-negative integer or null, got {seed!r}")
        self.name = "scripted"
        self.formulas_per_call = formulas_per_call
        self.calls_per_turn = calls_per_turn
        self.structures = structures
        self.seed = seed
        self.variables = tuple(variables) if variables is not None else None
        self._lock = threading.Lock()
        self._calls = 0
        self._pools: dict[tuple[str, ...], tuple[str, ...]] = {}

    def call(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse:
        if tools is not None and EVALUATE_TOOL not in _tool_names(tools):
            raise ModelError(f"the scripted model needs the {EVALUATE_TOOL!r} tool; offered: "
                             f"{sorted(_tool_names(tools))}", kind="config")
        pool = self._pool(self._variables(context))
        with self._lock:
            number = self._calls
            self._calls += 1
        rng = random.Random(f"{self._seed(context)}:{number}")
        k = min(self.formulas_per_call, len(pool))
        calls = tuple(
            {"id": f"scripted-{number}-{i}", "type": "function",
             "function": {"name": EVALUATE_TOOL,
                          "arguments": json.dumps({"expressions": rng.sample(pool, k)})}}
            for i in range(self.calls_per_turn)
        )
        return ModelResponse(text="", tool_calls=calls, usage=Usage(), finish_reason="tool_calls")

    async def acall(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse:
        # Inline, not in a thread: a call costs microseconds, a thread hop would cost more.
        return self.call(context, tools)

    def _variables(self, context: Context) -> tuple[str, ...]:
        if self.variables is not None:
            return self.variables
        names = context.info.get("variables") if isinstance(context.info, Mapping) else None
        if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names):
            raise ModelError("the scripted model needs the dataset's variable names in "
                             "context.info['variables'] (or model.variables)", kind="config")
        return tuple(names)

    def _seed(self, context: Context) -> int:
        if self.seed is not None:
            return self.seed
        seed = context.info.get("seed", 0) if isinstance(context.info, Mapping) else 0
        return int(seed) if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 else 0

    def _pool(self, variables: tuple[str, ...]) -> list[str]:
        with self._lock:
            pool = self._pools.get(variables)
            if pool is None:
                pool = self._pools[variables] = structure_pool(variables, self.structures)
        return list(pool)

    def __repr__(self) -> str:
        return (f"ScriptedModel(formulas_per_call={self.formulas_per_call}, "
                f"calls_per_turn={self.calls_per_turn}, structures={self.structures})")


def _tool_names(tools: Sequence[Mapping[str, Any]]) -> set[str]:
    names: set[str] = set()
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        name = fn.get("name") if isinstance(fn, Mapping) else (tool.get("name") if isinstance(tool, Mapping) else None)
        if isinstance(name, str):
            names.add(name)
    return names


def build_scripted(cfg: Mapping[str, Any] | Any) -> ScriptedModel:
    """Build from a ``model`` config: ``formulas_per_call``, ``calls_per_turn``, ``structures``,
    ``seed`` and ``variables`` (each ``null`` for its default); the common model keys are
    accepted and ignored, others refused."""
    options = as_plain_dict(cfg)
    check_keys(options, COMMON_KEYS | _OWN_KEYS, "scripted")
    mode = options.get("tool_mode")
    if mode not in (None, "native"):
        raise ModelConfigError(f"the scripted model speaks native tool calls only, not tool_mode={mode!r}")
    variables = options.get("variables")
    if variables is not None and (isinstance(variables, str) or not isinstance(variables, Sequence)
                                  or not all(isinstance(v, str) for v in variables)):
        raise ModelConfigError(f"model.variables must be a list of names, got {variables!r}")
    seed = options.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ModelConfigError(f"model.seed must be a non-negative integer or null, got {seed!r}")

    def given(key: str, default: int) -> Any:
        value = options.get(key)
        return default if value is None else value

    return ScriptedModel(
        formulas_per_call=given("formulas_per_call", MAX_FORMULAS_PER_CALL),
        calls_per_turn=given("calls_per_turn", 1),
        structures=given("structures", 256),
        seed=seed,
        variables=variables,
    )
