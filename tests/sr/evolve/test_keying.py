"""The keying shortcut (``Keyer``, ``render_as_parsed``) against the parser it stands in for:
every field of the formula, over generated trees, bred trees and the renderer's edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sr_dist.formula import FormulaError, Node, parse_formula
from sr_dist.formula.memo import clear_memo, parse_cached, recall
from sr_dist.sr.evolve.keying import Keyer
from sr_dist.sr.evolve.operators import OPERATORS, Grammar, finish, random_tree
from sr_dist.sr.evolve.rendering import render, render_as_parsed
from sr_dist.sr.evolve.tree import (
    binary,
    const,
    count_constants,
    name_constants,
    num,
    unary,
    var,
    with_constant_values,
)

VARIABLES = ("x0", "x1", "x2")


def _same(tree: Node, variables: tuple[str, ...] = VARIABLES, prefix: str = "c") -> None:
    text = render(tree, prefix)
    keyed = Keyer(variables, prefix)(tree)
    try:
        parsed = parse_formula(text, variables)
    except FormulaError:
        assert keyed is None, text
        return
    assert keyed is not None, text
    assert keyed == parsed, text  # text, tree, variables, constants, complexity, canonical
    assert keyed.tree == parsed.tree, text
    assert keyed.canonical_tree == parsed.canonical_tree, text
    assert keyed.canonical_constants == parsed.canonical_constants, text


def test_generated_trees_key_as_their_text_parses() -> None:
    rng = np.random.default_rng(0)
    grammar = Grammar(VARIABLES)
    regrouped = 0
    for _ in range(3000):
        tree = random_tree(rng, grammar, int(rng.integers(2, 7)))
        _same(tree)
        rendered = render_as_parsed(tree)
        regrouped += rendered is not None and rendered.tree != name_constants(tree)
    assert regrouped > 100  # the family exercises the chains the parser reads from the left


def test_bred_trees_key_as_their_text_parses() -> None:
    rng = np.random.default_rng(1)
    grammar = Grammar(VARIABLES)
    pool = [random_tree(rng, grammar, 4) for _ in range(50)]
    names = sorted(OPERATORS)
    bred = 0
    for _ in range(3000):
        operator, _, arity = OPERATORS[names[int(rng.integers(len(names)))]]
        parents = tuple(pool[int(rng.integers(len(pool)))] for _ in range(arity))
        child = finish(operator(parents, rng, grammar), grammar)
        if child is None:
            continue
        _same(child)
        bred += 1
        # constants carry fitted values through breeding; the text names them all the same
        fitted = {f"c{i}": float(v) for i, v in enumerate(rng.normal(size=count_constants(child)))}
        pool[int(rng.integers(len(pool)))] = with_constant_values(name_constants(child), fitted)
    assert bred > 1000


x0, x1, x2 = var("x0"), var("x1"), var("x2")
EDGE_CASES = [
    binary("mul", x0, binary("div", x1, x2)),  # a*(b/c) prints a*b/c: (a*b)/c
    binary("add", x0, binary("sub", x1, binary("add", x2, const()))),  # a + (b - (c + k))
    binary("add", x0, binary("add", binary("sub", x1, x2), const())),
    binary("sub", x0, binary("add", x1, x2)),  # keeps its parentheses
    binary("div", x0, binary("mul", x1, x2)),
    binary("mul", binary("div", x0, x1), binary("mul", binary("div", x2, const()), x1)),
    binary("mul", x0, binary("mul", unary("neg", x1), x2)),  # x0*-x1*x2
    binary("add", x0, binary("add", unary("neg", x1), x2)),
    unary("neg", num(2.5)), unary("neg", num(-2.5)), unary("neg", unary("neg", num(3.0))),
    binary("add", num(-3.0), x0), binary("pow", num(-2.0), x0), binary("pow", x0, num(-2.0)),
    binary("pow", x0, unary("neg", x1)), binary("pow", binary("pow", x0, x1), x2),
    unary("neg", binary("pow", num(2.0), x0)), unary("neg", binary("add", x0, x1)),
    num(math.pi), num(-math.pi), unary("neg", num(math.pi)), binary("mul", num(-math.pi), x0),
    binary("mul", num(math.e), x0), num(-0.0), binary("add", num(0.1 + 0.2), x0),
    binary("mul", num(1e-300), x0), binary("mul", num(1e20), x0), binary("mul", num(3.0), x0),
    unary("sin", binary("add", binary("mul", const(), x0), const())),
    binary("mul", x0, binary("mul", binary("add", x1, x2), binary("div", x2, x1))),
]


@pytest.mark.parametrize("tree", EDGE_CASES, ids=render)
def test_edge_cases_key_as_their_text_parses(tree: Node) -> None:
    _same(tree)


def test_what_the_shortcut_does_not_cover_goes_through_the_parser() -> None:
    _same(binary("mul", num(math.pi), var("pi")), ("pi", "x0"))  # pi the variable
    _same(binary("mul", num(float("inf")), x0))  # no number's text reads back as inf
    _same(binary("mul", num(float("nan")), x0))
    _same(binary("add", var("y"), x0))  # an undeclared name reads as a constant
    deep = x0
    for _ in range(40):  # past the parser's nesting limit
        deep = unary("sin", deep)
    _same(deep)
    wide = x0
    for _ in range(120):  # past the node limit
        wide = binary("add", wide, x1)
    _same(wide)
    _same(binary("add", x0, x1), ("x0", "x1", "sin"))  # variables the parser refuses


def test_a_keyed_formula_is_what_the_memo_then_returns() -> None:
    clear_memo()
    tree = binary("mul", x0, binary("div", const(), x1))
    keyed = Keyer(VARIABLES, "c")(tree)
    assert keyed is not None
    assert parse_cached(keyed.text, VARIABLES) is keyed


def test_a_tree_bred_again_is_keyed_from_the_memo() -> None:
    clear_memo()
    tree = binary("add", binary("mul", const(), unary("sin", x0)), binary("div", x1, const()))
    text = render(tree)
    assert recall(text, VARIABLES) is None  # nothing keyed or parsed yet
    first = Keyer(VARIABLES, "c")(tree)
    assert first is not None and recall(text, VARIABLES) is first
    assert Keyer(VARIABLES, "c")(tree) is first  # keyed again: no second canonical form built
    clear_memo()
    parsed = parse_cached(text, VARIABLES)  # what the evaluator client or history reader parse
    assert Keyer(VARIABLES, "c")(tree) is parsed
    assert parse_cached("x0 +* 1", VARIABLES) is None and recall("x0 +* 1", VARIABLES) is None

