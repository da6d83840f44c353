"""The seed library's knobs (LibraryConfig, ``model.library.*``) and its seeds' sources."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from sr_dist.models.base import ModelConfigError
from sr_dist.sr.evolve.library import Sample, library_for_info, seed_library
from sr_dist.sr.evolve.library.assemble import build_library, library_seeds
from sr_dist.sr.evolve.library.config import DEFAULT_LIBRARY, DEFAULT_SOURCES, SOURCES, LibraryConfig, library_config
from sr_dist.sr.evolve.library.sources.data_free import data_free_seeds
from sr_dist.sr.evolve.model import build_evolve
from sr_dist.sr.evolve.tree import render

EVOLVE_YAML = Path(__file__).resolve().parents[3] / "sr_dist" / "conf" / "model" / "evolve.yaml"


def _sample(seed: int = 0) -> tuple[tuple[str, ...], Sample]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(1.0, 3.0, size=(200, 2))
    return ("x0", "x1"), Sample(X, 2.5 * X[:, 0] ** 2 / X[:, 1] + np.sin(X[:, 1]))


def test_the_yaml_preset_lists_every_key_at_its_default() -> None:
    section = OmegaConf.to_container(OmegaConf.load(EVOLVE_YAML)["library"])
    assert library_config(section) == DEFAULT_LIBRARY
    assert set(section) == set(LibraryConfig.__dataclass_fields__)


@pytest.mark.parametrize(("options", "message"), [
    ({"max_basis_terms": 10}, "unknown library key"),
    ({"max_basis": 0}, "positive"),
    ({"max_basis": 2.5}, "integer"),
    ({"sources": ["power_law", "nonsense"]}, "distinct names"),
    ({"sources": ["power_law", "power_law"]}, "distinct names"),
])
def test_bad_library_options_are_refused_with_the_key_named(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        library_config(options)
    with pytest.raises(ModelConfigError, match=message):
        build_evolve({"provider": "evolve", "library": options})


def test_model_library_keys_reach_the_library() -> None:
    variables, sample = _sample()
    cfg = OmegaConf.load(EVOLVE_YAML)
    cfg.library.sources = ["data_free"]
    model = build_evolve(cfg)
    assert model.library.sources == ("data_free",)
    assert [s.tree for s in model._library(variables, sample)] == data_free_seeds(variables)  # noqa: SLF001 - the memo


def test_every_seed_names_its_source_and_the_trees_are_the_library() -> None:
    variables, sample = _sample()
    seeds = library_seeds(variables, sample)
    assert [s.tree for s in seeds] == list(build_library(variables, sample)) == seed_library(variables, sample)
    assert {s.source.split("/")[0] for s in seeds} <= set(SOURCES)
    assert {"transformed_sums", "power_law", "data_free"} <= {s.source.split("/")[0] for s in seeds}
    assert all(s.error is None or s.error >= 0 for s in seeds)
    info = {"variables": list(variables), "sample": {"X": sample.X.tolist(), "y": sample.y.tolist()}}
    assert [render(t) for t in library_for_info(info)] == [render(s.tree) for s in seeds]


def test_leaving_a_source_out_removes_exactly_its_seeds() -> None:
    variables, sample = _sample(1)
    full = library_seeds(variables, sample)
    without = library_seeds(variables, sample, config=LibraryConfig(sources=tuple(s for s in DEFAULT_SOURCES if s != "power_law")))
    # The same seeds in the same order; the decomposition's looser ones sit a fixed number of
    # entries into the rest, so they may move against the others.
    def others(seeds: object) -> list[object]:
        return [s for s in seeds if s.source != "decomposition"]  # type: ignore[attr-defined]

    assert others([s for s in full if not s.source.startswith("power_law")]) == others(without)
    assert {s for s in full if not s.source.startswith("power_law")} == set(without)
    assert any(s.source.startswith("power_law") for s in full)
