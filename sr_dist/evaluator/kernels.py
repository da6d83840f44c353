"""Compiled bucket entry points and the process-wide cache of compiled executables.

A bucket is one static shape (register layout, instruction capacity, batch capacity, restart
count, LM settings, layout mode, dtype, row chunking). Every batch that fits a bucket reuses its
executable, so the number of XLA compiles is the number of distinct buckets ever used in the
process, never the number of formulas.

Layout modes:

- ``"map"`` (CPU): every (formula, restart) pair of the batch is one lane of a single
  Levenberg-Marquardt loop (:func:`~sr_dist.evaluator.lm.lm_lanes`): its per-iteration
  bookkeeping (solves, acceptance, damping) is vectorised over all lanes, and each pass is a
  ``fori_loop`` over the lanes still running, a real ``lax.switch`` on each unbatched opcode.
  Padding formulas and finished lanes cost nothing. (Fitting one formula at a time paid the
  bookkeeping, about 40 us an iteration on a CPU, once per formula: twice a short program's
  pass.)
- ``"vmap"`` (GPU): formulas vmapped too, so the switch becomes a select over all operators and
  everything is one wide data-parallel program; the batch capacity is always computed.
"""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from sr_dist.evaluator.bfgs import bfgs
from sr_dist.evaluator.interpreter import (
    Layout,
    Normal,
    init_duals,
    init_values,
    normal_pass,
    predict_pass,
    split_pass,
    write_literals,
)
from sr_dist.evaluator.lm import LMOptions, PassFn, levenberg_marquardt, lm_lanes
from sr_dist.evaluator.losses import LossSpec, objective_pass, objective_split_pass
from sr_dist.evaluator.traced import TracedStore

Array = jax.Array

#: Split ids used by the metrics pass (0 marks padding rows).
SPLIT_TRAIN, SPLIT_VAL, SPLIT_TEST = 1, 2, 3
N_SPLITS = 3


class FitKey(NamedTuple):
    """Static part of a fit bucket (hashable)."""

    layout: Layout
    n_instr: int
    capacity: int
    restarts: int
    lm: LMOptions
    polish_iters: int
    mode: str
    dtype: str
    #: ``"lm"`` (restarts + Levenberg-Marquardt) or ``"llmsr"`` (BFGS on the MSE, see bfgs.py).
    method: str = "lm"
    #: The fitting loss and whether rows are weighted (losses.py); unweighted ``mse`` runs the
    #: original least-squares passes.
    loss: LossSpec = LossSpec()
    #: A local search: keep the start (restart 0's initial constants) where it is better on
    #: the training rows than where the search ended (a search on a subset of the rows,
    #: ``local_subsample``, or a float32 varpro step on a degenerate fit can end worse), so a
    #: local search never ends worse than its start.
    keep_start: bool = False


class PredictKey(NamedTuple):
    layout: Layout
    n_instr: int
    capacity: int
    mode: str
    dtype: str


class FitOutput(NamedTuple):
    consts: Array  # (B, K) best constants
    fit_sse: Array  # (B,) masked SSE on the fitting rows at the best constants
    iters: Array  # (B,) LM passes (all restarts in lockstep, plus polish)
    split_sse: Array  # (B, 3) SSE on finite rows per split
    split_bad: Array  # (B, 3) non-finite rows per split
    split_loss: Array  # (B, 3) weighted loss sum on finite rows per split (mse: the SSE)


def _pick_best(sse: Array, nbad: Array) -> Array:
    score = jnp.where(jnp.isfinite(sse), sse, jnp.inf)
    fewest = jnp.min(nbad)
    return jnp.argmin(jnp.where(nbad == fewest, score, jnp.inf))


