"""Pure helpers of ``bench/peers.py``: the problem list, peer model strings -> sr-dist formulas,
result records, resumption keys and the markdown tables.

Nothing here starts a process or reads a clock; ``bench/peers.py`` is the shell that does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: The fixed problem list (34 AI Feynman equations): every 4th equation of the table in file
#: order (the 25 of ``bench/evolve_feynman.py``), I.12.11 (the README's problem), and eight
#: more picked to widen the operator mix (exp, sqrt, sin/cos, rational forms) and the variable
#: count (1 to 6).
PROBLEMS: tuple[str, ...] = (
    "I.6.2a", "I.9.18", "I.12.2", "I.13.4", "I.15.3x", "I.18.4", "I.25.13", "I.29.16",
    "I.32.17", "I.34.27", "I.39.11", "I.43.16", "I.47.23", "II.3.24", "II.6.15b", "II.11.3",
    "II.11.28", "II.15.4", "II.27.16", "II.34.11", "II.35.21", "II.38.14", "III.8.54",
    "III.13.18", "III.15.27", "I.12.11",
    "I.6.2", "I.10.7", "I.12.1", "I.14.3", "I.14.4", "II.8.31", "I.27.6", "III.4.32",
)

#: Every tool the script knows, in table order.
TOOLS: tuple[str, ...] = ("sr-dist", "pyoperon", "gplearn", "pysr")

#: Relative tolerance for snapping fitted constants to closed forms, per noise level: at noise 0
#: a float32 fit is good to a few parts in 1e6; with 1% noise on 7,000 training rows a constant
#: is only known to about 1e-4, so the check would be impossible at the noise-free tolerance.
RECOVERY_REL_TOL_NOISELESS = 2e-6
RECOVERY_REL_TOL_NOISY = 2e-3


def recovery_rel_tol(noise: float) -> float:
    """The constant-snapping tolerance used for every tool at this noise level."""
    return RECOVERY_REL_TOL_NOISELESS if noise == 0 else RECOVERY_REL_TOL_NOISY


@dataclass(frozen=True)
class PeerResult:
    """One (tool, problem, noise) cell: what the tool returned and how it scores.

    ``status`` is ``ok`` (the tool ran and returned a model), ``timeout`` (killed at the hard
    limit), ``failed`` (it ran but crashed; ``error`` says why) or ``not_run`` (it cannot run on
    this machine; ``error`` says why). ``time_to_exact_s`` is from the worker process's start
    to the first exactly recovering candidate, None where the tool cannot tell (the peers only
    hand back their final model: their figure is their total fit time when the final model is
    exact, marked by ``time_to_exact_kind``).
    """

    tool: str
    problem: str
    noise: float
    budget_s: float
    n: int
    status: str
    error: str | None = None
    truth: str = ""
    model: str | None = None
    formula: str | None = None
    constants: dict[str, float] = field(default_factory=dict)
    exact: bool = False
    test_nmse: float | None = None
    test_r2: float | None = None
    acc_0_1: float | None = None
    time_to_exact_s: float | None = None
    time_to_exact_kind: str = "n/a"
    candidates: int | None = None
    wall_s: float | None = None
    search_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def key(self) -> tuple[str, str, float, float, int]:
        return result_key(self.tool, self.problem, self.noise, self.budget_s, self.n)

    def to_json(self) -> dict[str, Any]:
        return {k: json_safe(v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PeerResult:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


def result_key(tool: str, problem: str, noise: float, budget_s: float,
               n: int) -> tuple[str, str, float, float, int]:
    """What makes two cells the same measurement (the script skips keys it already has)."""
    return (tool, problem, float(noise), float(budget_s), int(n))


def json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    return value


# --- model strings -> sr-dist formula text --------------------------------------------------------

_FLOAT = re.compile(r"(?<![A-Za-z_0-9.])(\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+)")


def literals_to_constants(text: str, prefix: str = "k") -> tuple[str, dict[str, float]]:
    """Replace every float literal (``1.5``, ``2e-3``; not plain integers such as exponents)
    with a named constant ``k0, k1, ...``; returns the new text and the constants' values.

    A peer's model carries its fitted constants as literals; the exact-recovery check snaps
    *named* constants to closed forms, so each literal becomes a name with its value.
    """
    values: dict[str, float] = {}

    def swap(match: re.Match[str]) -> str:
        name = f"{prefix}{len(values)}"
        values[name] = float(match.group(1))
        return name

    return _FLOAT.sub(swap, text), values


#: gplearn's functions and how they read in the formula language. Division, sqrt and log are
#: protected in gplearn (``div`` returns 1 where ``|b| < 0.001``, ``sqrt``/``log`` take ``|x|``,
#: ``log`` returns 0 near 0); the plain forms below are what the model means on the data, and
#: sympy removes ``abs`` of a positive argument (AI Feynman variables are positive).
_GPLEARN_BINARY = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})",
                   "div": "({} / {})", "max": None, "min": None}
_GPLEARN_UNARY = {"sqrt": "sqrt(abs({}))", "log": "log(abs({}))", "neg": "(-({}))",
                  "inv": "(1 / {})", "abs": "abs({})", "sin": "sin({})", "cos": "cos({})",
                  "tan": "tan({})"}


class ConversionError(ValueError):
    """A peer's model string uses something the formula language cannot say."""


