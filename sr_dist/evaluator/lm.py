"""Levenberg-Marquardt with Marquardt scaling and early stopping (traced inside ``jax.jit``).

Each iteration costs exactly one pass over the rows: the trial point's pass returns its loss
*and* its JᵀJ/Jᵀr, so an accepted step already holds what the next step needs; a rejected step
keeps the old normal equations and only raises the damping.

Acceptance is lexicographic on (non-finite rows, SSE): a step may never trade valid rows for a
lower loss on fewer rows, and a step that produces more non-finite rows is rejected.

Variable projection (separable least squares, Golub & Pereyra 1973, SIAM J. Numer. Anal. 10:413;
the Jacobian approximation of Kaufman 1975, BIT 15:49). For a constant ``a_j`` that enters
linearly, ``f = sum_j a_j phi_j(x; b) + psi(x; b)``, its Jacobian column *is* the term's value
``phi_j``, so the pass that accumulates JᵀJ and Jᵀr already holds the Gram matrix ΦᵀΦ and Φᵀr.
For the nonlinear constants ``b`` at hand the best linear constants are then one solve,
``a* = a + (ΦᵀΦ)⁻¹Φᵀr``, and the projected loss (the SSE at ``a*``, what varpro minimises over
``b``) is ``SSE - Φᵀrᵀ(ΦᵀΦ)⁻¹Φᵀr``, exact because ``f`` is affine in ``a``. LM then:

* judges a step by the projected loss, so a change of ``b`` is compared at the best linear
  constants for it, never at stale ones;
* steps the nonlinear constants with damping on them only: eliminating the (undamped) linear
  block from the normal equations leaves the Schur complement ``J_bᵀ P⊥ J_b`` and the projected
  gradient ``J_bᵀ P⊥ r``, which is Kaufman's varpro step; its linear part moves ``a`` to the
  Gauss-Newton prediction of ``a*`` at the new ``b``, so every iteration stays one pass;
* takes a *projection step* (``b`` fixed, ``a`` to ``a*``) when the current linear constants
  are far from their optimum (so ``J_b``, which scales with ``a``, would point the wrong way):
  at the start, and after a long nonlinear step;
* treats a formula whose constants are all linear as one solve (plus float-rounding refinement
  passes, stopped at the first that gains nothing), with no LM damping at all.

With no linear constant (the mask all false) every quantity reduces to plain LM exactly.
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
    #: Variable projection: a projection step is taken when the linear constants are off their
    #: optimum by more than this fraction (in the norm of the linear part of the prediction).
    project_gap: float = 0.1
    #: Variable projection: a nonlinear step must gain at least this share of its predicted gain.
    project_ratio: float = 0.25


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

    ``lam`` is a scalar or one damping per constant (variable projection damps only the
    nonlinear constants).

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


class Projection(NamedTuple):
    """The exact linear least-squares move of the linear constants at fixed nonlinear ones."""

    step: Array  # (K,) change of the linear constants (zero elsewhere)
    gain: Array  # SSE reduction the step gives (exact: the model is affine in them)
    size: Array  # squared norm of the linear part of the prediction at the solved constants
    finite: Array  # the solve succeeded


def project_linear(jtj: Array, jtr: Array, c: Array, linear: Array, floor: float) -> Projection:
    """Solve ΦᵀΦ s = Φᵀr on the linear block of the normal equations (Marquardt-scaled, with a
    ``floor`` ridge that regularises redundant columns such as ``a*x + b*x``)."""
    d = jnp.diagonal(jtj)
    good = linear & (d > 0) & jnp.isfinite(d)
    s = jnp.where(good, lax.rsqrt(jnp.where(good, d, jnp.ones_like(d))), jnp.zeros_like(d))
    pair = good[:, None] & good[None, :]
    a = jtj * s[:, None] * s[None, :]
    a = jnp.where(pair & jnp.isfinite(a), a, jnp.zeros_like(a))
    a = a + jnp.diag(jnp.where(good, floor, 1.0).astype(a.dtype))
    g = jnp.where(good, jtr * s, jnp.zeros_like(jtr))
    z = jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(a), True), g)
    step = s * z
    finite = jnp.all(jnp.isfinite(step))
    step = jnp.where(finite, step, jnp.zeros_like(step))
    gain = jnp.where(finite, jnp.maximum(jnp.dot(z, g), 0.0), jnp.zeros_like(g[0]))
    star = jnp.where(good, c + step, jnp.zeros_like(c))
    h = jnp.where(pair & jnp.isfinite(jtj), jtj, jnp.zeros_like(jtj))
    size = jnp.dot(star, h @ star)
    return Projection(step, gain, size, finite)


def projected_sse(normal: Normal, proj: Projection) -> Array:
    """The SSE at the best linear constants (the varpro objective); plain SSE without any."""
    return jnp.where(jnp.isfinite(normal.sse), jnp.maximum(normal.sse - proj.gain, 0.0),
                     normal.sse)


def levenberg_marquardt(
    pass_fn: PassFn, c0: Array, active: Array, state0: object, opts: LMOptions, max_iters: int,
    sse_floor: Array, linear: Array | None = None,
) -> LMResult:
    """Minimise the masked SSE from each row of ``c0`` (restarts, K), restarts in lockstep.

    ``pass_fn(c, state) -> (Normal, state)`` does one pass over the rows for one restart
    (``state`` carries its register buffer; it is vmapped over the restarts). ``active`` masks
    the constants this formula really has. A restart stops after ``patience`` consecutive
    stalls, damping above ``lam_max`` or an SSE at the rounding floor ``sse_floor``; the loop
    ends when every restart has stopped or after ``max_iters`` passes. With ``prune_after``, a
    restart still running after that many passes while clearly behind the best one
    (``prune_gap``) is stopped, so one slow lane does not hold the whole batch.
    ``linear`` (K,) marks the constants that enter linearly (variable projection, see the
    module docstring); ``None`` or all false is plain LM.
    Returns per-restart constants, SSE, non-finite counts and passes.
    """
    n_lanes = c0.shape[0]
    vpass = jax.vmap(pass_fn)
    state = jax.tree_util.tree_map(
        lambda x: jnp.broadcast_to(x, (n_lanes,) + x.shape), state0)

    def lanes_pass(c: Array, todo: Array, st: Any) -> tuple[Normal, Any]:
        del todo  # vmapped: every lane computes, stopped lanes' results are discarded
        return vpass(c, st)

    lin = jnp.zeros_like(active) if linear is None else linear
    return lm_lanes(lanes_pass, c0, jnp.broadcast_to(active, c0.shape),
                    jnp.broadcast_to(lin, c0.shape), state, opts, max_iters,
                    jnp.broadcast_to(sse_floor, (n_lanes,)), n_lanes)


#: ``lanes_pass(c, todo, state) -> (Normal, state)``: one pass for every lane of ``c`` (L, K)
#: whose ``todo`` (L,) is true; the other lanes' entries are ignored by the caller.
LanesPassFn = Callable[[Array, Array, Any], tuple[Normal, Any]]


def lm_lanes(
    lanes_pass: LanesPassFn, c0: Array, active: Array, linear: Array, state: object,
    opts: LMOptions, max_iters: int, sse_floor: Array, group: int, valid: Array | None = None,
) -> LMResult:
    """:func:`levenberg_marquardt` over independent lanes (L, K) in lockstep: each lane has its
    own ``active`` and ``linear`` constants (L, K) and ``sse_floor`` (L,), and lanes form
    consecutive groups of ``group`` (one formula's restarts) for pruning. Only the lanes still
    running are passed (``todo``), so a CPU pass function can skip the others, and the
    bookkeeping of one iteration is paid once for all lanes rather than once per formula.
    Lanes whose ``valid`` (L,) is false (a batch's padding) are never passed and never run."""
    n_lanes = c0.shape[0]
    dtype = c0.dtype
    # Damping floor relative to the unit scaled diagonal: regularises redundant constants
    # (a*exp(b)*x) whose normal matrix is singular to working precision.
    info = jnp.finfo(dtype)  # type: ignore[no-untyped-call]  # unannotated in jax 0.10
    lam_min = 100.0 * float(info.eps)
    tiny = info.tiny
    rho = 64.0 * float(info.eps)  # rounding noise of the projected SSE, relative to the SSE
    lin = linear & active
    has_lin = jnp.any(lin, axis=1)
    # All constants linear: the problem is linear least squares; stop at the first
    # refinement pass that gains nothing instead of waiting for `patience` stalls.
    patience = jnp.where(has_lin & ~jnp.any(active & ~lin, axis=1), 1, opts.patience)
    vproject = jax.vmap(project_linear, in_axes=(0, 0, 0, 0, None))
    valid = jnp.ones((n_lanes,), bool) if valid is None else valid
    normal, state = lanes_pass(c0, valid, state)

    class S(NamedTuple):
        c: Array
        normal: Normal
        proj: Projection
        lam: Array
        it: Array
        lane_it: Array
        stall: Array
        done: Array
        state: object

    def lane(c: Array, normal: Normal, proj: Projection, lam: Array, stall: Array,
             trial: Normal, tproj: Projection, delta: Array, solved: Array, projecting: Array,
             has_lin: Array, patience: Array, sse_floor: Array,
             ) -> tuple[Array, Normal, Projection, Array, Array, Array]:
        merit, tmerit = projected_sse(normal, proj), projected_sse(trial, tproj)
        same_rows = trial.nbad == normal.nbad
        scale = jnp.maximum(merit, tiny)
        gain = (merit - tmerit) / scale
        # Gauss-Newton model's predicted reduction: even a perfect step would gain this much
        # (of the projected loss: the linear re-solve at the current point is not a gain).
        predicted = (2.0 * jnp.dot(delta, normal.jtr) - jnp.dot(delta, normal.jtj @ delta)
                     - proj.gain) / scale
        # Judged at the best linear constants, a long nonlinear step can land in a far basin
        # with a slightly lower loss (sinusoid frequencies): with linear constants, a step must
        # also earn a share of what the model predicted (a trust-region gain-ratio test).
        earned = projecting | ~has_lin | (gain >= opts.project_ratio * predicted)
        # Lexicographic on (non-finite rows, projected SSE); within the projected SSE's rounding
        # noise a lower actual SSE also wins (it refines the linear constants). Without linear
        # constants this is exactly `better`.
        refine = (trial.sse < normal.sse) & (tmerit <= merit + rho * normal.sse)
        ok = jnp.isfinite(trial.sse) & ((trial.nbad < normal.nbad)
                                        | (same_rows & (((tmerit < merit) & earned) | refine)))
        tiny_step = jnp.linalg.norm(delta) <= opts.xtol * (jnp.linalg.norm(c) + opts.xtol)
        # A step rejected for a higher loss on the same rows is a stall once the damping is
        # high or the loss barely moved (at a float32 noise floor the model keeps promising
        # phantom gains); one rejected because it crossed into non-finite rows is not: LM raises
        # the damping and approaches the boundary instead; nor is a step that gained too little
        # of its prediction (a shorter one may earn it).
        flat_reject = (~ok) & (gain <= 0) & ((lam >= opts.reject_stall_lam)
                                             | (-gain < opts.reject_stall_gain))
        stalled = solved & ((same_rows & (flat_reject | (ok & (gain < opts.ftol))))
                            | (predicted < opts.ftol) | tiny_step)
        # A projection step (nonlinear constants fixed) is not judged as an LM step: it leaves
        # the damping alone and is a stall only if it failed.
        stalled = jnp.where(projecting, ~ok, stalled)
        new_normal = jax.tree_util.tree_map(lambda n, o: jnp.where(ok, n, o), trial, normal)
        new_proj = jax.tree_util.tree_map(lambda n, o: jnp.where(ok, n, o), tproj, proj)
        new_c = jnp.where(ok, c + delta, c)
        new_lam = jnp.where(ok, jnp.maximum(lam * opts.lam_down, lam_min), lam * opts.lam_up)
        new_lam = jnp.where(projecting, lam, new_lam)
        new_stall = jnp.where(stalled, stall + 1, jnp.where(projecting, stall, 0))
        done = ((new_stall >= patience) | (new_lam > opts.lam_max)
                | ((new_normal.sse <= sse_floor) & (new_normal.nbad == 0)))
        return new_c, new_normal, new_proj, new_lam.astype(dtype), new_stall, done

    def cond(s: S) -> Array:
        return jnp.any(~s.done) & (s.it < max_iters)

    def body(s: S) -> S:
        # Linear constants are not damped (beyond the regularising floor): LM works on the
        # nonlinear ones; a linear-only formula's first step is the exact solve.
        lam_vec = jnp.where(lin, jnp.asarray(lam_min, dtype), s.lam[:, None])
        delta, solved = jax.vmap(damped_step)(s.normal.jtj, s.normal.jtr, lam_vec, active)
        projecting = has_lin & (s.proj.gain > opts.project_gap ** 2 * s.proj.size)
        delta = jnp.where(projecting[:, None], s.proj.step, delta)
        solved = jnp.where(projecting, s.proj.finite, solved)
        trial, state = lanes_pass(s.c + delta, ~s.done, s.state)
        tproj = vproject(trial.jtj, trial.jtr, s.c + delta, lin, lam_min)
        c, normal, proj, lam, stall, done = jax.vmap(lane)(
            s.c, s.normal, s.proj, s.lam, s.stall, trial, tproj, delta, solved, projecting,
            has_lin, patience, sse_floor)
        # Stopped lanes keep their state (their trials, if computed at all, are discarded).
        def keep(new: Array, old: Array) -> Array:
            return jnp.where(s.done.reshape((-1,) + (1,) * (new.ndim - 1)), old, new)

        c = keep(c, s.c)
        normal = jax.tree_util.tree_map(keep, normal, s.normal)
        proj = jax.tree_util.tree_map(keep, proj, s.proj)
        lam = keep(lam, s.lam)
        stall = keep(stall, s.stall)
        if opts.prune_after > 0 and group > 1:
            # Judged on every lane's current point (a stopped lane's is where it stopped).
            merit = jax.vmap(projected_sse)(normal, proj).reshape(-1, group)
            nbad = normal.nbad.reshape(-1, group)
            fewest = jnp.min(nbad, axis=1, keepdims=True)
            best = jnp.min(jnp.where(nbad == fewest, merit, jnp.inf), axis=1, keepdims=True)
            behind = ((nbad > fewest) | (merit > (1.0 + opts.prune_gap) * best)).reshape(-1)
            done = done | ((s.it + 1 >= opts.prune_after) & behind)
        lane_it = jnp.where(s.done, s.lane_it, s.it + 1)
        return S(c, normal, proj, lam, s.it + 1, lane_it, stall, s.done | done, state)

    zeros = jnp.zeros((n_lanes,), jnp.int32)
    proj0 = vproject(normal.jtj, normal.jtr, c0, lin, lam_min)
    s0 = S(c0, normal, proj0, jnp.full((n_lanes,), opts.lam0, dtype), jnp.zeros((), jnp.int32),
           zeros, zeros, ~valid | ((normal.sse <= sse_floor) & (normal.nbad == 0)), state)
    out = lax.while_loop(cond, body, s0)
    return LMResult(out.c, out.normal.sse, out.normal.nbad, out.lane_it)
