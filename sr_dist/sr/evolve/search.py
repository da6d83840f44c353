"""One generation of the evolve search: from a :class:`History` to the next batch (or a submission).

The batch mixes (1) not-yet-tried structures from the seed library, (2) offspring of parents
picked by tournament on ``log10(NMSE) + parsimony*complexity`` from the best of the population
plus its Pareto front, made by the operators in :mod:`sr_dist.sr.evolve.operators`, and (3) fresh
random trees. Every proposal is new (its canonical form was never proposed before), except a
full refit of a locally fitted front member (``refit_share``, with ``inherit_constants``), and
it carries its origin (``library/<source>``, ``reduction``, ``pruned``, ``phase_form``,
``gp/<operator>``, ``gp/fresh``, ``refit``), which the results table keeps. Once a
candidate beats ``stop_nmse`` (an exact fit, not an approximant) the search spends
``polish_generations`` on simplifying the solutions (those under ``target_nmse``), then submits
the simplest one; it also submits its best after ``patience``
generations without progress. With units, only dimensionally consistent candidates count as
solutions and inconsistent ones score worse (:data:`~sr_dist.sr.evolve.population.INCONSISTENT_PENALTY`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sr_dist.formula import Node
from sr_dist.sr.evolve.keying import Keyer
from sr_dist.sr.evolve.library.seed import Seed
from sr_dist.sr.evolve.operators import (
    OPERATORS,
    Grammar,
    constant_reductions,
    cumulative,
    draw,
    random_tree,
    within_limits,
)
from sr_dist.sr.evolve.population import History, Individual, score, tournament
from sr_dist.sr.evolve.rewrites import phase_forms, without_negligible_terms
from sr_dist.sr.evolve.tree import (
    constant_prefix,
    constant_values,
    count_constants,
    has_var,
    size,
    tidy,
)

__all__ = ["EvolveConfig", "INHERITED_SHARE", "SeedKeys", "Proposal", "SearchConfig", "grammar_for", "inherited_start", "propose"]

_POLISH_OPERATORS = ("drop_term", "constant_subtree", "delete_node")
#: Limits for library seeds (the search's own are ``EvolveConfig.max_size`` and
#: ``max_constants``): the evaluator's largest constant bucket, and twice the default size.
SEED_MAX_CONSTANTS = 16
SEED_MAX_SIZE = 80
#: Solutions (simplest first) whose one-constant reductions lead each batch once solved.
REDUCED_SOLUTIONS = 3


@dataclass(frozen=True)
class EvolveConfig:
    """Knobs of the search; the defaults are what the benchmark in docs/benchmarks.md uses."""

    #: Candidates per ``evaluate_formulas`` call. Each call has a fixed cost in the agent loop
    #: and the evaluator actor: 64 gave about 1.2 times the distinct candidates a second of 32,
    #: and 128 (the most the tool takes) about 1.1 times those of 64, but at 128 the search
    #: (with or without proposing ahead) lost a development problem it finds at 64 (issue 32,
    #: docs/benchmarks.md "Throughput").
    batch_size: int = 64
    #: A candidate with validation NMSE below this counts as a solution (its reductions are
    #: offered, and the submission picks the simplest one).
    target_nmse: float = 1e-11
    #: The search submits (ends) only once its best validation NMSE is below this. An exact
    #: law refitted in float64 lands near 1e-30; a rational approximant of a smooth law can
    #: reach 1e-13 to 1e-17 and, at ``target_nmse``, ended searches before they found the law.
    stop_nmse: float = 1e-20
    #: Score penalty per node (in decades of NMSE).
    parsimony: float = 0.02
    pool_size: int = 64
    tournament_size: int = 4
    #: Share of offspring that are fresh random trees.
    p_fresh: float = 0.08
    #: Share of offspring whose (first) parent is the best candidate by score.
    p_elite: float = 0.25
    #: Share of each batch after the first given to untried library structures.
    library_share: float = 0.5
    #: Generations spent simplifying after the first solution, before submitting.
    polish_generations: int = 2
    #: Submit the best after this many generations without progress (0: never).
    patience: int = 200
    max_size: int = 40
    max_constants: int = 8
    #: Proposal attempts per batch slot before giving up on filling the batch.
    attempts_per_slot: int = 40
    #: Lamarckian local search: offspring carry their parents' fitted constants and ask the
    #: evaluator for a local search from them (``evaluate_formulas``' ``starts``) instead of a
    #: multi-start fit; library seeds, fresh trees and reductions still get the full fit. On by
    #: default since issue 32 (about five times the fitted candidates a second; AI Feynman 94/100
    #: with units and 88/100 without, docs/evolve.md).
    inherit_constants: bool = True
    #: With inherited constants, the most of a batch given to full refits of Pareto-front
    #: members that were only searched locally (a local search from a parent's constants can
    #: stop short of the structure's best fit; the answer is chosen from the front). 0 (the
    #: default): none; on the generated family of docs/evolve.md a share cost hits.
    refit_share: float = 0.0
    #: Breed the next batch while the last one is fitted (``EvolveModel``: a background thread
    #: proposes call ``n + 1`` as soon as call ``n`` is out). A call's batch is then bred from
    #: the history without the last ``evaluate_formulas`` call's results (its candidates count as
    #: tried), so the proposal is still a function of the context: a fresh model given it
    #: proposes the same (docs/evolve.md "Proposing ahead"). On by default since issue 32's
    #: tenth session: about 1.1 times the distinct candidates a second, AI Feynman within its bars.
    propose_ahead: bool = True
    #: Offer each solution's phase forms (:func:`~sr_dist.sr.evolve.rewrites.phase_forms`:
    #: ``a*F*sin(u) + b*F*cos(u)`` as ``R*F*sin(u + p)``, carrying ``R`` and ``p``; origin
    #: ``phase_form``) with its reductions: the same function, one to three nodes shorter, and
    #: its phase reads as the law's.
    phase_forms: bool = True
    #: Offer each solution without the terms of its sums whose constant the fit drove to
    #: nothing (below :data:`~sr_dist.sr.evolve.rewrites.NEGLIGIBLE` of the largest; origin
    #: ``pruned``), with its reductions.
    drop_negligible_terms: bool = True
    #: Where the run's agent count is known (``context.info["agents"]``), agent ``k`` of ``n``
    #: takes every ``n``-th library seed after the common head, so the run fits each seed once
    #: (two agents walking the whole library fitted every seed twice: a tenth of a default
    #: run's candidates). ``False``: every agent walks the whole library.
    split_library: bool = True
    #: Every this many generations, ask ``best_formulas`` (where the tool is offered) for the
    #: run's Pareto front and breed from its members too (migration between agents); 0: never.
    migrate_every: int = 5

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if not all(0 <= v <= 1 for v in (self.p_fresh, self.p_elite, self.library_share,
                                          self.refit_share)):
            raise ValueError("p_fresh, p_elite, library_share and refit_share must lie in [0, 1]")
        if self.migrate_every < 0:
            raise ValueError("migrate_every must be >= 0 (0: no migration)")
        if self.pool_size < 1 or self.tournament_size < 1:
            raise ValueError("pool_size and tournament_size must be >= 1")
        if not (self.target_nmse >= 0 and self.stop_nmse >= 0):
            raise ValueError("target_nmse and stop_nmse must be >= 0 (stop_nmse 0: never "
                             "submit a solution)")


@dataclass(frozen=True)
class Proposal:
    """The proposer's decision for one turn: a batch to evaluate, or a formula to submit."""

    expressions: tuple[str, ...] = ()
    submit: Individual | None = None
    reason: str = ""
    #: Where each expression came from, in order (see the module docstring).
    origins: tuple[str, ...] = ()
    #: One start per expression (inherited constant values by rendered name, or None for a
    #: full fit); empty when no expression has one.
    starts: tuple[dict[str, float] | None, ...] = ()


