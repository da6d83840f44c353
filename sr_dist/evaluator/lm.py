"""Levenberg-Marquardt with Marquardt scaling and early stopping (traced inside ``jax.jit``).

Each iteration costs exactly one pass over the rows: the trial point's pass returns its loss
*and* its JᵀJ/Jᵀr, so an accepted step already holds what the next step needs; a rejected step
keeps the old normal equations and only raises the damping.

Acceptance is lexicographic on (non-finite rows, SSE): a step may never trade valid rows for a
lower loss on fewer rows, and a step that produces more non-finite rows is rejected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from sr_dist.evaluator.interpreter import Normal

Array = jax.Array
#: ``pass_fn(c, state) -> (Normal, state)``: one pass over the rows. The state is a pytree the
#: optimisers carry without looking at it (the kernels' dual register file), hence ``Any``.
PassFn = Callable[[Array, Any], tuple[Normal, Any]]


class LMOptions(NamedTuple):
    """Static LM settings (hashable: part of a compiled bucket's key)."""

    max_iters: int = 40
    ftol: float = 1e-6  # an accepted step improving less than this (relative) is a stall
    xtol: float = 1e-7  # a step shorter than this (relative to |c|) is a stall
    patience: int = 3  # consecutive stalls that end the fit
    lam0: float = 1e-3
    lam_up: float = 6.0
    lam_down: float = 1.0 / 3.0
    lam_max: float = 1e10
    reject_stall_lam: float = 1.0  # rejections count as stalls once damping is this high...
    reject_stall_gain: float = 1e-3  # ...or when the trial was worse by less than this
    prune_after: int = 12  # passes after which a lane far behind the best lane stops (0: never)
    prune_gap: float = 0.5  # "far behind": SSE above (1 + gap) x the best lane's, or more NaN rows


class LMResult(NamedTuple):
    c: Array
    sse: Array
    nbad: Array
    iters: Array


def better(sse_new: Array, nbad_new: Array, sse_old: Array, nbad_old: Array) -> Array:
    """Lexicographic (fewer non-finite rows, then lower finite SSE) comparison."""
    finite = jnp.isfinite(sse_new)
    return finite & ((nbad_new < nbad_old) | ((nbad_new == nbad_old) & (sse_new < sse_old)))


def damped_step(jtj: Array, jtr: Array, lam: Array, active: Array) -> tuple[Array, Array]:
    """Solve (JᵀJ + λ·diag(JᵀJ)) δ = Jᵀr in scaled form; inactive or flat constants get δ = 0.

    Returns the step and whether the solve was finite (a failed factorisation is retried with
    more damping, never counted as convergence)."""
    d = jnp.diagonal(jtj)
    good = active & (d > 0) & jnp.isfinite(d)
    s = jnp.where(good, lax.rsqrt(jnp.where(good, d, jnp.ones_like(d))), jnp.zeros_like(d))
    a = jtj * s[:, None] * s[None, :]
    a = jnp.where(jnp.isfinite(a), a, jnp.zeros_like(a))
    # Scaled diagonal is 1 for good constants (-> 1 + λ); flat/inactive rows become identity.
    a = a + jnp.diag(jnp.where(good, lam, jnp.ones_like(d)))
    g = jnp.where(good, jtr * s, jnp.zeros_like(jtr))
    chol = jnp.linalg.cholesky(a)
    z = jax.scipy.linalg.cho_solve((chol, True), g)
    delta = s * z
    finite = jnp.all(jnp.isfinite(delta))
    return jnp.where(finite, delta, jnp.zeros_like(delta)), finite


def levenberg_marquardt(
    pass_fn: PassFn, c0: Array, active: Array, state0: object, opts: LMOptions, max_iters: int,
    sse_floor: Array,
) -> LMResult:
    """Minimise the masked SSE from each row of ``c0`` (restarts, K), restarts in lockstep.

    ``pass_fn(c, state) -> (Normal, state)`` does one pass over the rows for one restart
    (``state`` carries its register buffer; it is vmapped over the restarts). ``active`` masks
    the constants this formula really has. A restart stops after ``patience`` consecutive
    stalls, damping above ``lam_max`` or an SSE at the rounding floor ``sse_floor``; the loop
    ends when every restart has stopped or after ``max_iters`` passes. With ``prune_after``, a
    restart still running after that many passes while clearly behind the best one
    (``prune_gap``) is stopped, so one slow lane does not hold the whole batch.
    Returns per-restart constants, SSE, non-finite counts and passes.
    """
    n_lanes = c0.shape[0]
    dtype = c0.dtype
    # Damping floor relative to the unit scaled diagonal: regularises redundant constants
    # (a*exp(b)*x) whose normal matrix is singular to working precision.
    info = jnp.finfo(dtype)  # type: ignore[no-untyped-call]  # unannotated in jax 0.10
    lam_min = 100.0 * float(info.eps)
    tiny = info.tiny
    vpass = jax.vmap(pass_fn)
    state = jax.tree_util.tree_map(
        lambda x: jnp.broadcast_to(x, (n_lanes,) + x.shape), state0)
    normal, state = vpass(c0, state)

    class S(NamedTuple):
        c: Array
        normal: Normal
        lam: Array
        it: Array
        lane_it: Array
        stall: Array
        done: Array
        state: object

    def lane(c: Array, normal: Normal, lam: Array, stall: Array, trial: Normal, delta: Array,
             solved: Array) -> tuple[Array, Normal, Array, Array, Array]:
        ok = better(trial.sse, trial.nbad, normal.sse, normal.nbad)
        scale = jnp.maximum(normal.sse, tiny)
        gain = (normal.sse - trial.sse) / scale
        # Gauss-Newton model's predicted reduction: even a perfect step would gain this much.
        predicted = (2.0 * jnp.dot(delta, normal.jtr) - jnp.dot(delta, normal.jtj @ delta)) / scale
        same_rows = trial.nbad == normal.nbad
        tiny_step = jnp.linalg.norm(delta) <= opts.xtol * (jnp.linalg.norm(c) + opts.xtol)
        # A step rejected for a higher loss on the same rows is a stall once the damping is
        # high or the loss barely moved (at a float32 noise floor the model keeps promising
        # phantom gains); one rejected because it crossed into non-finite rows is not: LM raises
        # the damping and approaches the boundary instead.
        flat_reject = (~ok) & ((lam >= opts.reject_stall_lam) | (-gain < opts.reject_stall_gain))
        stalled = solved & ((same_rows & (flat_reject | (ok & (gain < opts.ftol))))
                            | (predicted < opts.ftol) | tiny_step)
        new_normal = jax.tree_util.tree_map(lambda n, o: jnp.where(ok, n, o), trial, normal)
        new_c = jnp.where(ok, c + delta, c)
        new_lam = jnp.where(ok, jnp.maximum(lam * opts.lam_down, lam_min), lam * opts.lam_up)
        new_stall = jnp.where(stalled, stall + 1, 0)
        done = ((new_stall >= opts.patience) | (new_lam > opts.lam_max)
                | ((new_normal.sse <= sse_floor) & (new_normal.nbad == 0)))
        return new_c, new_normal, new_lam.astype(dtype), new_stall, done

    def cond(s: S) -> Array:
        return jnp.any(~s.done) & (s.it < max_iters)

    def body(s: S) -> S:
        delta, solved = jax.vmap(damped_step, in_axes=(0, 0, 0, None))(
            s.normal.jtj, s.normal.jtr, s.lam, active)
        trial, state = vpass(s.c + delta, s.state)
        c, normal, lam, stall, done = jax.vmap(lane)(s.c, s.normal, s.lam, s.stall, trial,
                                                     delta, solved)
        if opts.prune_after > 0 and n_lanes > 1:
            fewest = jnp.min(normal.nbad)
            best = jnp.min(jnp.where(normal.nbad == fewest, normal.sse, jnp.inf))
            behind = (normal.nbad > fewest) | (normal.sse > (1.0 + opts.prune_gap) * best)
            done = done | ((s.it + 1 >= opts.prune_after) & behind)
        # Stopped lanes keep their state (their lanes still compute, results are discarded).
        def keep(new: Array, old: Array) -> Array:
            return jnp.where(s.done.reshape((-1,) + (1,) * (new.ndim - 1)), old, new)

        c = keep(c, s.c)
        normal = jax.tree_util.tree_map(keep, normal, s.normal)
        lam = keep(lam, s.lam)
        stall = keep(stall, s.stall)
        lane_it = jnp.where(s.done, s.lane_it, s.it + 1)
        return S(c, normal, lam, s.it + 1, lane_it, stall, s.done | done, state)

    zeros = jnp.zeros((n_lanes,), jnp.int32)
    s0 = S(c0, normal, jnp.full((n_lanes,), opts.lam0, dtype), jnp.zeros((), jnp.int32), zeros,
           zeros, (normal.sse <= sse_floor) & (normal.nbad == 0), state)
    out = lax.while_loop(cond, body, s0)
    return LMResult(out.c, out.normal.sse, out.normal.nbad, out.lane_it)
