"""A front formula as a person reads it: fitted constants put in (rounded), as a short text
label for a plot or as presentation MathML for the report (which Chromium renders natively,
so the page needs no script and no network).

Formulas are parsed by :func:`sr_dist.formula.parse_formula` (never ``sympify``); the fitted
constants are the keys of the candidate's ``constants``, every other name is a variable.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

from sr_dist.formula import parse_formula

__all__ = ["formula_label", "formula_mathml", "with_constants"]

#: Significant digits of a constant shown in a label or the report.
DIGITS = 4


def _number(value: float, digits: int) -> Any:
    import sympy  # lazy: sympy is slow to import and only pictures need it here

    if not math.isfinite(value):
        return sympy.nan
    text = f"{value:.{digits}g}"
    number = float(text)
    if number == int(number) and abs(number) < 1e15:
        return sympy.Integer(int(number))
    return sympy.Float(text, digits)


def with_constants(expression: str, constants: Mapping[str, float],
                   digits: int = DIGITS) -> Any:
    """The sympy expression of ``expression`` with each fitted constant replaced by its value
    to ``digits`` significant digits; :class:`sr_dist.formula.FormulaError` if it does not parse."""
    import sympy

    names = list(parse_formula(expression, None).constants)
    variables = [n for n in names if n not in constants]
    formula = parse_formula(expression, variables)
    expr = formula.to_sympy()
    mapping = {sympy.Symbol(name, real=True): _number(float(value), digits)
               for name, value in constants.items()}
    return expr.xreplace(mapping)


def formula_label(expression: str, constants: Mapping[str, float], max_chars: int = 48,
                  digits: int = 3) -> str:
    """A one-line label: the formula with its constants put in, cut to ``max_chars``."""
    try:
        text = str(with_constants(expression, constants, digits))
    except Exception:  # a label is never worth failing a picture: show the text as stored
        text = expression
    text = text.replace("**", "^")
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def formula_mathml(expression: str, constants: Mapping[str, float]) -> str:
    """``<math>`` markup of the formula with its constants put in; an escaped ``<code>`` of the
    raw text when it cannot be rendered."""
    from sympy.printing.mathml import mathml

    try:
        body = mathml(with_constants(expression, constants), printer="presentation")
    except Exception:  # any formula sympy cannot print still gets its row, as plain text
        return f"<code>{html.escape(expression)}</code>"
    return f'<math display="inline">{body}</math>'
