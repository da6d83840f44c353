"""Restricted formula language: parse model-written formulas safely, canonicalise, evaluate.

Formulas arrive as untrusted text from language models. This module never hands that text to
``eval``, ``exec``, Python's ``ast`` or ``sympify``: a hand-written lexer and a depth-bounded
recursive-descent parser build a small AST (:class:`Node`), and everything else (canonical key,
sympy form, LaTeX, numpy evaluation) walks that AST iteratively.

The AST below is the contract between the parser, the canonicaliser and the evaluator's lowering
step; keep it stable.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - typing only
    import sympy

#: Binary operators in the AST (always exactly two children).
BINARY_OPS = ("add", "sub", "mul", "div", "pow")
#: Unary operators and functions in the AST (exactly one child).
UNARY_OPS = (
    "neg", "sin", "cos", "tan", "exp", "log", "sqrt", "abs",
    "tanh", "sinh", "cosh", "arcsin", "arccos", "arctan",
)
#: Leaf kinds.
LEAF_OPS = ("num", "var", "const")


@dataclass(frozen=True, slots=True)
class Node:
    """One AST node.

    - ``op == "num"``: a literal; ``value`` holds the float (``pi`` and ``e`` become nums too;
      those two carry ``name == "pi"`` / ``"e"`` so they print back by name — evaluators use
      ``value`` only).
    - ``op == "var"``: a dataset variable; ``name`` holds its name.
    - ``op == "const"``: a free constant to fit; ``name`` holds its name.
    - ``op`` in :data:`BINARY_OPS`: ``args == (left, right)``.
    - ``op`` in :data:`UNARY_OPS`: ``args == (operand,)``.
    """

    op: str
    args: tuple["Node", ...] = ()
    value: float | None = None
    name: str | None = None


# --------------------------------------------------------------------------------------------
# Language constants and limits
# --------------------------------------------------------------------------------------------

#: Functions callable in formulas (each is also an AST op of the same name).
FUNCTION_NAMES: tuple[str, ...] = tuple(op for op in UNARY_OPS if op != "neg")
#: Extra spellings accepted for functions; they parse to the op on the right.
FUNCTION_ALIASES: Mapping[str, str] = {
    "ln": "log",
    "asin": "arcsin",
    "acos": "arccos",
    "atan": "arctan",
}
#: Named numeric constants (parsed as ``num`` nodes unless a variable has the same name).
NAMED_NUMBERS: Mapping[str, float] = {"pi": math.pi, "e": math.e}

#: Default limit on the formula text length (characters).
MAX_LENGTH = 2000
#: Default limit on the AST node count.
MAX_NODES = 200
#: Default limit on the parser's nesting depth (parentheses, calls, unary minus, powers).
MAX_DEPTH = 64

_CALLABLE = {**{name: name for name in FUNCTION_NAMES}, **FUNCTION_ALIASES}
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NUM_RE = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CANONICAL_CONST_RE = re.compile(r"c[0-9]+\Z")
_KEYWORDS = frozenset(keyword.kwlist)


def is_identifier(name: str) -> bool:
    """True when ``name`` can be a variable of a formula (ASCII identifier, not a function)."""
    return (
        isinstance(name, str)
        and _IDENT_RE.match(name) is not None
        and name not in _CALLABLE
    )


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class FormulaError(ValueError):
    """A formula that cannot be accepted; says what is wrong and where.

    ``message`` is the bare reason, ``offset`` the 0-based character offset in ``text`` (or
    ``None`` when the problem has no position, e.g. empty input); ``str()`` adds a caret snippet.
    """

    def __init__(self, message: str, offset: int | None = None, text: str | None = None) -> None:
        self.message = message
        self.offset = offset
        self.text = text
        super().__init__(self._render())

    def _render(self) -> str:
        if self.offset is None or self.text is None:
            return self.message
        start = max(0, self.offset - 30)
        end = min(len(self.text), self.offset + 30)
        window = self.text[start:end]
        prefix = "..." if start > 0 else ""
        suffix = "..." if end < len(self.text) else ""
        shown = "".join(ch if ch.isprintable() else " " for ch in window)
        caret = " " * (len(prefix) + self.offset - start) + "^"
        return (
            f"{self.message} at offset {self.offset}: {self.text[start:end]!r}\n"
            f"    {prefix}{shown}{suffix}\n    {caret}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.offset, self.text))


# --------------------------------------------------------------------------------------------
# Lexer
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "num", "name", "op", "(", ")", ",", "end"
    text: str
    offset: int
    value: float = 0.0


_SINGLE_CHAR_ERRORS = {
    "[": "subscripts are not allowed",
    "]": "subscripts are not allowed",
    "{": "braces (sets and dicts) are not allowed",
    "}": "braces (sets and dicts) are not allowed",
    "'": "strings are not allowed",
    '"': "strings are not allowed",
    "`": "strings are not allowed",
    ";": "';' is not allowed: a formula is a single expression",
    ":": "':' is not allowed (slices, lambdas and annotations are not supported)",
    "&": "bitwise operators are not allowed",
    "|": "bitwise operators are not allowed",
    "~": "bitwise operators are not allowed",
    "%": "'%' (modulo) is not allowed",
    "@": "'@' is not allowed",
    "#": "comments are not allowed",
    "\\": "'\\' is not allowed",
    "$": "'$' is not allowed",
    "?": "'?' is not allowed",
}


def _lex(text: str) -> Iterable[_Token]:
    """Yield tokens lazily, so that a parse error stops the scan early."""
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
            continue
        if ord(ch) > 127:
            raise FormulaError(
                f"non-ASCII character {ch!r} (U+{ord(ch):04X}) is not allowed; "
                "use ASCII names and operators",
                i, text,
            )
        if ch.isdigit() or (ch == "." and i + 1 < n and text[i + 1].isdigit()):
            match = _NUM_RE.match(text, i)
            assert match is not None
            literal = match.group()
            end = match.end()
            if literal.endswith(".") and end < n and (text[end].isalpha() or text[end] == "_"):
                raise FormulaError("attribute access is not allowed", end - 1, text)
            value = float(literal)
            if not math.isfinite(value):
                raise FormulaError(f"number {literal!r} is too large", i, text)
            yield _Token("num", literal, i, value)
            i = end
            continue
        if ch.isalpha() or ch == "_":
            match = _NAME_RE.match(text, i)
            assert match is not None
            yield _Token("name", match.group(), i)
            i = match.end()
            continue
        nxt = text[i + 1] if i + 1 < n else ""
        if ch == "*":
            if nxt == "*":
                yield _Token("op", "**", i)
                i += 2
            else:
                yield _Token("op", "*", i)
                i += 1
            continue
        if ch == "/":
            if nxt == "/":
                raise FormulaError("'//' (floor division) is not allowed; use '/'", i, text)
            yield _Token("op", "/", i)
            i += 1
            continue
        if ch in "+-":
            yield _Token("op", ch, i)
            i += 1
            continue
        if ch == "^":
            yield _Token("op", "**", i)
            i += 1
            continue
        if ch in "(),":
            yield _Token(ch, ch, i)
            i += 1
            continue
        if ch == ".":
            if nxt.isalpha() or nxt == "_":
                raise FormulaError("attribute access is not allowed", i, text)
            raise FormulaError("unexpected '.'", i, text)
        if ch == "=":
            if nxt == "=":
                raise FormulaError("comparisons are not allowed", i, text)
            raise FormulaError(
                "'=' is not allowed (keyword arguments and assignments are not supported)",
                i, text,
            )
        if ch in "<>":
            if nxt == ch:
                raise FormulaError("bit shifts are not allowed", i, text)
            raise FormulaError("comparisons are not allowed", i, text)
        if ch == "!":
            if nxt == "=":
                raise FormulaError("comparisons are not allowed", i, text)
            raise FormulaError("unexpected '!'", i, text)
        message = _SINGLE_CHAR_ERRORS.get(ch)
        if message is None:
            message = f"unexpected character {ch!r}"
        raise FormulaError(message, i, text)
    yield _Token("end", "", n)


# --------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------


class _Parser:
    """Recursive descent with an explicit depth bound and node budget (one use per parse)."""

    def __init__(
        self, text: str, variables: frozenset[str], max_nodes: int, max_depth: int
    ) -> None:
        self.text = text
        self.variables = variables
        self.max_nodes = max_nodes
        self.max_depth = max_depth
        self.tokens = iter(_lex(text))
        self.buffer: list[_Token] = []
        self.depth = 0
        self.nodes = 0
        self.const_order: dict[str, None] = {}
        self.var_used: set[str] = set()

    # token helpers -------------------------------------------------------------------------
    def peek(self, k: int = 0) -> _Token:
        while len(self.buffer) <= k:
            if self.buffer and self.buffer[-1].kind == "end":
                return self.buffer[-1]
            self.buffer.append(next(self.tokens))
        return self.buffer[k]

    def advance(self) -> _Token:
        tok = self.peek()
        if tok.kind != "end":
            self.buffer.pop(0)
        return tok

    def error(self, message: str, offset: int | None) -> FormulaError:
        return FormulaError(message, offset, self.text)

    def make(self, tok: _Token, op: str, args: tuple[Node, ...] = (), value: float | None = None,
             name: str | None = None) -> Node:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise self.error(f"formula is too large (more than {self.max_nodes} nodes)",
                             tok.offset)
        return Node(op, args, value, name)

    def enter(self, tok: _Token) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise self.error(
                f"formula is nested too deeply (more than {self.max_depth} levels)", tok.offset
            )

    def describe(self, tok: _Token) -> str:
        return "the end of the formula" if tok.kind == "end" else repr(tok.text)

    # grammar -------------------------------------------------------------------------------
    def parse(self) -> Node:
        tree = self.expr()
        tok = self.peek()
        if tok.kind != "end":
            raise self.trailing(tok, None)
        return tree

    def trailing(self, tok: _Token, opener: _Token | None) -> FormulaError:
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

    def name(self, tok: _Token) -> Node:
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
        if name in _CALLABLE:
            if not called:
                raise self.error(
                    f"function {name!r} must be called with parentheses, e.g. {name}(x)",
                    tok.offset,
                )
            return self.call(tok, _CALLABLE[name])
        if called:
            allowed = ", ".join(sorted(_CALLABLE))
            raise self.error(
                f"unknown function {name!r}; allowed functions are: {allowed} "
                "(write '*' to multiply)", tok.offset
            )
        if name in NAMED_NUMBERS:
            return self.make(tok, "num", value=NAMED_NUMBERS[name], name=name)
        self.const_order.setdefault(name, None)
        return self.make(tok, "const", name=name)

    def call(self, tok: _Token, op: str) -> Node:
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


# --------------------------------------------------------------------------------------------
# Tree walking
# --------------------------------------------------------------------------------------------

T = TypeVar("T")


#: Trees deeper than this are folded with an explicit stack instead of recursion.
_RECURSION_DEPTH = 150


class _TooDeep(Exception):
    pass


def _fold_recursive(node: Node, fn: Callable[[Node, tuple[T, ...]], T], depth: int) -> T:
    args = node.args
    if not args:
        return fn(node, ())
    if depth > _RECURSION_DEPTH:
        raise _TooDeep
    if len(args) == 1:
        return fn(node, (_fold_recursive(args[0], fn, depth + 1),))
    return fn(node, tuple([_fold_recursive(a, fn, depth + 1) for a in args]))


def fold_tree(root: Node, fn: Callable[[Node, tuple[T, ...]], T]) -> T:
    """Post-order fold: ``fn(node, results_of_children)`` for every node, children first.

    Shallow trees (the usual case) recurse, which is fastest; deeper ones use an explicit
    stack, so no tree can raise ``RecursionError``. ``fn`` must be pure (it may run twice).
    """
    try:
        return _fold_recursive(root, fn, 0)
    except _TooDeep:
        pass
    stack: list[tuple[Node, bool]] = [(root, False)]
    out: list[T] = []
    while stack:
        node, ready = stack.pop()
        if ready:
            k = len(node.args)
            if k:
                children = tuple(out[-k:])
                del out[-k:]
            else:
                children = ()
            out.append(fn(node, children))
        else:
            stack.append((node, True))
            for child in reversed(node.args):
                stack.append((child, False))
    return out[0]


def iter_nodes(root: Node) -> Iterable[Node]:
    """Pre-order traversal without recursion."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.args))


