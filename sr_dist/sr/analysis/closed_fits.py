"""Fast least-squares fits with closed forms: polynomials, power laws, rational functions.

Each fit runs on the arrays it is given (the tools pass the training split) and returns a
:class:`ClosedFit`: a formula in sr-dist's formula language with the fitted numbers written in
(``formula``, ready for ``evaluate_formulas``; numbers rather than free constants so the
agent can pass it on unchanged), the same shape with free constants (``template``, to refit),
and its train NMSE. Bad requests raise :class:`FitRequestError` with a message that says how
to fix them; the tool shell turns it into a failed result.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sr_dist.sr.analysis._common import AnalysisRequestError, fresh_name, nmse, number_text, term_text
from sr_dist.sr.structure.power_law import huber_lstsq

__all__ = [
    "MAX_DEGREE",
    "MAX_TERMS",
    "POWER_LAW_ROWS",
    "ClosedFit",
    "FitRequestError",
    "fit_polynomial",
    "fit_power_law",
    "fit_rational",
    "monomial_powers",
    "monomial_matrix",
    "least_squares",
]

#: Highest total degree a polynomial (or either side of a rational function) may have.
MAX_DEGREE = 6
#: Most monomials one fit may use (more would overfit and slow the solve).
MAX_TERMS = 200
#: A term whose share of the target's spread is below this is dropped as numerical noise.
_NEGLIGIBLE = 1e-9
#: Fewest rows a power law is fitted on (the structure core's ``power_law`` asks as many).
POWER_LAW_ROWS = 8
#: Reweighting rounds of the rational fit (Sanathanan-Koerner): each divides by the last Q.
_RATIONAL_ROUNDS = 4


class FitRequestError(AnalysisRequestError):
    """A fit that cannot be made as asked (bad degree, unusable data); the message says why."""


@dataclass(frozen=True)
class ClosedFit:
    """One fitted formula: ``formula`` with numbers, ``template`` with free constants."""

    kind: str
    variables: tuple[str, ...]
    formula: str
    template: str
    train_nmse: float
    terms: int
    note: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "variables": list(self.variables), "formula": self.formula,
                "template": self.template, "train_nmse": self.train_nmse, "terms": self.terms,
                "note": self.note}


def monomial_powers(n_vars: int, degree: int, *, constant: bool = True) -> list[tuple[int, ...]]:
    """Exponent tuples of every monomial of total degree up to ``degree`` (lowest degree first)."""
    out: list[tuple[int, ...]] = []
    for total in range(0 if constant else 1, degree + 1):
        for combo in itertools.combinations_with_replacement(range(n_vars), total):
            powers = [0] * n_vars
            for index in combo:
                powers[index] += 1
            out.append(tuple(powers))
    return out


def monomial_matrix(X: np.ndarray, powers: Sequence[tuple[int, ...]]) -> np.ndarray:
    """The design matrix: one column per monomial."""
    X = np.asarray(X, dtype=float)
    # Each monomial is a known one times one variable: one multiplication per column.
    known: dict[tuple[int, ...], np.ndarray] = {(0,) * X.shape[1]: np.ones(len(X))}

    def column(power: tuple[int, ...]) -> np.ndarray:
        found = known.get(power)
        if found is None:
            j = next(k for k, p in enumerate(power) if p)
            lower = power[:j] + (power[j] - 1,) + power[j + 1:]
            found = column(lower) * X[:, j]
            known[power] = found
        return found

    columns = [column(tuple(int(v) for v in p)) for p in powers]
    return np.column_stack(columns) if columns else np.empty((len(X), 0))


def _check_degree(degree: object, what: str, low: int) -> int:
    if isinstance(degree, bool) or not isinstance(degree, int) or not low <= degree <= MAX_DEGREE:
        raise FitRequestError(f"{what} must be an integer from {low} to {MAX_DEGREE}, got {degree!r}")
    return degree


def _check_terms(count: int, rows: int, what: str) -> None:
    if count > MAX_TERMS:
        raise FitRequestError(f"{what} needs {count} monomials (at most {MAX_TERMS}); "
                              "lower the degree or pass fewer variables")
    if count >= rows:
        raise FitRequestError(f"{what} needs {count} coefficients but there are only {rows} "
                              "training rows; lower the degree or pass fewer variables")


def _solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares on column-scaled ``A`` (scaling keeps high powers from ruining the solve)."""
    scale = np.sqrt(np.mean(A ** 2, axis=0))
    scale[scale == 0] = 1.0
    return np.asarray(least_squares(A / scale, b) / scale)


