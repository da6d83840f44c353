"""Data-driven restarts (``EvaluatorOptions.data_starts``): periodogram frequencies and quantile
shifts for constants inside functions, over a generated family of oscillations and bumps."""

from __future__ import annotations

import os

import numpy as np

from sr_dist.data import dataset_from_arrays
from sr_dist.evaluator import Evaluator, EvaluatorOptions
from sr_dist.evaluator.data_starts import (
    DataHints,
    data_hints,
    hinted_restarts,
    periodogram_peaks,
    product_frequencies,
)
from sr_dist.formula import parse_formula

CACHE = os.environ.get("SR_DIST_JAX_CACHE_DIR", os.path.expanduser("~/.cache/sr-dist/jax"))


def test_the_strongest_peak_is_the_sinusoids_frequency() -> None:
    rng = np.random.default_rng(0)
    for omega in (2.5, 6.0, 11.0):
        x = rng.uniform(0.0, 6.0, 800)
        y = 2.0 * np.sin(omega * x + 0.7) + 0.5 * x + rng.normal(0.0, 0.1, x.size)
        peaks = periodogram_peaks(x, y)
        assert peaks and abs(peaks[0] - omega) < 0.1
    # Noise, a constant variable and too few rows give no peak (the constants keep random starts).
    x = rng.uniform(0.0, 6.0, 800)
    assert periodogram_peaks(x, rng.normal(size=800)) == ()
    assert periodogram_peaks(np.ones(800), rng.normal(size=800)) == ()
    assert periodogram_peaks(x[:10], np.sin(x[:10])) == ()


def test_a_linear_term_in_another_variable_does_not_hide_the_oscillation() -> None:
    rng = np.random.default_rng(1)
    X = rng.uniform(0.0, 5.0, (1000, 2))
    y = 0.8 * np.exp(-0.5 * X[:, 1]) * np.sin(4.0 * X[:, 1] + 0.9) + 3.0 * X[:, 0]
    hints = data_hints(X, y, ["x0", "x1"])
    assert hints.frequencies["x1"] and abs(hints.frequencies["x1"][0] - 4.0) < 0.15
    assert hints.frequencies["x0"] == ()


def _restarts(text: str, hints: DataHints, rows: int = 4) -> tuple[np.ndarray, np.ndarray]:
    f = parse_formula(text, ["x0", "x1"])
    base = np.arange(rows * len(f.canonical_constants), dtype=float).reshape(rows, -1) + 10.0
    names = [f"c{j}" for j in range(len(f.canonical_constants))]
    return base, hinted_restarts(f.canonical_tree, names, base, hints)


def test_only_matching_constants_in_the_middle_restarts_change() -> None:
    hints = DataHints({"x0": (3.0, 7.0), "x1": ()}, {"x0": (2.0, 1.0, 3.0), "x1": (5.0, 4.0, 6.0)})
    base, out = _restarts("a*sin(w*x0 + p) + b*x1", hints)
    changed = np.argwhere(out != base)
    assert {int(r) for r, _ in changed} == {1, 2}  # restart 0 (all ones) and the last keep theirs
    assert len({int(c) for _, c in changed}) == 1  # only the frequency
    assert sorted(out[1:3][out[1:3] != base[1:3]]) == [3.0, 7.0]
    # A shift inside a function starts at the variable's quantiles, with the sign the text needs.
    base, out = _restarts("a*exp(k*(x1 - m)**2)", hints)
    assert sorted(set(out[1:3].ravel()) - set(base.ravel())) == [4.0, 5.0]
    base, out = _restarts("a*tanh(x1 + m)", hints)
    assert sorted(set(out[1:3].ravel()) - set(base.ravel())) == [-5.0, -4.0]
    # No pattern (or no hint for its variable): the same array back.
    for text in ("a*x0 + b/(x1 + c)", "a*sin(w*x1)"):
        base, out = _restarts(text, hints)
        assert out is base


