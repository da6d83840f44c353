"""The parser: the restricted grammar -> a :class:`Node` tree, by bounded recursive descent.

The text is never handed to ``eval``, ``exec``, ``ast`` or ``sympify``; the depth bound and the
node budget are checked as the tree grows, so no input can exhaust the stack or memory.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass

from .errors import FormulaError
from .lexer import Token, lex
from .nodes import CALLABLE, NAMED_NUMBERS, Node

__all__ = ["Parsed", "parse_tree"]

_KEYWORDS = frozenset(keyword.kwlist)
#: Longer text is lexed as the parse goes: a node or depth limit then stops the scan where it
#: stops the parse (a 15 MB sum lexed whole took 19 s before its node limit was seen at 299).
WHOLE_LEX_MAX_CHARS = 100_000


@dataclass(frozen=True, slots=True)
class Parsed:
    """A parsed tree with what the parser counted on the way, so nothing walks it again."""

    tree: Node
    variables_used: frozenset[str]
    #: free constant names in order of first appearance
    constants: tuple[str, ...]
    #: node count of ``tree``
    nodes: int


def parse_tree(text: str, variables: frozenset[str], max_nodes: int, max_depth: int) -> Parsed:
    """Parse ``text`` (names in ``variables`` are variables); raises :class:`FormulaError`."""
    parser: _Parser
    if len(text) > WHOLE_LEX_MAX_CHARS:
        parser = _LexingParser(text, variables, max_nodes, max_depth)
    else:
        try:
            parser = _Parser(text, variables, max_nodes, max_depth, list(lex(text)))
        except FormulaError:  # report the first error the parse meets, as a lazy scan does
            parser = _LexingParser(text, variables, max_nodes, max_depth)
    tree = parser.parse()
    return Parsed(tree, frozenset(parser.var_used), tuple(parser.const_order), parser.nodes)


class _Parser:
    """Recursive descent with an explicit depth bound and node budget (one use per parse),
    over the whole token list of a text that lexes cleanly (an index into a list: about 10%
    of a parse faster than pulling tokens from the lexer as it goes, 70 against 78 µs)."""

    def __init__(self, text: str, variables: frozenset[str], max_nodes: int, max_depth: int,
                 tokens: list[Token]) -> None:
        self.text = text
        self.variables = variables
        self.max_nodes = max_nodes
        self.max_depth = max_depth
        self.buffer = tokens
        self.pos = 0
        self.depth = 0
        self.nodes = 0
        self.const_order: dict[str, None] = {}
        self.var_used: set[str] = set()

    # token helpers -------------------------------------------------------------------------
    def peek(self) -> Token:
        return self.buffer[self.pos]

    def advance(self) -> Token:
        tok = self.buffer[self.pos]
        if tok.kind != "end":
            self.pos += 1
        return tok

    def error(self, message: str, offset: int | None) -> FormulaError:
        return FormulaError(message, offset, self.text)

    def make(self, tok: Token, op: str, args: tuple[Node, ...] = (), value: float | None = None,
             name: str | None = None) -> Node:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise self.error(f"formula is too large (more than {self.max_nodes} nodes)",
                             tok.offset)
        return Node(op, args, value, name)

    def enter(self, tok: Token) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise self.error(
                f"formula is nested too deeply (more than {self.max_depth} levels)", tok.offset
            )

    def describe(self, tok: Token) -> str:
        return "the end of the formula" if tok.kind == "end" else repr(tok.text)

    # grammar -------------------------------------------------------------------------------
    def parse(self) -> Node:
        tree = self.expr()
        tok = self.peek()
        if tok.kind != "end":
            raise self.trailing(tok, None)
        return tree

    def trailing(self, tok: Token, opener: Token | None) -> FormulaError:
        """The error for a token where an operator or a closing token was expected."""
        if tok.kind == "name" and tok.text not in self.variables:
            if tok.text == "lambda":
                return self.error("lambda expressions are not allowed", tok.offset)
            if tok.text in _KEYWORDS:
                return self.error(f"Python keyword {tok.text!r} is not allowed", tok.offset)
        if tok.kind in ("num", "name", "("):
            return self.error(
                f"missing operator before {tok.text!r} "
                "(implicit multiplication is not allowed; write '*')",
                tok.offset,
            )
        if tok.kind == ")":
            return self.error("unmatched ')'", tok.offset)
        if tok.kind == ",":
            return self.error("',' is not allowed here (tuples are not supported)", tok.offset)
        if tok.kind == "end" and opener is not None:
            return self.error(
                f"missing ')': the '(' at offset {opener.offset} is never closed", tok.offset
            )
        return self.error(f"unexpected {self.describe(tok)}", tok.offset)

    def expr(self) -> Node:
        self.enter(self.peek())
        left = self.term()
        while (tok := self.peek()).kind == "op" and tok.text in "+-":
            self.advance()
            right = self.term()
            left = self.make(tok, "add" if tok.text == "+" else "sub", (left, right))
        self.depth -= 1
        return left

    def term(self) -> Node:
        left = self.unary()
        while (tok := self.peek()).kind == "op" and tok.text in ("*", "/"):
            self.advance()
            right = self.unary()
            left = self.make(tok, "mul" if tok.text == "*" else "div", (left, right))
        return left

    def unary(self) -> Node:
        tok = self.peek()
        if tok.kind == "op" and tok.text in "+-":
            self.advance()
            self.enter(tok)
            operand = self.unary()
            self.depth -= 1
            if tok.text == "+":
                return operand
            if operand.op == "num" and operand.name is None:
                assert operand.value is not None
                return Node("num", (), -operand.value)
            return self.make(tok, "neg", (operand,))
        return self.power()

    def power(self) -> Node:
        base = self.atom()
        tok = self.peek()
        if tok.kind == "op" and tok.text == "**":
            self.advance()
            self.enter(tok)
            exponent = self.unary()
            self.depth -= 1
            return self.make(tok, "pow", (base, exponent))
        return base

    def atom(self) -> Node:
        tok = self.advance()
        if tok.kind == "num":
            return self.make(tok, "num", value=tok.value)
        if tok.kind == "name":
            return self.name(tok)
        if tok.kind == "(":
            if self.peek().kind == ")":
                raise self.error("empty parentheses", tok.offset)
            inner = self.expr()
            close = self.peek()
            if close.kind != ")":
                raise self.trailing(close, tok)
            self.advance()
            return inner
        if tok.kind == "end":
            raise self.error("unexpected end of formula (expected a number, name or '(')",
                             tok.offset)
        if tok.kind == "op" and tok.text in ("*", "**"):
            raise self.error(f"unexpected {tok.text!r} (expected a number, name or '(')",
                             tok.offset)
        raise self.error(f"unexpected {self.describe(tok)} (expected a number, name or '(')",
                         tok.offset)

    def name(self, tok: Token) -> Node:
        name = tok.text
        called = self.peek().kind == "("
        if name in self.variables:
            if called:
                raise self.error(
                    f"variable {name!r} cannot be called as a function "
                    "(write '*' to multiply)", tok.offset
                )
            self.var_used.add(name)
            return self.make(tok, "var", name=name)
        if name == "lambda":
            raise self.error("lambda expressions are not allowed", tok.offset)
        if name in _KEYWORDS:
            raise self.error(f"Python keyword {name!r} is not allowed", tok.offset)
        if name in CALLABLE:
            if not called:
                raise self.error(
                    f"function {name!r} must be called with parentheses, e.g. {name}(x)",
                    tok.offset,
                )
            return self.call(tok, CALLABLE[name])
        if called:
            allowed = ", ".join(sorted(CALLABLE))
            raise self.error(
                f"unknown function {name!r}; allowed functions are: {allowed} "
                "(write '*' to multiply)", tok.offset
            )
        if name in NAMED_NUMBERS:
            return self.make(tok, "num", value=NAMED_NUMBERS[name], name=name)
        self.const_order.setdefault(name, None)
        return self.make(tok, "const", name=name)

    def call(self, tok: Token, op: str) -> Node:
        opener = self.advance()  # "("
        if self.peek().kind == ")":
            raise self.error(f"function {tok.text!r} takes one argument, got none",
                             self.peek().offset)
        arg = self.expr()
        close = self.peek()
        if close.kind == ",":
            raise self.error(f"function {tok.text!r} takes exactly one argument", close.offset)
        if close.kind != ")":
            raise self.trailing(close, opener)
        self.advance()
        return self.make(tok, op, (arg,))


class _LexingParser(_Parser):
    """The parser over :func:`~sr_dist.formula.lexer.lex`'s lazy tokens, for text with a lexing
    error: the scan stops where the parse does, so the error reported is the first one met."""

    def __init__(self, text: str, variables: frozenset[str], max_nodes: int, max_depth: int) -> None:
        super().__init__(text, variables, max_nodes, max_depth, [])
        self.tokens = lex(text)

    def peek(self) -> Token:
        if self.pos == len(self.buffer):  # never past the end token: advance stops there
            self.buffer.append(next(self.tokens))
        return self.buffer[self.pos]

    def advance(self) -> Token:
        tok = self.peek()
        if tok.kind != "end":
            self.pos += 1
        return tok
