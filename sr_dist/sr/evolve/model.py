"""``evolve``: the built-in offline proposer, a symbolic-regression search behind the model protocol.

It answers each turn the way a tool-calling LLM would: it reads the structured results of earlier
``evaluate_formulas`` calls from ``context.tool_history`` and replies with one new
``evaluate_formulas`` call (a batch of candidates), or with ``submit_formula`` once it has
converged. Its whole state is derived from the context, and its random numbers are seeded from
``(seed, number of tool calls so far)``, so a fresh instance given the same context proposes the
same batch: replays are exact and an agent can be restarted.

What it reads from ``context.info``: ``variables`` (the dataset's variable names, unless given
to the constructor), ``seed`` (unless given), and optionally ``sample`` =
``{"X": [[...], ...], "y": [...]}``, training rows used for data-driven seeding (power-law
fit, sparse sums). Without a sample the search still runs, from data-free seeds. With
``units`` = ``{"variables": {name: exponents}, "target": exponents}`` (a dataset with units) the
library starts with dimensionally consistent seeds built from the Buckingham π groups
(:mod:`sr_dist.sr.evolve.library.sources.pi_groups`), and the search prefers consistent candidates.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from sr_dist.conversation import Context
from sr_dist.models.base import ModelConfigError, ModelError, ModelResponse, Usage
from sr_dist.models.options import COMMON_KEYS, as_plain_dict, check_keys
from sr_dist.sr.evolve.library.assemble import library_seeds
from sr_dist.sr.evolve.library.cache import LibraryCache
from sr_dist.sr.evolve.library.config import LibraryConfig, library_config
from sr_dist.sr.evolve.library.sample import Sample, sample_from_info
from sr_dist.sr.evolve.library.seed import Seed
from sr_dist.sr.evolve.library.sources.pi_groups import units_from_info
from sr_dist.sr.evolve.population import (
    EVALUATE_TOOL,
    FRONT_TOOL,
    SUBMIT_TOOL,
    History,
    HistoryReader,
)
from sr_dist.sr.evolve.search import EvolveConfig, Proposal, SeedKeys, propose

__all__ = ["EvolveModel", "build_evolve"]

_SEARCH_KEYS = frozenset(f.name for f in fields(EvolveConfig))
#: Keys an evolve config may hold: the common model keys (ignored) plus its own.
_ALLOWED_KEYS = COMMON_KEYS | _SEARCH_KEYS | {"seed", "variables", "library", "library_cache"}


def _tool_names(tools: Sequence[Mapping[str, Any]] | None) -> frozenset[str] | None:
    if tools is None:
        return None
    names: set[str] = set()
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        fn = tool.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else tool.get("name")
        if isinstance(name, str):
            names.add(name)
    return frozenset(names)


#: Conversations whose history readers a model keeps (one per agent it serves; the oldest
#: unused one is dropped beyond this).
READERS_KEPT = 64


@dataclass(frozen=True)
class _Ahead:
    """A proposal being bred for a conversation's next call (``propose_ahead``): valid when
    that call's history is the ``known`` pairs plus one ``evaluate_formulas`` call of exactly
    ``expressions`` (the batch this model just sent), with the same tools offered."""

    known: int
    last: Any
    expressions: tuple[Any, ...]
    available: frozenset[str] | None
    future: Future[tuple[ModelResponse, tuple[str, ...] | None]]


def _evaluated(pair: Any) -> tuple[Any, ...] | None:
    """The ``expressions`` of a history pair's ``evaluate_formulas`` call (None: not one)."""
    call = pair[0] if isinstance(pair, tuple) and pair else None
    arguments = getattr(call, "arguments", None)
    if getattr(call, "name", None) != EVALUATE_TOOL or not isinstance(arguments, Mapping):
        return None
    expressions = arguments.get("expressions")
    return tuple(expressions) if isinstance(expressions, list) else None