def least_squares(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``argmin |A c - b|`` by LAPACK's SVD solver (``lstsq``): robust to rank-deficient ``A``
    (a repeated or constant column), and on a multi-threaded OpenBLAS under load many times
    faster than a QR factorisation of the same matrix, which measured 0.56 s against 0.03 s
    for 1000 x 84 on two busy cores."""
    if A.shape[1] == 0:
        return np.zeros(0)
    coef, *_ = np.linalg.lstsq(A, b, rcond=None)
    return np.asarray(coef)


def _polynomial_text(names: Sequence[str], powers: Sequence[tuple[int, ...]],
                     coefficients: Sequence[float]) -> str:
    parts: list[str] = []
    for power, coefficient in zip(powers, coefficients, strict=True):
        term = term_text(names, power)
        magnitude = number_text(abs(coefficient))
        body = magnitude if term == "1" else (term if magnitude == "1" else f"{magnitude}*{term}")
        sign = "-" if coefficient < 0 else "+"
        parts.append(("-" + body) if not parts and sign == "-" else (body if not parts else f" {sign} {body}"))
    return "".join(parts) if parts else "0"


def _template_text(names: Sequence[str], powers: Sequence[tuple[int, ...]], prefix: str,
                   taken: Sequence[str], start: int = 0, unit_first: bool = False) -> tuple[str, int]:
    parts: list[str] = []
    index = start
    for k, power in enumerate(powers):
        term = term_text(names, power)
        if unit_first and k == 0 and term == "1":
            parts.append("1")
            continue
        name = fresh_name(prefix, index, taken)
        index += 1
        parts.append(name if term == "1" else f"{name}*{term}")
    return " + ".join(parts) if parts else "0", index


def _prune(A: np.ndarray, coef: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the terms that matter (contribution above numerical noise)."""
    spread = float(np.std(y)) or float(np.max(np.abs(y))) or 1.0
    contribution = np.abs(coef) * np.sqrt(np.mean(A ** 2, axis=0))
    return np.flatnonzero(contribution > _NEGLIGIBLE * spread)


def fit_polynomial(X: np.ndarray, y: np.ndarray, names: Sequence[str], degree: int) -> ClosedFit:
    """Least squares over every monomial of total degree up to ``degree`` in ``names``
    (the columns of ``X``); terms that contribute nothing measurable are dropped and the rest
    refitted, so an exact polynomial comes back with only its own terms."""
    degree = _check_degree(degree, "degree", 1)
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    powers = monomial_powers(len(names), degree)
    _check_terms(len(powers), len(y), f"a degree-{degree} polynomial in {len(names)} variable(s)")
    A = monomial_matrix(X, powers)
    coef = _solve(A, y)
    keep = _prune(A, coef, y)
    if keep.size < len(powers):
        powers = [powers[i] for i in keep]
        A = A[:, keep]
        coef = _solve(A, y) if keep.size else np.zeros(0)
    prediction = A @ coef if keep.size else np.zeros_like(y)
    template, _ = _template_text(names, powers, "c", names)
    return ClosedFit("polynomial", tuple(names), _polynomial_text(names, powers, [float(c) for c in coef]),
                     template,
                     nmse(y, prediction), len(powers))


def fit_power_law(X: np.ndarray, y: np.ndarray, names: Sequence[str]) -> ClosedFit:
    """``y = c * prod(x_i ** b_i)`` by a robust fit of ``log|y| = log c + sum b_i log x_i``.

    The fit is the structure core's (:func:`sr_dist.sr.structure.power_law.huber_lstsq`, the
    log-log fit the offline proposer reads its power laws from): least squares reweighted with
    Huber's weights, so a few rows off the law do not bend the exponents. Needs every chosen
    variable strictly positive and the target of one sign without zeros (a negative target is
    fitted as ``-c * ...``); a variable constant on the rows gets the exponent 0 (its power is
    part of ``c``). The fit minimises the error of the logs, i.e. relative error;
    ``train_nmse`` is measured on the original scale.
    """
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    bad = [name for j, name in enumerate(names) if not np.all(X[:, j] > 0)]
    if bad:
        verb = "has" if len(bad) == 1 else "have"
        raise FitRequestError(f"a power law needs strictly positive variables; {', '.join(bad)} {verb} "
                              "zero or negative values. Leave it out, or use fit_polynomial")
    if np.all(y > 0):
        sign = 1.0
    elif np.all(y < 0):
        sign = -1.0
    else:
        raise FitRequestError("a power law needs a target of one sign without zeros; this target "
                              "changes sign or is zero. Try fit_polynomial or fit_rational")
    if len(y) < POWER_LAW_ROWS:
        raise FitRequestError(f"a power law needs at least {POWER_LAW_ROWS} training rows, got {len(y)}")
    # The columns of the core's ``power_law``: a constant, then log x of each varying variable.
    varying = [j for j in range(X.shape[1]) if np.ptp(X[:, j]) > 0]
    A = np.column_stack([np.ones(len(y))] + [np.log(X[:, j]) for j in varying])
    coef, _ = huber_lstsq(A, np.log(sign * y))
    if not np.all(np.isfinite(coef)):
        raise FitRequestError("the log-log fit did not converge on this data; try fit_polynomial")
    prefactor = sign * math.exp(float(coef[0]))
    exponents = [0.0] * len(names)
    for i, j in enumerate(varying):
        exponents[j] = float(coef[i + 1])
    with np.errstate(all="ignore"):
        prediction = prefactor * np.exp(np.log(X) @ np.asarray(exponents))
    body = term_text(names, [_tidy(b) for b in exponents])
    formula = number_text(prefactor) if body == "1" else f"{number_text(prefactor)}*{body}"
    exponent_names = [fresh_name("b", j, names) for j in range(len(names))]
    template = "*".join([fresh_name("c", 0, names),
                         *(f"{name}**{b}" for name, b in zip(names, exponent_names, strict=True))])
    return ClosedFit("power_law", tuple(names), formula, template, nmse(y, prediction), len(names) + 1,
                     note="fitted on logs, robustly (relative error, Huber weights)")


def _tidy(exponent: float) -> float:
    """An exponent within 1e-9 of a multiple of 1/2 is written as that multiple."""
    half = round(exponent * 2) / 2
    return half if abs(exponent - half) < 1e-9 else exponent


def fit_rational(X: np.ndarray, y: np.ndarray, names: Sequence[str], numerator_degree: int,
                 denominator_degree: int) -> ClosedFit:
    """``y = P(x) / (1 + Q(x))`` with polynomials of the given total degrees.

    Linearised least squares: ``y = P - y*Q`` is linear in the coefficients; then a few
    Sanathanan-Koerner rounds reweight each row by ``1/(1 + Q)`` of the last round, which turns
    the linearised error back into the true one. The constant term of the denominator is 1
    (that fixes the scale). ``note`` says when the denominator changes sign on the data (a
    pole inside the training range).

    Not the structure core's :func:`sr_dist.sr.structure.rational.rational_fits`: that one
    answers another question (is there a sparse *exact* ratio, at degrees it picks, on at most
    256 rows and six variables; nothing on noisy data, and no coefficients), while this is the
    least-squares ratio of the degrees asked for, exact or not.
    """
    num_degree = _check_degree(numerator_degree, "numerator_degree", 0)
    den_degree = _check_degree(denominator_degree, "denominator_degree", 1)
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    p_powers = monomial_powers(len(names), num_degree)
    q_powers = monomial_powers(len(names), den_degree, constant=False)
    _check_terms(len(p_powers) + len(q_powers), len(y),
                 f"a rational function of degrees {num_degree}/{den_degree} in {len(names)} variable(s)")
    P = monomial_matrix(X, p_powers)
    Q = monomial_matrix(X, q_powers)
    A = np.column_stack([P, -y[:, None] * Q])
    weights = np.ones(len(y))
    best: tuple[bool, float, np.ndarray] | None = None
    for _ in range(_RATIONAL_ROUNDS + 1):
        coef = _solve(A * weights[:, None], y * weights)
        denominator = 1.0 + Q @ coef[len(p_powers):]
        with np.errstate(all="ignore"):
            prediction = (P @ coef[:len(p_powers)]) / denominator
        score = nmse(y, prediction)
        # A round whose denominator keeps one sign beats any with a pole among the data.
        pole = bool(np.any(denominator > 0) and np.any(denominator < 0))
        if best is None or (pole, score) < (best[0], best[1]):
            best = (pole, score, coef)
        if not np.all(np.abs(denominator) > 1e-12):
            break
        weights = 1.0 / np.abs(denominator)
    assert best is not None
    _, score, coef = best
    p_coef, q_coef = coef[:len(p_powers)], coef[len(p_powers):]
    keep_p = _prune(P, p_coef, y)
    keep_q = _prune(y[:, None] * Q, q_coef, y)
    p_powers_kept = [p_powers[i] for i in keep_p]
    q_powers_kept = [q_powers[i] for i in keep_q]
    numerator = _polynomial_text(names, p_powers_kept, [float(c) for c in p_coef[keep_p]])
    denominator_text = _polynomial_text(names, [(0,) * len(names), *q_powers_kept],
                                        [1.0, *(float(c) for c in q_coef[keep_q])])
    # A denominator that came out as 1 (a polynomial fits): no division to write.
    formula = f"({numerator})/({denominator_text})" if q_powers_kept else numerator
    top, used = _template_text(names, p_powers_kept, "p", names)
    bottom, _ = _template_text(names, [(0,) * len(names), *q_powers_kept], "q", names, used,
                               unit_first=True)
    denominator_values = 1.0 + Q[:, keep_q] @ q_coef[keep_q]
    pole = bool(np.any(denominator_values > 0) and np.any(denominator_values < 0))
    note = "the denominator changes sign on the training data (a pole in range)" if pole else ""
    return ClosedFit("rational", tuple(names), formula, f"({top})/({bottom})", score,
                     len(p_powers_kept) + len(q_powers_kept), note=note)