def _validate_tree(root: Node, max_nodes: int) -> int:
    """Check a hand-built tree against the contract; returns its node count."""
    count = 0
    for node in iter_nodes(root):
        count += 1
        if count > max_nodes:
            raise FormulaError(f"formula is too large (more than {max_nodes} nodes)")
        if not isinstance(node, Node):
            raise FormulaError(f"not an AST node: {node!r}")
        if node.op in BINARY_OPS:
            arity = 2
        elif node.op in UNARY_OPS:
            arity = 1
        elif node.op in LEAF_OPS:
            arity = 0
        else:
            raise FormulaError(f"unknown AST op {node.op!r}")
        if len(node.args) != arity:
            raise FormulaError(f"AST op {node.op!r} needs {arity} children, got {len(node.args)}")
        if node.op == "num" and (
            not isinstance(node.value, (int, float)) or not math.isfinite(node.value)
        ):
            raise FormulaError(f"num node needs a finite value, got {node.value!r}")
        if node.op in ("var", "const") and not (
            isinstance(node.name, str) and _IDENT_RE.match(node.name)
        ):
            raise FormulaError(f"{node.op} node needs an identifier name, got {node.name!r}")
    return count


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

_ADD, _MUL, _NEG, _POW, _ATOM = 1, 2, 3, 4, 5


