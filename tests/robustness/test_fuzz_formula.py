"""parse_formula under hostile input: only FormulaError, nothing executed, downstream walks safe.

tests/formula fuzzes the parser for "raises only FormulaError". This module adds the proof that
nothing runs: every parse (and, for what parses, every downstream walk: canonical key, sympy,
LaTeX, numpy) happens under an audit hook that records code execution, imports, file and process
events, with sentinel payloads that would leave a file or a global behind if evaluated.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sr_dist.formula import Formula, FormulaError, evaluate_numpy, parse_formula
from tests.robustness.guard import PAYLOADS, SENTINEL_FILE, assert_no_sentinel, watching

# Names an attacker would reach for, declared as variables so they parse as *names*, not code.
VARIABLES = ("x", "y", "os", "open", "__import__", "exec", "eval", "globals", "Symbol")
X = np.linspace(0.5, 2.0, 8 * len(VARIABLES)).reshape(8, len(VARIABLES))

# Formula tokens and payload fragments; random sequences of them are near-formulas.
PIECES = [
    "x", "y", "a", "b", "1", "2.5", "1e308", "1e999", "pi", "e", "+", "-", "*", "/", "**", "^",
    "(", ")", ",", "sin(", "exp(", "log(", ".", "[", "]", "'", '"', ":", ";", "=", "lambda",
    "import", "__import__", "os", ".system", "open", "__class__", "__globals__", "__builtins__",
    "exec", "eval", "\n", " ", "\u0445", "\u03b8", "\uff0b", "\u00a0", "\u2212", "\x00",
]
near_formula = st.lists(st.one_of(st.sampled_from(PIECES), st.sampled_from(PAYLOADS)),
                        max_size=40).map("".join)
any_input = st.one_of(near_formula, st.text(max_size=120), st.sampled_from(PAYLOADS))


def _warm_up() -> None:
    """Import everything the walks below use lazily, so an ``import`` event means an attack."""
    f = parse_formula("a*sin(x)**2 + exp(-y/b) - log(abs(os))", VARIABLES)
    f.to_sympy(), f.latex(), f.canonical
    evaluate_numpy(f, X, VARIABLES, {"a": 1.0, "b": 2.0})
    with pytest.raises(FormulaError):
        parse_formula("x.y", VARIABLES)


_warm_up()


def _exercise(text: str) -> Formula | None:
    """Parse; for what parses, run every downstream walk a formula meets in a search."""
    try:
        f = parse_formula(text, VARIABLES)
    except FormulaError as exc:
        assert exc.message and str(exc)
        return None
    _ = f.canonical, f.canonical_tree, f.complexity, str(f)
    f.to_sympy()
    f.latex()
    evaluate_numpy(f, X, VARIABLES, {c: 1.5 for c in f.constants})
    return f


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_input)
def test_hostile_text_only_raises_formula_error_and_runs_nothing(text: str) -> None:
    with watching() as events:
        _exercise(text)
    assert events == [], f"{text!r} triggered {events}"
    assert_no_sentinel()


#: Ids without the sentinel's path (it names this process's pid): every process that collects
#: the suite (pytest-xdist's workers too) sees the same test names.
PAYLOAD_IDS = [p.replace(str(SENTINEL_FILE), "SENTINEL") for p in PAYLOADS]


@pytest.mark.parametrize("payload", PAYLOADS, ids=PAYLOAD_IDS)
def test_every_payload_is_refused_without_running(payload: str) -> None:
    with watching() as events:
        with pytest.raises(FormulaError) as info:
            parse_formula(payload, VARIABLES)
    assert events == []
    assert_no_sentinel()
    assert info.value.message  # says what is wrong
    print(f"{payload[:50]!r}: {info.value.message}")


# Adversarial shapes, each far past a limit; the limits are raised where the test targets a
# deeper one (so depth 10,000 is refused by the depth limit, not just by the length limit).
ADVERSARIAL: list[tuple[str, str, dict[str, int], str]] = [
    ("parens depth 10,000", "(" * 10_000 + "x" + ")" * 10_000, {"max_length": 10**6}, "nest"),
    ("calls depth 10,000", "sin(" * 10_000 + "x" + ")" * 10_000, {"max_length": 10**6}, "nest"),
    ("unary minus depth 10,000", "-" * 10_000 + "x", {"max_length": 10**6}, "nest"),
    ("power tower 10,000", "x**" * 10_000 + "2", {"max_length": 10**6}, "nest"),
    ("10 MB sum", "x+" * (5 * 1024 * 1024) + "1", {}, "too long"),
    ("10 MB sum, no length limit", "x+" * (5 * 1024 * 1024) + "1", {"max_length": 10**8}, "nodes"),
    ("10 MB of '('", "(" * (10 * 1024 * 1024), {"max_length": 10**8}, "nest"),
    ("10 MB digits", "9" * (10 * 1024 * 1024), {"max_length": 10**8}, "too large"),
]


@pytest.mark.parametrize("name, text, limits, fragment", ADVERSARIAL, ids=[a[0] for a in ADVERSARIAL])
def test_adversarial_shapes_hit_a_limit(name: str, text: str, limits: dict[str, int], fragment: str) -> None:
    start = time.perf_counter()
    with watching() as events:
        with pytest.raises(FormulaError) as info:
            parse_formula(text, ["x"], **limits)
    elapsed = time.perf_counter() - start
    print(f"{name}: refused in {elapsed * 1e3:.2f} ms: {info.value.message[:90]}")
    assert fragment in info.value.message, info.value.message
    assert events == []


def test_the_guard_sees_execution() -> None:
    """The audit guard is live: evaluating a payload-free expression is recorded."""
    with watching() as events:
        eval(compile("1 + 1", "<guard-self-test>", "eval"))  # noqa: S307 - the point of the test
    assert {"compile", "exec"} <= {e for e, _ in events}
    with watching(allow_compile=True) as events:
        compile("1 + 1", "<guard-self-test>", "eval")
    assert events == []
