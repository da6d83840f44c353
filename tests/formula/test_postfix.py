"""Postfix code (``sr_dist.formula.postfix``): every tree round-trips, bad code is refused."""

from __future__ import annotations

import math
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sr_dist.formula import BINARY_OPS, UNARY_OPS, FormulaError, Node, parse_formula
from sr_dist.formula.postfix import from_postfix, to_postfix

leaves = st.one_of(
    st.sampled_from(("x", "y")).map(lambda n: Node("var", name=n)),
    st.sampled_from(("a", "b")).map(lambda n: Node("const", name=n)),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: Node("num", value=v)),
    st.just(Node("num", value=math.pi, name="pi")),
)
trees = st.recursive(leaves, lambda kids: st.one_of(
    st.tuples(st.sampled_from(BINARY_OPS), kids, kids).map(lambda t: Node(t[0], (t[1], t[2]))),
    st.tuples(st.sampled_from(UNARY_OPS), kids).map(lambda t: Node(t[0], (t[1],))),
), max_leaves=24)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(trees)
def test_every_tree_round_trips(tree: Node) -> None:
    code = to_postfix(tree)
    assert from_postfix(code) == tree
    assert from_postfix(pickle.loads(pickle.dumps(code))) == tree
    assert len(code) == sum(1 for _ in _nodes(tree))


def _nodes(tree: Node):  # type: ignore[no-untyped-def]
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.args)


def test_named_numbers_and_deep_trees_round_trip() -> None:
    formula = parse_formula("pi*x + e**a", ["x"])
    assert from_postfix(to_postfix(formula.tree)) == formula.tree
    deep = Node("var", name="x")
    for _ in range(5000):  # far deeper than Python's recursion limit
        deep = Node("sin", (deep,))
    code = to_postfix(deep)
    assert len(code) == 5001
    assert to_postfix(from_postfix(code)) == code  # (Node equality itself recurses)


@pytest.mark.parametrize("code", [
    (),                                            # no tree
    (("var", None, "x"), ("var", None, "y")),      # two trees
    ("add",),                                      # an operator without operands
    (("var", None, "x"), "add"),                   # one operand short
    (("add", None, None),),                        # an operator as a leaf
    (("var", None, "x"), "frobnicate"),            # an unknown operator
    (("var", None),),                              # a short leaf
    (["var", None, "x"],),                         # a leaf that is not a tuple
])
def test_malformed_code_is_a_formula_error(code: tuple) -> None:  # type: ignore[type-arg]
    with pytest.raises(FormulaError, match="postfix code"):
        from_postfix(code)