def format_number(value: float) -> str:
    """Shortest text that parses back to exactly ``value`` (integers without a decimal point)."""
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(float(value))


def _renderer(canonical: bool) -> Callable[[Node, tuple[tuple[str, int], ...]], tuple[str, int]]:
    def render(node: Node, kids: tuple[tuple[str, int], ...]) -> tuple[str, int]:
        op = node.op
        if op == "num":
            assert node.value is not None
            if node.name is not None and node.name in NAMED_NUMBERS and not canonical:
                return node.name, _ATOM
            text = format_number(node.value)
            return text, (_NEG if text.startswith("-") else _ATOM)
        if op == "var":
            assert node.name is not None
            if canonical and _CANONICAL_CONST_RE.match(node.name):
                return "$" + node.name, _ATOM
            return node.name, _ATOM
        if op == "const":
            assert node.name is not None
            return node.name, _ATOM
        if op in ("add", "sub"):
            (ls, _), (rs, rp) = kids
            if rp <= _ADD or rp == _NEG:
                rs = f"({rs})"
            return f"{ls} {'+' if op == 'add' else '-'} {rs}", _ADD
        if op in ("mul", "div"):
            (ls, lp), (rs, rp) = kids
            if lp < _MUL:
                ls = f"({ls})"
            if rp <= _MUL or rp == _NEG:
                rs = f"({rs})"
            return f"{ls}{'*' if op == 'mul' else '/'}{rs}", _MUL
        if op == "pow":
            (ls, lp), (rs, rp) = kids
            if lp < _ATOM:
                ls = f"({ls})"
            if rp < _POW or rp == _NEG:
                rs = f"({rs})"
            return f"{ls}**{rs}", _POW
        if op == "neg":
            ((s, p),) = kids
            if p < _POW:
                s = f"({s})"
            return f"-{s}", _NEG
        ((s, _),) = kids
        return f"{op}({s})", _ATOM

    return render


