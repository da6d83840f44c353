"""The skeleton set of ``bench/fit_quality.py`` (no fitting here): fixed by the seed, at least
200 formulas in the stated ranges, linear and nonlinear constants mixed, usable targets."""

from __future__ import annotations

import numpy as np

from bench.fit_quality import CLASSICS, VARS, _sample, skeletons
from sr_dist.formula import parse_formula


def test_the_set_is_fixed_by_its_seed_and_in_range() -> None:
    first, again, other = skeletons(240, 0), skeletons(240, 0), skeletons(240, 1)
    assert first == again and first != other
    assert len(first) == 240 and [s.text for s in first[: len(CLASSICS)]] == list(CLASSICS)
    for sk in first:
        f = parse_formula(sk.text, VARS)
        assert 1 <= len(f.variables) <= 4 and 1 <= len(f.constants) <= 8, sk.text
        assert list(f.constants) == [f"c{i}" for i in range(len(f.constants))], sk.text
        assert len(sk.constants) == len(f.constants)
    kinds = {(s.n_linear == 0, s.n_linear == len(s.constants)) for s in first}
    assert kinds == {(True, False), (False, True), (False, False)}  # none, all, mixed


def test_targets_are_sampled_from_the_true_constants() -> None:
    sk = next(s for s in skeletons(len(CLASSICS), 0) if s.text == "c0*exp(-c1*x0)")
    data = _sample(sk.text, sk.constants, 200, seed=5)
    assert data is not None and data.X_train.shape == (140, 4)
    want = sk.constants[0] * np.exp(-sk.constants[1] * data.X_train[:, 0])
    np.testing.assert_allclose(data.y_train, want, rtol=1e-12)
    assert _sample("c0 + 0*x0", (1.0,), 200, seed=5) is None  # constant target: unusable