def gplearn_to_formula(program: str) -> str:
    """gplearn's prefix program (``add(mul(x, 0.5), y)``) as an infix formula."""
    tokens = re.findall(r"[A-Za-z_][A-Za-z_0-9]*|-?\d+\.?\d*(?:[eE][+-]?\d+)?|[(),]", program)
    pos = 0

    def expr() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise ConversionError(f"unexpected end of gplearn program {program!r}")
        tok = tokens[pos]
        pos += 1
        if pos < len(tokens) and tokens[pos] == "(":
            pos += 1
            args = [expr()]
            while pos < len(tokens) and tokens[pos] == ",":
                pos += 1
                args.append(expr())
            if pos >= len(tokens) or tokens[pos] != ")":
                raise ConversionError(f"unbalanced gplearn program {program!r}")
            pos += 1
            if len(args) == 2 and _GPLEARN_BINARY.get(tok):
                return _GPLEARN_BINARY[tok].format(*args)  # type: ignore[union-attr]
            if len(args) == 1 and tok in _GPLEARN_UNARY:
                return _GPLEARN_UNARY[tok].format(args[0])
            raise ConversionError(f"gplearn function {tok}/{len(args)} has no formula form")
        if re.fullmatch(r"-?\d+\.?\d*(?:[eE][+-]?\d+)?", tok):
            return f"({tok})" if tok.startswith("-") else tok
        return tok

    out = expr()
    if pos != len(tokens):
        raise ConversionError(f"trailing tokens in gplearn program {program!r}")
    return out


def operon_to_formula(model: str) -> str:
    """pyoperon's infix model string as formula text (``^`` is already a power there; its
    ``square(x)``, if printed, becomes ``(x)**2``)."""
    text = model.replace("square(", "sq__(")
    text = re.sub(r"sq__\(", "_SQ(", text)
    # _SQ(...) -> ((...)**2): find the matching parenthesis.
    while "_SQ(" in text:
        start = text.index("_SQ(")
        depth, i = 0, start + 3
        for i in range(start + 3, len(text)):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                break
        inner = text[start + 4:i]
        text = text[:start] + f"(({inner})**2)" + text[i + 1:]
    return text


# --- tables -------------------------------------------------------------------------------------

def _fmt(value: float | None, spec: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, spec)


def _cell(r: PeerResult | None) -> str:
    if r is None:
        return "·"
    if r.status != "ok":
        return r.status
    hit = "**yes**" if r.exact else "no"
    tte = _fmt(r.time_to_exact_s, ".1f") if r.exact else "-"
    return f"{hit} / {_fmt(r.test_nmse, '.1e')} / {tte}"