_RENDER_PLAIN = _renderer(canonical=False)
_RENDER_CANONICAL = _renderer(canonical=True)


def render(tree: Node) -> str:
    """Infix text with minimal parentheses; ``parse_formula`` reads it back to the same tree."""
    return fold_tree(tree, _RENDER_PLAIN)[0]


# --------------------------------------------------------------------------------------------
# Canonical form
# --------------------------------------------------------------------------------------------

_MATH_UNARY: Mapping[str, Callable[[float], float]] = {
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "exp": math.exp, "log": math.log,
    "sqrt": math.sqrt, "abs": math.fabs, "tanh": math.tanh, "sinh": math.sinh,
    "cosh": math.cosh, "arcsin": math.asin, "arccos": math.acos, "arctan": math.atan,
}

# Sort ranks of operand kinds inside a flattened product / sum: products read "2*c0*x*sin(x)",
# sums read "x*y + x + c0 + 2".
_MUL_RANK = {"num": 0, "const": 1, "var": 2}
_ADD_RANK = {"num": 3, "const": 2, "var": 1}


class _C:
    """Internal canonical node: n-ary add/mul, ``key`` ignores constant names."""

    __slots__ = ("op", "args", "value", "name", "key", "pending")

    def __init__(self, op: str, args: tuple["_C", ...], value: float | None, name: str | None,
                 key: str, pending: list["_C"] | None = None) -> None:
        self.op = op
        self.args = args
        self.value = value
        self.name = name
        self.key = key
        # operands of a sum/product still being collected along a chain of the same op; the
        # chain is combined and sorted once, by its first ancestor of another kind (_finish)
        self.pending = pending