def _law(shape: int, rng: np.random.Generator) -> tuple[str, np.ndarray, np.ndarray]:
    a, f, p = rng.uniform(1, 3), rng.uniform(3, 10), rng.uniform(0.1, 3)
    b, k, m = rng.uniform(0.5, 2), rng.uniform(0.2, 1), rng.uniform(1, 3)
    X = rng.uniform(0, 6, (600, 2))
    x0, x1 = X[:, 0], X[:, 1]
    if shape == 0:
        return "c0*sin(c1*x0 + c2) + c3*x1", X, a * np.sin(f * x0 + p) + b * x1
    if shape == 1:
        return "c0*exp(c1*x0)*cos(c2*x0)", X, a * np.exp(-k * x0) * np.cos(f * x0)
    return "c0*exp(c1*(x0 - c2)**2) + c3*x1", X, a * np.exp(-4 * k * (x0 - m) ** 2) + b * x1


def test_hit_count_over_a_generated_family_of_oscillations_and_bumps() -> None:
    """The law's own skeleton, fitted with and without data-driven restarts: measured 24 of 24
    with them, 18 of 24 without (seeds 0-7, 600 rows, frequencies 3-10 on [0, 6])."""
    hits = {False: 0, True: 0}
    for seed in range(8):
        rng = np.random.default_rng(seed)
        for shape in range(3):
            text, X, y = _law(shape, rng)
            ds = dataset_from_arrays(X, y, ["x0", "x1"])
            for on in (False, True):
                r = Evaluator(ds, compilation_cache_dir=CACHE, data_starts=on).fit(text)
                hits[on] += r.status == "ok" and r.train_nmse is not None and r.train_nmse < 1e-8
    assert hits[True] >= 22 and hits[True] > hits[False]


def test_the_option_is_part_of_the_fit_key() -> None:
    assert EvaluatorOptions().data_starts is True
    assert EvaluatorOptions(data_starts=False).fit_key() != EvaluatorOptions().fit_key()


def _rate_law(shape: int, rng: np.random.Generator) -> tuple[str, np.ndarray, np.ndarray]:
    """A law whose rate, slope or scale sits inside a function, on variables whose typical size
    is far from 1 (a few tenths to a few tens): the argument ``k*u*v`` (or ``k*u/v``, ``k*u``)
    spans about 0.3-3 over the data only near the right ``k``."""
    low = float(rng.choice([0.05, 2.0, 10.0]))
    X = rng.uniform(low, 4.0 * low, (600, 3))
    u, v, w = X[:, 0], X[:, 1], X[:, 2]
    a, b = rng.uniform(0.5, 3.0, 2) * rng.choice([-1.0, 1.0], 2)
    t = rng.uniform(0.5, 2.0)  # the argument's size at the median
    if shape == 0:
        k = t / float(np.median(u * v))
        return "c0*tanh(c1*x0*x1) + c2*x2", X, a * np.tanh(k * u * v) + b * w
    if shape == 1:
        k = t / float(np.median(u / v))
        return "c0*exp(-(c1*x0/x1)) + c2", X, a * np.exp(-k * u / v) + b
    if shape == 2:
        k, m = 3.0 * t / float(np.ptp(u)), float(np.median(u))
        return "c0/(1 + exp(c1*(x0 - c2))) + c3*x2", X, a / (1.0 + np.exp(k * (m - u))) + b * w
    k = t / float(np.median(u))
    return "c0*x1*(1 - exp(-(c1*x0)))", X, a * v * (1.0 - np.exp(-k * u))


def test_rates_start_at_the_arguments_size() -> None:
    hints = DataHints({"x0": (), "x1": ()}, {"x0": (2.0, 1.0, 3.0), "x1": (5.0, 4.0, 6.0)},
                      {"x0": 2.0, "x1": 5.0})
    base, out = _restarts("a*tanh(k*x0*x1) + b", hints)
    assert sorted(set(out[1:3].ravel()) - set(base.ravel())) == [-0.1, 0.1]
    base, out = _restarts("a*exp(-k*x0/x1)", hints)
    assert sorted(set(out[1:3].ravel()) - set(base.ravel())) == [-2.5, 2.5]
    # A logistic slope: the shifted variable's half interquartile range is its size.
    base, out = _restarts("a/(1 + exp(k*(x0 - m)))", hints)
    assert sorted(set(out[1:3].ravel()) - set(base.ravel())) == [-1.0, 1.0, 2.0]  # slopes +-1, midpoints 2 and 1
    # Inside sin/cos a constant is a frequency's, and a constant dividing is left alone.
    for text in ("a*sin(w*x0*x1)", "a*tanh(x0/(k*x1))"):
        base, out = _restarts(text, hints)
        assert out is base


