"""Host-side lowering: a formula AST becomes a small register program.

Formulas are data to the evaluator: one compiled interpreter runs every program of a bucket, so
lowering must be cheap (pure Python, no JAX) and produce fixed-width integer instructions.

Register file layout used by the interpreter (absolute indices, fixed per bucket)::

    [0, F)                 dataset variables (refilled per row chunk)
    [F, F+K)               free constants (refilled per LM pass; their dual is the unit vector)
    [F+K, F+K+NL)          literals (written once per formula; dual always zero)
    [F+K+NL, F+K+NL+T)     temporaries (always written before they are read)

Operands are stored here symbolically as ``kind * KIND_STRIDE + index`` so a program can be
placed into any bucket whose slots are large enough (:func:`absolute_operands`).

Lowering also finds the constants that enter the formula linearly (:func:`find_linear`), so the
fit can solve them by linear least squares (variable projection) instead of iterating on them.
That split is data (a bitmask in the packed ``meta``), never a new compiled shape.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sr_dist.formula import BINARY_OPS, UNARY_OPS, Node

#: Opcodes understood by the interpreter; the position is the ``lax.switch`` branch index.
OPCODES: tuple[str, ...] = ("copy",) + BINARY_OPS + UNARY_OPS
OPCODE_INDEX: dict[str, int] = {name: i for i, name in enumerate(OPCODES)}

KIND_VAR, KIND_CONST, KIND_LIT, KIND_TMP = 0, 1, 2, 3
KIND_STRIDE = 1 << 16
#: Deepest tree the lowering accepts (the parser's own limit is far lower).
MAX_DEPTH = 512

#: Instruction columns: opcode, destination, operand a, operand b, flags.
#: flags bit 0: operand a depends on a free constant; bit 1: operand b does.
INSTR_WIDTH = 5
FLAG_DEP_A, FLAG_DEP_B = 1, 2
#: Packed per-formula metadata columns: instruction count, root register, constant count,
#: linear-constant bitmask.
META_WIDTH = 4
MAX_LINEAR_BIT = 30


class LoweringError(ValueError):
    """A tree cannot be lowered (unknown variable or constant, malformed node)."""


@dataclass(frozen=True, slots=True)
class Program:
    """A lowered formula: instructions over symbolic operands.

    ``instructions`` rows are ``(opcode, dst, a, b, flags)`` with ``dst`` a temporary index and
    ``a``/``b`` symbolic operand codes; ``root`` is the symbolic code of the result (always a
    temporary, so the output location is uniform).
    """

    instructions: tuple[tuple[int, int, int, int, int], ...]
    literals: tuple[float, ...]
    n_vars: int
    n_consts: int
    n_temps: int
    root: int
    n_nodes: int
    #: Indices (into the constant order) of the constants that enter linearly (:func:`find_linear`).
    linear: tuple[int, ...] = ()

    @property
    def n_instructions(self) -> int:
        return len(self.instructions)


def _code(kind: int, index: int) -> int:
    return kind * KIND_STRIDE + index


def count_nodes(node: Node) -> int:
    """Tree size (leaves and operators), iteratively so deep trees cannot overflow the stack."""
    total, stack = 0, [node]
    while stack:
        cur = stack.pop()
        total += 1
        stack.extend(cur.args)
    return total


def _num(node: Node) -> float:
    """A ``num`` leaf's value (a hand-built node without one is malformed)."""
    if node.value is None:
        raise LoweringError("a num node has no value")
    return float(node.value)


def _name(node: Node) -> str:
    """A ``var``/``const`` leaf's name (a hand-built node without one is malformed)."""
    if node.name is None:
        raise LoweringError(f"a {node.op} node has no name")
    return node.name


def _fold(node: Node) -> Node:
    """Fold number-only subtrees into one literal (float64 on the host, like numpy would).
    A subtree with nothing to fold is returned as it is (no copy)."""
    if not node.args:
        return node
    args = tuple([_fold(a) for a in node.args])
    if all(a.op == "num" for a in args):
        vals = [_num(a) for a in args]
        with np.errstate(all="ignore"):
            value = float(_NUMPY_OPS[node.op](*[np.float64(v) for v in vals]))
        return Node("num", value=value)
    if all(a is b for a, b in zip(args, node.args)):
        return node
    return Node(node.op, args, node.value, node.name)


