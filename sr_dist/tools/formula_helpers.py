"""Formula boundary logic shared by tools: clean model text, parse it, fit it, describe the fit.

SRHarness tools get these as ``BaseTool`` helpers (``normalize_formula``, ``parse_formula``,
``evaluate``, ``format_evaluation_result``) so each tool does not re-implement them. They are
plain functions of the tool's context here, so any tool kind can use them.

``sr_dist.formula`` (and with it numpy) is imported on first use, not with the tool layer:
``import sr_dist.tools`` stays free of the formula stack (about 0.18 s measured) for agents
whose tools never touch a formula.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sr_dist.tools.contexts import context_value
from sr_dist.tools.execution import run_coroutine_blocking
from sr_dist.tools.formatting import significant

if TYPE_CHECKING:
    from sr_dist.formula import Formula

__all__ = [
    "ParsedFormula",
    "context_variables",
    "evaluate_expressions",
    "formula_text",
    "format_evaluation_result",
    "normalize_formula",
    "parse_tool_formula",
]

# A fenced block (```python ... ```) or an inline code span around the whole text.
_FENCE = re.compile(r"^```[A-Za-z0-9_+.-]*[ \t]*\n?(?P<body>.*?)\n?```$", re.DOTALL)
_INLINE = re.compile(r"^`(?P<body>[^`]*)`$")
# ``y =``, ``f(x0, x1) =``: a left-hand side naming the target; ``==`` is not an assignment.
_LEFT_SIDE = re.compile(r"^[A-Za-z_]\w*\s*(?:\([^()=]*\))?\s*=(?!=)")
# Typographic operators models copy from papers; the formula language spells them in ASCII.
_TYPOGRAPHIC = str.maketrans({"\u2212": "-", "\u00d7": "*", "\u00b7": "*", "\u22c5": "*", "\u2013": "-"})


@dataclass(frozen=True)
class ParsedFormula:
    """A formula a tool parsed: sr-dist's :class:`~sr_dist.formula.Formula` plus SRHarness's ``to_str()``.

    ``to_str()`` is the standard rendering (``2.5 * x0 ^ 2`` becomes ``2.5*x0**2``), the text
    tools return and compare; ``formula`` keeps the full value (tree, canonical key, sympy).
    """

    formula: Formula

    def to_str(self) -> str:
        """The formula in sr-dist's standard text form."""
        return str(self.formula)

    @property
    def text(self) -> str:
        """The text as it was given."""
        return self.formula.text

    @property
    def variables(self) -> tuple[str, ...]:
        return self.formula.variables

    @property
    def constants(self) -> tuple[str, ...]:
        """Free constants a fit would determine, in order of first appearance."""
        return self.formula.constants

    @property
    def complexity(self) -> int:
        return self.formula.complexity

    @property
    def canonical(self) -> str:
        """Equal for formulas that differ only in commutative order and constant names."""
        return self.formula.canonical

    def __str__(self) -> str:
        return self.to_str()


def _formula_error(message: str) -> Exception:
    from sr_dist.formula import FormulaError

    return FormulaError(message)


def normalize_formula(text: str) -> str:
    """Clean model-written formula text so the restricted parser can read it; does not parse.

    Strips surrounding whitespace and a Markdown code fence or inline code span, drops a
    left-hand side such as ``y =`` or ``f(x0, x1) =``, spells typographic operators
    (``−``, ``×``, ``·``) in ASCII and collapses runs of whitespace. Anything else is kept, so a
    wrong formula still fails in the parser with a message pointing at the problem.
    """
    if not isinstance(text, str):
        raise _formula_error(f"a formula must be a string, got {type(text).__name__}")
    cleaned = text.strip()
    for wrapper in (_FENCE, _INLINE):
        match = wrapper.match(cleaned)
        if match is not None:
            cleaned = match.group("body").strip()
    cleaned = cleaned.translate(_TYPOGRAPHIC)
    if cleaned.count("=") == 1:
        left = _LEFT_SIDE.match(cleaned)
        if left is not None and cleaned[left.end() :].strip():
            cleaned = cleaned[left.end() :]
    return " ".join(cleaned.split())


