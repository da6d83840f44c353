"""Formulas prepared by the proposing process (``sr_dist.evaluator.prepared``) fit exactly as
their texts do, over a generated family, however they travel."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.evaluator.prepared import PreparedFormula, prepare, prepare_text
from sr_dist.formula import Node, parse_formula, render

NAMES = ("x0", "x1", "x2")
CONSTANTS = ("a", "b", "k")
UNARY = ("sin", "exp", "sqrt", "log", "neg", "tanh")
BINARY = ("add", "sub", "mul", "div", "pow")


def random_tree(rng: np.random.Generator, depth: int) -> Node:
    if depth <= 1 or rng.random() < 0.25:
        roll = rng.random()
        if roll < 0.45:
            return Node("var", name=NAMES[int(rng.integers(len(NAMES)))])
        if roll < 0.85:
            return Node("const", name=CONSTANTS[int(rng.integers(len(CONSTANTS)))])
        return Node("num", value=float(rng.choice([0.5, 2.0, 3.0])))
    if rng.random() < 0.3:
        return Node(UNARY[int(rng.integers(len(UNARY)))], (random_tree(rng, depth - 1),))
    op = BINARY[int(rng.integers(len(BINARY)))]
    if op == "pow":  # small literal powers, as proposers write them
        return Node(op, (random_tree(rng, depth - 1), Node("num", value=float(rng.integers(2, 4)))))
    return Node(op, (random_tree(rng, depth - 1), random_tree(rng, depth - 1)))


def family(seed: int, n: int) -> list[str]:
    """``n`` distinct random formulas over the test datasets' variables (seeded)."""
    rng = np.random.default_rng(seed)
    texts: dict[str, None] = {}
    while len(texts) < n:
        texts.setdefault(render(random_tree(rng, int(rng.integers(2, 6)))), None)
    return list(texts)


def comparable(result: Any) -> dict[str, Any]:
    out = result.to_dict()
    out.pop("fit_s")  # a timing
    return out


def fit_fresh(ev: Evaluator, items: list[Any], starts: list[Any] | None = None) -> list[Any]:
    ev.clear_cache()
    return ev.fit_many(items, starts=starts)


@pytest.fixture(scope="module")
def ev(target_dataset: Dataset) -> Evaluator:
    return Evaluator(target_dataset)


def test_prepared_formulas_fit_exactly_as_their_texts(ev: Evaluator) -> None:
    texts = family(seed=7, n=60)
    prepared = [prepare_text(t, NAMES) for t in texts]
    assert all(isinstance(p, PreparedFormula) for p in prepared)
    sent = pickle.loads(pickle.dumps(prepared))  # as Ray carries them
    # Half with inherited starts (local searches), as an evolving agent sends them.
    starts = [{"a": 1.5} if i % 2 else None for i in range(len(texts))]
    for given in (None, starts):
        want = [comparable(r) for r in fit_fresh(ev, texts, given)]
        got = [comparable(r) for r in fit_fresh(ev, sent, given)]
        assert got == want
    assert sum(r["status"] == "ok" for r in want) >= 30  # the family is mostly fittable


def test_data_starts_read_the_rebuilt_canonical_tree(target_dataset: Dataset) -> None:
    ev = Evaluator(target_dataset, data_starts=True)
    texts = ["a*sin(k*x1 + b)/x2 + x0", "a*exp(-k*x0) + b*x1"]
    sent = pickle.loads(pickle.dumps([prepare_text(t, NAMES) for t in texts]))
    want = [comparable(r) for r in fit_fresh(ev, texts)]
    assert [comparable(r) for r in fit_fresh(ev, sent)] == want


@pytest.mark.parametrize("columns", [tuple(reversed(NAMES)), ("x0", "x1", "x9")])
def test_a_formula_prepared_for_other_columns_is_parsed_again(ev: Evaluator,
                                                              columns: tuple[str, ...]) -> None:
    # Reversed columns lower to another program; with x9 a variable there, it is a free
    # constant here (as the text would be read by this evaluator).
    text = "a*x0**2 + sin(k*x1)/x2 + x9"
    other = prepare(parse_formula(text, columns), columns)
    assert other.program != prepare(parse_formula(text, NAMES), NAMES).program
    [want] = fit_fresh(ev, [text])
    [got] = fit_fresh(ev, [other])
    assert comparable(got) == comparable(want)
    assert got.status == "ok" and set(got.constants) == {"a", "k", "x9"}


@pytest.mark.parametrize("text", ["a*x0**2 + sin(k*x1)/(x2 + b)", "x0*0.1*3 + a*k*b"])
def test_predictions_of_a_prepared_formula_are_its_texts(ev: Evaluator, text: str) -> None:
    values = {"a": 2.5, "k": 1.3, "b": 0.25}
    want = ev.evaluate_many([text], [values])
    got = ev.evaluate_many([prepare_text(text, NAMES)], [values])
    np.testing.assert_array_equal(got, want)  # the same program: bit for bit


def test_the_pickle_carries_fields_not_a_rebuilt_tree() -> None:
    formula = parse_formula("b + a*x0*sin(k*x1)", NAMES)
    item = prepare(formula, NAMES)
    size = len(pickle.dumps(item))
    assert item.canonical_tree == formula.canonical_tree  # rebuilt from the postfix code
    assert len(pickle.dumps(item)) == size
    back = pickle.loads(pickle.dumps(item))
    for name in ("text", "canonical", "variables", "constants", "canonical_constants",
                 "complexity"):
        assert getattr(back, name) == getattr(formula, name)
    assert (back.feature_names, back.program, back.canonical_code) == (
        NAMES, item.program, item.canonical_code)
    assert str(back) == formula.text


@pytest.mark.parametrize("text", ["x0 +", "sin(", "", "x0 ** ** 2"])
def test_text_that_does_not_parse_stays_text(ev: Evaluator, text: str) -> None:
    assert prepare_text(text, NAMES) == text
    [result] = ev.fit_many([prepare_text(text, NAMES)])
    assert result.status == "invalid" and result.error
