"""The jitted interpreter against independent references: sympy ``lambdify`` (numpy) for
values, finite differences for the forward-mode duals, and the GPU (vmap) layout against the
CPU (map) layout."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import sympy

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.formula import parse_formula

NAMES = ("x0", "x1", "x2")

UNARY = ("sin", "cos", "tan", "exp", "log", "sqrt", "abs", "tanh", "sinh", "cosh", "arctan",
         "arcsin", "arccos", "-")
BINARY = ("+", "-", "*", "/", "**")


def random_formula(rng: np.random.Generator, depth: int = 4) -> str:
    n_const = [0]

    def leaf() -> str:
        u = rng.random()
        if u < 0.5:
            return f"x{rng.integers(0, 3)}"
        if u < 0.8:
            n_const[0] += 1
            return f"k{n_const[0]}"
        return f"{rng.uniform(0.1, 3):.3f}"

    def tree(d: int) -> str:
        if d == 0 or rng.random() < 0.2:
            return leaf()
        if rng.random() < 0.3:
            op = str(rng.choice(UNARY))
            inner = tree(d - 1)
            if op in ("arcsin", "arccos"):  # keep away from the ill-conditioned ends +-1
                return f"{op}(tanh({inner})/2)"
            if op in ("exp", "sinh", "cosh"):
                return f"{op}(tanh({inner}))"  # keep magnitudes sane for float32
            return f"-({inner})" if op == "-" else f"{op}({inner})"
        op = str(rng.choice(BINARY))
        if op == "**":
            return f"abs({tree(d - 1)})**{rng.choice(['2', '3', '0.5', '1.5', 'x1', 'k9'])}"
        return f"({tree(d - 1)} {op} {tree(d - 1)})"

    return tree(depth)



@pytest.fixture(scope="module")
def ev(target_dataset: Dataset) -> Evaluator:
    return Evaluator(target_dataset)


def _random_cases(count: int, seed: int) -> list[tuple[str, dict[str, float]]]:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        text = random_formula(rng)
        f = parse_formula(text, NAMES)
        cases.append((text, {c: float(rng.uniform(0.5, 2.0)) for c in f.constants}))
    return cases


def _lambdify(text: str, consts: dict[str, float], X: np.ndarray,
              dtype: type = np.float64) -> np.ndarray:
    f = parse_formula(text, NAMES)
    syms = [sympy.Symbol(n, real=True) for n in NAMES + tuple(f.constants)]
    fn = sympy.lambdify(syms, f.to_sympy(), "numpy")
    Xd = X.astype(dtype)
    with np.errstate(all="ignore"):
        out = fn(*[Xd[:, i] for i in range(3)], *[dtype(consts[c]) for c in f.constants])
    return np.broadcast_to(np.asarray(out, dtype=np.float64), (X.shape[0],))


def test_values_match_sympy_lambdify_on_random_formulas(ev: Evaluator,
                                                       target_dataset: Dataset) -> None:
    """float32 interpreter vs float64 lambdify: the tolerance is what float32 itself loses on
    that row (lambdify in float32 against float64) plus a few ulps, so ill-conditioned rows
    near a pole are judged fairly and well-conditioned rows tightly."""
    cases = _random_cases(60, seed=11)
    X = target_dataset.X_train
    got = ev.evaluate_many([t for t, _ in cases], [c for _, c in cases], X)
    assert got.shape == (len(cases), X.shape[0])
    checked = 0
    for (text, consts), row in zip(cases, got):
        want = _lambdify(text, consts, X)
        want32 = _lambdify(text, consts, X, np.float32)
        finite = np.isfinite(want) & np.isfinite(want32) & (np.abs(want) < 1e6)
        assert np.all(~np.isfinite(row[np.isnan(want)])), text
        tol = 1e-5 * np.abs(want) + 8 * np.abs(want32 - want) + 1e-6
        bad = np.abs(row - want) > tol
        assert not np.any(bad & finite), (text, row[bad & finite], want[bad & finite])
        checked += int(finite.sum())
    assert checked > 0.5 * len(cases) * X.shape[0]


def test_duals_match_finite_differences(target_dataset: Dataset) -> None:
    """The Jacobian the LM loop uses equals central differences of the float64 values."""
    import jax
    import jax.numpy as jnp

    from sr_dist.evaluator.evaluator import _chunks
    from sr_dist.evaluator.interpreter import Layout, init_duals, normal_pass
    from sr_dist.evaluator.program import lower, pack_programs
    from sr_dist.formula import evaluate_numpy

    layout = Layout(3, 3, 8, 8)

    @jax.jit
    def normal(code, meta, lits, c, X, y, w):  # type: ignore[no-untyped-def]
        regs = init_duals(layout, lits, X.shape[2], jnp.float64)
        return normal_pass(code, meta[0], meta[1], layout, c, regs, X, y, w)[0]

    with jax.enable_x64(True):
        X = target_dataset.X_train[:200]
        rng = np.random.default_rng(5)
        y = rng.normal(size=len(X))
        Xc, yc, w = _chunks(X, y, 64, np.dtype("float64"))
        for text in ("a*x0**5 + sin(b*x1)/x2 + c", "exp(-a*x0)*cos(b*x1 + c) + x2**a",
                     "sqrt(abs(a*x0 - b)) + log(c + x1) * tanh(a*x2) / (b + x0)",
                     "arctan(a*x0) + arcsin(tanh(b*x1)/2) - cosh(c*x2/3) + x1**b"):
            f = parse_formula(text, NAMES)
            k = len(f.canonical_constants)
            assert k == 3
            c = np.array([0.7, 1.3, 0.4])
            prog = lower(f.canonical_tree, NAMES, [f"c{i}" for i in range(k)])
            code, meta, lits = pack_programs([prog], n_vars=3, n_consts=3, n_lits=8,
                                             n_instr=32, capacity=1)
            got = normal(code[0], meta[0], lits[0], c, Xc, yc, w)
            names = {f"c{i}": v for i, v in enumerate(c)}
            f0 = evaluate_numpy(f.canonical_tree, X, NAMES, names)
            J = np.empty((k, len(X)))
            for i in range(k):
                h = 1e-6 * max(1.0, abs(c[i]))
                up = dict(names, **{f"c{i}": c[i] + h})
                dn = dict(names, **{f"c{i}": c[i] - h})
                J[i] = (evaluate_numpy(f.canonical_tree, X, NAMES, up)
                        - evaluate_numpy(f.canonical_tree, X, NAMES, dn)) / (2 * h)
            np.testing.assert_allclose(np.asarray(got.jtj), J @ J.T, rtol=1e-6, err_msg=text)
            np.testing.assert_allclose(np.asarray(got.jtr), J @ (y - f0), rtol=1e-6,
                                       atol=1e-8 * np.abs(J).sum(), err_msg=text)
            assert float(got.sse) == pytest.approx(float((y - f0) @ (y - f0)), rel=1e-12)
            assert int(got.nbad) == 0


def test_constant_free_operand_at_a_pole_does_not_poison_the_jacobian(ev: Evaluator,
                                                                     make_dataset) -> None:
    """``x**5`` at x = 0 has an infinite log-partial; it must not NaN the constants' J."""
    ds = make_dataset(lambda X: 3.0 * (X[:, 0] - 1.0) ** 5 + 0.5, seed=4)
    ev0 = Evaluator(ds)
    res = ev0.fit_many(["a*(x0 - 1)**5 + b"])[0]
    assert res.ok and abs(res.constants["a"] - 3.0) < 1e-4