def _fit_bucket(
    key: FitKey, code: Array, meta: Array, lits: Array, init: Array, n_formulas: Array,
    fit_data: tuple[Array, Array, Array], polish_data: tuple[Array, Array, Array] | None,
    all_data: tuple[Array, ...], floors: Array,
) -> FitOutput:
    """Fit one batch. ``all_data`` is (X, y, split ids), plus the sample weights when the
    loss is not plain mse; ``floors`` holds the SSE rounding floors of the fit and polish
    rows, plus the mae/user-loss scale ``tau`` when the loss is not plain mse."""
    layout = key.layout
    dtype = jnp.dtype(key.dtype)
    k = layout.n_consts
    chunk = fit_data[0].shape[2]

    def fit_one(code_i: Array, meta_i: Array, lits_i: Array, init_i: Array) -> FitOutput:
        n_instr, root, k_i = meta_i[0], meta_i[1], meta_i[2]
        # The metrics pass runs on all rows, whose chunk may differ from the fitting rows'
        # (a local search fits on a subset).
        vals0 = init_values(layout, lits_i, all_data[0].shape[2], dtype)
        if k == 0:
            c = jnp.zeros((0,), dtype)
            fit_sse = jnp.zeros((), dtype)
            iters = jnp.zeros((), jnp.int32)
        else:
            regs0 = init_duals(layout, lits_i, chunk, dtype)
            active = jnp.arange(k) < k_i
            # Variable projection: bit j of meta column 3 marks constant j as linear (data, so
            # formulas with different linear/nonlinear splits share this executable).
            linear = ((meta_i[3] >> jnp.arange(k, dtype=meta_i.dtype)) & 1) != 0

            def make_pass(data: tuple[Array, Array, Array]) -> PassFn:
                X, y, w = data

                if key.loss.plain:
                    def pass_fn(c: Array, regs: Array) -> tuple[Normal, Array]:
                        return normal_pass(code_i, n_instr, root, layout, c, regs, X, y, w)
                else:
                    def pass_fn(c: Array, regs: Array) -> tuple[Normal, Array]:
                        normal: Normal
                        normal, regs = objective_pass(code_i, n_instr, root, layout, c, regs,
                                                      X, y, w, key.loss, floors[2])
                        return normal, regs

                return pass_fn

            if key.method == "llmsr":
                # scipy's BFGS default: at most 200 iterations per constant.
                res = bfgs(make_pass(fit_data), init_i, active, regs0, jnp.sum(fit_data[2]),
                           200 * k)
            else:
                res = levenberg_marquardt(make_pass(fit_data), init_i, active, regs0, key.lm,
                                          key.lm.max_iters, floors[0], linear)
            best = _pick_best(res.sse, res.nbad)
            c = res.c[best]
            fit_sse = res.sse[best]
            iters = jnp.max(res.iters)
            if polish_data is not None and key.polish_iters > 0 and key.method == "lm":
                regs_p = (regs0 if polish_data[0].shape[2] == chunk
                          else init_duals(layout, lits_i, polish_data[0].shape[2], dtype))
                pol = levenberg_marquardt(make_pass(polish_data), c[None, :], active, regs_p,
                                          key.lm, key.polish_iters, floors[1], linear)
                c, fit_sse, iters = pol.c[0], pol.sse[0], iters + pol.iters[0] + 1
        sse, bad, lsum = _formula_metrics(key, code_i, meta_i, vals0, c, all_data, floors)
        return FitOutput(c, fit_sse, iters, sse, bad, lsum)

    capacity = key.capacity
    if key.mode == "vmap":
        return jax.vmap(fit_one)(code, meta, lits, init)
    if key.method == "lm" and k > 0:
        return _fit_lanes(key, code, meta, lits, init, n_formulas, fit_data, polish_data,
                          all_data, floors)

    out0 = FitOutput(
        jnp.zeros((capacity, k), dtype), jnp.zeros((capacity,), dtype),
        jnp.zeros((capacity,), jnp.int32), jnp.zeros((capacity, N_SPLITS), dtype),
        jnp.zeros((capacity, N_SPLITS), jnp.int32), jnp.zeros((capacity, N_SPLITS), dtype))

    def loop(i: Array, out: FitOutput) -> FitOutput:
        res = fit_one(code[i], meta[i], lits[i], init[i])
        return FitOutput(*(lax.dynamic_update_index_in_dim(o, r, i, 0) for o, r in zip(out, res)))

    fitted: FitOutput = lax.fori_loop(0, n_formulas, loop, out0)
    return fitted


