"""Keying what the search breeds: a tree's text and the :class:`Formula` its parse gives (whose
canonical form is the key), without lexing and parsing the text.

The search renders every tree it breeds and keys it by the canonical form of the text's parse;
lexing and parsing were about an eighth of an ``evolve`` agent's CPU in a default run
(docs/benchmarks.md, Throughput).
:func:`~sr_dist.sr.evolve.rendering.render_as_parsed` builds the parser's tree in the rendering walk
instead, and the formula goes into the process's parse memo, where the evaluator client and the
history reader look the same text up. Trees the shortcut does not cover (past the parser's
limits, a name the parser would read otherwise) are parsed from their text as before.
"""

from __future__ import annotations

from sr_dist.formula import MAX_DEPTH, MAX_LENGTH, MAX_NODES, Formula, Node, is_identifier
from sr_dist.formula.memo import parse_cached, recall, remember
from sr_dist.sr.evolve.rendering import render, render_as_parsed

__all__ = ["Keyer"]


class Keyer:
    """Keys trees for one tuple of variables, naming constants ``{prefix}0, {prefix}1, ...``."""

    def __init__(self, variables: tuple[str, ...], prefix: str) -> None:
        self.variables = variables
        self.prefix = prefix
        self.declared = frozenset(variables)
        # parse_formula refuses such variables (every text is then unparsable), and a variable
        # named pi would take the place of the number pi in the text.
        self.shortcut = ("pi" not in self.declared and len(self.declared) == len(variables)
                         and all(is_identifier(v) for v in variables))

    def __call__(self, tree: Node) -> Formula | None:
        """What ``parse_formula(render(tree, prefix), variables)`` returns; None where it
        raises."""
        if self.shortcut:
            rendered = render_as_parsed(tree, self.prefix)
            if (rendered is not None and len(rendered.text) <= MAX_LENGTH
                    and rendered.nodes <= MAX_NODES and 2 * rendered.depth + 1 <= MAX_DEPTH
                    and rendered.variables <= self.declared):
                known = recall(rendered.text, self.variables)
                if known is not None:  # bred before: its canonical form is known
                    return known
                formula = Formula.from_parsed(rendered.text, rendered.tree, self.variables,
                                              used=rendered.variables,
                                              constants=rendered.constants, nodes=rendered.nodes)
                remember(formula, self.variables)
                return formula
        return parse_cached(render(tree, self.prefix), self.variables)