def _rewrite_pow(node: Node) -> Node:
    """Turn ``a**2``, ``a**3``, ``a**0.5``, ``a**1`` and ``a**-1`` into cheaper exact forms.
    A subtree with no such power is returned as it is (no copy)."""
    if not node.args:
        return node
    args = tuple([_rewrite_pow(a) for a in node.args])
    if node.op == "pow" and args[1].op == "num":
        base, e = args[0], _num(args[1])
        if e == 1.0:
            return Node("copy", (base,))
        if e == 2.0:
            return Node("mul", (base, base))
        if e == 3.0:
            return Node("mul", (Node("mul", (base, base)), base))
        if e == 0.5:
            return Node("sqrt", (base,))
        if e == -1.0:
            return Node("div", (Node("num", value=1.0), base))
    if all(a is b for a, b in zip(args, node.args)):
        return node
    return Node(node.op, args, node.value, node.name)


_NUMPY_OPS: dict[str, Callable[..., Any]] = {
    "copy": lambda a: a,
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "neg": np.negative, "sin": np.sin, "cos": np.cos, "tan": np.tan, "exp": np.exp,
    "log": np.log, "sqrt": np.sqrt, "abs": np.abs, "tanh": np.tanh, "sinh": np.sinh,
    "cosh": np.cosh, "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
}


_PASS_THROUGH = frozenset({"neg", "copy"})


def _top_terms(node: Node) -> list[Node]:
    """The terms of the top-level sum (signs dropped: a term's column carries its own sign)."""
    terms, stack = [], [node]
    while stack:
        cur = stack.pop()
        if cur.op in ("add", "sub"):
            stack.extend(reversed(cur.args))
        elif cur.op in _PASS_THROUGH:
            stack.append(cur.args[0])
        else:
            terms.append(cur)
    return terms


def _factor_constants(term: Node) -> list[str]:
    """Constant leaves that multiply the whole term: factors of its product chain, numerators
    of divisions only (``x/c`` is not linear in ``c``)."""
    found, stack = [], [term]
    while stack:
        cur = stack.pop()
        if cur.op == "mul":
            stack.extend(reversed(cur.args))
        elif cur.op == "div":
            stack.append(cur.args[0])
        elif cur.op in _PASS_THROUGH:
            stack.append(cur.args[0])
        elif cur.op == "const" and cur.name is not None:
            found.append(cur.name)
    return found


def find_linear(tree: Node) -> tuple[str, ...]:
    """Names of the constants the formula is jointly linear in, in first-seen order.

    A constant is linear when it occurs exactly once in the tree (after the lowering rewrites,
    so ``(c*x)**2`` counts ``c`` twice) and multiplies a whole term of the top-level sum (the
    whole formula is a one-term sum). A term gets at most one linear constant (in ``a*b*x`` the
    pair is one degree of freedom), so the formula is affine in the chosen set and, for fixed
    nonlinear constants, their best values are one linear least-squares solve. Pure host code.
    """
    return _linear_in(_rewrite_pow(_fold(tree)))


def _linear_in(work: Node) -> tuple[str, ...]:
    """:func:`find_linear` on a tree already folded and rewritten as lowering does."""
    counts: dict[str, int] = {}
    stack = [work]
    while stack:
        cur = stack.pop()
        if cur.op == "const" and cur.name is not None:
            counts[cur.name] = counts.get(cur.name, 0) + 1
        stack.extend(cur.args)
    chosen: list[str] = []
    for term in _top_terms(work):
        for name in _factor_constants(term):
            if counts.get(name) == 1 and name not in chosen:
                chosen.append(name)
                break
    return tuple(chosen)