def _collect(op: str, kids: Sequence[_C]) -> _C:
    first = kids[0]
    if first.pending is not None and first.op == op:
        parts = first.pending  # consumed exactly once: its parent is this node
    else:
        parts = [_finish(first)]
    for kid in kids[1:]:
        if kid.pending is not None and kid.op == op:
            parts.extend(kid.pending)
        else:
            parts.append(_finish(kid))
    return _C(op, (), None, None, "", parts)


def _finish(item: _C) -> _C:
    return item if item.pending is None else _nary(item.op, item.pending)


def _cnum(value: float) -> _C:
    value = value + 0.0  # -0.0 -> 0.0
    return _C("num", (), value, None, "n" + repr(value))


def _safe(fn: Callable[[], float]) -> float | None:
    try:
        value = fn()
    except (ArithmeticError, ValueError):
        return None
    if isinstance(value, complex) or not math.isfinite(value):
        return None
    return float(value)


def _nary(op: str, items: Sequence[_C]) -> _C:
    """Flatten, fold literals, drop identities and sort the operands of add or mul."""
    flat: list[_C] = []
    nums: list[float] = []
    for item in items:
        for sub in (item.args if item.op == op else (item,)):
            if sub.op == "num":
                assert sub.value is not None
                nums.append(sub.value)
            else:
                flat.append(sub)
    identity = 0.0 if op == "add" else 1.0
    if nums:
        if len(nums) == 1:
            combined: float | None = nums[0]
        elif op == "add":
            combined = _safe(lambda: math.fsum(nums))
        else:
            combined = _safe(lambda: math.prod(sorted(nums)))
        if combined is None:
            flat.extend(_cnum(v) for v in nums)
        elif not (combined == identity and flat):
            flat.append(_cnum(combined))
    if len(flat) == 1:
        return flat[0]
    if op == "add":
        flat.sort(key=_term_sort_key)
    else:
        flat.sort(key=lambda c: (_MUL_RANK.get(c.op, 3), c.key))
    return _C(op, tuple(flat), None, None, f"{op}({','.join(c.key for c in flat)})")


def _term_sort_key(item: _C) -> tuple[int, str, bool]:
    """Sort key of a sum term by its magnitude, so ``x - y`` keeps reading ``x - y``."""
    if item.op == "num":
        assert item.value is not None
        return _ADD_RANK["num"], _cnum(abs(item.value)).key, item.value < 0
    if item.op == "mul" and item.args[0].op == "num":
        coeff = item.args[0].value
        assert coeff is not None
        if coeff < 0:
            rest = item.args[1:]
            if coeff == -1.0 and len(rest) == 1:
                return _ADD_RANK.get(rest[0].op, 0), rest[0].key, True
            keys = [c.key for c in rest]
            if coeff != -1.0:
                keys.insert(0, _cnum(-coeff).key)
            return 0, f"mul({','.join(keys)})", True
    return _ADD_RANK.get(item.op, 0), item.key, False


