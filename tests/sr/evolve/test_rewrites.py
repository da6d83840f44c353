"""Rewrites of solutions (``sr_dist.sr.evolve.rewrites``): phase forms (``a*F*sin(u) + b*F*cos(u)``
as ``R*F*sin(u + p)``, ``EvolveConfig.phase_forms``) and negligible terms dropped
(``EvolveConfig.drop_negligible_terms``).

Invariants over generated trees (the same values, fewer nodes, the constants carried), the hit
count of the judge over a generated family of phased laws, and the search offering them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sr_dist.formula import evaluate_numpy, parse_formula
from sr_dist.results.recovery import recovery_verdict
from sr_dist.sr.evolve.population import read_history
from sr_dist.sr.evolve.rewrites import phase_forms, without_negligible_terms
from sr_dist.sr.evolve.search import EvolveConfig, propose
from sr_dist.sr.evolve.tree import constant_values, render, size, values, with_constant_values
from sr_dist.tools.types import ToolCall, ToolCallResult

NAMES = ("x0", "x1", "x2")


def _fitted(text: str, constants: dict[str, float]):
    return with_constant_values(parse_formula(text, NAMES).tree, constants)


def _generated(seed: int) -> tuple[str, dict[str, float]]:
    """A random formula holding one ``a*sin(u)`` and ``b*cos(u)`` pair among other terms: the
    coefficients absent, literal or fitted, the terms signed either way, the sum inside a
    product or a function or not, ``u`` a variable, a difference or a scaled variable."""
    rng = np.random.default_rng(seed)
    constants: dict[str, float] = {}

    def constant() -> str:
        name = f"c{len(constants)}"
        constants[name] = float(np.round(rng.uniform(-3, 3), 3)) or 0.5
        return name

    i, j = (f"x{k}" for k in rng.permutation(3)[:2])
    kind = int(rng.integers(3))
    if kind == 2:
        scale = constant()
        constants[f"c{len(constants)}"] = constants[scale]  # the cosine's own copy, same value
        u_sin, u_cos = f"{scale}*{i}", f"c{len(constants) - 1}*{i}"
    else:
        u_sin = u_cos = i if kind == 0 else f"{i} - {j}"

    def coefficient() -> str:
        form = int(rng.integers(3))
        return "" if form == 0 else (f"{rng.integers(2, 6)}*" if form == 1 else f"{constant()}*")

    terms = [f"{coefficient()}sin({u_sin})", f"{coefficient()}cos({u_cos})"]
    terms += [f"{constant()}*{j}**2", constant()][: int(rng.integers(3))]
    order = rng.permutation(len(terms))
    text = "".join(f" {'-' if rng.random() < 0.4 else '+'} {terms[k]}" for k in order)
    text = text[3:] if text.startswith(" + ") else "-" + text[3:]
    wrap = int(rng.integers(3))
    if wrap == 1:
        text = f"{j}*({text})"
    elif wrap == 2:
        text = f"exp({text})"
    return text, constants


@pytest.mark.parametrize("seed", range(40))
def test_a_phase_form_takes_the_same_values_and_fewer_nodes(seed: int) -> None:
    text, constants = _generated(seed)
    tree = _fitted(text, constants)
    X = np.random.default_rng(seed).uniform(0.5, 3.0, (64, 3))
    expected = evaluate_numpy(parse_formula(text, NAMES), X, NAMES, constants)
    forms = phase_forms(tree)
    fitted_coefficient = any(f"{c}*sin" in text or f"{c}*cos" in text for c in constants)
    # Two known coefficients (absent or literal): nothing to read back, no node saved.
    assert len(forms) == int(fitted_coefficient), (text, [render(f) for f in forms])
    if not forms:
        return
    (form,) = forms
    carried = constant_values(form)
    assert all(v is not None for v in carried), (text, render(form))  # a local search's start
    np.testing.assert_allclose(values(form, NAMES, X, carried), expected, rtol=1e-10, atol=1e-10)
    both_fitted = len([c for c in constants if f"{c}*sin" in text or f"{c}*cos" in text]) == 2
    assert size(form) <= size(tree) - (3 if both_fitted else 1), (text, render(form))
    assert "cos" not in render(form), render(form)


def test_forms_without_a_pair_have_no_phase_form() -> None:
    for text in ("c0*sin(x0) + c1*cos(x1)", "c0*sin(x0) + c1*sin(x0)**2", "c0*sin(x0)*cos(x0)",
                 "sin(c0*x0) + cos(c1*x0)", "x0*sin(x1) + c0*cos(x1)", "sin(x0) - 2*cos(x0)", "c0 + x1"):
        # different arguments, no cosine, a product, scales that differ, a variable factor,
        # no fitted coefficient, no wave
        constants = {"c0": 0.7, "c1": 1.3}
        assert phase_forms(_fitted(text, constants)) == [], text


def test_pairs_with_the_same_other_factors_and_every_pair_at_once() -> None:
    text = "c0*x1*sin(x1) + x1*c1*cos(x1) + (x0 + x2)*(c2*sin(x1) + c3*cos(x1)) + x2"
    constants = {"c0": 0.2272, "c1": 0.9738, "c2": -0.2272, "c3": -0.9738}
    forms = phase_forms(_fitted(text, constants))
    X = np.random.default_rng(0).uniform(0.5, 3.0, (64, 3))
    expected = evaluate_numpy(parse_formula(text, NAMES), X, NAMES, constants)
    assert len(forms) == 3  # each pair alone, then both
    for form in forms:
        np.testing.assert_allclose(values(form, NAMES, X, constant_values(form)), expected,
                                   rtol=1e-10, atol=1e-10)
    assert "cos" not in render(forms[-1]) and render(forms[-1]).count("sin") == 2
    # Other factors that differ make no pair: x1 against x0.
    assert phase_forms(_fitted("c0*x1*sin(x1) + c1*x0*cos(x1)", constants)) == []


def test_constants_without_values_give_a_form_to_fit_in_full() -> None:
    (form,) = phase_forms(parse_formula("c0*sin(x0) + c1*cos(x0) + x1", NAMES).tree)
    assert render(form) == "x1 + c0*sin(x0 + c1)"
    assert constant_values(form) == [None, None]


def _law(seed: int) -> tuple[str, str, dict[str, float]]:
    """The family: ``A*sin(x_i + k) + B*x_j`` or ``A*cos(k - x_i) + B*x_j`` with ``k = p/10``
    (``p`` in 1..35, the existing generator's range of constants) and ``A, B`` small
    rationals; returns the truth and its answer as the search finds it: ``a*sin(x_i) +
    b*cos(x_i) + c*x_j`` with exact constants."""
    rng = np.random.default_rng(1000 + seed)
    i, j = (f"x{k}" for k in rng.permutation(3)[:2])
    p, amplitude, slope = int(rng.integers(1, 36)), int(rng.integers(1, 5)), int(rng.integers(1, 5))
    k = p / 10
    if seed % 2:
        truth = f"{amplitude}*sin({i} + {p}/10) + {slope}*{j}"
        a, b = amplitude * math.cos(k), amplitude * math.sin(k)
    else:
        truth = f"{amplitude}*cos({p}/10 - {i}) + {slope}*{j}"
        a, b = amplitude * math.sin(k), amplitude * math.cos(k)
    return truth, f"c0*sin({i}) + c1*cos({i}) + c2*{j}", {"c0": a, "c1": b, "c2": float(slope)}


def test_phase_forms_hit_count_over_a_generated_family() -> None:
    """Seeds 0-23 of the family: the judge reads the phase form back as the law in 24 of 24.
    It read the pair form in none of them (0 of 24, 1.2 s each, when this was written: a
    coefficient ``A*sin(p/q)`` is no closed form it tries), so only the first four pair forms
    are judged here, to keep the contrast at a cost of seconds."""
    pair_hits = phase_hits = 0
    for seed in range(24):
        truth, answer, constants = _law(seed)
        if seed < 4:
            pair_hits += recovery_verdict(answer, constants, truth, NAMES) is True
        (form,) = phase_forms(_fitted(answer, constants))
        named = {f"c{n}": v for n, v in enumerate(constant_values(form))}
        phase_hits += recovery_verdict(render(form), named, truth, NAMES) is True
    assert phase_hits == 24, phase_hits
    assert pair_hits < 4, pair_hits


def _with_junk(seed: int) -> tuple[str, dict[str, float], int]:
    """A sum of three to five terms (coefficients of order one), some of whose coefficients a
    fit drove to nothing (1e-21 to 1e-12 times the others), possibly inside a product or a
    function; returns it, its constants and how many terms are junk."""
    rng = np.random.default_rng(seed)
    shapes = ["{}*x0", "{}*x1**2", "{}*exp(x2)", "{}*sin(x0)", "{}*x0*x1", "{}/x2", "x1/{}", "{}"]
    picked = [shapes[k] for k in rng.choice(len(shapes), size=int(rng.integers(3, 6)), replace=False)]
    junk = int(rng.integers(1, len(picked)))
    constants = {}
    terms = []
    for n, shape in enumerate(picked):
        value = float(rng.uniform(0.5, 3.0)) if n >= junk else float(10.0 ** rng.uniform(-21, -12))
        if shape.startswith("x1/"):  # junk as a quotient: a huge denominator
            value = 1.0 / value if n < junk else value
        constants[f"c{n}"] = value * (1 if rng.random() < 0.5 else -1)
        terms.append(shape.format(f"c{n}"))
    text = " + ".join(terms[k] for k in rng.permutation(len(terms)))
    return (f"x1*({text})" if seed % 3 == 1 else f"log(x0 + {text})" if seed % 3 == 2
            else text), constants, junk


@pytest.mark.parametrize("seed", range(24))
def test_negligible_terms_are_dropped_and_the_rest_kept(seed: int) -> None:
    text, constants, junk = _with_junk(seed)
    tree = _fitted(text, constants)
    pruned = without_negligible_terms(tree)
    assert pruned is not None, text
    carried = constant_values(pruned)
    assert len(carried) == len(constants) - junk, (text, render(pruned))
    assert all(v is not None and 0.3 <= abs(v) <= 3.0 for v in carried), (text, render(pruned))
    X = np.random.default_rng(seed).uniform(0.5, 3.0, (64, 3))
    expected = evaluate_numpy(parse_formula(text, NAMES), X, NAMES, constants)
    np.testing.assert_allclose(values(pruned, NAMES, X, carried), expected, rtol=1e-9)


def test_nothing_is_dropped_from_comparable_or_unknown_coefficients() -> None:
    comparable = _fitted("c0*x0 + c1*x1**2 + c2", {"c0": 1e-3, "c1": 5.0, "c2": -2.0})
    assert without_negligible_terms(comparable) is None
    unknown = _fitted("c0*x0 + c1*x1**2 + c2", {"c0": 1e-30, "c1": 5.0})  # c2 carries none
    assert without_negligible_terms(unknown) is None
    assert without_negligible_terms(parse_formula("x0 + x1", NAMES).tree) is None


def _solved_history(text: str, constants: dict[str, float]):
    record = {"expression": text, "canonical": parse_formula(text, NAMES).canonical, "status": "ok",
              "val_nmse": 1e-30, "train_nmse": 1e-30,
              "complexity": parse_formula(text, NAMES).complexity, "constants": constants}
    call = ToolCall("evaluate_formulas", {"expressions": [text]})
    return read_history([(call, ToolCallResult(True, {"results": [record]}, ""))], NAMES,
                        with_constants=True)


def test_the_search_offers_a_solutions_phase_forms_from_its_constants() -> None:
    history = _solved_history("c0*sin(x0) + c1*cos(x0) + c2*x1", {"c0": 0.6, "c1": 0.8, "c2": 2.0})
    proposal = propose(history, NAMES, [], EvolveConfig(batch_size=8), np.random.default_rng(0))
    offered = [(e, s) for e, o, s in zip(proposal.expressions, proposal.origins,
                                         proposal.starts or [None] * 8, strict=True)
               if o == "phase_form"]
    assert len(offered) == 1, proposal.origins
    expression, start = offered[0]
    assert expression == "c0*x1 + c1*sin(x0 + c2)"
    assert start == pytest.approx({"c0": 2.0, "c1": 1.0, "c2": math.atan2(0.8, 0.6)})
    # Switched off, none is offered; without inheritance, it is offered for a full fit.
    off = propose(history, NAMES, [], EvolveConfig(batch_size=8, phase_forms=False),
                  np.random.default_rng(0))
    assert "phase_form" not in off.origins
    full = propose(history, NAMES, [], EvolveConfig(batch_size=8, inherit_constants=False),
                   np.random.default_rng(0))
    at = full.origins.index("phase_form")
    assert not full.starts or full.starts[at] is None


def test_the_search_offers_a_solution_without_its_negligible_terms_then_its_phase_forms() -> None:
    constants = {"c0": 0.6, "c1": 0.8, "c2": 2.0, "c3": 1e-19}
    history = _solved_history("c0*sin(x0) + c1*cos(x0) + c2*x1 + c3*exp(x2)", constants)
    proposal = propose(history, NAMES, [], EvolveConfig(batch_size=8), np.random.default_rng(0))
    rewrites = [(e, o) for e, o in zip(proposal.expressions, proposal.origins, strict=True)
                if o in ("pruned", "phase_form")]
    assert rewrites == [("c0*sin(x0) + c1*cos(x0) + c2*x1", "pruned"),
                        ("c0*x1 + c1*sin(x0 + c2)", "phase_form")]
    off = propose(history, NAMES, [], EvolveConfig(batch_size=8, drop_negligible_terms=False),
                  np.random.default_rng(0))
    assert "pruned" not in off.origins
    assert "c0*x1 + c1*exp(x2) + c2*sin(x0 + c3)" in off.expressions
