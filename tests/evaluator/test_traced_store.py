"""The traced-program store (sr_dist/evaluator/traced.py): a fresh process loads what another
traced, fits to the very same numbers, and survives a damaged store.

Each case is a real, fresh Python process (the store's whole point is the next process) with
its own store folder (XLA's executables come from the suite's cache); the script counts the traces (``jax.export.export`` calls) it makes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

SCRIPT = r"""
import json, sys
from jax import export
traces = []
real = export.export
def counting(fn, *a, **k):
    traces.append(1)
    return real(fn, *a, **k)
export.export = counting
import numpy as np
from sr_dist.data import dataset_from_arrays
from sr_dist.evaluator import Evaluator
rng = np.random.default_rng(0)
X = rng.uniform(1, 2, (240, 2))
y = 1.7 * X[:, 0] * np.sin(0.8 * X[:, 1]) + 0.3
ds = dataset_from_arrays(X, y, feature_names=("x0", "x1"), name="traced")
from sr_dist.evaluator.kernels import COMPILED
from sr_dist.evaluator.traced import TracedStore
options = {"compilation_cache_dir": sys.argv[2]} if sys.argv[2] else {}
if len(sys.argv) > 3:
    options["loss"] = sys.argv[3]
evaluator = Evaluator(ds, **options)
COMPILED.use_store(TracedStore(sys.argv[1]))  # the case's own store; XLA's cache the suite's
fits = evaluator.fit_many(["c0*x0*sin(c1*x1) + c2", "c0*x0 + c1"])
print(json.dumps({"traces": len(traces), "fits": [[f.status, f.val_nmse, f.constants] for f in fits]}))
"""

USER_LOSS = "def absolute(pred, y):\n    import jax.numpy as jnp\n    return jnp.abs(pred - y)\n"


def _run(store: Path, *extra: str, cwd: Path | None = None) -> tuple[dict, str]:
    """The script with its own traced-program ``store``; XLA's executables come from the
    suite's persistent cache (tests/conftest.py) when it has one, which changes no trace."""
    env = {k: v for k, v in os.environ.items() if k != "SR_DIST_JAX_CACHE_DIR"}
    xla_cache = os.environ.get("SR_DIST_JAX_CACHE_DIR", "")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(cwd or ""), str(Path.cwd()),
                                                      env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(store), xla_cache, *extra], env=env,
                          capture_output=True, text=True, timeout=240, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_fresh_process_loads_the_traced_programs_and_fits_the_same(tmp_path: Path) -> None:
    store = tmp_path / "traced"
    first, _ = _run(store)
    stored = sorted(store.glob("*.jaxexport"))
    assert first["traces"] == len(stored) >= 1
    second, _ = _run(store)
    assert second["traces"] == 0  # every bucket came from the store
    assert second["fits"] == first["fits"] and first["fits"][0][0] == "ok"
    # A damaged store costs a trace, never a fit: each entry is replaced by a good one.
    for path in stored:
        path.write_bytes(b"not a program")
    third, log = _run(store)
    assert third["traces"] == len(stored) and "could not be used" in log
    assert third["fits"] == first["fits"]
    assert all(path.read_bytes() != b"not a program" for path in stored)


def test_a_store_that_cannot_be_written_falls_back_to_tracing(tmp_path: Path) -> None:
    store = tmp_path / "traced"
    store.write_text("a file where the folder should be")
    result, log = _run(store)
    assert result["fits"][0][0] == "ok" and "could not store traced program" in log


def test_a_users_own_loss_is_never_stored(tmp_path: Path) -> None:
    (tmp_path / "traced_user_loss.py").write_text(USER_LOSS)
    store = tmp_path / "traced"
    result, _ = _run(store, "traced_user_loss:absolute", cwd=tmp_path)
    assert result["fits"][0][0] == "ok"
    assert result["traces"] == 0 and not list(store.glob("*.jaxexport"))
