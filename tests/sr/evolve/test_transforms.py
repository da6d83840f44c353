"""The target-transform catalog: each inverse undoes its forward, on trees and on values."""

from __future__ import annotations

import numpy as np
import pytest

from sr_dist.sr.evolve.library.transforms import TRANSFORMS
from sr_dist.sr.evolve.tree import values as evaluate
from sr_dist.sr.evolve.tree import var

#: Targets inside each transform's domain and on the branch its inverse returns.
TARGETS = {
    "id": (-3.0, 3.0), "inv": (0.5, 4.0), "sq": (0.5, 4.0), "invsq": (0.5, 4.0), "sqrt": (0.5, 4.0),
    "cbrt": (-4.0, 4.0), "log": (0.5, 4.0), "exp": (-3.0, 3.0), "acos": (-0.9, 0.9),
    "asin": (-0.9, 0.9), "sin": (-1.5, 1.5), "tan": (-1.5, 1.5),
}


def test_every_transform_has_a_case() -> None:
    assert set(TARGETS) == set(TRANSFORMS)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_inverse_undoes_forward(name: str) -> None:
    transform = TRANSFORMS[name]
    t = np.random.default_rng(0).uniform(*TARGETS[name], size=200)
    assert transform.usable(t)
    z = transform.forward(t)
    assert np.all(np.isfinite(z))
    np.testing.assert_allclose(transform.inverse_values(z), t, rtol=1e-10, atol=1e-12)
    # The tree wraps a fitted sum (here just z itself) so that it predicts t again.
    tree_values = evaluate(transform.inverse(var("z")), ["z"], z[:, None], ())
    np.testing.assert_allclose(tree_values, t, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "name,outside",
    [("inv", [1.0, 0.0]), ("invsq", [2.0, 0.0]), ("sqrt", [1.0, -1.0]), ("log", [1.0, 0.0]),
     ("exp", [1.0, 40.0]), ("acos", [0.5, 1.5]), ("asin", [0.5, -1.5]), ("sin", [0.1, 1.6]),
     ("tan", [0.1, -1.6])],
)
def test_usable_refuses_targets_outside_the_domain(name: str, outside: list[float]) -> None:
    assert not TRANSFORMS[name].usable(np.array(outside))