def summarize(results: Iterable[PeerResult], noise: float,
              tools: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per tool at one noise level: problems run, exact recoveries, rate, median test NMSE,
    median R², median time to exact, total candidates."""
    rows = [r for r in results if r.noise == noise]
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        mine = [r for r in rows if r.tool == tool]
        ran = [r for r in mine if r.status in ("ok", "timeout", "failed")]
        ok = [r for r in mine if r.status == "ok"]
        exact = [r for r in ok if r.exact]
        times = sorted(r.time_to_exact_s for r in exact if r.time_to_exact_s is not None)
        nm = sorted(r.test_nmse for r in ok if r.test_nmse is not None)
        r2 = sorted(r.test_r2 for r in ok if r.test_r2 is not None)
        cands = [r.candidates for r in ok if r.candidates is not None]
        # Where the tool exposes its search (sr-dist): an exact formula anywhere in it, and
        # whether the lowest-validation-NMSE answer (instead of the parsimony pick) was exact.
        searched = [r for r in ok if "exact_any" in r.extra or "select" in r.extra]
        lowest = [r for r in searched
                  if (r.extra["lowest_val_nmse"].get("exact") if "lowest_val_nmse" in r.extra
                      else r.exact)]
        out[tool] = {
            "run": len(ran), "not_run": len(mine) - len(ran), "exact": len(exact),
            "rate": (len(exact) / len(ran)) if ran else None,
            "median_test_nmse": _median(nm), "median_test_r2": _median(r2),
            "median_time_to_exact_s": _median(times),
            "candidates": sum(cands) if cands else None,
            "exact_anywhere": (sum(1 for r in searched if r.extra.get("exact_any"))
                               if searched else None),
            "exact_lowest_nmse": len(lowest) if searched else None,
        }
    return out


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


def markdown_tables(results: Sequence[PeerResult], tools: Sequence[str]) -> str:
    """One table per noise level (cell: exact / test NMSE / time to exact) and a summary."""
    parts: list[str] = []
    by_key = {(r.tool, r.problem, r.noise): r for r in results}
    for noise in sorted({r.noise for r in results}):
        problems = [p for p in dict.fromkeys(r.problem for r in results if r.noise == noise)]
        budgets = sorted({r.budget_s for r in results if r.noise == noise})
        parts.append(f"### noise {noise:g} (budget {', '.join(f'{b:g}' for b in budgets)} s "
                     "per problem)\n")
        parts.append("Cell: exact recovery / test NMSE / time to exact hit (s).\n")
        parts.append("| problem | " + " | ".join(tools) + " |")
        parts.append("|---|" + "---|" * len(tools))
        for p in problems:
            parts.append(f"| {p} | " + " | ".join(_cell(by_key.get((t, p, noise)))
                                                 for t in tools) + " |")
        parts.append("")
        summary = summarize(results, noise, tools)
        parts.append("| tool | problems run | exact | exact rate | median test NMSE | "
                     "median test R² | median time to exact (s) | candidates evaluated |")
        parts.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for tool in tools:
            s = summary[tool]
            rate = "-" if s["rate"] is None else f"{100 * s['rate']:.0f}%"
            parts.append(
                f"| {tool} | {s['run']} | {s['exact']} | {rate} | "
                f"{_fmt(s['median_test_nmse'], '.2e')} | {_fmt(s['median_test_r2'], '.6f')} | "
                f"{_fmt(s['median_time_to_exact_s'], '.1f')} | "
                f"{s['candidates'] if s['candidates'] is not None else '-'} |")
        parts.append("")
        for tool in tools:
            s = summary[tool]
            if s.get("exact_anywhere") is not None:
                parts.append(
                    f"{tool}: an exact formula was evaluated during the search in "
                    f"{s['exact_anywhere']}/{s['run']} problems; answering with the lowest "
                    f"validation NMSE instead of the parsimony pick would have been exact in "
                    f"{s['exact_lowest_nmse']}/{s['run']}.")
        parts.append("")
    return "\n".join(parts)


__all__ = [
    "ConversionError", "PROBLEMS", "PeerResult", "TOOLS", "gplearn_to_formula", "json_safe",
    "literals_to_constants", "markdown_tables", "operon_to_formula", "recovery_rel_tol",
    "result_key", "summarize",
]
