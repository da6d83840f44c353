"""Shared fixtures: small real datasets (CSV files read by ``load_dataset``), one real
Evaluator per dataset for the whole session (XLA compiles are paid once), and a direct loop that
does what the agent does with the evolve model's tool calls."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sr_dist.conversation import Context
from sr_dist.data import Dataset, load_dataset
from sr_dist.evaluator import Evaluator
from sr_dist.models.base import ModelResponse
from sr_dist.tools.types import ToolCall, ToolCallResult

N_ROWS = 200
NAMES = ("x0", "x1", "x2")
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("evaluate_formulas", "submit_formula", "best_formulas", "data_summary")
]


def _write(path: Path, fn: Callable[[np.ndarray], np.ndarray], seed: int) -> Dataset:
    X = np.random.default_rng(seed).uniform(1.0, 3.0, size=(N_ROWS, len(NAMES)))
    body = np.column_stack([X, fn(X)])
    np.savetxt(path, body, delimiter=",", header=",".join(NAMES + ("y",)), comments="", fmt="%.17g")
    return load_dataset(f"csv:{path}", seed=0)


@pytest.fixture(scope="session")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Dataset]:
    root = tmp_path_factory.mktemp("evolve-data")
    return {
        "product": _write(root / "product.csv", lambda X: 2.5 * X[:, 0] * X[:, 1], 0),
        "sum": _write(root / "sum.csv", lambda X: 1.5 * X[:, 0] * np.sin(X[:, 1]) + X[:, 2] ** 2, 1),
    }


@pytest.fixture(scope="session")
def evaluators(datasets: dict[str, Dataset]) -> dict[str, Evaluator]:
    return {name: Evaluator(ds, restarts=4, max_iters=30) for name, ds in datasets.items()}


def info_for(ds: Dataset, sample: bool = True, seed: int = 0) -> dict[str, Any]:
    info: dict[str, Any] = {"variables": list(ds.feature_names), "seed": seed, "dataset": ds.name}
    if sample:
        info["sample"] = {"X": ds.X_train.tolist(), "y": ds.y_train.tolist()}
    return info


def tool_record(fit: Any) -> dict[str, Any]:
    """What the evaluate_formulas tool shows a model for one fit (no test metrics)."""
    d = fit.to_dict()
    keys = ("expression", "canonical", "status", "constants", "train_nmse", "val_nmse", "complexity", "error")
    return {k: d[k] for k in keys}


def step(model: Any, context: Context, evaluator: Evaluator) -> ModelResponse:
    """One agent turn: call the model, run its evaluate_formulas call, record the result."""
    response = model.call(context, TOOLS)
    for call in response.tool_calls:
        name = call["function"]["name"]
        args = json.loads(call["function"]["arguments"])
        if name == "evaluate_formulas":
            fits = evaluator.fit_many(args["expressions"], starts=args.get("starts"))
            result = ToolCallResult(True, {"results": [tool_record(f) for f in fits]}, "", {"tool": name})
        else:
            result = ToolCallResult(True, {"submitted": args.get("expression")}, "submitted", {"tool": name})
        context.tool_history.append((ToolCall(name, args, call["id"]), result))
    return response


@pytest.fixture
def counted_builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The variables of every seed library :mod:`sr_dist.sr.evolve.model` builds from now on."""
    import sr_dist.sr.evolve.model as evolve_model

    built: list[tuple[str, ...]] = []
    real = evolve_model.library_seeds

    def counting(variables: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(tuple(variables))
        return real(variables, *args, **kwargs)

    monkeypatch.setattr(evolve_model, "library_seeds", counting)
    return built


def user_curve(which: int, z: np.ndarray, s: float) -> np.ndarray:
    """One of five curves of ``z`` with scale ``s``, written as a user would (not as the library
    writes them): a saturation, a decay, a logistic step at the median, a sinusoid, a rise. The
    generated families of the curve sources' tests draw from these."""
    mid = float(np.median(z))
    shapes = (lambda: np.tanh(s * z),
              lambda: np.exp(-s * z),
              lambda: 1.0 / (1.0 + np.exp(3.0 * s * (mid - z))),
              lambda: np.sin(2.0 * s * z + 0.7),
              lambda: 1.0 - np.exp(-2.0 * s * z))
    return shapes[which % len(shapes)]()


def source_adds_only_its_seeds(names: tuple[str, ...], sample: Any, base: tuple[str, ...],
                               source: str) -> list[Any]:
    """The trees ``source`` adds to a library of the ``base`` sources, after checking that
    turning it on leaves every other seed as it was, in its order."""
    from sr_dist.sr.evolve.library.assemble import library_seeds
    from sr_dist.sr.evolve.library.config import LibraryConfig

    on = library_seeds(names, sample, None, LibraryConfig(sources=(*base, source)))
    assert [s for s in on if s.source != source] == list(library_seeds(names, sample, None, LibraryConfig(sources=base)))
    return [s.tree for s in on if s.source == source]


def exact_library_entries(names: tuple[str, ...], X: np.ndarray, y: np.ndarray, config: Any,
                          sources: tuple[str, ...], besides: Any = None) -> int:
    """How many library entries from ``sources`` fit ``y`` to validation NMSE below 1e-10 (8
    restarts and ``data_starts``, the seed-source tests' evaluator); with ``besides`` (another
    config), only the entries that one's library lacks."""
    import os

    from sr_dist.data import dataset_from_arrays
    from sr_dist.sr.evolve.library.assemble import library_seeds
    from sr_dist.sr.evolve.library.sample import Sample
    from sr_dist.sr.evolve.tree import render

    def entries(c: Any) -> list[str]:
        return [render(s.tree) for s in library_seeds(names, Sample(X[:256], y[:256]), None, c)
                if s.source in sources]

    ours = entries(config)
    if besides is not None:
        theirs = set(entries(besides))
        ours = [e for e in ours if e not in theirs]
    assert ours
    cache = os.environ.get("SR_DIST_JAX_CACHE_DIR", os.path.expanduser("~/.cache/sr-dist/jax"))
    evaluator = Evaluator(dataset_from_arrays(X, y, list(names), seed=0), restarts=8,
                          data_starts=True, compilation_cache_dir=cache)
    return sum(1 for fit in evaluator.fit_many(ours) if fit.val_nmse is not None and fit.val_nmse < 1e-10)


# A generated family for the search alone (no data sample, so no library shape fits):
# a*x_i*f(x_j) + b*x_k**2 with f in sin, cos, exp(-.), variables and constants drawn per seed.
_FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sin": np.sin, "cos": np.cos, "exp": lambda v: np.exp(-v)}


def generated_law(seed: int) -> Callable[[np.ndarray], np.ndarray]:
    """Member ``seed`` of the family above, as a function of the rows (3 variables)."""
    rng = np.random.default_rng(seed)
    i, j, k = rng.permutation(3)
    fn = _FUNCTIONS[("sin", "cos", "exp")[seed % 3]]
    a, b = np.round(rng.uniform(0.5, 3.0, 2), 2)
    return lambda X: a * X[:, i] * fn(X[:, j]) + b * X[:, k] ** 2


def generated_dataset(folder: Path, seed: int) -> Dataset:
    """Member ``seed`` of :func:`generated_law`'s family on 200 rows of ``U(1, 3)``, written
    as a CSV under ``folder`` and loaded as a user's file is."""
    X = np.random.default_rng(100 + seed).uniform(1.0, 3.0, (200, 3))
    path = folder / f"law{seed}.csv"
    np.savetxt(path, np.column_stack([X, generated_law(seed)(X)]), delimiter=",",
               header="x0,x1,x2,y", comments="", fmt="%.17g")
    return load_dataset(f"csv:{path}", seed=0)
