"""The register-machine interpreter and its chunked data passes (traced inside ``jax.jit``).

One interpreter runs every program: the opcode picks a ``lax.switch`` branch, the loop runs to
the program's real instruction count, and rows are processed in fixed-size chunks so the
register file stays in cache. With duals, every register also carries its derivatives with
respect to the free constants (hand-written forward mode, cheaper than ``jax.jvp`` through the
interpreter), which gives the Jacobian rows for Levenberg-Marquardt.

Dependence flags guard the derivative partials: an operand that does not depend on any constant
has an exactly-zero dual, and its partial is zeroed too so ``0 * inf`` cannot produce a NaN
(``x0**5`` at ``x0 = 0`` would otherwise poison the Jacobian).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from sr_dist.evaluator.program import FLAG_DEP_A, FLAG_DEP_B, OPCODES

Array = jax.Array


def _z(dep: Array, partial: Array) -> Array:
    """The partial where the operand depends on a constant, zero elsewhere (no 0*inf NaNs)."""
    return jnp.where(dep, partial, jnp.zeros_like(partial))


# ---------------------------------------------------------------- value-only branches
def _value_branches() -> list[Callable[[Array, Array], Array]]:
    table: dict[str, Callable[[Array, Array], Array]] = {
        "copy": lambda a, b: a,
        "add": lambda a, b: a + b,
        "sub": lambda a, b: a - b,
        "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b,
        "pow": lambda a, b: jnp.power(a, b),
        "neg": lambda a, b: -a,
        "sin": lambda a, b: jnp.sin(a),
        "cos": lambda a, b: jnp.cos(a),
        "tan": lambda a, b: jnp.tan(a),
        "exp": lambda a, b: jnp.exp(a),
        "log": lambda a, b: jnp.log(a),
        "sqrt": lambda a, b: jnp.sqrt(a),
        "abs": lambda a, b: jnp.abs(a),
        "tanh": lambda a, b: jnp.tanh(a),
        "sinh": lambda a, b: jnp.sinh(a),
        "cosh": lambda a, b: jnp.cosh(a),
        "arcsin": lambda a, b: jnp.arcsin(a),
        "arccos": lambda a, b: jnp.arccos(a),
        "arctan": lambda a, b: jnp.arctan(a),
    }
    return [table[name] for name in OPCODES]


# ---------------------------------------------------------------- dual branches
# Signature: (va, da, vb, db, dep_a, dep_b) -> (value, dual); va/vb: (C,), da/db: (K, C).
DualFn = Callable[[Array, Array, Array, Array, Array, Array], tuple[Array, Array]]


def _unary(f: Callable[[Array], Array], dfdx: Callable[[Array, Array], Array]) -> DualFn:
    def branch(va: Array, da: Array, vb: Array, db: Array, pa: Array, pb: Array) -> tuple[Array, Array]:
        v = f(va)
        return v, da * _z(pa, dfdx(va, v))[None, :]

    return branch


def _dual_branches() -> list[DualFn]:
    def copy(va: Array, da: Array, vb: Array, db: Array, pa: Array, pb: Array) -> tuple[Array, Array]:
        return va, da

    def add(va: Array, da: Array, vb: Array, db: Array, pa: Array, pb: Array) -> tuple[Array, Array]:
        return va + vb, da + db

    def sub(va: Array, da: Array, vb: Array, db: Array, pa: Array, pb: Array) -> tuple[Array, Array]:
        return va - vb, da - db

    def mul(va: Array, da: Array, vb: Array, db: Array, pa: Array, pb: Array) -> tuple[Array, Array]:
        return va * vb, da * _z(pa, vb)[None, :] + db * _z(pb, va)[None, :]

    def div(va: Array, da: Array, vb: Array, db: Array, pa: Array, pb: Array) -> tuple[Array, Array]:
        inv = 1.0 / vb
        v = va * inv
        return v, da * _z(pa, inv)[None, :] - db * _z(pb, v * inv)[None, :]

    def pow_(va: Array, da: Array, vb: Array, db: Array, pa: Array, pb: Array) -> tuple[Array, Array]:
        v = jnp.power(va, vb)
        ga = vb * jnp.power(va, vb - 1.0)
        gb = v * jnp.log(va)
        return v, da * _z(pa, ga)[None, :] + db * _z(pb, gb)[None, :]

    def neg(va: Array, da: Array, vb: Array, db: Array, pa: Array, pb: Array) -> tuple[Array, Array]:
        return -va, -da

    table: dict[str, DualFn] = {
        "copy": copy, "add": add, "sub": sub, "mul": mul, "div": div, "pow": pow_, "neg": neg,
        "sin": _unary(jnp.sin, lambda x, v: jnp.cos(x)),
        "cos": _unary(jnp.cos, lambda x, v: -jnp.sin(x)),
        "tan": _unary(jnp.tan, lambda x, v: 1.0 + v * v),
        "exp": _unary(jnp.exp, lambda x, v: v),
        "log": _unary(jnp.log, lambda x, v: 1.0 / x),
        "sqrt": _unary(jnp.sqrt, lambda x, v: 0.5 / v),
        "abs": _unary(jnp.abs, lambda x, v: jnp.sign(x)),
        "tanh": _unary(jnp.tanh, lambda x, v: 1.0 - v * v),
        "sinh": _unary(jnp.sinh, lambda x, v: jnp.cosh(x)),
        "cosh": _unary(jnp.cosh, lambda x, v: jnp.sinh(x)),
        "arcsin": _unary(jnp.arcsin, lambda x, v: lax.rsqrt(1.0 - x * x)),
        "arccos": _unary(jnp.arccos, lambda x, v: -lax.rsqrt(1.0 - x * x)),
        "arctan": _unary(jnp.arctan, lambda x, v: 1.0 / (1.0 + x * x)),
    }
    return [table[name] for name in OPCODES]


def _combined(fn: DualFn) -> Callable[[Array, Array, Array, Array], Array]:
    def branch(a: Array, b: Array, pa: Array, pb: Array) -> Array:
        v, d = fn(a[0], a[1:], b[0], b[1:], pa, pb)
        return jnp.concatenate([v[None, :], d], axis=0)

    return branch


def _value_only(fn: Callable[[Array, Array], Array]) -> Callable[[Array, Array, Array, Array], Array]:
    """Branch for an instruction that depends on no constant: the value is computed and the
    derivative rows are copied from operand ``a``, which are exactly zero by induction
    (variables and literals have zero rows and such instructions only read such registers)."""

    def branch(a: Array, b: Array, pa: Array, pb: Array) -> Array:
        return jnp.concatenate([fn(a[0], b[0])[None, :], a[1:]], axis=0)

    return branch


_VALUE_BRANCHES = _value_branches()
#: Dual-mode branches: opcode ``i`` with a constant-dependent operand runs branch ``i``; with
#: none, branch ``len(OPCODES) + i`` (value only).
_DUAL_BRANCHES = ([_combined(fn) for fn in _dual_branches()]
                  + [_value_only(fn) for fn in _VALUE_BRANCHES])


# ---------------------------------------------------------------- instruction loop
def run_values(code: Array, n_instr: Array, vals: Array) -> Array:
    """Run ``n_instr`` instructions of ``code`` (L, 5) on the value registers ``vals`` (R, C)."""

    def body(i: Array, vals: Array) -> Array:
        ins = code[i]
        va = lax.dynamic_index_in_dim(vals, ins[2], 0, keepdims=False)
        vb = lax.dynamic_index_in_dim(vals, ins[3], 0, keepdims=False)
        v = lax.switch(ins[0], _VALUE_BRANCHES, va, vb)
        # lax's jit-wrapped helpers and loops are typed as returning Any: name the type here.
        updated: Array = lax.dynamic_update_index_in_dim(vals, v, ins[1], 0)
        return updated

    final: Array = lax.fori_loop(0, n_instr, body, vals)
    return final


def run_duals(code: Array, n_instr: Array, regs: Array) -> Array:
    """Like :func:`run_values` on dual registers ``regs`` (R, 1+K, C): row 0 of each register
    is its value, rows 1..K its derivatives with respect to the K constants. One buffer keeps
    it to one gather per operand and one scatter per instruction."""

    def body(i: Array, regs: Array) -> Array:
        ins = code[i]
        flags = ins[4]
        a = lax.dynamic_index_in_dim(regs, ins[2], 0, keepdims=False)
        b = lax.dynamic_index_in_dim(regs, ins[3], 0, keepdims=False)
        pa = (flags & FLAG_DEP_A) != 0
        pb = (flags & FLAG_DEP_B) != 0
        branch = jnp.where(flags == 0, ins[0] + len(OPCODES), ins[0])
        out = lax.switch(branch, _DUAL_BRANCHES, a, b, pa, pb)
        updated: Array = lax.dynamic_update_index_in_dim(regs, out, ins[1], 0)
        return updated

    final: Array = lax.fori_loop(0, n_instr, body, regs)
    return final


# ---------------------------------------------------------------- register files
class Layout(NamedTuple):
    """Static register-file layout of a bucket."""

    n_vars: int
    n_consts: int
    n_lits: int
    n_temps: int

    @property
    def n_regs(self) -> int:
        return self.n_vars + self.n_consts + self.n_lits + self.n_temps

    @property
    def const_base(self) -> int:
        return self.n_vars

    @property
    def lit_base(self) -> int:
        return self.n_vars + self.n_consts


def init_values(layout: Layout, lits: Array, chunk: int, dtype: jnp.dtype) -> Array:
    """Value registers with the literals in place (other slots are filled before use)."""
    vals = jnp.zeros((layout.n_regs, chunk), dtype=dtype)
    if layout.n_lits:
        block = jnp.broadcast_to(lits.astype(dtype)[:, None], (layout.n_lits, chunk))
        vals = lax.dynamic_update_slice(vals, block, (layout.lit_base, 0))
    return vals


def init_duals(layout: Layout, lits: Array, chunk: int, dtype: jnp.dtype) -> Array:
    """Dual registers (R, 1+K, C): literal values in place, unit derivative rows for the
    constant slots, zero elsewhere (variables and literals never depend on a constant)."""
    k = layout.n_consts
    regs = write_literals(layout, jnp.zeros((layout.n_regs, 1 + k, chunk), dtype=dtype), lits)
    eye = jnp.broadcast_to(jnp.eye(k, dtype=dtype)[:, :, None], (k, k, chunk))
    return lax.dynamic_update_slice(regs, eye, (layout.const_base, 1, 0))


def write_literals(layout: Layout, regs: Array, lits: Array) -> Array:
    """The dual registers ``regs`` (R, 1+K, C) with a formula's literal values ``lits`` in
    their slots (value row; literals have no derivative), as :func:`init_duals` starts them and
    as a register file shared by several formulas is rewritten for each."""
    if not layout.n_lits:
        return regs
    block = jnp.broadcast_to(lits.astype(regs.dtype)[:, None, None],
                             (layout.n_lits, 1, regs.shape[2]))
    return lax.dynamic_update_slice(regs, block, (layout.lit_base, 0, 0))


def set_constants(layout: Layout, vals: Array, c: Array) -> Array:
    """Write the constant vector ``c`` (K,) into its register slots."""
    chunk = vals.shape[1]
    block = jnp.broadcast_to(c.astype(vals.dtype)[:, None], (layout.n_consts, chunk))
    return lax.dynamic_update_slice(vals, block, (layout.const_base, 0))


# ---------------------------------------------------------------- chunked passes
class Normal(NamedTuple):
    """What one pass over the rows yields for Levenberg-Marquardt."""

    sse: Array  # masked sum of squared residuals
    nbad: Array  # rows (of those weighted in) whose prediction is not finite
    jtj: Array  # (K, K)
    jtr: Array  # (K,)


def normal_pass(
    code: Array, n_instr: Array, root: Array, layout: Layout, c: Array, regs: Array,
    X: Array, y: Array, w: Array,
) -> tuple[Normal, Array]:
    """SSE, JᵀJ and Jᵀr at constants ``c`` over row chunks ``X`` (N, F, C), ``y``/``w`` (N, C).

    ``regs`` is the dual register file from :func:`init_duals`. Rows whose prediction is not
    finite are masked out (and counted); non-finite Jacobian entries of finite rows are zeroed.
    Returns the reductions and the register file (carried so the buffer is reused).
    """
    k = layout.n_consts
    dtype = regs.dtype
    chunk_len = regs.shape[2]
    block = jnp.broadcast_to(c.astype(dtype)[:, None, None], (k, 1, chunk_len))
    regs = lax.dynamic_update_slice(regs, block, (layout.const_base, 0, 0))

    Acc = tuple[Array, Array, Array, Array, Array]  # registers, SSE, non-finite rows, JᵀJ, Jᵀr

    def chunk(j: Array, acc: Acc) -> Acc:
        regs, sse, nbad, jtj, jtr = acc
        regs = lax.dynamic_update_slice(regs, X[j][:, None, :], (0, 0, 0))
        regs = run_duals(code, n_instr, regs)
        res = lax.dynamic_index_in_dim(regs, root, 0, keepdims=False)
        out, jac = res[0], res[1:]
        wj = w[j]
        finite = jnp.isfinite(out)
        ok = wj & finite
        r = jnp.where(ok, y[j] - out, jnp.zeros_like(out))
        jac = jnp.where(ok[None, :] & jnp.isfinite(jac), jac, jnp.zeros_like(jac))
        sse = sse + jnp.dot(r, r)
        nbad = nbad + jnp.sum(wj & ~finite, dtype=jnp.int32)
        jtj = jtj + jnp.dot(jac, jac.T)
        jtr = jtr + jnp.dot(jac, r)
        return regs, sse, nbad, jtj, jtr

    init: Acc = (regs, jnp.zeros((), dtype), jnp.zeros((), jnp.int32),
                 jnp.zeros((k, k), dtype), jnp.zeros((k,), dtype))
    final: Acc = lax.fori_loop(0, X.shape[0], chunk, init)
    regs, sse, nbad, jtj, jtr = final
    return Normal(sse, nbad, jtj, jtr), regs


def split_pass(
    code: Array, n_instr: Array, root: Array, layout: Layout, c: Array, vals: Array,
    X: Array, y: Array, split: Array, n_splits: int,
) -> tuple[Array, Array]:
    """Per-split SSE (finite rows) and non-finite counts; ``split`` (N, C) holds ids 1..n_splits
    (0 marks padding)."""
    vals = set_constants(layout, vals, c) if layout.n_consts else vals
    dtype = vals.dtype
    ids = jnp.arange(1, n_splits + 1, dtype=jnp.int32)

    def chunk(j: Array, acc: tuple[Array, Array, Array]) -> tuple[Array, Array, Array]:
        vals, sse, nbad = acc
        vals = lax.dynamic_update_slice(vals, X[j], (0, 0))
        vals = run_values(code, n_instr, vals)
        out = lax.dynamic_index_in_dim(vals, root, 0, keepdims=False)
        member = split[j][None, :] == ids[:, None]  # (S, C)
        finite = jnp.isfinite(out)
        r = jnp.where(finite, y[j] - out, jnp.zeros_like(out))
        sq = r * r
        sse = sse + jnp.sum(jnp.where(member, sq[None, :], jnp.zeros_like(sq)[None, :]), axis=1)
        nbad = nbad + jnp.sum(member & ~finite[None, :], axis=1, dtype=jnp.int32)
        return vals, sse, nbad

    _, sse, nbad = lax.fori_loop(
        0, X.shape[0], chunk,
        (vals, jnp.zeros((n_splits,), dtype), jnp.zeros((n_splits,), jnp.int32)))
    return sse, nbad


def predict_pass(
    code: Array, n_instr: Array, root: Array, layout: Layout, c: Array, vals: Array, X: Array,
) -> Array:
    """Predictions (N, C) for row chunks ``X`` (N, F, C)."""
    vals = set_constants(layout, vals, c) if layout.n_consts else vals

    def chunk(j: Array, acc: tuple[Array, Array]) -> tuple[Array, Array]:
        vals, out = acc
        vals = lax.dynamic_update_slice(vals, X[j], (0, 0))
        vals = run_values(code, n_instr, vals)
        row = lax.dynamic_index_in_dim(vals, root, 0, keepdims=True)
        return vals, lax.dynamic_update_slice(out, row, (j, 0))

    out = jnp.zeros((X.shape[0], X.shape[2]), dtype=vals.dtype)
    final: tuple[Array, Array] = lax.fori_loop(0, X.shape[0], chunk, (vals, out))
    return final[1]