def _negate(item: _C) -> _C:
    if item.op == "num":
        assert item.value is not None
        return _cnum(-item.value)
    return _nary("mul", (_cnum(-1.0), item))


def _canonical_item(counts: Mapping[str, int]) -> Callable[[Node, tuple[_C, ...]], _C]:
    def build(node: Node, kids: tuple[_C, ...]) -> _C:
        op = node.op
        if op == "num":
            assert node.value is not None
            return _cnum(float(node.value))
        if op == "var":
            return _C("var", (), None, node.name, "v" + str(node.name))
        if op == "const":
            return _C("const", (), None, node.name, f"c{counts[str(node.name)]}")
        if op == "add" or op == "mul":
            return _collect(op, kids)
        if op == "sub":
            return _collect("add", (kids[0], _negate(_finish(kids[1]))))
        if op == "neg":
            return _negate(_finish(kids[0]))
        kids = tuple([_finish(k) for k in kids])
        if op in ("div", "pow"):
            a, b = kids
            if a.op == "num" and b.op == "num":
                x, y = float(a.value or 0.0), float(b.value or 0.0)
                folded = _safe(lambda: x / y if op == "div" else math.pow(x, y))
                if folded is not None:
                    return _cnum(folded)
            return _C(op, kids, None, None, f"{op}({a.key},{b.key})")
        (a,) = kids
        if a.op == "num":
            arg = float(a.value or 0.0)
            folded = _safe(lambda: _MATH_UNARY[op](arg))
            if folded is not None:
                return _cnum(folded)
        return _C(op, kids, None, None, f"{op}({a.key})")

    return build


def _split_sign(term: Node) -> tuple[bool, Node]:
    """(negative?, magnitude) of an emitted sum term, so ``a + (-b)`` is emitted as ``a - b``.

    Sign flips are exact in floating point, so this rewrite never changes a value.
    """
    if term.op == "num":
        assert term.value is not None
        return (True, Node("num", (), -term.value)) if term.value < 0 else (False, term)
    if term.op == "neg":
        return True, term.args[0]
    if term.op != "mul":
        return False, term
    spine = [term]
    while spine[-1].op == "mul":
        spine.append(spine[-1].args[0])
    leaf = spine.pop()
    if leaf.op != "num" or leaf.value is None or leaf.value >= 0:
        return False, term
    node = Node("num", (), -leaf.value)
    for parent in reversed(spine):
        node = Node("mul", (node, parent.args[1]))
    return True, node


def _chain(op: str, parts: Sequence[Node]) -> Node:
    node = parts[0]
    for part in parts[1:]:
        node = Node(op, (node, part))
    return node


def _emitter(rename: Mapping[str, str]) -> Callable[[_C, tuple[Node, ...]], Node]:
    def emit(item: _C, kids: tuple[Node, ...]) -> Node:
        op = item.op
        if op == "num":
            return Node("num", (), item.value)
        if op == "var":
            return Node("var", (), None, item.name)
        if op == "const":
            return Node("const", (), None, rename[str(item.name)])
        if op == "mul":
            first = kids[0]
            if first.op == "num" and first.value == -1.0:
                return Node("neg", (_chain("mul", kids[1:]),))
            return _chain("mul", kids)
        if op == "add":
            node = kids[0]
            for term in kids[1:]:
                negative, magnitude = _split_sign(term)
                node = Node("sub" if negative else "add", (node, magnitude))
            return node
        return Node(op, kids)

    return emit


@dataclass(frozen=True, slots=True)
class Canonical:
    """The canonical form of a tree: see :class:`Formula` for the meaning of the fields."""

    tree: Node
    text: str
    constants: tuple[str, ...]


