"""A reference evaluator: a formula on the rows of a matrix, in float64 numpy."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .core import Formula, parse_formula
from .nodes import Node
from .tree import fold_tree, iter_nodes

__all__ = ["evaluate_numpy"]

_NUMPY_UNARY: Mapping[str, Callable[[np.ndarray], np.ndarray]] = {
    "neg": np.negative, "sin": np.sin, "cos": np.cos, "tan": np.tan, "exp": np.exp,
    "log": np.log, "sqrt": np.sqrt, "abs": np.abs, "tanh": np.tanh, "sinh": np.sinh,
    "cosh": np.cosh, "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
}
_NUMPY_BINARY: Mapping[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "pow": np.power,
}


def evaluate_numpy(
    formula_or_tree: Formula | Node | str,
    X: np.ndarray,
    feature_names: Sequence[str],
    constants: Mapping[str, float] | None = None,
) -> np.ndarray:
    """Evaluate a formula on the rows of ``X`` (n x d, columns named by ``feature_names``).

    A reference evaluator in float64 with numpy semantics (nan/inf where numpy produces them,
    no warnings). ``constants`` maps constant names in the tree to values; for a
    ``canonical_tree`` the names are ``c0, c1, ...``. Returns an array of shape (n,).
    """
    names = tuple(feature_names)
    if isinstance(formula_or_tree, str):
        tree = parse_formula(formula_or_tree, names).tree
    elif isinstance(formula_or_tree, Formula):
        tree = formula_or_tree.tree
    else:
        tree = formula_or_tree
    data = np.asarray(X, dtype=np.float64)
    if data.ndim != 2 or data.shape[1] != len(names):
        raise ValueError(
            f"X must be 2-D with {len(names)} columns (one per feature name), "
            f"got shape {data.shape}"
        )
    column = {name: i for i, name in enumerate(names)}
    values = dict(constants or {})
    missing = sorted({
        str(n.name) for n in iter_nodes(tree) if n.op == "const" and n.name not in values
    })
    if missing:
        raise ValueError(f"no value given for constants: {', '.join(missing)}")
    unknown = sorted({
        str(n.name) for n in iter_nodes(tree) if n.op == "var" and n.name not in column
    })
    if unknown:
        raise ValueError(f"variables not among the feature names: {', '.join(unknown)}")
    rows = data.shape[0]

    def step(node: Node, kids: tuple[Any, ...]) -> Any:
        op = node.op
        if op == "num":
            return np.float64(node.value)
        if op == "var":
            return data[:, column[str(node.name)]]
        if op == "const":
            return np.float64(values[str(node.name)])
        if op in _NUMPY_BINARY:
            return _NUMPY_BINARY[op](kids[0], kids[1])
        return _NUMPY_UNARY[op](kids[0])

    with np.errstate(all="ignore"):
        result = fold_tree(tree, step)
    return np.array(np.broadcast_to(np.asarray(result, dtype=np.float64), (rows,)))