def lower(tree: Node, variables: Sequence[str], constants: Sequence[str]) -> Program:
    """Lower ``tree`` to a register program.

    ``variables`` gives the dataset column order and ``constants`` the constant order (the
    fitted vector's layout). Raises :class:`LoweringError` for names not in those lists or a
    malformed node.
    """
    n_nodes = count_nodes(tree)
    # A tree's depth is at most its size: most trees are too small to need the depth walk.
    depth = tree_depth(tree) if n_nodes > MAX_DEPTH else n_nodes
    if depth > MAX_DEPTH:
        raise LoweringError(f"formula is nested too deeply (depth {depth}; the limit is "
                            f"{MAX_DEPTH})")
    limit = sys.getrecursionlimit()
    if limit < 4 * depth + 200:
        sys.setrecursionlimit(4 * depth + 200)
    try:
        return _lower(tree, variables, constants, n_nodes)
    finally:
        sys.setrecursionlimit(limit)


@functools.lru_cache(maxsize=8192)
def lower_cached(tree: Node, variables: tuple[str, ...], constants: tuple[str, ...]) -> Program:
    """:func:`lower` memoised on (tree, variables, constants): trees are frozen values, so the
    same formula evaluated again skips the host compiler."""
    return lower(tree, variables, constants)


def tree_depth(node: Node) -> int:
    """Nesting depth (a leaf has depth 1), computed without recursion."""
    best, stack = 0, [(node, 1)]
    while stack:
        cur, d = stack.pop()
        best = max(best, d)
        stack.extend((a, d + 1) for a in cur.args)
    return best


def _fold_value(op: str, args: Sequence[Node]) -> Node:
    """A literal for ``op`` applied to number-only ``args`` (float64 on the host, like numpy)."""
    with np.errstate(all="ignore"):
        value = float(_NUMPY_OPS[op](*[np.float64(_num(a)) for a in args]))
    return Node("num", value=value)


_UNARY_LOWERED = frozenset(op for op in OPCODES if op not in BINARY_OPS)
_BINARY_LOWERED = frozenset(BINARY_OPS)