class EvolveModel:
    """The offline proposer; see the module docstring. Thread-compatible, not shared-mutable:
    the only instance state besides configuration is a memo of seed libraries (with their seeds'
    keys) and one incremental history reader per conversation: memos, so a fresh model
    proposes the same."""

    name = "evolve"
    tool_mode = "native"

    def __init__(
        self,
        variables: Sequence[str] | None = None,
        seed: int | None = 0,
        batch_size: int = 64,
        library: Mapping[str, Any] | LibraryConfig | None = None,
        library_cache: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> None:
        unknown = set(options) - _SEARCH_KEYS
        if unknown:
            raise ModelConfigError(f"unknown evolve option(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(_SEARCH_KEYS))}")
        try:
            self.config = EvolveConfig(batch_size=batch_size, **options)
        except (TypeError, ValueError) as exc:
            raise ModelConfigError(f"invalid evolve options: {exc}") from exc
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ModelConfigError(f"seed must be a non-negative integer, got {seed!r}")
        self.variables = tuple(variables) if variables is not None else None
        self.seed = None if seed is None else int(seed)
        try:
            self.library = library_config(library)
        except (TypeError, ValueError) as exc:
            raise ModelConfigError(f"invalid evolve library options: {exc}") from exc
        if library_cache is not None and (not isinstance(library_cache, (str, os.PathLike))
                                          or not os.fspath(library_cache)):
            raise ModelConfigError(f"library_cache must be a folder path or null, got {library_cache!r}")
        #: Where built libraries are kept across processes (:mod:`.library.cache`); None: not.
        self.library_cache = None if library_cache is None else LibraryCache(library_cache)
        self._libraries: dict[str, tuple[Seed, ...]] = {}
        #: Each library's memo of its seeds' keys, under the library's own memo key (which
        #: includes the variables the keys depend on).
        self._seed_keys: dict[str, SeedKeys] = {}
        self._readers: OrderedDict[int, tuple[list[Any], HistoryReader]] = OrderedDict()
        self._readers_lock = threading.Lock()
        #: ``propose_ahead``: per conversation, the next call's proposal being bred.
        self._aheads: dict[int, _Ahead] = {}
        self._ahead_pool: ThreadPoolExecutor | None = None
        #: Calls answered with a proposal bred ahead (``propose_ahead``).
        self.proposed_ahead = 0

    # ------------------------------------------------------------------ protocol

    def call(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse:
        variables = self._variables(context)
        available = _tool_names(tools)
        if available is not None and EVALUATE_TOOL not in available:
            raise ModelError(f"evolve needs the {EVALUATE_TOOL!r} tool; offered: {sorted(available)}", kind="config")
        pairs = context.tool_history
        if not self.config.propose_ahead:
            return self._propose(context, variables, available, pairs, None)[0]
        bred = self._take_ahead(pairs, available)
        if bred is None:
            held = _evaluated(pairs[-1]) if pairs else None
            bred = self._propose(context, variables, available,
                                 pairs[:-1] if held is not None else pairs, held)
        else:
            self.proposed_ahead += 1
        response, sent = bred
        if sent is not None:
            self._start_ahead(context, variables, available, list(pairs), sent)
        return response

    def _propose(self, context: Context, variables: tuple[str, ...],
                 available: frozenset[str] | None, pairs: Sequence[Any],
                 held: tuple[Any, ...] | None) -> tuple[ModelResponse, tuple[str, ...] | None]:
        """The response to a call whose history is ``pairs``, plus ``held``: the expressions
        of one more ``evaluate_formulas`` call whose results are not read (``propose_ahead``),
        which count as tried and as a call. Also returns the batch sent (None: no
        ``evaluate_formulas`` call)."""
        history = self._reader(context.tool_history, variables).read(pairs, held)
        sample = sample_from_info(context.info, variables)
        rng = np.random.default_rng([self._seed(context), history.calls])
        can_submit = available is None or SUBMIT_TOOL in available
        units = units_from_info(context.info, variables)
        memo = _library_key(variables, sample, units)
        library = _share(self._library(variables, sample, units), _agent_id(context),
                         self.config.batch_size, _agents(context) if self.config.split_library else None)
        keys = self._seed_keys.setdefault(memo, SeedKeys())
        proposal = propose(history, variables, library, self.config, rng, can_submit, keys)
        sent = proposal.expressions if proposal.submit is None and proposal.expressions else None
        migrate = sent is not None and self._migration_due(history.generations, available)
        # A turn that also reads the run's front adds two results to the history, so no
        # proposal is bred ahead of it (it would be bred for one).
        return self._respond(proposal, history, migrate), None if migrate else sent

    def _migration_due(self, generations: int, available: frozenset[str] | None) -> bool:
        """Whether this turn also asks ``best_formulas`` for the run's front (migration):
        every ``migrate_every`` generations, where the tool is offered."""
        every = self.config.migrate_every
        return (every > 0 and generations > 0 and generations % every == 0
                and available is not None and FRONT_TOOL in available)

    def _start_ahead(self, context: Context, variables: tuple[str, ...],
                     available: frozenset[str] | None, pairs: list[Any],
                     sent: tuple[str, ...]) -> None:
        """Breed the next call's proposal in the background: its history will be ``pairs``
        plus the call just sent (``sent``), whose results it does not read."""
        dropped: list[_Ahead] = []
        with self._readers_lock:
            if self._ahead_pool is None:
                self._ahead_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evolve-ahead")
            try:
                future = self._ahead_pool.submit(self._propose, context, variables, available,
                                                 pairs, sent)
            except RuntimeError:  # the interpreter is shutting down: the next call proposes
                return
            self._aheads[id(context.tool_history)] = _Ahead(
                len(pairs), pairs[-1] if pairs else None, sent, available, future)
            while len(self._aheads) > READERS_KEPT:
                dropped.append(self._aheads.pop(next(iter(self._aheads))))
        for ahead in dropped:  # a forgotten conversation's reader is not in use once this returns
            ahead.future.exception()

    def _take_ahead(self, pairs: Sequence[Any], available: frozenset[str] | None,
                    ) -> tuple[ModelResponse, tuple[str, ...] | None] | None:
        """The proposal bred ahead for this call, or None when there is none or the history
        is not the one it was bred for. Waits for a proposal still being bred either way
        (it uses this conversation's reader)."""
        with self._readers_lock:
            ahead = self._aheads.pop(id(pairs), None)
        if ahead is None:
            return None
        try:
            bred = ahead.future.result()
        except Exception:  # noqa: BLE001 - proposed again in the foreground, which reports it
            return None
        if (available != ahead.available or len(pairs) != ahead.known + 1
                or (ahead.known and pairs[ahead.known - 1] is not ahead.last)
                or _evaluated(pairs[-1]) != ahead.expressions):
            return None
        return bred

    async def acall(self, context: Context, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelResponse:
        return await asyncio.to_thread(self.call, context, tools)

    def prepare(self, context: Context) -> None:
        """Build the seed library for ``context``'s data and its seeds' keys (what the first
        :meth:`call` would spend seconds on), so an agent host can do it before the run
        starts (``Agent.aprepare``). Proposals are the same with or without it."""
        variables = self._variables(context)
        sample = sample_from_info(context.info, variables)
        units = units_from_info(context.info, variables)
        library = self._library(variables, sample, units)
        keys = self._seed_keys.setdefault(_library_key(variables, sample, units), SeedKeys())
        keys.fill(library, variables, self.config)

    # ------------------------------------------------------------------ helpers

    def _variables(self, context: Context) -> tuple[str, ...]:
        if self.variables is not None:
            return self.variables
        names = context.info.get("variables") if isinstance(context.info, Mapping) else None
        if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names):
            raise ModelError("evolve needs the dataset's variable names in context.info['variables']", kind="config")
        return tuple(names)

    def _reader(self, tool_history: list[Any], variables: tuple[str, ...]) -> HistoryReader:
        """The incremental reader of this conversation's history (keyed by the list itself,
        which the entry keeps alive so its id is not reused)."""
        with self._readers_lock:
            kept = self._readers.get(id(tool_history))
            if kept is not None and kept[0] is tool_history and kept[1].names == variables:
                self._readers.move_to_end(id(tool_history))
                return kept[1]
            reader = HistoryReader(variables, with_constants=self.config.inherit_constants,
                                   parsimony=self.config.parsimony)
            self._readers[id(tool_history)] = (tool_history, reader)
            while len(self._readers) > READERS_KEPT:
                self._readers.popitem(last=False)
            return reader

    def _seed(self, context: Context) -> int:
        if self.seed is not None:
            return self.seed
        seed = context.info.get("seed", 0) if isinstance(context.info, Mapping) else 0
        return int(seed) if isinstance(seed, (int, np.integer)) and seed >= 0 else 0

    def _library(self, variables: tuple[str, ...], sample: Sample | None,
                 units: Any = None) -> tuple[Seed, ...]:
        key = _library_key(variables, sample, units)
        if key not in self._libraries:
            def build() -> tuple[Seed, ...]:
                return tuple(library_seeds(variables, sample, units, self.library))

            self._libraries[key] = (build() if self.library_cache is None
                                    else self.library_cache.get(f"{key} {self.library!r}", build))
        return self._libraries[key]

    def _respond(self, proposal: Proposal, history: History, migrate: bool = False) -> ModelResponse:
        call_id = f"evolve-{history.calls}"
        if proposal.submit is not None:
            best = proposal.submit
            rationale = f"{proposal.reason}; complexity {best.complexity}, after {history.generations} generations"
            args = {"expression": best.expression, "rationale": rationale}
            return self._calls(SUBMIT_TOOL, args, call_id, f"Submitting {best.expression} ({proposal.reason}).")
        if proposal.expressions:
            text = (f"Generation {history.generations}: proposing {len(proposal.expressions)} candidates"
                    + (f"; best so far {history.best.expression} (NMSE {history.best.nmse:.3g})." if history.best else "."))
            arguments: dict[str, Any] = {"expressions": list(proposal.expressions),
                                         "origins": list(proposal.origins)}
            if proposal.starts:
                arguments["starts"] = list(proposal.starts)
            response = self._calls(EVALUATE_TOOL, arguments, call_id, text)
            if not migrate:
                return response
            front = self._calls(FRONT_TOOL, {"k": MIGRANTS, "simplify": False}, f"{call_id}-front", "")
            return ModelResponse(text=text, tool_calls=(*response.tool_calls, *front.tool_calls),
                                 usage=Usage(), finish_reason="tool_calls")
        return ModelResponse(text="The search has nothing new to propose.", finish_reason="stop")

    @staticmethod
    def _calls(tool: str, arguments: Mapping[str, Any], call_id: str, text: str) -> ModelResponse:
        payload = json.dumps(arguments)
        call = {"id": call_id, "type": "function", "function": {"name": tool, "arguments": payload}}
        return ModelResponse(text=text, tool_calls=(call,), usage=Usage(), finish_reason="tool_calls")


#: How many of the run's front a migration asks ``best_formulas`` for (its most).
MIGRANTS = 50

#: Where agent ``k`` starts in the library after its common head: ``k`` times the golden
#: ratio's fraction of its length (any number of agents spreads out without being told it).
_GOLDEN = 0.6180339887498949


def _library_key(variables: tuple[str, ...], sample: Sample | None, units: Any) -> str:
    """The memo key of a seed library: its variables, rows and units."""
    digest = hashlib.sha256(json.dumps(variables).encode())
    if sample is not None:
        digest.update(np.ascontiguousarray(sample.X).tobytes())
        digest.update(np.ascontiguousarray(sample.y).tobytes())
    if units is not None:
        digest.update(repr(units).encode())
    return digest.hexdigest()


def _agent_id(context: Context) -> int:
    value = context.info.get("agent_id", 0) if isinstance(context.info, Mapping) else 0
    return int(value) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0 else 0


def _agents(context: Context) -> int | None:
    """The run's agent count (``context.info["agents"]``), or None where it is not given."""
    value = context.info.get("agents") if isinstance(context.info, Mapping) else None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
        return int(value)
    return None


def _share(library: tuple[Seed, ...], agent_id: int, batch_size: int,
           agents: int | None = None) -> tuple[Seed, ...]:
    """The library in the order agent ``agent_id`` takes it: every agent starts with the same
    half batch (the near-exact seeds, worth fitting twice rather than late). Where the run's
    agent count is known, agent ``k`` of ``n`` then takes every ``n``-th seed of the rest from
    the ``k``-th, so each seed is fitted once in the run and the agents share what they found
    through the run's front (migration). Otherwise agent 0 goes on in order and agent ``k``
    from ``k * 0.618`` of the way along, wrapping round."""
    head = max(1, batch_size // 2)
    tail = library[head:]
    if agents is not None and agents > 1:
        return library[:head] + tail[agent_id % agents::agents]
    if agent_id == 0 or len(tail) < 2:
        return library
    offset = int(len(tail) * ((agent_id * _GOLDEN) % 1.0))
    return library[:head] + tail[offset:] + tail[:offset]


def build_evolve(cfg: Mapping[str, Any] | Any) -> EvolveModel:
    """Build from a config mapping (or ``DictConfig``): ``batch_size``, ``seed``, ``variables``
    any :class:`~sr_dist.sr.evolve.search.EvolveConfig` field and ``library`` (the keys of
    :class:`~sr_dist.sr.evolve.library.config.LibraryConfig`). The keys every model config may
    carry (``provider``, ``record_path``, ...) are accepted and ignored; others are refused."""
    options = as_plain_dict(cfg)
    check_keys(options, _ALLOWED_KEYS, "evolve")
    mode = options.get("tool_mode")
    if mode not in (None, "native"):
        raise ModelConfigError(f"evolve speaks native tool calls only, not tool_mode={mode!r}")
    own = {k: v for k, v in options.items() if k not in COMMON_KEYS and v is not None}
    variables = own.pop("variables", None)
    if variables is not None and (isinstance(variables, str) or not all(isinstance(v, str) for v in variables)):
        raise ModelConfigError(f"model.variables must be a list of names, got {variables!r}")
    seed = own.pop("seed", 0)
    batch_size = own.pop("batch_size", 64)
    if not isinstance(batch_size, int) or isinstance(batch_size, bool):
        raise ModelConfigError(f"model.batch_size must be an integer, got {batch_size!r}")
    return EvolveModel(variables=variables, seed=seed, batch_size=batch_size, **own)
