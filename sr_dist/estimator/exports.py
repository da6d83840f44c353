"""A fitted formula as code: numpy, JAX and torch callables, sympy and LaTeX, built from its AST.

Every export walks the formula's tree (never its text through ``eval``) and lowers each node to
the backend's own function, so the three numeric exports cannot disagree on what a formula
means. Free constants, and the literals that are not integers (``2.5`` in a simplified form),
become the export's parameters, in order of first appearance, as PySR's exports hand them over:
the JAX callable is ``f(X, parameters)`` and the torch module holds them as ``nn.Parameter``.

:func:`check_exports` compares every export with the numeric core's reference evaluator
(:func:`sr_dist.formula.evaluate_numpy`) on the training rows, so a formula whose export is
wrong fails at fit time, with the entry named, never later in someone's notebook.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sr_dist.formula import Node, evaluate_numpy, fold_tree, parse_formula

__all__ = [
    "ExportMismatch",
    "Form",
    "check_exports",
    "form_of",
    "jax_export",
    "latex_export",
    "numpy_export",
    "sympy_export",
    "torch_export",
]

#: Relative tolerance of an export against the reference, by the export's float type: a few
#: hundred ulps of float64; float32 (JAX's default without x64) carries ~7 digits.
TOLERANCE = {np.dtype(np.float64): 1e-9, np.dtype(np.float32): 2e-4}
#: Rows of the training split the sympy export is checked on (``lambdify`` is exact but slow
#: to build per formula, not per row; a few hundred rows say as much as all of them).
SYMPY_CHECK_ROWS = 256


class ExportMismatch(ValueError):
    """An export computes other numbers than the reference evaluator for the same formula."""


@dataclass(frozen=True)
class Form:
    """One formula ready to export: its expression (constants by name), their values, and the
    variables ``X``'s columns are."""

    expression: str
    constants: Mapping[str, float]
    variables: tuple[str, ...]

    def tree(self) -> Node:
        return parse_formula(self.expression, self.variables).tree

    def reference(self, X: np.ndarray) -> np.ndarray:
        """The numeric core's float64 reference values on ``X``."""
        return evaluate_numpy(self.expression, X, self.variables, dict(self.constants))


def form_of(expression: str, constants: Mapping[str, float] | None, variables: Sequence[str]) -> Form:
    """A :class:`Form`; ``constants`` maps each free constant of ``expression`` to its value."""
    return Form(str(expression), dict(constants or {}), tuple(variables))


# --- lowering ----------------------------------------------------------------------------------

_UNARY = ("neg", "sin", "cos", "tan", "exp", "log", "sqrt", "abs", "tanh", "sinh", "cosh",
          "arcsin", "arccos", "arctan")
_BINARY = ("add", "sub", "mul", "div", "pow")


def _is_parameter(node: Node) -> bool:
    """Literals that are fitted numbers (not integers like an exponent ``2``, not ``pi``/``e``)."""
    return node.op == "num" and node.name is None and node.value is not None \
        and not float(node.value).is_integer()


def _parameters(form: Form) -> tuple[Node, tuple[str, ...], tuple[float, ...]]:
    """The tree, the parameter of each ``const`` node or fitted literal, and their values."""
    tree = form.tree()
    names: list[str] = []
    values: list[float] = []

    def visit(node: Node, kids: tuple[None, ...]) -> None:
        if node.op == "const" and str(node.name) not in names:
            names.append(str(node.name))
            values.append(float(form.constants[str(node.name)]))

    fold_tree(tree, visit)
    return tree, tuple(names), tuple(values)


Lowered = Callable[[Any, Any], Any]


def _lower(form: Form, ops: Mapping[str, Callable[..., Any]],
           column: Callable[[Any, int], Any], output: Callable[[Any, Any], Any],
           ) -> tuple[Lowered, tuple[float, ...]]:
    """``f(X, parameters)`` built from the backend's ``ops`` (one per AST op), how to take
    column ``j`` of ``X``, and how to shape the result to one value per row."""
    tree, names, values = _parameters(form)
    index = {name: i for i, name in enumerate(names)}
    literal_values = list(values)
    columns = {name: j for j, name in enumerate(form.variables)}

    def step(node: Node, kids: tuple[Lowered, ...]) -> Lowered:
        op = node.op
        if op == "const":
            i = index[str(node.name)]
            return lambda X, P: P[i]
        if op == "num":
            assert node.value is not None
            if _is_parameter(node):
                i = len(literal_values)
                literal_values.append(float(node.value))
                return lambda X, P: P[i]
            number = float(node.value)
            return lambda X, P: number
        if op == "var":
            j = columns[str(node.name)]
            return lambda X, P: column(X, j)
        fn = ops[op]
        if op in _BINARY:
            left, right = kids
            return lambda X, P: fn(left(X, P), right(X, P))
        (arg,) = kids
        return lambda X, P: fn(arg(X, P))

    body = fold_tree(tree, step)
    return (lambda X, P: output(body(X, P), X)), tuple(literal_values)


