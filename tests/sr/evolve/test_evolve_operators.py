"""Pure operators and tree helpers: every output parses, respects the limits, and renders back
to the same canonical form; tidying removes exactly the redundancy it claims to."""

from __future__ import annotations

import numpy as np
import pytest

from sr_dist.formula import Node, parse_formula
from sr_dist.sr.evolve import tree as tree_module
from sr_dist.sr.evolve.operators import (
    OPERATORS,
    Grammar,
    cumulative,
    draw,
    random_factor,
    random_tree,
)
from sr_dist.sr.evolve.tree import constant_prefix, count_constants, render, size, tidy

VARIABLES = ("x0", "x1", "theta")
GRAMMAR = Grammar(VARIABLES, max_size=25, max_constants=4)


def _parents(rng: np.random.Generator, n: int) -> list[tuple]:
    out = []
    while len(out) < n:
        a = tidy(random_tree(rng, GRAMMAR, 4))
        b = tidy(random_tree(rng, GRAMMAR, 4))
        if size(a) <= GRAMMAR.max_size and size(b) <= GRAMMAR.max_size:
            out.append((a, b))
    return out


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operator_outputs_parse_and_respect_limits(name: str) -> None:
    operator, _, arity = OPERATORS[name]
    rng = np.random.default_rng(7)
    produced = 0
    for parents in _parents(rng, 150):
        child = operator(parents[:arity], rng, GRAMMAR)
        if child is None:
            continue
        produced += 1
        text = render(child, "c")
        formula = parse_formula(text, VARIABLES)
        assert formula.complexity <= GRAMMAR.max_size, text
        assert len(formula.constants) <= GRAMMAR.max_constants, text
        assert formula.variables, f"{name} produced a formula without variables: {text}"
        # The rendered text parses back to a tree with the same canonical form.
        assert parse_formula(render(formula.tree, "c"), VARIABLES).canonical == formula.canonical
    assert produced >= 30, f"{name} applied only {produced} times out of 150"


def test_random_trees_render_and_parse_back() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        tree = random_tree(rng, GRAMMAR, int(rng.integers(1, 6)), full=bool(rng.integers(2)))
        text = render(tree)
        assert parse_formula(text, VARIABLES).complexity == size(tree), text
        factor = random_factor(rng, GRAMMAR)
        parse_formula(render(factor), VARIABLES)


def test_operators_are_deterministic_for_a_seed() -> None:
    parents = _parents(np.random.default_rng(3), 20)
    for name, (operator, _, arity) in OPERATORS.items():
        first = [operator(p[:arity], np.random.default_rng(11), GRAMMAR) for p in parents]
        second = [operator(p[:arity], np.random.default_rng(11), GRAMMAR) for p in parents]
        assert first == second, name


# Behaviour table for ``tidy``: input text -> expected canonical text after tidying.
TIDY_CASES = [
    ("c0*(c1*x0)", "c0*x0"),
    ("c0*x0/c1", "c0*x0"),
    ("x0 + c0 - c1", "x0 + c0"),
    ("x0 + 1 + c0", "x0 + c0"),
    ("sin(c0*c1) + x0", "x0 + c0"),
    ("exp(c0 + c1)*x0", "c0*x0"),
    ("x0**2 + c0", "x0**2 + c0"),
    ("2*x0*c0", "c0*x0"),
    ("-(-x0)", "x0"),
    ("x0*c0 + x1*c1", "c0*x0 + c1*x1"),
    # One scale per product: its constant, or its first scaled sum.
    ("c0*(c1*x0 + c2)", "c0*(x0 + c1)"),
    ("(c0*x0 + c1)*(c2*x1 + c3)*c4", "c0*(x0 + c1)*(x1 + c2)"),
    ("(c0*x0 + c1)*(c2*x1 + c3)", "(c0*x0 + c1)*(x1 + c2)"),
    ("c0*x1/(c1*x0 + c2)", "c0*x1/(x0 + c1)"),
    ("c0*(x0 + c1*x1)", "c0*(x0 + c1*x1)"),  # x0 has no scale of its own: nothing to take
    ("sin(c0*x0 + c1)*(c2*x1 + c3)", "sin(c0*x0 + c1)*(c2*x1 + c3)"),
]


@pytest.mark.parametrize("text,expected", TIDY_CASES)
def test_tidy_cases(text: str, expected: str) -> None:
    tree = parse_formula(text, VARIABLES).tree
    tidied = parse_formula(render(tidy(tree)), VARIABLES)
    assert tidied.canonical == parse_formula(expected, VARIABLES).canonical


def test_tidy_never_increases_size_or_constants() -> None:
    rng = np.random.default_rng(5)
    for _ in range(300):
        tree = random_tree(rng, GRAMMAR, 5)
        tidied = tidy(tree)
        assert size(tidied) <= size(tree)
        assert count_constants(tidied) <= count_constants(tree)


def _fresh(node: Node) -> Node:
    """An equal tree that shares no node object with ``node`` (so no memo entry applies)."""
    return Node(node.op, tuple(_fresh(a) for a in node.args), node.value, node.name)