def _fits(text: str, X: np.ndarray, y: np.ndarray, on: bool) -> bool:
    ds = dataset_from_arrays(X, y, ["x0", "x1", "x2"])
    r = Evaluator(ds, compilation_cache_dir=CACHE, data_starts=on).fit(text)
    return r.status == "ok" and r.train_nmse is not None and r.train_nmse < 1e-8


def test_hit_count_over_a_generated_family_of_rates() -> None:
    """The law's own skeleton with the evaluator's default restarts, with and without
    data-driven restarts. Measured over seeds 0-9: a saturation of a product (shape 0) fits
    10 of 10 with them, 5 of 10 without; the decay, the logistic step and the rise (shapes
    1-3) fit 10 of 10 either way."""
    hits = {False: 0, True: 0}
    for seed in range(10):
        text, X, y = _rate_law(0, np.random.default_rng([seed, 5]))
        for on in (False, True):
            hits[on] += _fits(text, X, y, on)
    assert hits[True] >= 9 and hits[True] > hits[False], hits
    rng = np.random.default_rng([0, 5])
    laws = [_rate_law(shape, rng) for shape in range(4)][1:]
    assert all(_fits(*law, on=True) for law in laws)


def _beat(seed: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """``a*sin(f*x0 + p)*cos(g*x1 + q)`` (a wave modulated by another), with a linear term in x2
    on odd seeds; frequencies give 1-6 periods over ranges of width 2-6."""
    rng = np.random.default_rng([seed, 53])
    low, width = rng.uniform(0.1, 1.0), rng.choice([2.0, 4.0, 6.0])
    X = low + width * rng.uniform(size=(800, 3))
    f, g = (2 * np.pi * rng.uniform(1.0, 6.0, 2) / width)
    a, p, q = rng.uniform(0.5, 4.0), rng.uniform(0.1, 3.0), rng.uniform(0.1, 3.0)
    y = a * np.sin(f * X[:, 0] + p) * np.cos(g * X[:, 1] + q) + (seed % 2) * 1.3 * X[:, 2]
    return X, y, float(f), float(g)


def test_a_product_of_oscillations_gets_frequencies_from_the_squared_residual() -> None:
    """No marginal peak along either variable; half the squared residual's peak is each
    frequency. Measured over seeds 0-11: within 5% for all 24 frequencies."""
    close = 0
    for seed in range(12):
        X, y, f, g = _beat(seed)
        design = np.column_stack([X, np.ones(len(y))])
        residual = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
        hints = data_hints(X, y, ["x0", "x1", "x2"])
        for j, omega in ((0, f), (1, g)):
            if periodogram_peaks(X[:, j], residual) == ():  # the marginal says nothing
                assert hints.frequencies[f"x{j}"] == product_frequencies(X[:, j], residual)
            found = hints.frequencies[f"x{j}"]
            close += bool(found) and abs(found[0] - omega) <= 0.05 * omega
    assert close >= 22, close
    # A single oscillation keeps its marginal peak, not half of its square's.
    x = np.random.default_rng(3).uniform(0.0, 6.0, 800)
    assert abs(data_hints(x[:, None], np.sin(5.0 * x), ["x0"]).frequencies["x0"][0] - 5.0) < 0.1


def test_hit_count_over_a_generated_family_of_beats() -> None:
    """The law's own skeleton with the evaluator's defaults: measured 12 of 12 with
    ``data_starts`` (seeds 0-11), 2 of 12 without, and 2 of 12 with the marginal periodogram
    alone (before the squared residual was read)."""
    hits = {False: 0, True: 0}
    for seed in range(12):
        X, y, _, _ = _beat(seed)
        ds = dataset_from_arrays(X, y, ["x0", "x1", "x2"])
        text = "c0*sin(c1*x0 + c2)*sin(c3*x1 + c4) + c5*x2"
        for on in (False, True):
            r = Evaluator(ds, compilation_cache_dir=CACHE, data_starts=on).fit(text)
            hits[on] += r.status == "ok" and r.train_nmse is not None and r.train_nmse < 1e-8
    assert hits[True] >= 10 and hits[True] > hits[False], hits