#: The earlier name of :class:`EvolveConfig` (``sr_dist.conf.schema.SearchConfig`` is the run's
#: ``search`` group, a different thing).
SearchConfig = EvolveConfig


def grammar_for(variables: Sequence[str], config: EvolveConfig) -> Grammar:
    return Grammar(tuple(variables), max_size=config.max_size, max_constants=config.max_constants)


class _Batch:
    """Collects new, distinct, parseable proposals."""

    def __init__(self, variables: tuple[str, ...], seen: frozenset[str], grammar: Grammar) -> None:
        self.variables = variables
        self.seen = seen
        self.grammar = grammar
        self.prefix = constant_prefix(variables)
        self.keyer = Keyer(variables, self.prefix)
        self.keys: set[str] = set()
        self.texts: list[str] = []
        self.origins: list[str] = []
        self.starts: list[dict[str, float] | None] = []

    def again(self, individual: Individual, origin: str) -> bool:
        """Propose a fitted individual once more, without a start (a full fit of a structure
        searched only locally); the one offer that may repeat a seen form."""
        if individual.canonical in self.keys:
            return False
        return self._add(individual.expression, individual.canonical, origin, None)

    def _add(self, text: str, canonical: str, origin: str, start: dict[str, float] | None) -> bool:
        self.keys.add(canonical)
        self.texts.append(text)
        self.origins.append(origin)
        self.starts.append(start)
        return True

    def key(self, tree: Node) -> tuple[str, str] | None:
        parsed = self.keyer(tree)
        return None if parsed is None else (parsed.text, parsed.canonical)

    def seed_key(self, tree: Node) -> tuple[str, str] | None:
        """A library seed's (text, canonical form) once tidied, or None where it is unusable
        (past :data:`SEED_MAX_SIZE` or :data:`SEED_MAX_CONSTANTS`, no variable, unparsable)."""
        tidied = tidy(tree)
        if size(tidied) > SEED_MAX_SIZE or count_constants(tidied) > SEED_MAX_CONSTANTS \
                or not has_var(tidied):
            return None
        return self.key(tidied)

    def offer_key(self, key: tuple[str, str] | None, origin: str) -> bool:
        """Add a seed by its :meth:`seed_key` if it is new."""
        if key is None or key[1] in self.seen or key[1] in self.keys:
            return False
        return self._add(key[0], key[1], origin, None)

    def offer(self, tree: Node | None, origin: str, inherit: bool = False) -> bool:
        """Add ``tree`` (what the search breeds) if it is new and within the grammar's limits
        (a library seed, whose shape the data chose, has its own: :meth:`seed_key`).
        ``inherit``: ask for a local search from the constants ``tree`` carries
        (:func:`inherited_start`)."""
        if tree is None or not within_limits(tree, self.grammar):
            return False
        key = self.key(tree)
        if not self.offer_key(key, origin):
            return False
        if inherit:
            self.starts[-1] = inherited_start(tree, self.prefix)
        return True


