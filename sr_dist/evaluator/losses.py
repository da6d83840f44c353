"""Fitting losses other than plain least squares, compiled into the bucket programs.

The loss is a *static* part of a bucket's key (:class:`LossSpec`), so choosing one compiles
each shape bucket once, as ``mse`` does; it never makes a compile per formula.

Levenberg-Marquardt needs residuals and a Gauss-Newton matrix. For a loss ``l(e)`` of the
error ``e = prediction - target`` (per row, times the row's weight ``w``) the passes here build
them by iteratively reweighted least squares (IRLS; Holland & Welsch 1977, "Robust regression
using iteratively reweighted least-squares", Commun. Stat. 6:813): with ``g = dl/de`` and the
IRLS weight ``omega = g / e``,

* objective ``F = sum w l(e)``;
* gradient part ``Jᵀr = -1/2 sum w g J`` (so ``dF/dc = -2 Jᵀr``, LM's convention);
* curvature part ``JᵀJ = 1/2 sum w omega J Jᵀ``.

For ``mse`` (``l = e²``) these are exactly the least-squares quantities. For Huber and log-cosh
``omega`` is non-increasing in ``|e|``, so the quadratic model LM steps on is a majoriser of the
loss (Huber's own argument for IRLS): an accepted step never raises the true loss. ``mae`` is
IRLS for least absolute deviations (Schlossmacher 1973, JASA 68:857) with ``|e|`` floored at a
small scale ``tau`` so the weights stay bounded. A user loss (``module:function``) is
differentiated by JAX: ``g`` by ``jax.grad``, and ``omega`` as ``g / e`` (or the second
derivative where ``|e| <= tau``), clipped at zero.

No Ray, Hydra or file access here: the numeric core. A user loss is imported only from a
trusted config path (:func:`resolve_loss`), never from a model's text.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

#: The built-in loss names (``evaluator.loss``); anything else must be ``module:function``.
BUILTIN_LOSSES: tuple[str, ...] = ("mse", "mae", "huber", "logcosh", "relative")
#: Losses whose quadratic model is exact, so variable projection stays on for them.
QUADRATIC_LOSSES: frozenset[str] = frozenset({"mse", "relative"})
#: The name a :class:`LossSpec` carries for a user loss.
USER = "user"


class LossError(ValueError):
    """A loss setting that cannot work; the message says how to fix it."""


class LossSpec(NamedTuple):
    """The static loss of a fit bucket (hashable: part of the compiled bucket's key).

    ``name`` is a built-in name or ``"user"``; ``delta`` is Huber's threshold; ``fn`` is the
    imported user function (hashable by identity) and ``path`` its config text; ``weighted``
    says whether rows carry sample weights.
    """

    name: str = "mse"
    delta: float = 1.0
    fn: Callable[..., Any] | None = None
    path: str = ""
    weighted: bool = False

    @property
    def plain(self) -> bool:
        """Unweighted ``mse``: the evaluator's original passes, bit for bit."""
        return self.name == "mse" and not self.weighted


def resolve_loss(loss: str, huber_delta: float = 1.0, weighted: bool = False) -> LossSpec:
    """``evaluator.loss`` as a :class:`LossSpec`: a built-in name, or ``module:function`` of an
    importable, trusted JAX function ``fn(y_pred, y_true) -> per-row losses``."""
    if not isinstance(loss, str) or not loss.strip():
        raise LossError(f"loss must be one of {', '.join(BUILTIN_LOSSES)} or 'module:function', "
                        f"got {loss!r}")
    loss = loss.strip()
    delta = float(huber_delta)
    if not (np.isfinite(delta) and delta > 0):
        raise LossError(f"huber_delta must be a positive number, got {huber_delta!r}")
    if loss in BUILTIN_LOSSES:
        return LossSpec(loss, delta, None, loss, bool(weighted))
    module, sep, attr = loss.partition(":")
    if not sep or not module or not attr:
        raise LossError(f"loss {loss!r} is not a built-in loss ({', '.join(BUILTIN_LOSSES)}) "
                        "nor a 'module:function' path such as 'mypkg.losses:quantile90'")
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix
        raise LossError(f"loss {loss!r}: cannot import module {module!r} ({type(exc).__name__}: "
                        f"{exc}); put it on PYTHONPATH or install its package") from None
    fn: Any = mod
    for part in attr.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise LossError(f"loss {loss!r}: module {module!r} has no attribute {attr!r}")
    if not callable(fn):
        raise LossError(f"loss {loss!r}: {attr!r} is not a function")
    check_user_loss(fn, loss)
    return LossSpec(USER, delta, fn, loss, bool(weighted))


def check_user_loss(fn: Callable[..., Any], path: str) -> None:
    """Call a user loss once on a few rows: it must take ``(y_pred, y_true)`` arrays and return
    one finite loss per row, differentiable by JAX."""
    import jax
    import jax.numpy as jnp

    pred = jnp.asarray([0.5, -1.0, 2.0, 0.0], jnp.float32)
    true = jnp.asarray([0.0, -0.5, 1.0, 0.25], jnp.float32)
    try:
        out = jnp.asarray(fn(pred, true))
        grad = jax.grad(lambda p: jnp.sum(fn(p, true)))(pred)
    except Exception as exc:  # noqa: BLE001 - report what the function did
        raise LossError(f"loss {path!r} failed on a test call fn(y_pred, y_true) with two "
                        f"float arrays of 4 rows: {type(exc).__name__}: {exc}; it must be a JAX "
                        "function of two arrays returning one loss per row") from None
    if out.shape != pred.shape:
        raise LossError(f"loss {path!r} returned shape {tuple(out.shape)} for 4 rows; it must "
                        "return one loss per row (elementwise, shape (4,)), not a scalar: "
                        "sr-dist sums and weights the rows itself")
    if not (bool(jnp.all(jnp.isfinite(out))) and bool(jnp.all(jnp.isfinite(grad)))):
        raise LossError(f"loss {path!r} gave non-finite values or gradients on ordinary inputs")


# --------------------------------------------------------------------------- traced parts
def _derivs(spec: LossSpec, pred: Any, y: Any, tau: Any) -> tuple[Any, Any, Any]:
    """Per-row (loss, dl/dpred, IRLS weight) for prediction ``pred`` and target ``y``."""
    import jax
    import jax.numpy as jnp

    e = pred - y
    a = jnp.abs(e)
    one = jnp.ones_like(e)
    if spec.name == "mse":
        return e * e, 2.0 * e, 2.0 * one
    if spec.name == "relative":
        inv = 1.0 / (y * y)
        return e * e * inv, 2.0 * e * inv, 2.0 * inv
    if spec.name == "mae":
        return a, jnp.sign(e), 1.0 / jnp.maximum(a, tau)
    if spec.name == "huber":
        d = jnp.asarray(spec.delta, e.dtype)
        inner = a <= d
        loss = jnp.where(inner, 0.5 * e * e, d * (a - 0.5 * d))
        g = jnp.where(inner, e, d * jnp.sign(e))
        om = jnp.where(inner, one, d / jnp.maximum(a, d))
        return loss, g, om
    if spec.name == "logcosh":
        # log(cosh(e)) without overflow: |e| + log1p(exp(-2|e|)) - log 2.
        loss = a + jnp.log1p(jnp.exp(-2.0 * a)) - jnp.log(2.0).astype(e.dtype)
        g = jnp.tanh(e)
        small = a < 1e-3
        om = jnp.where(small, 1.0 - e * e / 3.0, g / jnp.where(small, one, e))
        return loss, g, om
    fn = spec.fn
    assert fn is not None  # a user spec always carries its function

    def total(p: Any) -> Any:
        return jnp.sum(fn(p, y))

    loss = fn(pred, y)
    g, h = jax.jvp(jax.grad(total), (pred,), (one,))  # elementwise: h is the diagonal
    big = a > tau
    om = jnp.where(big, g / jnp.where(big, e, one), h)
    om = jnp.where(jnp.isfinite(om), jnp.maximum(om, 0.0), jnp.zeros_like(om))
    return loss, g, om


def elementwise(spec: LossSpec, pred: Any, y: Any, tau: Any) -> Any:
    """Per-row loss values (what ``train_loss``/``val_loss`` average)."""
    return _derivs(spec, pred, y, tau)[0]


def objective_pass(code: Any, n_instr: Any, root: Any, layout: Any, c: Any, regs: Any,
                   X: Any, y: Any, w: Any, spec: LossSpec, tau: Any) -> tuple[Any, Any]:
    """:func:`~sr_dist.evaluator.interpreter.normal_pass` for a general loss and sample weights
    ``w`` (N, C) (0 on padding rows): the IRLS quantities of the module docstring, with the
    same masking of non-finite rows."""
    import jax.numpy as jnp
    from jax import lax

    from sr_dist.evaluator.interpreter import Normal, run_duals

    k = layout.n_consts
    dtype = regs.dtype
    chunk_len = regs.shape[2]
    block = jnp.broadcast_to(c.astype(dtype)[:, None, None], (k, 1, chunk_len))
    regs = lax.dynamic_update_slice(regs, block, (layout.const_base, 0, 0))

    def chunk(j: Any, acc: tuple[Any, ...]) -> tuple[Any, ...]:
        regs, total, nbad, jtj, jtr = acc
        regs = lax.dynamic_update_slice(regs, X[j][:, None, :], (0, 0, 0))
        regs = run_duals(code, n_instr, regs)
        res = lax.dynamic_index_in_dim(regs, root, 0, keepdims=False)
        out, jac = res[0], res[1:]
        wj = w[j].astype(dtype)
        used = wj > 0
        finite = jnp.isfinite(out)
        safe = jnp.where(used & finite, out, y[j])
        loss, g, om = _derivs(spec, safe, y[j], tau)
        ok = used & finite & jnp.isfinite(loss) & jnp.isfinite(g) & jnp.isfinite(om)
        wt = jnp.where(ok, wj, jnp.zeros_like(wj))
        jac = jnp.where(ok[None, :] & jnp.isfinite(jac), jac, jnp.zeros_like(jac))
        total = total + jnp.sum(jnp.where(ok, wt * loss, jnp.zeros_like(loss)))
        nbad = nbad + jnp.sum(used & ~ok, dtype=jnp.int32)
        jtj = jtj + jnp.dot(jac * (0.5 * wt * jnp.where(ok, om, 0.0))[None, :], jac.T)
        jtr = jtr + jnp.dot(jac, -0.5 * wt * jnp.where(ok, g, 0.0))
        return regs, total, nbad, jtj, jtr

    init = (regs, jnp.zeros((), dtype), jnp.zeros((), jnp.int32),
            jnp.zeros((k, k), dtype), jnp.zeros((k,), dtype))
    regs, total, nbad, jtj, jtr = lax.fori_loop(0, X.shape[0], chunk, init)
    return Normal(total, nbad, jtj, jtr), regs


def objective_split_pass(code: Any, n_instr: Any, root: Any, layout: Any, c: Any, vals: Any,
                         X: Any, y: Any, split: Any, w: Any, n_splits: int, spec: LossSpec,
                         tau: Any) -> tuple[Any, Any, Any]:
    """Per split: weighted SSE (for the NMSE), weighted loss sum, and non-finite rows."""
    import jax.numpy as jnp
    from jax import lax

    from sr_dist.evaluator.interpreter import run_values, set_constants

    vals = set_constants(layout, vals, c) if layout.n_consts else vals
    dtype = vals.dtype
    ids = jnp.arange(1, n_splits + 1, dtype=jnp.int32)

    def chunk(j: Any, acc: tuple[Any, ...]) -> tuple[Any, ...]:
        vals, sse, lsum, nbad = acc
        vals = lax.dynamic_update_slice(vals, X[j], (0, 0))
        vals = run_values(code, n_instr, vals)
        out = lax.dynamic_index_in_dim(vals, root, 0, keepdims=False)
        member = split[j][None, :] == ids[:, None]
        finite = jnp.isfinite(out)
        wj = w[j].astype(dtype)
        safe = jnp.where(finite, out, y[j])
        r = jnp.where(finite, y[j] - out, jnp.zeros_like(out))
        loss = elementwise(spec, safe, y[j], tau)
        loss = jnp.where(finite, loss, jnp.zeros_like(loss))
        zero = jnp.zeros_like(r)[None, :]
        sse = sse + jnp.sum(jnp.where(member, (wj * r * r)[None, :], zero), axis=1)
        lsum = lsum + jnp.sum(jnp.where(member, (wj * loss)[None, :], zero), axis=1)
        nbad = nbad + jnp.sum(member & ~finite[None, :], axis=1, dtype=jnp.int32)
        return vals, sse, lsum, nbad

    zeros = jnp.zeros((n_splits,), dtype)
    _, sse, lsum, nbad = lax.fori_loop(
        0, X.shape[0], chunk, (vals, zeros, zeros, jnp.zeros((n_splits,), jnp.int32)))
    return sse, lsum, nbad


__all__ = [
    "BUILTIN_LOSSES",
    "QUADRATIC_LOSSES",
    "LossError",
    "LossSpec",
    "check_user_loss",
    "elementwise",
    "objective_pass",
    "objective_split_pass",
    "resolve_loss",
]