def context_variables(context: object) -> tuple[str, ...] | None:
    """The feature names of the context's ``dataset``; ``None`` when the context has no dataset."""
    names = getattr(context_value(context, "dataset"), "feature_names", None)
    return None if names is None else tuple(str(name) for name in names)


def parse_tool_formula(text: str, variables: Sequence[str] | None) -> ParsedFormula:
    """Parse ``text`` with ``variables`` as the variable names (every other name is a free constant).

    Raises :class:`~sr_dist.formula.FormulaError` saying what is wrong and where.
    """
    from sr_dist.formula import parse_formula

    return ParsedFormula(parse_formula(text, tuple(variables or ())))


def formula_text(expression: object) -> str:
    """The text of a formula given as text, a :class:`ParsedFormula` or a ``Formula``."""
    if isinstance(expression, str):
        return expression
    if isinstance(expression, ParsedFormula):
        return expression.to_str()
    from sr_dist.formula import Formula

    if isinstance(expression, Formula):
        return str(expression)
    raise TypeError(f"a formula must be text, a ParsedFormula or a Formula, got {type(expression).__name__}")


def evaluate_expressions(context: object, expressions: Iterable[object],
                         starts: Sequence[Mapping[str, float] | None] | None = None) -> list[Any]:
    """Fit each formula's free constants with the context's ``evaluator``; one result per formula.

    ``starts`` (one mapping of constant values or ``None`` per formula) asks for local searches
    from those values; it is passed on only when given, so evaluators without it still serve.

    The evaluator (``fit_many(list[str])``, possibly async: the in-process
    :class:`~sr_dist.evaluator.Evaluator` or an actor adapter) fits on the training split and
    scores train/validation NMSE. A formula that does not parse comes back with status
    ``invalid``; only a missing or broken evaluator raises.
    """
    texts = [formula_text(expression) for expression in expressions]
    evaluator = context_value(context, "evaluator")
    fit_many = getattr(evaluator, "fit_many", None)
    if not callable(fit_many):
        raise RuntimeError(  # noqa: TRY004 - a missing evaluator is a setup error, not a bad argument
            "BaseTool.evaluate needs an evaluator in the tool context: pass one under 'evaluator' "
            "(an object with fit_many(list[str]), e.g. sr_dist.evaluator.Evaluator(dataset))"
        )
    fits = fit_many(texts) if starts is None else fit_many(texts, list(starts))
    if inspect.isawaitable(fits):
        fits = run_coroutine_blocking(fits)
    results = list(fits)
    if len(results) != len(texts):
        raise RuntimeError(f"the evaluator returned {len(results)} results for {len(texts)} formulas")
    return results


def _field(result: object, name: str) -> Any:
    return result.get(name) if isinstance(result, Mapping) else getattr(result, name, None)


def _one_line(result: object) -> str:
    expression = _field(result, "expression")
    status = _field(result, "status") or "unknown"
    if status != "ok":
        detail = " ".join(str(_field(result, "error") or "no details").split())
        return f"{expression}: {status}: {detail}"
    parts = [
        f"val_nmse={significant(_field(result, 'val_nmse'), 4)}",
        f"train_nmse={significant(_field(result, 'train_nmse'), 4)}",
        f"complexity={_field(result, 'complexity')}",
    ]
    constants = _field(result, "constants") or {}
    if constants:
        parts.append("constants " + ", ".join(f"{k}={significant(v, 6)}" for k, v in dict(constants).items()))
    return f"{expression}: ok, " + ", ".join(parts)


def format_evaluation_result(result: object) -> str:
    """One line per fit for the model: status, NMSEs (4 significant digits), complexity, constants.

    ``result`` is a fit (a ``FitResult`` or its dict form) or a list of them; failed fits show
    their status and error instead of metrics.
    """
    if isinstance(result, (list, tuple)):
        return "\n".join(_one_line(item) for item in result)
    return _one_line(result)