#: An offspring asks for a local search only when at least this share of its constants carry a
#: parent's value: with fewer, the start is mostly ones and the multi-start fit serves it better.
INHERITED_SHARE = 0.5


def inherited_start(tree: Node, prefix: str) -> dict[str, float] | None:
    """The constant values ``tree`` inherited, by the names :func:`render` gives them
    (``{prefix}0, ...``), or None when it has no constant or too few carry a value
    (:data:`INHERITED_SHARE`)."""
    carried = constant_values(tree)
    known = {f"{prefix}{i}": v for i, v in enumerate(carried) if v is not None}
    if not carried or len(known) < INHERITED_SHARE * len(carried):
        return None
    return known


def _submission(history: History, config: EvolveConfig) -> Proposal | None:
    best = history.best
    if best is None:
        return None
    if best.nmse < config.stop_nmse:
        # (a migrant read before any generation of this agent's own counts from the last one)
        first = next((g for g, b in enumerate(history.best_by_generation) if b < config.stop_nmse),
                     history.generations - 1)
        solved = history.solutions(config.target_nmse)
        if history.generations - 1 - first >= config.polish_generations and solved:
            choice = min(solved, key=lambda i: (i.complexity, i.nmse, i.canonical))
            if choice.expression not in history.submitted:
                return Proposal(submit=choice, reason=f"solved: validation NMSE {choice.nmse:.3g} < target")
    if config.patience and history.stagnant_for() >= config.patience:
        choice = history.ranked(config.parsimony)[0]
        if choice.expression not in history.submitted:
            return Proposal(submit=choice, reason=f"no progress for {config.patience} generations")
    return None


def _rewrites(tree: Node, config: EvolveConfig) -> list[tuple[Node, str]]:
    """A solution's rewrites that keep its function (:mod:`sr_dist.sr.evolve.rewrites`), with
    their origins: without its negligible terms, then the phase forms of that (or of the
    solution itself)."""
    pruned = without_negligible_terms(tree) if config.drop_negligible_terms else None
    out = [] if pruned is None else [(pruned, "pruned")]
    if config.phase_forms:
        out += [(t, "phase_form") for t in phase_forms(tree if pruned is None else pruned)]
    return out


class SeedKeys:
    """Each library seed's (text, canonical form) kept once computed (a memo of a pure
    function): the library is fixed for a dataset and every turn walks it from the start, so
    without it every turn tidied, rendered and looked up each tried seed again (17k of 19.5k
    offers in 60 turns of one profile). Keyed by the seed object, which the memo keeps alive;
    one per (library, variables): ``EvolveModel`` keeps one beside each library it builds."""

    def __init__(self) -> None:
        self._keys: dict[int, tuple[Seed, tuple[str, str] | None]] = {}

    def key(self, seed: Seed, batch: _Batch) -> tuple[str, str] | None:
        kept = self._keys.get(id(seed))
        if kept is not None and kept[0] is seed:
            return kept[1]
        key = batch.seed_key(seed.tree)
        self._keys[id(seed)] = (seed, key)
        return key

    def fill(self, library: Sequence[Seed], variables: Sequence[str], config: EvolveConfig) -> None:
        """Compute every seed's key now (before a run starts: the first turns then only look
        them up)."""
        batch = _Batch(tuple(variables), frozenset(), grammar_for(variables, config))
        for seed in library:
            self.key(seed, batch)


