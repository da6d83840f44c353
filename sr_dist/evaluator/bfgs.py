"""BFGS on the mean squared error (traced inside ``jax.jit``): the LLM-SR compatibility fit.

LLM-SR and SR-Scientist fit a candidate's constants with ``scipy.optimize.minimize(...,
method="BFGS")`` on the MSE, starting from all ones, once. This is that method on the batched
interpreter: the same pass over the rows gives the SSE and Jᵀr, so the MSE gradient is
``-2 Jᵀr / n``. Like scipy: inverse-Hessian estimate starting at the identity, a line search
from step 1, stop when the gradient's max-norm is below ``gtol`` (1e-5) or after ``max_iters``.
The first trial step of each line search is scipy's (the step that would repeat the last
decrease, capped at 1); from there the search backtracks with the Armijo condition (scipy uses
a Wolfe search, so paths can differ on multi-modal problems); a step
whose curvature ``yᵀs`` is not positive skips the update. A trial point with more non-finite
rows than the current one counts as a failed step, as in LM.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from sr_dist.evaluator.lm import LMResult, PassFn

Array = jax.Array


class BFGSOptions(NamedTuple):
    """Static BFGS settings (hashable: part of a compiled bucket's key)."""

    gtol: float = 1e-5
    armijo: float = 1e-4
    shrink: float = 0.5
    max_line_steps: int = 30


def bfgs(pass_fn: PassFn, c0: Array, active: Array, state0: object, n_rows: Array,
         max_iters: int, opts: BFGSOptions = BFGSOptions()) -> LMResult:  # noqa: B008 - a frozen value
    """Minimise the MSE from each row of ``c0`` (lanes, K); returns LM-shaped results
    (constants, SSE, non-finite rows, iterations) per lane. ``active`` masks real constants."""
    dtype = c0.dtype
    k = c0.shape[1]
    scale = 1.0 / jnp.maximum(n_rows.astype(dtype), 1.0)
    eye = jnp.eye(k, dtype=dtype) * active[:, None] * active[None, :]

    def evaluate(c: Array, state: object) -> tuple[Array, Array, Array, object]:
        normal, state = pass_fn(c, state)
        grad = jnp.where(active, -2.0 * normal.jtr * scale, 0.0)
        return normal.sse * scale, normal.nbad, grad, state

    def lane(c_init: Array, state: object) -> LMResult:
        f0, bad0, g0, state = evaluate(c_init, state)

        class S(NamedTuple):
            c: Array
            f: Array
            bad: Array
            g: Array
            h: Array
            f_prev: Array
            it: Array
            done: Array
            state: object

        def cond(s: S) -> Array:
            return (~s.done) & (s.it < max_iters)

        def body(s: S) -> S:
            p = -(s.h @ s.g)
            slope = jnp.dot(s.g, p)
            # Not a descent direction (numerical trouble): restart from steepest descent.
            bad_dir = ~(slope < 0)
            p = jnp.where(bad_dir, -s.g, p)
            slope = jnp.where(bad_dir, -jnp.dot(s.g, s.g), slope)
            h = jnp.where(bad_dir, eye, s.h)
            # scipy's first trial step: the step a quadratic would take to repeat the last
            # decrease (f_prev starts at f + |g|/2), capped at 1.
            guess = 1.01 * 2.0 * (s.f - s.f_prev) / slope
            alpha0 = jnp.where(jnp.isfinite(guess) & (guess > 0), jnp.minimum(1.0, guess), 1.0)

            class L(NamedTuple):
                alpha: Array
                n: Array
                ok: Array
                f: Array
                bad: Array
                g: Array
                state: object

            def lcond(ls: L) -> Array:
                return (~ls.ok) & (ls.n < opts.max_line_steps)

            def lbody(ls: L) -> L:
                alpha = jnp.where(ls.n == 0, ls.alpha, ls.alpha * opts.shrink)
                f, bad, g, st = evaluate(s.c + alpha * p, ls.state)
                ok = (jnp.isfinite(f) & (bad <= s.bad)
                      & (f <= s.f + opts.armijo * alpha * slope))
                return L(alpha, ls.n + 1, ok, f, bad, g, st)

            ls = lax.while_loop(lcond, lbody, L(alpha0.astype(dtype), jnp.zeros((), jnp.int32),
                                                jnp.zeros((), bool), s.f, s.bad, s.g, s.state))
            step = ls.alpha * p
            c = jnp.where(ls.ok, s.c + step, s.c)
            f = jnp.where(ls.ok, ls.f, s.f)
            bad = jnp.where(ls.ok, ls.bad, s.bad)
            g = jnp.where(ls.ok, ls.g, s.g)
            y = g - s.g
            sy = jnp.dot(step, y)
            rho = 1.0 / jnp.where(sy > 0, sy, 1.0)
            a = eye - rho * jnp.outer(step, y)
            h_new = a @ h @ a.T + rho * jnp.outer(step, step)
            h = jnp.where(ls.ok & (sy > 0), h_new, h)
            done = (~ls.ok) | (jnp.max(jnp.abs(g)) <= opts.gtol)
            return S(c, f, bad, g, h, s.f, s.it + 1, done, ls.state)

        s0 = S(c_init, f0, bad0, g0, eye, f0 + 0.5 * jnp.linalg.norm(g0), jnp.zeros((), jnp.int32),
               jnp.max(jnp.abs(g0)) <= opts.gtol, state)
        out = lax.while_loop(cond, body, s0)
        return LMResult(out.c, out.f / scale, out.bad, out.it)

    lanes = c0.shape[0]
    states = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (lanes,) + x.shape), state0)
    return jax.vmap(lane)(c0, states)


__all__ = ["BFGSOptions", "bfgs"]