def _lanes_pass(key: FitKey, code: Array, meta: Array, lits: Array, restarts: int,
                data: tuple[Array, ...], tau: Array) -> Any:
    """A :data:`~sr_dist.evaluator.lm.LanesPassFn` over the lanes (formula, restart) of a
    batch: one pass per running lane, in turn, through one shared register buffer (each
    lane writes its constants, literals and rows before it runs)."""
    layout = key.layout
    k = layout.n_consts
    X, y, w = data[0], data[1], data[2]

    def lanes_pass(c: Array, todo: Array, regs: Array) -> tuple[Normal, Array]:
        n_lanes = c.shape[0]
        order = jnp.nonzero(todo, size=n_lanes, fill_value=0)[0]

        def one(i: Array, acc: tuple[Array, Normal]) -> tuple[Array, Normal]:
            regs, out = acc
            lane = order[i]
            f = lane // restarts
            regs = write_literals(layout, regs, lits[f])
            normal: Normal
            if key.loss.plain:
                normal, regs = normal_pass(code[f], meta[f, 0], meta[f, 1], layout, c[lane],
                                           regs, X, y, w)
            else:
                normal, regs = objective_pass(code[f], meta[f, 0], meta[f, 1], layout, c[lane],
                                              regs, X, y, w, key.loss, tau)
            out = Normal(*(lax.dynamic_update_index_in_dim(o, v, lane, 0)
                           for o, v in zip(out, normal)))
            return regs, out

        dtype = c.dtype
        out0 = Normal(jnp.zeros((n_lanes,), dtype), jnp.zeros((n_lanes,), jnp.int32),
                      jnp.zeros((n_lanes, k, k), dtype), jnp.zeros((n_lanes, k), dtype))
        regs, out = lax.fori_loop(0, jnp.sum(todo, dtype=jnp.int32), one, (regs, out0))
        return out, regs

    return lanes_pass


