"""The ``pair_curves`` seed source over a generated family of laws that bend in a product or a
ratio of two variables: with it on, the library holds entries that fit those laws exactly;
with ``curves`` alone (curves of one variable) it holds none."""

from __future__ import annotations

import numpy as np

from sr_dist.sr.evolve.library.assemble import library_seeds
from sr_dist.sr.evolve.library.config import DEFAULT_LIBRARY, LibraryConfig
from sr_dist.sr.evolve.library.sample import Sample
from sr_dist.sr.evolve.library.sources.curves import CURVES
from sr_dist.sr.evolve.library.sources.pair_curves import pair_arguments, pair_curve_seeds

from .conftest import exact_library_entries, source_adds_only_its_seeds, user_curve

NAMES = ("x0", "x1", "x2")
ROWS = 300


def draw_law(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A law of three variables on a positive range: a saturation, a decay, a logistic step, a
    sinusoid or a rise of the product or the ratio of two of them (written as a user would, not
    as the library writes it), beside a linear term in the third, times it, or plus a constant."""
    rng = np.random.default_rng([seed, 37])
    X = rng.uniform(0.5, 3.0, (ROWS, 3))
    i, j, k = (int(a) for a in rng.permutation(3))
    u, v, w = X[:, i], X[:, j], X[:, k]
    product = seed % 2 == 0
    z = u * v if product else u / v
    a, b = rng.uniform(0.5, 3.0, 2) * rng.choice([-1.0, 1.0], 2)
    s = rng.uniform(0.3, 0.8) if product else rng.uniform(0.8, 2.0)  # z spans about 0.25-9 or 0.17-6
    shape = user_curve((seed // 2) % 5, z, s)
    y = [a * shape + b * w, a * w * shape, a * shape + b][(seed // 10) % 3]
    return X, y


def exact_entries(X: np.ndarray, y: np.ndarray, config: LibraryConfig) -> int:
    """How many entries the library's curve sources add that fit the law to validation NMSE
    below 1e-10."""
    return exact_library_entries(NAMES, X, y, config, ("curves", "pair_curves"))


def test_the_source_is_on_by_default_and_names_its_seeds() -> None:
    assert "pair_curves" in DEFAULT_LIBRARY.sources
    X, y = draw_law(0)
    ours = source_adds_only_its_seeds(NAMES, Sample(X[:256], y[:256]), ("power_law", "data_free", "curves"),
                                      "pair_curves")
    assert ours == pair_curve_seeds(NAMES)
    # 3 products and 6 ratios; each curve with an offset, beside and times the third variable.
    assert len(pair_arguments(NAMES)) == 9
    assert len(ours) == 9 * len(CURVES) * 3


def test_hit_count_over_a_generated_family() -> None:
    without = LibraryConfig(sources=("curves",))
    with_pairs = LibraryConfig(sources=("curves", "pair_curves"))
    seeds = range(0, 30, 3)  # every shape, product and ratio, and the three outer forms
    hits = [exact_entries(*draw_law(seed), with_pairs) > 0 for seed in seeds]
    # Measured: see the commit that added the source. At least 8 of 10: a seed's restarts may
    # miss a basin on another machine's float kernels.
    assert sum(hits) >= 8, hits
    # Curves of one variable fit none of these laws.
    assert sum(exact_entries(*draw_law(seed), without) > 0 for seed in seeds[:4]) == 0


def test_wide_problems_get_no_pair_curves() -> None:
    names = tuple(f"x{i}" for i in range(5))
    on = ("data_free", "pair_curves")
    at_limit = LibraryConfig(sources=on, pair_curve_max_variables=5)
    assert [s.tree for s in library_seeds(names, None, None, at_limit) if s.source == "pair_curves"] == pair_curve_seeds(names)
    below = LibraryConfig(sources=on, pair_curve_max_variables=4)
    assert library_seeds(names, None, None, below) == library_seeds(names, None, None, LibraryConfig(sources=("data_free",)))