def _numpy_ops() -> dict[str, Callable[..., Any]]:
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
            "pow": np.power, "neg": np.negative, "sin": np.sin, "cos": np.cos, "tan": np.tan,
            "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs, "tanh": np.tanh,
            "sinh": np.sinh, "cosh": np.cosh, "arcsin": np.arcsin, "arccos": np.arccos,
            "arctan": np.arctan}


def numpy_export(form: Form) -> Callable[[Any], np.ndarray]:
    """``f(X) -> y`` in float64 numpy, the parameters written in."""
    fn, params = _lower(form, _numpy_ops(), lambda X, j: X[:, j],
                        lambda out, X: np.array(np.broadcast_to(np.asarray(out, np.float64),
                                                                (X.shape[0],))))
    values = np.asarray(params, dtype=np.float64)
    width = len(form.variables)

    def predict(X: Any) -> np.ndarray:
        data = np.asarray(X, dtype=np.float64)
        if data.ndim != 2 or data.shape[1] != width:
            raise ValueError(f"X must be 2-D with {width} columns ({', '.join(form.variables)}), "
                             f"got shape {data.shape}")
        with np.errstate(all="ignore"):
            return np.asarray(fn(data, values), dtype=np.float64)

    return predict


def jax_export(form: Form) -> dict[str, Any]:
    """PySR's form: ``{"callable": jitted f(X, parameters), "parameters": jnp array}``."""
    import jax
    import jax.numpy as jnp

    ops: dict[str, Callable[..., Any]] = {"add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "div": jnp.divide,
           "pow": jnp.power, "neg": jnp.negative, "sin": jnp.sin, "cos": jnp.cos,
           "tan": jnp.tan, "exp": jnp.exp, "log": jnp.log, "sqrt": jnp.sqrt, "abs": jnp.abs,
           "tanh": jnp.tanh, "sinh": jnp.sinh, "cosh": jnp.cosh, "arcsin": jnp.arcsin,
           "arccos": jnp.arccos, "arctan": jnp.arctan}
    fn, params = _lower(form, ops, lambda X, j: X[:, j],
                        lambda out, X: jnp.broadcast_to(jnp.asarray(out, X.dtype), (X.shape[0],)))
    return {"callable": jax.jit(fn), "parameters": jnp.asarray(params)}


def torch_export(form: Form) -> Any:
    """A ``torch.nn.Module`` whose ``forward(X)`` is the formula; its constants are one
    ``nn.Parameter`` vector (float64), so the module can be trained further."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is optional
        raise ImportError("the torch export needs PyTorch: pip install torch") from exc
    ops: dict[str, Callable[..., Any]] = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
           "pow": torch.pow, "neg": torch.neg, "sin": torch.sin, "cos": torch.cos,
           "tan": torch.tan, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
           "abs": torch.abs, "tanh": torch.tanh, "sinh": torch.sinh, "cosh": torch.cosh,
           "arcsin": torch.asin, "arccos": torch.acos, "arctan": torch.atan}

    def lift(f: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            return f(*(a if isinstance(a, torch.Tensor) else torch.tensor(a, dtype=torch.float64)
                       for a in args))
        return call

    ops = {k: lift(v) for k, v in ops.items()}
    fn, params = _lower(form, ops, lambda X, j: X[:, j],
                        lambda out, X: torch.zeros(X.shape[0], dtype=X.dtype) + out)
    return _torch_module(torch)(fn, params, form)


_TORCH_MODULE: Any = None


def _torch_module(torch: Any) -> Any:
    """The module class, made once (torch is imported only when a torch export is asked for)."""
    global _TORCH_MODULE
    if _TORCH_MODULE is None:
        class SymbolicModule(torch.nn.Module):  # type: ignore[misc]
            """One formula as a torch module; ``parameters_`` are its fitted constants."""

            def __init__(self, fn: Lowered, params: Sequence[float], form: Form) -> None:
                super().__init__()
                self._fn = fn
                self.expression = form.expression
                self.variables = form.variables
                self.parameters_ = torch.nn.Parameter(torch.tensor(list(params), dtype=torch.float64))

            def forward(self, X: Any) -> Any:
                return self._fn(X, self.parameters_.to(X.dtype))

            def extra_repr(self) -> str:
                return f"expression={self.expression!r}"

        _TORCH_MODULE = SymbolicModule
    return _TORCH_MODULE


def sympy_export(form: Form) -> Any:
    """The sympy expression with the constants' values written in (real symbols)."""
    import sympy

    expr = parse_formula(form.expression, form.variables).to_sympy()
    values = {sympy.Symbol(name, real=True): sympy.Float(repr(float(value)))
              for name, value in form.constants.items()}
    return expr.xreplace(values) if values else expr


def latex_export(form: Form) -> str:
    import sympy

    return str(sympy.latex(sympy_export(form)))


