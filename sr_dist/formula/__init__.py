"""Restricted formula language: parse model-written formulas safely, canonicalise, evaluate.

Formulas arrive as untrusted text from language models. This package never hands that text to
``eval``, ``exec``, Python's ``ast`` or ``sympify``: a hand-written lexer and a depth-bounded
recursive-descent parser build a small AST (:class:`Node`), and everything else (canonical key,
sympy form, LaTeX, numpy evaluation) walks that AST iteratively.

``sr_dist.formula`` is the public surface; the modules are split by job and may change:

- :mod:`.nodes`: the AST, its op tables, the language's names and limits;
  :mod:`.errors`: :class:`FormulaError`; :mod:`.tree`: folds and walks without recursion limits.
- :mod:`.lexer` and :mod:`.parser`: text -> tokens -> AST.
- :mod:`.canonical`: the canonical form and cache key; :mod:`.render`: text, sympy, LaTeX.
- :mod:`.core`: :class:`Formula` and :func:`parse_formula`; :mod:`.numeric`: numpy evaluation.
- :mod:`.units`: :class:`Unit` (exponent vectors over m, s, kg, K, V, A, cd, mol) and
  :class:`DatasetUnits`; :mod:`.dimensions`: :func:`check_dimensions`.
- :mod:`.simplify`: :func:`simplify_formula`, the readable form of a fitted formula.
- :mod:`.deadline`: :func:`call_within`, a hard deadline for sympy work in any thread.
- :mod:`.postfix`: a tree as flat postfix code (cheap to pickle, rebuilt without parsing);
  :mod:`.memo`: the process-wide parse memo (``parse_cached``).
"""

from __future__ import annotations

from .canonical import Canonical, canonicalize
from .core import Formula, parse_formula
from .deadline import DeadlineExceeded, call_within
from .dimensions import DimensionCheck, check_dimensions
from .errors import FormulaError
from .nodes import (
    BINARY_OPS,
    FUNCTION_ALIASES,
    FUNCTION_NAMES,
    LEAF_OPS,
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_NODES,
    NAMED_NUMBERS,
    UNARY_OPS,
    Node,
    free_constant_prefix,
    is_identifier,
)
from .numeric import evaluate_numpy
from .render import format_number, render, to_sympy
from .simplify import Simplified, simplify_formula, sympy_expression
from .tree import fold_tree, iter_nodes
from .units import BASE_UNITS, DatasetUnits, Unit, UnitError, parse_unit

__all__ = [
    "BASE_UNITS",
    "BINARY_OPS",
    "FUNCTION_ALIASES",
    "FUNCTION_NAMES",
    "LEAF_OPS",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MAX_NODES",
    "NAMED_NUMBERS",
    "UNARY_OPS",
    "Canonical",
    "DeadlineExceeded",
    "DatasetUnits",
    "DimensionCheck",
    "Formula",
    "FormulaError",
    "Node",
    "Simplified",
    "Unit",
    "UnitError",
    "check_dimensions",
    "call_within",
    "canonicalize",
    "evaluate_numpy",
    "fold_tree",
    "format_number",
    "free_constant_prefix",
    "is_identifier",
    "iter_nodes",
    "parse_formula",
    "parse_unit",
    "render",
    "simplify_formula",
    "sympy_expression",
    "to_sympy",
]