@pytest.mark.parametrize("memo_size", [1 << 16, 7])
def test_offspring_of_remembered_parents_equal_those_of_unshared_copies(
        memo_size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each operator tidies its offspring (``finish``), which share subtrees with their parents,
    # whose tidy forms the memo holds by identity; the same draw from copies that share no
    # node object (no memo entry applies) must breed the same tree. A small memo is emptied
    # again and again on the way.
    monkeypatch.setattr(tree_module, "TIDY_MEMO_SIZE", memo_size)
    rng = np.random.default_rng(11)
    parents = [tree for pair in _parents(rng, 20) for tree in pair]
    names = sorted(OPERATORS)
    bred = 0
    for _ in range(600):
        operator, _, arity = OPERATORS[names[int(rng.integers(len(names)))]]
        chosen = tuple(parents[int(i)] for i in rng.integers(len(parents), size=2))[:arity]
        state = rng.bit_generator.state
        child = operator(chosen, rng, GRAMMAR)
        again = np.random.default_rng(0)
        again.bit_generator.state = state
        assert child == operator(tuple(_fresh(p) for p in chosen), again, GRAMMAR)
        bred += child is not None
    assert bred > 300


def test_tidy_of_trees_sharing_untidy_subtrees_equals_tidy_of_unshared_copies() -> None:
    rng = np.random.default_rng(12)
    raw = [random_tree(rng, GRAMMAR, 4) for _ in range(40)]
    for tree in raw:
        tidy(tree)  # the memo now holds each raw subtree's tidy form
    for _ in range(300):
        a, b = (raw[int(i)] for i in rng.integers(len(raw), size=2))
        op = ("add", "sub", "mul", "div")[int(rng.integers(4))]
        joined = Node(op, (a, Node("neg", (b,))))
        assert tidy(joined) == tidy(_fresh(joined))


def test_constant_prefix_avoids_variable_names() -> None:
    assert constant_prefix(["x", "y"]) == "c"
    assert constant_prefix(["c0", "y"]) == "k"
    assert constant_prefix(["c1", "k2"]) == "a"
    text = render(parse_formula("a*c0 + b", ["c0"]).tree, constant_prefix(["c0"]))
    assert parse_formula(text, ["c0"]).variables == ("c0",)
    assert parse_formula(text, ["c0"]).constants == ("k0", "k1")


def test_grammar_rejects_bad_limits() -> None:
    with pytest.raises(ValueError):
        Grammar(())
    with pytest.raises(ValueError):
        Grammar(("x",), max_size=0)


REDUCTIONS = [
    # (tree, what its one-constant reductions must include)
    # tidy then leaves one scale per product (the rest made monic)
    ("(c0*x0 + c1)*(c2*x1 + c3)*c4", {"(c0*x0 + c1)*(x1 + c2)", "(x0 + c0)*(x1 + c1)*c2"}),
    ("c0/x0 + c1", {"1/x0 + c0", "c0/x0"}),
    ("c0 - x0*c1", {"-(x0*c0)", "c0 - x0"}),
    ("x0/c0 + x1", {"x0 + x1"}),
]


@pytest.mark.parametrize(("text", "expected"), REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_constant_reductions_take_out_one_constant_each(text: str, expected: set[str]) -> None:
    from sr_dist.sr.evolve.operators import constant_reductions

    tree = parse_formula(text, VARIABLES).tree
    reduced = constant_reductions(tree)
    rendered = {render(t) for t in reduced}
    assert expected <= rendered, rendered
    for t in reduced:
        assert count_constants(t) < count_constants(tree), render(t)  # tidy may merge more
        assert parse_formula(render(t), VARIABLES).canonical  # parses back
    assert len(rendered) == len(reduced)  # no repeats


def test_constant_reductions_leave_constants_under_functions_and_powers() -> None:
    from sr_dist.sr.evolve.operators import constant_reductions

    assert constant_reductions(parse_formula("sin(c0*x0)**2", VARIABLES).tree) != []  # c0*x0 -> x0
    assert constant_reductions(parse_formula("exp(c0)", VARIABLES).tree) == []
    assert constant_reductions(parse_formula("x0", VARIABLES).tree) == []


@pytest.mark.parametrize("seed", range(6))
def test_draw_is_generator_choice_from_the_same_stream(seed: int) -> None:
    """The search draws operators and functions by bisecting cumulative probabilities; over
    generated weight tables (zeros and tiny weights included) it draws what
    ``Generator.choice(n, p=p)`` draws, one uniform each, so proposals stay as they were."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 13))
    weights = rng.uniform(0, 3, n) * (rng.random(n) > 0.2)
    weights[int(rng.integers(n))] += 1e-9
    p = weights / weights.sum()
    ours, theirs = np.random.default_rng([seed, 1]), np.random.default_rng([seed, 1])
    cdf = cumulative(weights.tolist())
    assert [draw(ours, cdf) for _ in range(3000)] == [int(theirs.choice(n, p=p)) for _ in range(3000)]
    assert ours.random() == theirs.random()  # the streams are still in step
