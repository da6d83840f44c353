"""The :class:`Formula` value and its two constructors, :func:`parse_formula` (text from a model)
and :meth:`Formula.from_tree` (an AST built by code, e.g. the evolve search).
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .canonical import canonicalize
from .errors import FormulaError
from .nodes import (
    CALLABLE,
    IDENT_RE,
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_NODES,
    NAMED_NUMBERS,
    Node,
)
from .parser import parse_tree
from .render import render, to_latex, to_sympy
from .tree import fold_tree, iter_nodes, validate_tree

if TYPE_CHECKING:  # pragma: no cover - typing only
    import sympy  # type: ignore[import-untyped]  # sympy ships no type information

__all__ = ["Formula", "parse_formula"]


@dataclass(frozen=True, repr=False)
class Formula:
    """A parsed formula: the AST as written plus its canonical form.

    - ``text``: the text as given; ``tree``: its AST.
    - ``variables``: the variables it uses, in the order of the ``variables`` argument.
    - ``constants``: free constant names, in order of first appearance.
    - ``complexity``: node count of ``tree``.
    - ``canonical_tree``: the canonical AST (contract ops only; constants renamed ``c0, c1, ...``);
      ``canonical_constants[i]`` is the original name of ``c{i}``; ``canonical`` renders it and is
      the cache key (equal for formulas that differ only by commutative order, constant names
      and foldable literal arithmetic).
    """

    text: str
    tree: Node
    variables: tuple[str, ...]
    constants: tuple[str, ...]
    complexity: int
    canonical: str
    canonical_tree: Node = field(compare=False)
    canonical_constants: tuple[str, ...] = field(compare=False)

    @classmethod
    def from_tree(
        cls, tree: Node, variables: Sequence[str] = (), *, max_nodes: int = MAX_NODES
    ) -> Formula:
        """Wrap a hand-built AST (checked against the contract); ``text`` is its rendering."""
        declared = _check_variables(variables)
        complexity = validate_tree(tree, max_nodes)
        used: set[str] = set()
        constants: dict[str, None] = {}
        for node in iter_nodes(tree):
            if node.op == "var":
                if node.name not in declared:
                    raise FormulaError(f"variable {node.name!r} is not declared")
                used.add(str(node.name))
            elif node.op == "const":
                if node.name in declared or node.name in NAMED_NUMBERS:
                    raise FormulaError(f"constant {node.name!r} clashes with a variable or number")
                constants.setdefault(str(node.name), None)
        if declared & NAMED_NUMBERS.keys():
            tree = fold_tree(tree, _strip_number_names)
        return _build(
            render(tree), tree, used, tuple(constants), complexity, tuple(variables or ())
        )

    @classmethod
    def from_parsed(
        cls, text: str, tree: Node, variables: Sequence[str], *, used: AbstractSet[str],
        constants: tuple[str, ...], nodes: int,
    ) -> Formula:
        """What ``parse_formula(text, variables)`` returns, from the tree its parser builds and
        what the parse counts (the variables ``used``, the ``constants`` in order of first
        appearance, the ``nodes``), for a caller that built text and tree together (the evolve
        search keying what it breeds: ``sr_dist.sr.evolve.rendering.render_as_parsed``). Nothing is
        checked here; tests hold that caller to ``parse_formula``'s result."""
        return _build(text, tree, used, constants, nodes, tuple(variables))

    def to_sympy(self) -> sympy.Expr:
        """The sympy expression (real symbols), built from the AST, never from text."""
        return to_sympy(self.tree)

    def latex(self) -> str:
        """LaTeX of the formula (via ``sympy.latex``)."""
        return to_latex(self.tree)

    def __str__(self) -> str:
        return render(self.tree)

    def __repr__(self) -> str:
        return (
            f"Formula({str(self)!r}, variables={self.variables!r}, "
            f"constants={self.constants!r})"
        )


def _strip_number_names(node: Node, kids: tuple[Node, ...]) -> Node:
    if node.op == "num" and node.name is not None:
        return Node("num", (), node.value)
    return Node(node.op, kids, node.value, node.name) if kids else node


def _check_variables(variables: Sequence[str] | None) -> frozenset[str]:
    if variables is None:
        return frozenset()
    if isinstance(variables, str):
        raise FormulaError("variables must be a sequence of names, not a single string")
    names = tuple(variables)
    for name in names:
        if not isinstance(name, str) or IDENT_RE.match(name) is None:
            raise FormulaError(
                f"invalid variable name {name!r}: use ASCII letters, digits and '_', "
                "not starting with a digit"
            )
        if name in CALLABLE:
            raise FormulaError(f"invalid variable name {name!r}: it is a function name")
    return frozenset(names)


def _build(text: str, tree: Node, used: AbstractSet[str], constants: tuple[str, ...],
           complexity: int, order: Sequence[str]) -> Formula:
    canon = canonicalize(tree)
    ordered = [v for v in order if v in used]
    return Formula(
        text=text,
        tree=tree,
        variables=tuple(dict.fromkeys(ordered)),
        constants=constants,
        complexity=complexity,
        canonical=canon.text,
        canonical_tree=canon.tree,
        canonical_constants=canon.constants,
    )


def parse_formula(
    text: str,
    variables: Sequence[str] | None = (),
    *,
    max_length: int = MAX_LENGTH,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
) -> Formula:
    """Parse ``text`` in the restricted formula language; raises :class:`FormulaError`.

    Names in ``variables`` are variables (they shadow ``pi``/``e`` and keywords such as
    ``lambda``); ``pi`` and ``e`` are numbers; a whitelisted function name must be called; any
    other identifier is a free constant to fit.
    """
    if not isinstance(text, str):
        raise FormulaError(f"a formula must be a string, got {type(text).__name__}")
    if len(text) > max_length:
        raise FormulaError(
            f"formula is too long ({len(text)} characters; the limit is {max_length})",
            max_length, text,
        )
    if not text.strip():
        raise FormulaError("empty formula")
    declared = _check_variables(variables)
    parsed = parse_tree(text, declared, max_nodes, max_depth)
    order = tuple(variables) if variables is not None else ()
    return _build(text, parsed.tree, parsed.variables_used, parsed.constants, parsed.nodes, order)