def _fit_lanes(
    key: FitKey, code: Array, meta: Array, lits: Array, init: Array, n_formulas: Array,
    fit_data: tuple[Array, Array, Array], polish_data: tuple[Array, Array, Array] | None,
    all_data: tuple[Array, ...], floors: Array,
) -> FitOutput:
    """``_fit_bucket`` on the CPU with LM: the whole batch's lanes in one LM loop (module
    docstring), then the polish (one lane a formula) and the per-split metrics pass."""
    layout = key.layout
    dtype = jnp.dtype(key.dtype)
    k = layout.n_consts
    capacity, restarts = key.capacity, key.restarts
    n_lanes = capacity * restarts
    tau = floors[2] if not key.loss.plain else floors[0]
    formulas = jnp.arange(capacity)
    valid = formulas < n_formulas
    active = jnp.arange(k)[None, :] < meta[:, 2:3]
    # Variable projection: bit j of meta column 3 marks constant j as linear.
    linear = ((meta[:, 3:4] >> jnp.arange(k, dtype=meta.dtype)[None, :]) & 1) != 0

    def lanes(a: Array) -> Array:
        return jnp.repeat(a, restarts, axis=0)

    def buffer(data: tuple[Array, ...]) -> Array:
        return init_duals(layout, jnp.zeros((layout.n_lits,), dtype), data[0].shape[2], dtype)

    res = lm_lanes(_lanes_pass(key, code, meta, lits, restarts, fit_data, tau),
                   init.reshape(n_lanes, k), lanes(active), lanes(linear), buffer(fit_data),
                   key.lm, key.lm.max_iters, jnp.broadcast_to(floors[0], (n_lanes,)), restarts,
                   lanes(valid))
    best = jax.vmap(_pick_best)(res.sse.reshape(capacity, restarts),
                                res.nbad.reshape(capacity, restarts))
    c = res.c.reshape(capacity, restarts, k)[formulas, best]
    fit_sse = res.sse.reshape(capacity, restarts)[formulas, best]
    iters = jnp.max(res.iters.reshape(capacity, restarts), axis=1)
    if polish_data is not None and key.polish_iters > 0:
        pol = lm_lanes(_lanes_pass(key, code, meta, lits, 1, polish_data, tau), c, active,
                       linear, buffer(polish_data), key.lm, key.polish_iters,
                       jnp.broadcast_to(floors[1], (capacity,)), 1, valid)
        c, fit_sse, iters = pol.c, pol.sse, iters + pol.iters + 1

    split_sse, split_bad, split_loss = _split_metrics(key, code, meta, lits, c, n_formulas,
                                                      all_data, floors)
    if key.keep_start:
        start = init[:, 0, :]
        s_sse, s_bad, s_loss = _split_metrics(key, code, meta, lits, start, n_formulas,
                                              all_data, floors)
        # Lexicographic on the training split: fewer non-finite rows, then a lower loss.
        keep = ((s_bad[:, 0] < split_bad[:, 0])
                | ((s_bad[:, 0] == split_bad[:, 0]) & (s_loss[:, 0] < split_loss[:, 0])))
        c = jnp.where(keep[:, None], start, c)
        split_sse = jnp.where(keep[:, None], s_sse, split_sse)
        split_bad = jnp.where(keep[:, None], s_bad, split_bad)
        split_loss = jnp.where(keep[:, None], s_loss, split_loss)
    return FitOutput(c, fit_sse, iters, split_sse, split_bad, split_loss)


def _formula_metrics(key: FitKey, code_i: Array, meta_i: Array, vals0: Array, c: Array,
                     all_data: tuple[Array, ...], floors: Array) -> tuple[Array, Array, Array]:
    """One formula's per-split SSE, non-finite rows and loss sum at constants ``c``."""
    if key.loss.plain:
        X, y, split = all_data
        sse, bad = split_pass(code_i, meta_i[0], meta_i[1], key.layout, c, vals0, X, y, split,
                              N_SPLITS)
        return sse, bad, sse
    X, y, split, wa = all_data
    sse, lsum, bad = objective_split_pass(code_i, meta_i[0], meta_i[1], key.layout, c, vals0,
                                          X, y, split, wa, N_SPLITS, key.loss, floors[2])
    return sse, bad, lsum


def _split_metrics(key: FitKey, code: Array, meta: Array, lits: Array, c: Array,
                   n_formulas: Array, all_data: tuple[Array, ...], floors: Array,
                   ) -> tuple[Array, Array, Array]:
    """Per formula and split: SSE, non-finite rows and loss sum at constants ``c`` (B, K).
    (A function of its arguments only: lax caches a loop body's trace by the function.)"""
    layout = key.layout
    dtype = jnp.dtype(key.dtype)
    capacity = key.capacity
    out0 = (jnp.zeros((capacity, N_SPLITS), dtype), jnp.zeros((capacity, N_SPLITS), jnp.int32),
            jnp.zeros((capacity, N_SPLITS), dtype))

    def metrics(i: Array, out: tuple[Array, Array, Array]) -> tuple[Array, Array, Array]:
        vals0 = init_values(layout, lits[i], all_data[0].shape[2], dtype)
        sse, bad, lsum = _formula_metrics(key, code[i], meta[i], vals0, c[i], all_data, floors)
        return tuple(lax.dynamic_update_index_in_dim(o, v, i, 0)
                     for o, v in zip(out, (sse, bad, lsum)))

    result: tuple[Array, Array, Array] = lax.fori_loop(0, n_formulas, metrics, out0)
    return result