def canonicalize(tree: Node) -> Canonical:
    """Canonical form: folded literals, flattened and sorted sums/products, renamed constants.

    Semantics-preserving up to floating-point rounding (reassociation of sums and products);
    no algebraic simplification.
    """
    counts: dict[str, int] = {}
    for node in iter_nodes(tree):
        if node.op == "const":
            counts[str(node.name)] = counts.get(str(node.name), 0) + 1
    root = _finish(fold_tree(tree, _canonical_item(counts)))
    order: dict[str, str] = {}
    for item in iter_nodes(root):  # type: ignore[arg-type]
        if item.op == "const" and item.name not in order:
            order[str(item.name)] = f"c{len(order)}"
    ctree = fold_tree(root, _emitter(order))  # type: ignore[arg-type]
    return Canonical(ctree, fold_tree(ctree, _RENDER_CANONICAL)[0], tuple(order))


# --------------------------------------------------------------------------------------------
# Formula
# --------------------------------------------------------------------------------------------


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
    ) -> "Formula":
        """Wrap a hand-built AST (checked against the contract); ``text`` is its rendering."""
        declared = _check_variables(variables)
        complexity = _validate_tree(tree, max_nodes)
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
        return _build(render(tree), tree, used, tuple(constants), complexity, tuple(variables or ()))

    def to_sympy(self) -> "sympy.Expr":
        """The sympy expression (real symbols), built from the AST, never from text."""
        return to_sympy(self.tree)

    def latex(self) -> str:
        """LaTeX of the formula (via ``sympy.latex``)."""
        import sympy

        return str(sympy.latex(self.to_sympy()))

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
        if not isinstance(name, str) or _IDENT_RE.match(name) is None:
            raise FormulaError(
                f"invalid variable name {name!r}: use ASCII letters, digits and '_', "
                "not starting with a digit"
            )
        if name in _CALLABLE:
            raise FormulaError(f"invalid variable name {name!r}: it is a function name")
    return frozenset(names)


def _build(text: str, tree: Node, used: set[str], constants: tuple[str, ...], complexity: int,
           order: Sequence[str]) -> Formula:
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
    parser = _Parser(text, declared, max_nodes, max_depth)
    tree = parser.parse()
    order = tuple(variables) if variables is not None else ()
    return _build(text, tree, parser.var_used, tuple(parser.const_order), parser.nodes, order)


# --------------------------------------------------------------------------------------------
# sympy and numpy
# --------------------------------------------------------------------------------------------


def to_sympy(tree: Node) -> "sympy.Expr":
    """sympy form of an AST: variables and constants are real ``Symbol``s."""
    import sympy

    functions: Mapping[str, Callable[[Any], Any]] = {
        "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "exp": sympy.exp,
        "log": sympy.log, "sqrt": sympy.sqrt, "abs": sympy.Abs, "tanh": sympy.tanh,
        "sinh": sympy.sinh, "cosh": sympy.cosh, "arcsin": sympy.asin, "arccos": sympy.acos,
        "arctan": sympy.atan,
    }
    symbols: dict[str, Any] = {}

    def convert(node: Node, kids: tuple[Any, ...]) -> Any:
        op = node.op
        if op == "num":
            if node.name == "pi":
                return sympy.pi
            if node.name == "e":
                return sympy.E
            assert node.value is not None
            value = float(node.value)
            if value.is_integer() and abs(value) < 1e15:
                return sympy.Integer(int(value))
            return sympy.Float(value)
        if op in ("var", "const"):
            name = str(node.name)
            if name not in symbols:
                symbols[name] = sympy.Symbol(name, real=True)
            return symbols[name]
        if op == "add":
            return kids[0] + kids[1]
        if op == "sub":
            return kids[0] - kids[1]
        if op == "mul":
            return kids[0] * kids[1]
        if op == "div":
            return kids[0] / kids[1]
        if op == "pow":
            return kids[0] ** kids[1]
        if op == "neg":
            return -kids[0]
        return functions[op](kids[0])

    return fold_tree(tree, convert)


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


__all__ = [
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
    "Formula",
    "FormulaError",
    "Node",
    "canonicalize",
    "evaluate_numpy",
    "fold_tree",
    "format_number",
    "is_identifier",
    "iter_nodes",
    "parse_formula",
    "render",
    "to_sympy",
]