# --- the fit-time check ------------------------------------------------------------------------

def _mismatch(got: np.ndarray, want: np.ndarray, rtol: float) -> str | None:
    """Why ``got`` is not ``want`` to ``rtol`` (relative to each value and to the values' RMS
    scale), or ``None``; non-finite values must be non-finite in both."""
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    if got.shape != want.shape:
        return f"gave shape {got.shape} for {want.shape[0]} rows"
    finite_want, finite_got = np.isfinite(want), np.isfinite(got)
    if not np.array_equal(finite_want, finite_got):
        rows = int(np.sum(finite_want != finite_got))
        return f"is finite where the reference is not (or the reverse) on {rows} row(s)"
    if not finite_want.any():
        return None
    w, g = want[finite_want], got[finite_want]
    scale = float(np.sqrt(np.mean(w * w))) or 1.0
    error = np.abs(g - w)
    bad = error > rtol * (np.abs(w) + scale)
    if bad.any():
        return (f"differs on {int(bad.sum())} of {w.size} rows (largest difference "
                f"{float(error.max()):.3g}, values of scale {scale:.3g}, tolerance {rtol:g})")
    return None


def _jax_float64() -> Any:
    """A context in which JAX computes in float64 (``jax.enable_x64`` from JAX 0.5 on; the
    ``jax.experimental`` spelling before)."""
    import jax

    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64  # type: ignore[attr-defined]  # JAX < 0.5

    return enable_x64()


def check_exports(form: Form, X: np.ndarray, label: str, *, torch_ok: bool | None = None) -> None:
    """Every numeric export of ``form`` (numpy, JAX, torch when installed, sympy) against the
    reference evaluator on ``X``; :class:`ExportMismatch` naming ``label`` and the export."""
    try:
        want = form.reference(X)
    except Exception as exc:  # noqa: BLE001 - a form the reference cannot evaluate is a finding
        raise ExportMismatch(f"{label}: the reference evaluator cannot evaluate "
                             f"{form.expression!r}: {type(exc).__name__}: {exc}") from exc
    problems: list[str] = []

    def compare(name: str, compute: Callable[[], Any], dtype: np.dtype[Any]) -> None:
        try:
            got = np.asarray(compute())
        except Exception as exc:  # noqa: BLE001 - any failure of an export is a finding
            problems.append(f"the {name} export failed: {type(exc).__name__}: {exc}")
            return
        why = _mismatch(got, want, TOLERANCE.get(np.dtype(got.dtype), TOLERANCE[np.dtype(dtype)]))
        if why:
            problems.append(f"the {name} export {why}")

    compare("numpy", lambda: numpy_export(form)(X), np.dtype(np.float64))

    def run_jax() -> Any:
        import jax.numpy as jnp

        # In float64: JAX's default float32 cannot hold SI-unit data (1e-20 underflows,
        # exp(90) overflows, 1e4 + x cancels), and the check is of the export, not of float32.
        with _jax_float64():
            exported = jax_export(form)
            return exported["callable"](jnp.asarray(X), exported["parameters"])

    compare("jax", run_jax, np.dtype(np.float64))
    if torch_ok is None:
        torch_ok = torch_available()
    if torch_ok:
        def run_torch() -> Any:
            import torch

            with torch.no_grad():
                return torch_export(form)(torch.as_tensor(X, dtype=torch.float64)).numpy()

        compare("torch", run_torch, np.dtype(np.float64))
    rows = X[: min(SYMPY_CHECK_ROWS, X.shape[0])]
    sub_want = want[: rows.shape[0]]

    def run_sympy() -> Any:
        import sympy

        expr = sympy_export(form)
        symbols = [sympy.Symbol(v, real=True) for v in form.variables]
        fn = sympy.lambdify(symbols, expr, modules="numpy")
        with np.errstate(all="ignore"):
            out = fn(*(rows[:, j] for j in range(rows.shape[1])))
        return np.broadcast_to(np.asarray(out, dtype=np.float64), (rows.shape[0],))

    try:
        got = run_sympy()
        why = _mismatch(got, sub_want, TOLERANCE[np.dtype(np.float64)] * 1e3)
        if why:
            problems.append(f"the sympy export {why}")
    except Exception as exc:  # noqa: BLE001
        problems.append(f"the sympy export failed: {type(exc).__name__}: {exc}")
    try:
        if not latex_export(form):
            problems.append("the latex export is empty")
    except Exception as exc:  # noqa: BLE001
        problems.append(f"the latex export failed: {type(exc).__name__}: {exc}")
    if problems:
        raise ExportMismatch(f"{label} ({form.expression!r}, constants "
                             f"{dict(form.constants)}): " + "; ".join(problems) +
                             ". This is a bug in sr-dist's exports: please report the formula.")


def torch_available() -> bool:
    """Whether PyTorch imports here (the torch export is optional)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True

