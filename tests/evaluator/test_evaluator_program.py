"""Lowering: the register program computes exactly what the AST means (numpy reference)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sr_dist.evaluator.program import (
    OPCODES,
    LoweringError,
    Program,
    evaluate_program_numpy,
    find_linear,
    lower,
    pack_programs,
)
from sr_dist.formula import Node, evaluate_numpy, parse_formula

CASES = json.loads((Path(__file__).parent / "lowering_cases.json").read_text())
NAMES = ("x0", "x1", "x2")


def _rows() -> np.ndarray:
    return np.random.default_rng(3).uniform(1.0, 3.0, size=(64, 3))


@pytest.mark.parametrize("case", CASES, ids=[c["formula"] for c in CASES])
def test_lowering_conformance(case: dict) -> None:
    f = parse_formula(case["formula"], NAMES)
    consts = [f"c{i}" for i in range(len(f.canonical_constants))]
    prog = lower(f.canonical_tree, NAMES, consts)
    X = _rows()
    values = {c: 0.5 + 0.25 * i for i, c in enumerate(consts)}
    want = evaluate_numpy(f.canonical_tree, X, NAMES, values)
    got = evaluate_program_numpy(prog, X, [values[c] for c in consts])
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
    assert np.all(np.isfinite(want)) == (not case.get("nonfinite", False))
    if "instructions" in case:
        assert prog.n_instructions == case["instructions"]
    if "temps" in case:
        assert prog.n_temps == case["temps"]
    if "literals" in case:
        assert len(prog.literals) == case["literals"]
    assert prog.n_nodes == f.complexity or prog.n_nodes == _count(f.canonical_tree)


def _count(node: Node) -> int:
    return 1 + sum(_count(a) for a in node.args)


def test_dependence_flags_mark_constant_operands() -> None:
    prog = lower(parse_formula("c*x0 + x1**5", NAMES).canonical_tree, NAMES, ["c0"])
    flags = {OPCODES[op]: fl for op, _dst, _a, _b, fl in prog.instructions if OPCODES[op] == "pow"}
    assert flags == {"pow": 0}  # x1**5 depends on no constant: its partials must be guarded
    assert any(fl for *_rest, fl in prog.instructions)


def test_unknown_names_are_lowering_errors() -> None:
    with pytest.raises(LoweringError, match="unknown variable 'z'"):
        lower(Node("var", name="z"), NAMES, [])
    with pytest.raises(LoweringError, match="unknown constant"):
        lower(Node("const", name="k"), NAMES, [])
    with pytest.raises(LoweringError, match="unknown operator"):
        lower(Node("gamma", (Node("var", name="x0"),)), NAMES, [])
    with pytest.raises(LoweringError, match="two operands"):
        lower(Node("add", (Node("var", name="x0"),)), NAMES, [])


def test_deep_chain_lowers_and_too_deep_is_an_error() -> None:
    node = Node("var", name="x0")
    for _ in range(400):
        node = Node("sin", (node,))
    prog = lower(node, NAMES, [])
    assert prog.n_instructions == 400 and prog.n_temps == 1
    for _ in range(200):
        node = Node("cos", (node,))
    with pytest.raises(LoweringError, match="nested too deeply"):
        lower(node, NAMES, [])


def test_pack_places_operands_in_bucket_layout() -> None:
    prog = lower(parse_formula("a*x1 + 2", NAMES).canonical_tree, NAMES, ["c0"])
    code, meta, lits = pack_programs([prog], n_vars=3, n_consts=4, n_lits=2, n_instr=8,
                                     capacity=3)
    assert code.shape == (3, 8, 5) and meta.shape == (3, 4) and lits.shape == (3, 2)
    assert meta[0, 0] == prog.n_instructions and meta[0, 2] == 1 and meta[0, 3] == 1
    tmp_base = 3 + 4 + 2
    used = set(code[0, : prog.n_instructions, 2:4].ravel().tolist())
    assert 3 in used and 1 in used  # constant c0 -> register 3, x1 -> register 1
    assert meta[0, 1] == tmp_base and meta[1, 0] == 0  # padding rows run no instruction
    assert lits[0, 0] == 2.0
    with pytest.raises(ValueError):
        pack_programs([prog], n_vars=3, n_consts=0, n_lits=2, n_instr=8, capacity=1)


@pytest.mark.parametrize("linear", [True, False])
def test_packing_a_batch_stacks_the_packs_of_its_programs(linear: bool) -> None:
    """Every row of a packed batch is what packing its program alone gives (operands, roots,
    constant counts, linear masks and literals placed the same), and the rows past the
    batch are padding."""
    texts = [case["formula"] for case in CASES][:40] + ["a*x0 + b*x1**2 + 2.5", "x2", "3*a"]
    progs = []
    for text in texts:
        f = parse_formula(text, NAMES)
        if len(f.canonical_constants) > 4:
            continue
        prog = lower(f.canonical_tree, NAMES, [f"c{j}" for j in range(len(f.canonical_constants))])
        if prog.n_instructions <= 24 and len(prog.literals) <= 6:
            progs.append(prog)
    assert len(progs) >= 20
    layout = dict(n_vars=3, n_consts=4, n_lits=6, n_instr=24, linear=linear)
    code, meta, lits = pack_programs(progs, capacity=len(progs) + 3, **layout)
    for i, prog in enumerate(progs):
        one = pack_programs([prog], capacity=1, **layout)
        assert all(np.array_equal(whole[i], alone[0]) for whole, alone in zip((code, meta, lits), one))
    padding = pack_programs([], capacity=3, **layout)
    assert all(np.array_equal(whole[len(progs):], pad) for whole, pad in zip((code, meta, lits), padding))
    with pytest.raises(ValueError, match="capacity"):
        pack_programs(progs, capacity=len(progs) - 1, **layout)


def test_program_is_frozen_value() -> None:
    prog = lower(parse_formula("x0 + 1", NAMES).tree, NAMES, [])
    assert isinstance(prog, Program)
    with pytest.raises(AttributeError):
        prog.n_temps = 5  # type: ignore[misc]


@pytest.mark.parametrize("tree", [
    Node("pow", (Node("var", name="x0"),)),                            # one operand short
    Node("sin", (Node("var", name="x0"), Node("var", name="x1"))),     # one too many
    Node("mul", (Node("num", value=2.0), Node("num", value=3.0), Node("num", value=4.0))),
    Node("add"),                                                       # an operator as a leaf
])
def test_operators_with_the_wrong_operand_count_are_lowering_errors(tree: Node) -> None:
    with pytest.raises(LoweringError, match="needs (one|two) operand"):
        lower(tree, NAMES, [])


def test_lowering_over_a_generated_family_computes_the_tree() -> None:
    """Random formulas (seeded): the program computes the canonical tree's values, and its
    linear constants are those :func:`find_linear` finds on the tree (which folds and rewrites
    powers by its own walk)."""
    rng = np.random.default_rng(11)
    X = _rows()
    checked = 0
    for _ in range(300):
        text = _random_text(rng, int(rng.integers(2, 6)))
        f = parse_formula(text, NAMES)
        consts = [f"c{i}" for i in range(len(f.canonical_constants))]
        prog = lower(f.canonical_tree, NAMES, consts)
        values = {c: 0.5 + 0.25 * i for i, c in enumerate(consts)}
        with np.errstate(all="ignore"):
            want = evaluate_numpy(f.canonical_tree, X, NAMES, values)
        got = evaluate_program_numpy(prog, X, [values[c] for c in consts])
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True,
                                   err_msg=text)
        assert prog.linear == tuple(sorted(consts.index(c)
                                           for c in find_linear(f.canonical_tree))), text
        checked += 1
    assert checked == 300


def _random_text(rng: np.random.Generator, depth: int) -> str:
    if depth <= 1 or rng.random() < 0.25:
        return str(rng.choice(["x0", "x1", "x2", "a", "b", "k", "2", "0.5", "3"]))
    if rng.random() < 0.3:
        fn = str(rng.choice(["sin", "exp", "sqrt", "log", "-", "tanh"]))
        inner = _random_text(rng, depth - 1)
        return f"-({inner})" if fn == "-" else f"{fn}({inner})"
    op = str(rng.choice(["+", "-", "*", "/", "**"]))
    if op == "**":
        return f"({_random_text(rng, depth - 1)})**{rng.choice(['2', '3', '0.5', '-1', '1'])}"
    return f"({_random_text(rng, depth - 1)}){op}({_random_text(rng, depth - 1)})"