# At most two constants each: one compiled vmap bucket keeps this test cheap.
FORMULAS = ["c0*x0**2 + sin(c1*x1)/x2", "a*x0 + b", "a/(x1 - x1)", "a*exp(b*x1)",
            "x0 + x1*x2*k", "sqrt(x0 - 2)*a"]


def test_vmap_layout_gives_the_map_layout_results(target_dataset: Dataset, ev: Evaluator) -> None:
    gpu_style = Evaluator(target_dataset, layout="vmap", batch_size=8)
    assert gpu_style.stats()["layout"] == "vmap"
    a = ev.fit_many(FORMULAS)
    b = gpu_style.fit_many(FORMULAS)
    for ra, rb in zip(a, b):
        assert ra.status == rb.status, ra.expression
        # Reductions may be ordered differently, so flat directions (a*exp(b*x1) on this data)
        # can land a few 1e-4 apart; the losses must agree.
        for name, value in ra.constants.items():
            assert rb.constants[name] == pytest.approx(value, rel=1e-3, abs=1e-6)
        if ra.ok:
            assert rb.train_mse == pytest.approx(ra.train_mse, rel=1e-5, abs=1e-12)


def test_subsample_then_polish_path(target_dataset: Dataset) -> None:
    """Above ``subsample`` train rows the fit runs on a subsample and polishes on all rows."""
    small = Evaluator(target_dataset, subsample=128, polish_iters=3)
    assert small.stats()["rows"]["fit"] == 128
    res = small.fit_many(["c0*x0**2 + sin(c1*x1)/x2", "a*x0 + b*x2"])
    assert res[0].ok and abs(res[0].constants["c0"] / 2.5 - 1) < 1e-4
    full = Evaluator(target_dataset).fit_many(["a*x0 + b*x2"])[0]
    assert res[1].train_mse == pytest.approx(full.train_mse, rel=1e-3)


def test_float64_and_compile_cache_options_in_a_fresh_process(tmp_path: Path,
                                                              target_dataset: Dataset) -> None:
    """float64 flips JAX's process-global x64 switch and the persistent compilation cache is
    process-global too, so both are checked in their own process."""
    cache = tmp_path / "jax-cache"
    script = textwrap.dedent(f"""
        import numpy as np
        from sr_dist.data import load_dataset
        from sr_dist.evaluator import Evaluator
        ds = load_dataset({target_dataset.source!r}, seed=0)
        r = Evaluator(ds, dtype="float64", const_buckets=(2,),
                      compilation_cache_dir={str(cache)!r}).fit_many(
            ["c0*x0**2 + sin(c1*x1)/x2"])[0]
        assert r.ok, r
        assert abs(r.constants["c0"] / 2.5 - 1) < 1e-9, r.constants
        assert abs(r.constants["c1"] / 1.3 - 1) < 1e-9, r.constants
        assert r.train_nmse < 1e-18, r.train_nmse
        print("OK")
    """)
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=240, env=env, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-2000:]
    assert any(cache.iterdir()), "the persistent compilation cache stayed empty"
