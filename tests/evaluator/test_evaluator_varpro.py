"""Variable projection: linear constants are found from the program and solved exactly inside
the fit; LM iterates only on the nonlinear ones (lm.py). Same datasets and bucket shapes as the
other evaluator tests, so the compiled executables are shared."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.evaluator import kernels as _kernels
from sr_dist.evaluator.program import find_linear, lower, pack_programs
from sr_dist.formula import parse_formula

NAMES = ("x0", "x1", "x2")
LINEAR_CASES = json.loads((Path(__file__).parent / "linear_cases.json").read_text())


@pytest.mark.parametrize("case", LINEAR_CASES, ids=[c["formula"] for c in LINEAR_CASES])
def test_linear_constants_are_found_from_the_formula(case: dict) -> None:
    f = parse_formula(case["formula"], NAMES)
    assert sorted(find_linear(f.tree)) == sorted(case["linear"])
    # The lowered canonical program carries the same set as indices into its constant order.
    consts = [f"c{i}" for i in range(len(f.canonical_constants))]
    prog = lower(f.canonical_tree, NAMES, consts)
    assert sorted(f.canonical_constants[j] for j in prog.linear) == sorted(case["linear"])


def test_the_split_is_packed_as_data() -> None:
    f = parse_formula("a*exp(-b*x0) + c", NAMES)
    prog = lower(f.canonical_tree, NAMES, ["c0", "c1", "c2"])
    _, meta, _ = pack_programs([prog], n_vars=3, n_consts=4, n_lits=2, n_instr=8, capacity=2)
    assert meta[0, 3] == sum(1 << j for j in prog.linear) and meta[1, 3] == 0
    _, off, _ = pack_programs([prog], n_vars=3, n_consts=4, n_lits=2, n_instr=8, capacity=2,
                              linear=False)
    assert off[0, 3] == 0 and (off[:, :3] == meta[:, :3]).all()


def test_an_all_linear_formula_is_one_solve(make_dataset: Callable[..., Dataset]) -> None:
    """Noisy linear-in-constants data: the least-squares optimum after the solve and one
    refinement pass, where plain LM iterates until its stall counter runs out."""
    ds = make_dataset(lambda X: 1.5 * X[:, 0] ** 2 - 2.0 * np.sin(X[:, 1]) + 0.3 / X[:, 2],
                      seed=11, noise=0.05)
    formula = "a*x0**2 + b*sin(x1) + c/x2 + d"
    X, y = ds.X_train, ds.y_train
    A = np.column_stack([X[:, 0] ** 2, np.sin(X[:, 1]), 1 / X[:, 2], np.ones(len(y))])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    best = float(np.mean((A @ coef - y) ** 2))
    on = Evaluator(ds).fit(formula)
    off = Evaluator(ds, variable_projection=False).fit(formula)
    assert on.ok and off.ok
    np.testing.assert_allclose(list(on.constants.values()), coef, rtol=1e-3, atol=1e-4)
    assert on.train_mse is not None and on.train_mse <= best * (1 + 1e-5)
    assert on.iterations <= 2 < off.iterations


def test_exact_linear_constants_on_noise_free_data(make_dataset: Callable[..., Dataset]) -> None:
    ds = make_dataset(lambda X: -3.25 * X[:, 0] * X[:, 1] + 0.75 * X[:, 2] ** 3 + 4.0, seed=12)
    res = Evaluator(ds).fit("a*x0*x1 + b*x2**3 + c")
    assert res.ok and res.iterations <= 2
    np.testing.assert_allclose([res.constants[k] for k in "abc"], [-3.25, 0.75, 4.0],
                               rtol=1e-5)
    assert res.train_nmse is not None and res.train_nmse < 1e-10


def test_mixed_formula_recovered_where_plain_lm_is_not(
        make_dataset: Callable[..., Dataset]) -> None:
    """From the same four seeded starts, plain LM on all four constants ends in a poor local
    fit (``b`` near 0); with the linear ones projected out, LM on ``b`` alone finds the truth,
    in fewer passes."""
    ds = make_dataset(lambda X: -3.0 * np.exp(-1.7 * X[:, 0]) + 0.5 * X[:, 1] + 4.0, seed=13)
    formula = "a*exp(-b*x0) + c*x1 + d"
    off = Evaluator(ds, variable_projection=False).fit(formula)
    on = Evaluator(ds).fit(formula)
    assert off.train_nmse is not None and off.train_nmse > 1e-6
    assert on.ok and on.train_nmse is not None and on.train_nmse < 1e-10
    np.testing.assert_allclose([on.constants[k] for k in "abcd"], [-3.0, 1.7, 0.5, 4.0],
                               rtol=1e-4)
    assert on.iterations < off.iterations


def test_different_splits_share_one_compiled_bucket(target_dataset: Dataset) -> None:
    ev = Evaluator(target_dataset)
    ev.fit("a*x0 + b*x1 + c*x2 + d")  # k4-small: compiled here or by an earlier test
    compiles, executables = ev.stats()["compiles"], len(_kernels.COMPILED)
    splits = ["a*exp(-b*x0) + c*x1 + d",  # a, c, d linear
              "x0**a + sin(b*x1) + c*x2*d",  # c only (one per term)
              "exp(a*x0)*x1 + x0/(x2 + b) + cos(c*x1 + d)",  # none
              "a*(x0 + b*x1 + c*x2) + d"]  # a and d
    assert len({tuple(sorted(find_linear(parse_formula(s, NAMES).tree))) for s in splits}) == 4
    ev.fit_many(splits)
    Evaluator(target_dataset, variable_projection=False).fit_many(splits)
    assert ev.stats()["compiles"] == compiles and ev.stats()["buckets"] == {"k4-small": 2}
    assert len(_kernels.COMPILED) == executables


def test_no_linear_constants_fit_exactly_as_plain_lm(target_dataset: Dataset) -> None:
    formulas = ["exp(c0*x0)*x1 + sin(c1*x2)", "x0/(c0 + x1)", "x0**c0 + x1", "sin(c0*x1)/x2"]
    assert not any(find_linear(parse_formula(f, NAMES).tree) for f in formulas)
    on = Evaluator(target_dataset).fit_many(formulas)
    off = Evaluator(target_dataset, variable_projection=False).fit_many(formulas)
    for a, b in zip(on, off):
        assert a.status == b.status and a.iterations == b.iterations, a.expression
        assert a.constants == pytest.approx(b.constants, rel=1e-6, abs=1e-9)
        assert a.train_mse == pytest.approx(b.train_mse, rel=1e-6, abs=1e-12)


def test_nonfinite_rows_are_still_masked_and_reported(target_dataset: Dataset,
                                                     make_dataset: Callable[..., Dataset]) -> None:
    ev = Evaluator(target_dataset)
    bad = ev.fit("a*sqrt(x0 - 2) + b")  # both linear; the column is NaN on about half the rows
    assert bad.status == "nonfinite" and "train rows" in (bad.error or "")
    # A step may not buy a lower loss with non-finite rows: log(x0 - b) stays on its domain.
    ds = make_dataset(lambda X: 2.0 * np.log(X[:, 0] - 0.5) + 1.0, seed=14)
    res = Evaluator(ds).fit("a*log(x0 - b) + c")
    assert res.ok and res.train_nmse is not None and res.train_nmse < 1e-8
    assert res.constants["b"] == pytest.approx(0.5, rel=1e-3)


def test_bad_candidates_do_not_change_their_batch_mates(target_dataset: Dataset) -> None:
    good = ["a*exp(-b*x0) + c*x1 + d", "c0*x0**2 + sin(c1*x1)/x2 + c2"]
    ev = Evaluator(target_dataset)
    alone = [ev.fit(g) for g in good]
    ev.clear_cache()
    mixed = ev.fit_many(["a*log(x0 - x0) + b", good[0], "a*sqrt(x0 - 2) + b*x1", good[1]])
    assert [r.status for r in mixed[0::2]] == ["nonfinite", "nonfinite"]
    for lone, batch in zip(alone, mixed[1::2]):
        assert lone.constants == batch.constants and lone.train_mse == batch.train_mse


def test_the_option_is_checked_and_keys_the_cache(target_dataset: Dataset) -> None:
    with pytest.raises(ValueError, match="variable_projection must be true or false"):
        Evaluator(target_dataset, variable_projection="yes")
    on = Evaluator(target_dataset).options.fit_key()
    off = Evaluator(target_dataset, variable_projection=False).options.fit_key()
    assert on != off
