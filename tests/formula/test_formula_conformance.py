"""Data-driven conformance of the formula language: accepted, rejected, canonical (in)equality."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest

from sr_dist.formula import (
    MAX_DEPTH,
    MAX_NODES,
    Formula,
    FormulaError,
    Node,
    evaluate_numpy,
    iter_nodes,
    parse_formula,
)

CASES = json.loads((Path(__file__).with_name("conformance.json")).read_text())
VARS = tuple(CASES["variables"])


def _id(case: dict) -> str:
    return repr(case["text"][:40])


@pytest.mark.parametrize("case", CASES["accepted"], ids=_id)
def test_accepted(case: dict) -> None:
    f = parse_formula(case["text"], case["variables"])
    assert str(f) == case["str"]
    assert f.complexity == case["complexity"]
    assert list(f.constants) == case["constants"]
    assert list(f.variables) == case["used"]
    assert f.text == case["text"]
    # str() re-parses to the very same tree, and the canonical key is stable under that
    again = parse_formula(str(f), case["variables"])
    assert again.tree == f.tree
    assert again.canonical == f.canonical


@pytest.mark.parametrize("case", CASES["rejected"], ids=_id)
def test_rejected(case: dict) -> None:
    with pytest.raises(FormulaError) as info:
        parse_formula(case["text"], case["variables"])
    err = info.value
    assert case["error"] in err.message
    assert err.offset == case["offset"]
    if err.offset is not None:
        assert f"at offset {err.offset}" in str(err)
        assert "^" in str(err)


@pytest.mark.parametrize("pair", CASES["canonical_equal"], ids=lambda p: f"{p[0]} == {p[1]}")
def test_canonical_equal(pair: list[str]) -> None:
    a, b = (parse_formula(t, VARS) for t in pair)
    assert a.canonical == b.canonical
    assert a.canonical_tree == b.canonical_tree


@pytest.mark.parametrize("pair", CASES["canonical_unequal"], ids=lambda p: f"{p[0]} != {p[1]}")
def test_canonical_unequal(pair: list[str]) -> None:
    a, b = (parse_formula(t, VARS) for t in pair)
    assert a.canonical != b.canonical


def test_precedence_by_value() -> None:
    X = np.array([[2.0, 3.0, 5.0]])
    cases = {
        "-x**2": -4.0, "x**y**2": 2.0**9, "x^y^2": 2.0**9, "x/y*z": 2 / 3 * 5,
        "x - y - z": -6.0, "x**-1": 0.5, "-x*y": -6.0, "2**-x**2": 2.0**-4, "x*y+z": 11.0,
        "(x+y)*z": 25.0, "-(-x)": 2.0, "x - -y": 5.0,
    }
    for text, expected in cases.items():
        got = evaluate_numpy(parse_formula(text, VARS), X, VARS)
        assert got[0] == pytest.approx(expected), text


def test_named_numbers_and_shadowing() -> None:
    f = parse_formula("pi*e", VARS)
    assert f.tree.args[0] == Node("num", (), math.pi, "pi")
    assert f.constants == () and f.variables == ()
    g = parse_formula("pi*e", ["e"])
    assert g.tree.args[1] == Node("var", (), None, "e")
    assert g.variables == ("e",)
    # variables shadow keywords and constant names
    h = parse_formula("lambda + c", ["lambda", "c"])
    assert h.variables == ("lambda", "c") and h.constants == ()


def test_variables_in_declared_order_and_constants_in_first_use() -> None:
    f = parse_formula("b*z + a*x + b", ["x", "y", "z"])
    assert f.variables == ("x", "z")
    assert f.constants == ("b", "a")


def test_canonical_constants_map_back() -> None:
    f = parse_formula("k*x + m*sin(y) + k", VARS)
    assert set(f.canonical_constants) == {"k", "m"}
    names = {n.name for n in iter_nodes(f.canonical_tree) if n.op == "const"}
    assert names == {f"c{i}" for i in range(len(f.canonical_constants))}
    rng = np.random.default_rng(0)
    X = rng.uniform(1, 2, size=(50, 3))
    values = {"k": 0.7, "m": -1.3}
    canon_values = {f"c{i}": values[name] for i, name in enumerate(f.canonical_constants)}
    np.testing.assert_allclose(
        evaluate_numpy(f.canonical_tree, X, VARS, canon_values),
        evaluate_numpy(f, X, VARS, values),
        rtol=1e-13,
    )


def test_canonical_only_uses_contract_ops() -> None:
    from sr_dist.formula import BINARY_OPS, LEAF_OPS, UNARY_OPS

    f = parse_formula("-(a*x) - 3*y/z + exp(-x)**2 - sin(-y) - 4", VARS)
    for node in iter_nodes(f.canonical_tree):
        assert node.op in BINARY_OPS + UNARY_OPS + LEAF_OPS
        assert len(node.args) == (2 if node.op in BINARY_OPS else 1 if node.op in UNARY_OPS else 0)


def test_variable_named_like_canonical_constant_does_not_collide() -> None:
    a = parse_formula("c0*x", ["x", "c0"])
    b = parse_formula("k*x", ["x", "c0"])
    assert a.canonical != b.canonical


def test_folding_never_makes_nonfinite() -> None:
    for text in ("exp(1000)*x", "x*10**400", "1e308*10*x", "log(0) + x", "(-8)**(1/3)*x"):
        f = parse_formula(text, VARS)
        for node in iter_nodes(f.canonical_tree):
            if node.op == "num":
                assert node.value is not None and math.isfinite(node.value)


def test_limits_are_options() -> None:
    deep = "(" * 30 + "x" + ")" * 30
    parse_formula(deep, VARS)
    with pytest.raises(FormulaError, match="nested too deeply"):
        parse_formula(deep, VARS, max_depth=10)
    with pytest.raises(FormulaError, match="more than 5 nodes"):
        parse_formula("x+x+x+x", VARS, max_nodes=5)
    with pytest.raises(FormulaError, match="too long"):
        parse_formula("x+y", VARS, max_length=2)
    parse_formula("+".join(["x"] * 100), VARS)  # 199 nodes: within the default
    with pytest.raises(FormulaError, match=f"more than {MAX_NODES} nodes"):
        parse_formula("+".join(["x"] * 101), VARS)


@pytest.mark.parametrize(
    "text",
    [
        "(" * 10_000 + "x" + ")" * 10_000,
        "-" * 10_000 + "x",
        "x" + "**x" * 5_000,
        "sin(" * 5_000 + "x" + ")" * 5_000,
        "x+" * 5_000_000,
        "(" * 10_000_000,
    ],
    ids=["parens", "unary", "powers", "calls", "10MB-sum", "10MB-parens"],
)
def test_hostile_inputs_fail_fast(text: str) -> None:
    with pytest.raises(FormulaError):
        parse_formula(text, VARS)
    # with the length limit lifted, the depth and node limits still stop it early
    with pytest.raises(FormulaError) as info:
        parse_formula(text, VARS, max_length=len(text) + 1)
    assert info.value.offset is not None and info.value.offset <= 20_000
    assert MAX_DEPTH == 64


def test_bad_variables_argument() -> None:
    with pytest.raises(FormulaError, match="not a single string"):
        parse_formula("x", "x")  # type: ignore[arg-type]
    with pytest.raises(FormulaError, match="invalid variable name"):
        parse_formula("x", ["x y"])
    with pytest.raises(FormulaError, match="function name"):
        parse_formula("x", ["sin"])
    with pytest.raises(FormulaError, match="must be a string"):
        parse_formula(3, VARS)  # type: ignore[arg-type]


def test_error_value_and_pickling() -> None:
    with pytest.raises(FormulaError) as info:
        parse_formula("x.real", VARS)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.offset == 1 and err.message == "attribute access is not allowed"
    lines = str(err).splitlines()
    assert lines[0] == "attribute access is not allowed at offset 1: 'x.real'"
    assert lines[2].index("^") == lines[1].index(".")
    clone = pickle.loads(pickle.dumps(err))
    assert (clone.message, clone.offset, str(clone)) == (err.message, err.offset, str(err))


def test_formula_value_semantics() -> None:
    f = parse_formula("a*x + sin(y)", VARS)
    assert pickle.loads(pickle.dumps(f)) == f
    assert hash(f) == hash(parse_formula("a*x + sin(y)", VARS))
    assert "a*x + sin(y)" in repr(f)
    with pytest.raises(AttributeError):
        f.text = "y"  # type: ignore[misc]


def test_sympy_and_latex() -> None:
    import sympy

    f = parse_formula("a*x**2 + pi*sqrt(abs(y)) - arcsin(z)", VARS)
    expr = f.to_sympy()
    a, x, y, z = (sympy.Symbol(n, real=True) for n in "axyz")
    assert sympy.simplify(expr - (a * x**2 + sympy.pi * sympy.sqrt(sympy.Abs(y)) - sympy.asin(z))) == 0
    assert all(s.is_real for s in expr.free_symbols)
    tex = f.latex()
    assert "\\pi" in tex and "x^{2}" in tex and "\\operatorname{asin}" in tex
    assert parse_formula("lambd*gamma", ["lambd", "gamma"]).latex() == "\\gamma lambd"


def test_from_tree() -> None:
    tree = Node("add", (Node("mul", (Node("const", name="a"), Node("var", name="x"))),
                        Node("num", value=-2.0)))
    f = Formula.from_tree(tree, VARS)
    assert str(f) == "a*x + (-2)"
    assert f.canonical == parse_formula("a*x - 2", VARS).canonical
    with pytest.raises(FormulaError, match="not declared"):
        Formula.from_tree(Node("var", name="q"), VARS)
    with pytest.raises(FormulaError, match="unknown AST op"):
        Formula.from_tree(Node("mod", (Node("var", name="x"), Node("var", name="y"))), VARS)
    with pytest.raises(FormulaError, match="needs 2 children"):
        Formula.from_tree(Node("add", (Node("var", name="x"),)), VARS)
    with pytest.raises(FormulaError, match="finite value"):
        Formula.from_tree(Node("num", value=math.inf), VARS)
    # a named pi with a variable called pi is printed as digits, never as the variable
    g = Formula.from_tree(Node("add", (Node("num", value=math.pi, name="pi"),
                                       Node("var", name="pi"))), ["pi"])
    assert parse_formula(str(g), ["pi"]).canonical == g.canonical


def test_evaluate_numpy_errors_and_shapes() -> None:
    X = np.ones((4, 3))
    assert evaluate_numpy("2", X, VARS).shape == (4,)
    assert evaluate_numpy("x + k", X, VARS, {"k": 1.0}).tolist() == [2.0] * 4
    with pytest.raises(ValueError, match="no value given for constants: k"):
        evaluate_numpy("x + k", X, VARS)
    with pytest.raises(ValueError, match="3 columns"):
        evaluate_numpy("x", np.ones((4, 2)), VARS)
    got = evaluate_numpy("log(x - 2) + 1/(y - 1)", X, VARS)
    assert np.isnan(got).all() or not np.isfinite(got).any()