def _lower(tree: Node, variables: Sequence[str], constants: Sequence[str], n_nodes: int) -> Program:
    var_index = {name: i for i, name in enumerate(variables)}
    const_index = {name: i for i, name in enumerate(constants)}

    literals: list[float] = []
    lit_slot: dict[bytes, int] = {}
    instructions: list[tuple[int, int, int, int, int]] = []

    # One post-order pass (what _fold and then _rewrite_pow do, in one walk) that also notes,
    # per node, the registers its evaluation needs (Sethi-Ullman) and whether it depends on a
    # free constant. Keyed by id(): every node is noted when it is made or kept, so an id that
    # a discarded temporary had is overwritten before any lookup.
    need: dict[int, int] = {}
    dep: dict[int, bool] = {}

    def note(node: Node) -> Node:
        """Record ``need``/``dep`` of an interior node whose children are noted."""
        args = node.args
        if len(args) == 2:
            left, right = need[id(args[0])], need[id(args[1])]
            need[id(node)] = max(1, left + 1 if left == right else max(left, right))
            dep[id(node)] = dep[id(args[0])] or dep[id(args[1])]
        else:
            need[id(node)] = max(1, need[id(args[0])])
            dep[id(node)] = dep[id(args[0])]
        return node

    def leaf(node: Node) -> Node:
        key, op = id(node), node.op
        if op == "num":
            if node.value is None:
                raise LoweringError("number node without a value")
            need[key], dep[key] = 0, False
        elif op == "var":
            if node.name not in var_index:
                raise LoweringError(f"unknown variable {node.name!r}; dataset has {list(variables)}")
            need[key], dep[key] = 0, False
        elif op == "const":
            if node.name not in const_index:
                raise LoweringError(f"unknown constant {node.name!r}")
            need[key], dep[key] = 0, True
        elif op in _BINARY_LOWERED:
            raise LoweringError(f"{op} needs two operands, got 0")
        elif op in _UNARY_LOWERED:
            raise LoweringError(f"{op} needs one operand, got 0")
        else:
            raise LoweringError(f"unknown operator {op!r}")
        return node

    def prep(node: Node) -> Node:
        args = node.args
        if not args:
            return leaf(node)
        op = node.op
        if op in _BINARY_LOWERED:
            if len(args) != 2:
                raise LoweringError(f"{op} needs two operands, got {len(args)}")
        elif op in _UNARY_LOWERED:
            if len(args) != 1:
                raise LoweringError(f"{op} needs one operand, got {len(args)}")
        else:
            raise LoweringError(f"unknown operator {op!r}")
        kids = [prep(a) for a in args]
        if all(k.op == "num" for k in kids):
            return leaf(_fold_value(op, kids))
        if op == "pow" and kids[1].op == "num":
            base, e = kids[0], _num(kids[1])
            if e == 1.0:
                return note(Node("copy", (base,)))
            if e == 2.0:
                return note(Node("mul", (base, base)))
            if e == 3.0:
                return note(Node("mul", (note(Node("mul", (base, base))), base)))
            if e == 0.5:
                return note(Node("sqrt", (base,)))
            if e == -1.0:
                return note(Node("div", (leaf(Node("num", value=1.0)), base)))
        if all(k is a for k, a in zip(kids, args)):
            return note(node)
        return note(Node(op, tuple(kids), node.value, node.name))

    work = prep(tree)

    def leaf_code(leaf: Node) -> int:
        if leaf.op == "var":
            return _code(KIND_VAR, var_index[_name(leaf)])
        if leaf.op == "const":
            return _code(KIND_CONST, const_index[_name(leaf)])
        value = _num(leaf)
        key = np.float64(value).tobytes()
        if key not in lit_slot:
            lit_slot[key] = len(literals)
            literals.append(value)
        return _code(KIND_LIT, lit_slot[key])

    max_temp = 0

    def emit(node: Node, base: int) -> int:
        """Emit code for ``node`` using temporaries from ``base`` upward; return its operand."""
        nonlocal max_temp
        if not node.args:
            return leaf_code(node)
        op = OPCODE_INDEX[node.op]
        if len(node.args) == 1:
            a = emit(node.args[0], base)
            b = a
            flags = FLAG_DEP_A if dep[id(node.args[0])] else 0
        else:
            left, right = node.args
            # Evaluate the child that needs more registers first so the other fits above it.
            if need[id(right)] > need[id(left)]:
                b = emit(right, base)
                a = emit(left, base + (1 if right.args else 0))
            else:
                a = emit(left, base)
                b = emit(right, base + (1 if left.args else 0))
            flags = (FLAG_DEP_A if dep[id(left)] else 0) | (FLAG_DEP_B if dep[id(right)] else 0)
        max_temp = max(max_temp, base + 1)
        instructions.append((op, base, a, b, flags))
        return _code(KIND_TMP, base)

    if work.args:
        root = emit(work, 0)
    else:
        operand = leaf_code(work)
        flags = FLAG_DEP_A if dep[id(work)] else 0
        instructions.append((OPCODE_INDEX["copy"], 0, operand, operand, flags))
        max_temp = 1
        root = _code(KIND_TMP, 0)
    return Program(
        instructions=tuple(instructions),
        literals=tuple(literals),
        n_vars=len(variables),
        n_consts=len(constants),
        n_temps=max_temp,
        root=root,
        n_nodes=n_nodes,
        linear=tuple(sorted(const_index[name] for name in _linear_in(work))),
    )


def absolute_operands(codes: np.ndarray, n_vars: int, n_consts: int, n_lits: int) -> np.ndarray:
    """Map symbolic operand codes to absolute register indices for a bucket layout."""
    kind, index = np.divmod(codes, KIND_STRIDE)
    base = np.array([0, n_vars, n_vars + n_consts, n_vars + n_consts + n_lits], dtype=np.int64)
    return (base[kind] + index).astype(np.int32)


