"""The ``curves`` seed source over a generated family of laws with constants inside their
functions: with it on (the default, up to ``curve_max_variables`` variables), the library holds
entries that fit those laws exactly."""

from __future__ import annotations

import numpy as np

from sr_dist.sr.evolve.library.assemble import library_seeds
from sr_dist.sr.evolve.library.config import DEFAULT_LIBRARY, LibraryConfig
from sr_dist.sr.evolve.library.sample import Sample
from sr_dist.sr.evolve.library.sources.curves import CURVES, curve_seeds

from .conftest import exact_library_entries

NAMES = ("x0", "x1")
ROWS = 300


def draw_law(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A law of two variables on a positive range: a logistic step, a Gaussian bump, a shifted
    or damped sinusoid, an exponential approach or a saturation in one variable (written as a
    user would, not as the library writes it), times the other, or beside a linear term in it."""
    rng = np.random.default_rng([seed, 31])
    X = rng.uniform(0.5, 4.5, (ROWS, 2))
    i = int(rng.integers(2))
    u, v = X[:, i], X[:, 1 - i]
    a, b = rng.uniform(0.5, 3.0, 2) * rng.choice([-1.0, 1.0], 2)
    k, m, p = rng.uniform(0.6, 2.5), rng.uniform(1.5, 3.5), rng.uniform(0.1, 3.0)
    shape = [lambda: 1.0 / (1.0 + np.exp(k * (m - u))),
             lambda: np.exp(-((u - m) / (0.4 + 0.3 * k)) ** 2),
             lambda: np.sin(2.0 * k * u + p),
             lambda: np.exp(-0.5 * k * u) * np.cos(2.0 * k * u + p),
             lambda: 1.0 - np.exp(-k * u),
             lambda: np.tanh(0.5 * k * u)][seed % 6]()
    y = a * v * shape if rng.random() < 0.5 else a * shape + b * v
    return X, y


def exact_entries(X: np.ndarray, y: np.ndarray, config: LibraryConfig) -> int:
    """How many of the ``curves`` entries of the library fit the law to validation NMSE below
    1e-10."""
    return exact_library_entries(NAMES, X, y, config, ("curves",))


def test_the_source_is_on_by_default_and_names_its_seeds() -> None:
    # The default library is bench/library_digests.json's (tests/bench/test_library_digest.py).
    assert "curves" in DEFAULT_LIBRARY.sources
    X, y = draw_law(0)
    sample = Sample(X[:256], y[:256])
    default = library_seeds(NAMES, sample, None, LibraryConfig(sources=("power_law", "data_free")))
    on = library_seeds(NAMES, sample, None, LibraryConfig(sources=("power_law", "data_free", "curves")))
    assert [s for s in on if s.source != "curves"] == list(default)  # the others, in their order
    ours = [s.tree for s in on if s.source == "curves"]
    assert ours == curve_seeds(NAMES)
    # Each curve, in each variable: with an offset, times the other, beside a linear term.
    assert len(ours) == len(CURVES) * len(NAMES) * 3


def test_hit_count_over_a_generated_family() -> None:
    config = LibraryConfig(sources=("curves",))
    hits = [exact_entries(*draw_law(seed), config) > 0 for seed in range(6)]
    # Measured: 6 of 6 (seeds 0-5, one of each curve). At least 5: a seed's restarts may miss
    # a basin on another machine's float kernels.
    assert sum(hits) >= 5, hits


def test_wide_problems_get_no_curves() -> None:
    """Past ``curve_max_variables`` the source adds nothing (its entries grow as n squared);
    at the limit it adds every curve in every variable."""
    names = tuple(f"x{i}" for i in range(4))
    at_limit = LibraryConfig(sources=("data_free", "curves"), curve_max_variables=4)
    assert [s.tree for s in library_seeds(names, None, None, at_limit) if s.source == "curves"] == curve_seeds(names, linear_model=True)
    below = LibraryConfig(sources=("data_free", "curves"), curve_max_variables=3)
    without = LibraryConfig(sources=("data_free",))
    assert library_seeds(names, None, None, below) == library_seeds(names, None, None, without)
    assert DEFAULT_LIBRARY.curve_max_variables >= 9  # every AI Feynman problem, where it was measured