def propose(
    history: History,
    variables: Sequence[str],
    library: Sequence[Node | Seed],
    config: EvolveConfig,
    rng: np.random.Generator,
    can_submit: bool = True,
    seed_keys: SeedKeys | None = None,
) -> Proposal:
    r"""Decide this turn: submit, or propose up to ``batch_size`` new candidates.

    With ``can_submit`` False (no submit tool offered) the search never stops on its own.
    ``library`` holds :class:`Seed`\ s (their source becomes the origin) or bare trees.
    ``seed_keys``: the library's memo of seed keys (the same proposal, faster).
    """
    names = tuple(variables)
    done = _submission(history, config) if can_submit else None
    if done is not None:
        return done
    grammar = grammar_for(names, config)
    batch = _Batch(names, history.seen, grammar)
    n_library = config.batch_size if history.generations == 0 else int(config.batch_size * config.library_share)
    if config.inherit_constants and config.refit_share > 0:
        due = sorted((i for i in history.pareto() if i.local),
                     key=lambda i: (i.complexity, i.canonical))
        for ind in due[: int(config.batch_size * config.refit_share)]:
            batch.again(ind, "refit")
    solved = history.solutions(config.target_nmse)
    # Each solution's rewrites (the same function, shorter; a local search from the constants
    # it carries), then each with one constant fewer, simplest solutions first: an exact
    # product of fitted factors has one scale constant per factor, and the reduced one is the
    # law.
    for ind in sorted(solved, key=lambda i: (i.complexity, i.canonical))[:REDUCED_SOLUTIONS]:
        for tree, origin in _rewrites(ind.tree, config):
            if len(batch.texts) >= config.batch_size // 2:
                break
            batch.offer(tree, origin, inherit=config.inherit_constants)
        for tree in constant_reductions(ind.tree):
            if len(batch.texts) >= config.batch_size // 2:
                break
            batch.offer(tree, "reduction")
    n_library = min(config.batch_size, n_library + len(batch.texts))
    for entry in library:
        if len(batch.texts) >= n_library:
            break
        if isinstance(entry, Seed):
            key = seed_keys.key(entry, batch) if seed_keys is not None else batch.seed_key(entry.tree)
            batch.offer_key(key, f"library/{entry.source}")
        else:
            batch.offer_key(batch.seed_key(entry), "library")

    ranked = history.ranked(config.parsimony)
    pool_keys = {i.canonical for i in ranked[: config.pool_size]}
    pool = list(ranked[: config.pool_size]) + [i for i in history.pareto() if i.canonical not in pool_keys]
    pool_order = [(score(i, config.parsimony), i.canonical) for i in pool]
    names_ops = sorted(OPERATORS)  # read per call: OPERATORS is a public table
    operator_cdf = cumulative([OPERATORS[k][1] for k in names_ops])

    attempts = config.attempts_per_slot * config.batch_size
    while len(batch.texts) < config.batch_size and attempts > 0:
        attempts -= 1
        if not pool or rng.random() < config.p_fresh:
            batch.offer(tidy(random_tree(rng, grammar, int(rng.integers(2, 5)), full=rng.random() < 0.3)),
                        "gp/fresh")
            continue
        if solved and rng.random() < 0.5:
            op_name = _POLISH_OPERATORS[int(rng.integers(len(_POLISH_OPERATORS)))]
            parents: tuple[Node, ...] = (solved[int(rng.integers(len(solved)))].tree,)
        else:
            op_name = names_ops[draw(rng, operator_cdf)]
            first = ranked[0] if rng.random() < config.p_elite else tournament(
                pool, rng, config.tournament_size, config.parsimony, pool_order)
            second = tournament(pool, rng, config.tournament_size, config.parsimony, pool_order)
            parents = (first.tree, second.tree)
        operator, _, arity = OPERATORS[op_name]
        batch.offer(operator(parents[:arity] if arity <= len(parents) else parents, rng, grammar),
                    f"gp/{op_name}", inherit=config.inherit_constants)

    if not batch.texts and can_submit:
        best = history.best
        if best is not None and best.expression not in history.submitted:
            return Proposal(submit=ranked[0],
                            reason="no new candidates left to propose")
    starts = tuple(batch.starts) if any(s is not None for s in batch.starts) else ()
    return Proposal(expressions=tuple(batch.texts), reason=f"generation {history.generations}",
                    origins=tuple(batch.origins), starts=starts)
