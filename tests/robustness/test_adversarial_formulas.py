"""Adversarial formulas through the real Evaluator: refused as ``invalid``, quickly, batch intact.

Statuses:
- nesting depth 10,000, 10 MB strings, unicode look-alikes, code payloads: ``invalid`` (the
  parser refuses them; they never reach lowering or JAX).
- ``x**1e308``: ``nonfinite``. ``1e308`` is a finite float64, so the formula is well formed
  and parses (docs/formulas.md); on this dataset every ``sigma`` is in [1, 3], so the power
  overflows to inf on every row (the float32 evaluator already rounds the literal to inf), and
  the evaluator reports non-finite predictions instead of a number. ``1e999`` is not a float at
  all and is ``invalid``.
Times are printed, never asserted.
"""

from __future__ import annotations

import time

import pytest

from sr_dist.data import load_dataset
from sr_dist.evaluator import Evaluator
from tests.robustness.guard import PAYLOADS, assert_no_sentinel

LOOK_ALIKES = {
    "cyrillic es": "\u0441*sigma",
    "cyrillic i in sin": "s\u0456n(theta)",
    "greek theta": "\u03b8 + sigma",
    "fullwidth plus": "sigma\uff0b1",
    "unicode minus": "sigma \u2212 theta",
    "no-break space": "sigma\u00a0+ theta",
    "zero-width space": "sig\u200bma",
    "superscript two": "sigma\u00b2",
    "mathematical italic x": "\U0001d465*sigma",
    "right-to-left override": "sigma\u202e+theta",
}
CASES: list[tuple[str, str, str]] = [
    ("parens depth 10,000", "(" * 10_000 + "sigma" + ")" * 10_000, "invalid"),
    ("calls depth 10,000", "exp(" * 10_000 + "sigma" + ")" * 10_000, "invalid"),
    ("10 MB string", "sigma+" * (10 * 1024 * 1024 // 6), "invalid"),
    ("1e999", "sigma**1e999", "invalid"),
    ("x**1e308", "sigma**1e308", "nonfinite"),
    *((f"look-alike: {k}", v, "invalid") for k, v in LOOK_ALIKES.items()),
    *((f"payload {i}", p, "invalid") for i, p in enumerate(PAYLOADS)),
]


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(load_dataset("feynman:I.6.2", n=500, seed=0), device="cpu")


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_adversarial_batch(evaluator: Evaluator) -> None:
    """One batch of everything plus a good formula: each gets its status, the good one fits."""
    good = "exp(-(theta/sigma)**2/2)/(sqrt(2*pi)*sigma)"
    texts = [text for _, text, _ in CASES] + [good]
    start = time.perf_counter()
    results = evaluator.fit_many(texts)
    print(f"\nwhole batch ({len(texts)} formulas incl. one compile): {time.perf_counter() - start:.3f} s")
    assert len(results) == len(texts)
    for (name, _text, expected), result in zip(CASES, results):
        assert result.status == expected, (name, result.status, result.error)
        assert result.error, name
        if expected == "invalid":
            assert result.val_nmse is None and result.constants == {}
            assert len(result.error) < 2000, name  # the message quotes a window, not 10 MB
    assert results[-1].status == "ok" and results[-1].val_nmse is not None and results[-1].val_nmse < 1e-10
    assert_no_sentinel()


@pytest.mark.parametrize("name, text, expected", [c for c in CASES if c[2] == "invalid"],
                         ids=[c[0] for c in CASES if c[2] == "invalid"])
def test_each_refusal_is_quick_and_says_why(evaluator: Evaluator, name: str, text: str, expected: str) -> None:
    before = evaluator.stats()["compiles"]
    start = time.perf_counter()
    [result] = evaluator.fit_many([text])
    elapsed = time.perf_counter() - start
    print(f"{name}: {result.status} in {elapsed * 1e3:.2f} ms: {result.error.splitlines()[0][:100]}")
    assert result.status == "invalid"
    assert evaluator.stats()["compiles"] == before  # never reached JAX
    first = result.error.splitlines()[0]
    if name.startswith("look-alike"):
        assert "non-ASCII character" in first and "U+" in first
    elif "depth" in name or "10 MB" in name:
        assert "too long" in first or "nested too deeply" in first
