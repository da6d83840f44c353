"""bench/nonlinear_family.py: laws with nonlinear parameters inside functions, drawn from named
skeletons, seeded, non-degenerate, and reachable through ``bench/synthetic.py --family``."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from bench.nonlinear_family import FAMILY, MAX_VARS, SKELETONS, draw_nonlinear
from bench.synthetic import degeneracy, draw_formula, item_name, main
from sr_dist.formula import parse_formula

DRAWS = 40
INSIDE = ("exp", "sin", "cos", "tanh")


@pytest.fixture(scope="module")
def drawn() -> list[tuple[str, object]]:
    return [draw_nonlinear(1, i) for i in range(DRAWS)]


def test_draws_are_seeded_and_do_not_depend_on_each_other(drawn: list) -> None:
    again = draw_nonlinear(1, 7)
    assert again[1] == drawn[7][1] and again[0] == drawn[7][0]
    other_seed = [draw_nonlinear(2, i)[1].truth for i in range(5)]
    assert other_seed != [f.truth for _, f in drawn[:5]]


def test_every_draw_is_usable_and_puts_a_constant_inside_a_function(drawn: list) -> None:
    for name, f in drawn:
        assert name in SKELETONS
        assert f.family == FAMILY and f.item == f"{FAMILY}-seed1#{f.index}"
        assert 1 <= f.n_vars <= MAX_VARS
        assert degeneracy(f) is None  # the checks of bench/synthetic.py pass
        tree = parse_formula(f.truth, f.variables)  # the truth reads as sr-dist reads formulas
        assert tree is not None
        # A constant sits inside exp/sin/cos/tanh: what the family is for.
        assert any(node.op in INSIDE and any(e.op == "const" for e in node.args[0].walk())
                   for node in f.tree.walk()), f.truth
        X, y = f.sample(500, np.random.default_rng(0))
        assert X.shape == (500, f.n_vars) and np.all(np.isfinite(y))
        for j, (lo, hi) in enumerate(f.ranges):
            assert 0 < lo < hi and np.all((X[:, j] >= lo) & (X[:, j] <= hi))


def test_the_skeletons_are_all_drawn(drawn: list) -> None:
    counts = collections.Counter(name for name, _ in drawn)
    more = [draw_nonlinear(1, i)[0] for i in range(DRAWS, 3 * DRAWS)] if len(counts) < len(
        SKELETONS) else []
    counts.update(more)
    assert set(counts) == set(SKELETONS), counts


def test_synthetic_draws_the_family_by_name_and_refuses_an_unknown_one(
        drawn: list, capsys: pytest.CaptureFixture[str]) -> None:
    assert draw_formula(1, 3, "nonlinear").truth == drawn[3][1].truth
    assert draw_formula(1, 3).family == "srbench" and draw_formula(1, 3).item == "seed1#3"
    assert item_name(1, 3, "nonlinear") == drawn[3][1].item == "nonlinear-seed1#3"
    with pytest.raises(ValueError, match="unknown family 'noisy'"):
        draw_formula(1, 3, "noisy")
    assert main(["--family", "nonlinear", "--list", "--seed", "1", "--indices", "0", "3"]) == 0
    listed = capsys.readouterr().out
    assert "nonlinear-seed1#0" in listed and "nonlinear-seed1#3" in listed
    assert drawn[3][1].display in listed