def _predict_bucket(
    key: PredictKey, code: Array, meta: Array, lits: Array, consts: Array, n_formulas: Array,
    X: Array,
) -> Array:
    layout = key.layout
    dtype = jnp.dtype(key.dtype)
    chunk = X.shape[2]

    def one(code_i: Array, meta_i: Array, lits_i: Array, c_i: Array) -> Array:
        vals0 = init_values(layout, lits_i, chunk, dtype)
        return predict_pass(code_i, meta_i[0], meta_i[1], layout, c_i, vals0, X)

    if key.mode == "vmap":
        mapped: Array = jax.vmap(one)(code, meta, lits, consts)
        return mapped
    out0 = jnp.zeros((key.capacity, X.shape[0], chunk), dtype)

    def loop(i: Array, out: Array) -> Array:
        # lax's jit-wrapped helpers and loops are typed as returning Any: name the type here.
        updated: Array = lax.dynamic_update_index_in_dim(
            out, one(code[i], meta[i], lits[i], consts[i]), i, 0)
        return updated

    looped: Array = lax.fori_loop(0, n_formulas, loop, out0)
    return looped


_FIT_JIT = jax.jit(_fit_bucket, static_argnums=0)
_PREDICT_JIT = jax.jit(_predict_bucket, static_argnums=0)


def _signature(args: tuple[Any, ...], placed: bool = True) -> tuple[Any, ...]:
    """The arguments' tree, shapes, dtypes and (``placed``) devices: an executable runs on the
    device it was compiled for. A traced program is the same for every device, so the store
    keys it without them (``placed=False``): a second device compiles, but does not trace."""
    leaves, treedef = jax.tree_util.tree_flatten(args)
    return (treedef,) + tuple(
        (tuple(x.shape), str(x.dtype), str(getattr(x, "sharding", "")) if placed else "")
        for x in leaves)


class CompileCache:
    """Process-wide executables per (bucket key, argument shapes); thread-safe.

    ``get`` returns the executable and the seconds spent compiling it now (0.0 on a hit).
    With a :class:`~sr_dist.evaluator.traced.TracedStore` (``use_store``; the persistent
    compilation cache sets one) a bucket another process traced is loaded, not traced again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exes: dict[Any, Any] = {}
        self._store: TracedStore | None = None

    def use_store(self, store: TracedStore | None) -> None:
        with self._lock:
            self._store = store

    def _lower(self, kind: str, key: NamedTuple, args: tuple[Any, ...]) -> Any:
        fn = _FIT_JIT if kind == "fit" else _PREDICT_JIT
        loss = getattr(key, "loss", None)
        if self._store is None or (loss is not None and loss.fn is not None):
            return fn.lower(key, *args)  # a user's loss function is not part of any stored key
        raw = _fit_bucket if kind == "fit" else _predict_bucket
        portable = (kind, key, _signature(args, placed=False))
        return self._store.lower(raw, fn, key, args, portable,
                                 FitOutput if kind == "fit" else None)

    def get(self, kind: str, key: NamedTuple, args: tuple[Any, ...]) -> tuple[Any, float]:
        sig = (kind, key, _signature(args))
        with self._lock:
            exe = self._exes.get(sig)
        if exe is not None:
            return exe, 0.0
        # Compiled outside the lock: a compile for another device in the background must not
        # hold up this thread's lookups (two threads compiling one signature keep the first).
        t0 = time.perf_counter()
        exe = self._lower(kind, key, args).compile()
        elapsed = time.perf_counter() - t0
        with self._lock:
            return self._exes.setdefault(sig, exe), elapsed

    def __len__(self) -> int:
        with self._lock:
            return len(self._exes)


COMPILED = CompileCache()