def pack_programs(
    programs: Sequence[Program], *, n_vars: int, n_consts: int, n_lits: int, n_instr: int,
    capacity: int, linear: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stack programs into padded arrays for one bucket call.

    Returns ``code`` (capacity, n_instr, 5) int32 with absolute registers, ``meta``
    (capacity, 4) int32 = (instruction count, root register, constant count, linear-constant
    bitmask: bit j set when constant j enters linearly; all zero with ``linear=False``) and
    ``lits`` (capacity, n_lits) float64. Padding rows have zero instructions: the interpreter
    exits at once.
    """
    code = np.zeros((capacity, n_instr, INSTR_WIDTH), dtype=np.int32)
    meta = np.zeros((capacity, META_WIDTH), dtype=np.int32)
    lits = np.zeros((capacity, n_lits), dtype=np.float64)
    tmp_base = n_vars + n_consts + n_lits
    meta[:, 1] = tmp_base
    if not programs:
        return code, meta, lits
    if len(programs) > capacity:
        raise ValueError(f"{len(programs)} programs do not fit a capacity of {capacity}")
    for prog in programs:
        if prog.n_instructions > n_instr or len(prog.literals) > n_lits or prog.n_consts > n_consts:
            raise ValueError("program does not fit the bucket")
    # All programs' instructions in one array (one numpy pass instead of several per program).
    counts = np.array([prog.n_instructions for prog in programs], dtype=np.int64)
    flat = np.array([ins for prog in programs for ins in prog.instructions],
                    dtype=np.int64).reshape(-1, INSTR_WIDTH)
    rows = np.repeat(np.arange(len(programs)), counts)
    cols = np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)
    code[rows, cols, 0] = flat[:, 0]
    code[rows, cols, 1] = tmp_base + flat[:, 1]
    code[rows, cols, 2] = absolute_operands(flat[:, 2], n_vars, n_consts, n_lits)
    code[rows, cols, 3] = absolute_operands(flat[:, 3], n_vars, n_consts, n_lits)
    code[rows, cols, 4] = flat[:, 4]
    n = len(programs)
    meta[:n, 0] = counts
    meta[:n, 1] = absolute_operands(np.array([prog.root for prog in programs], dtype=np.int64),
                                    n_vars, n_consts, n_lits)
    meta[:n, 2] = [prog.n_consts for prog in programs]
    if linear:  # int32 bitmask: constants past bit 30 are treated as nonlinear (still fitted, by LM).
        meta[:n, 3] = [sum(1 << j for j in prog.linear if j <= MAX_LINEAR_BIT) for prog in programs]
    for i, prog in enumerate(programs):
        if prog.literals:
            lits[i, : len(prog.literals)] = prog.literals
    return code, meta, lits


def evaluate_program_numpy(prog: Program, X: np.ndarray, constants: Sequence[float]) -> np.ndarray:
    """Reference evaluation of a program in float64 numpy (used by tests and for debugging)."""
    n = X.shape[0]
    temps = [np.zeros(n) for _ in range(max(prog.n_temps, 1))]

    def fetch(code: int) -> np.ndarray:
        kind, index = divmod(code, KIND_STRIDE)
        if kind == KIND_VAR:
            return X[:, index].astype(np.float64)
        if kind == KIND_CONST:
            return np.full(n, float(constants[index]))
        if kind == KIND_LIT:
            return np.full(n, prog.literals[index])
        return temps[index]

    with np.errstate(all="ignore"):
        for op, dst, a, b, _flags in prog.instructions:
            name = OPCODES[op]
            fn = _NUMPY_OPS[name]
            if name in BINARY_OPS:
                temps[dst] = fn(fetch(a), fetch(b))
            else:
                temps[dst] = fn(fetch(a))
    return fetch(prog.root)


__all__ = [
    "OPCODES", "OPCODE_INDEX", "INSTR_WIDTH", "FLAG_DEP_A", "FLAG_DEP_B", "META_WIDTH", "Program",
    "LoweringError", "find_linear", "lower", "lower_cached", "pack_programs", "absolute_operands", "count_nodes",
    "evaluate_program_numpy",
]
