"""The seed-library cache: what is read back is the library a build gives, a second model on the
same data builds nothing, concurrent builders build once, and a broken cache costs a build."""

from __future__ import annotations

import copy
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from sr_dist.conversation import Context
from sr_dist.formula import parse_formula
from sr_dist.models.base import ModelConfigError
from sr_dist.sr.evolve.library.cache import LibraryCache, node_from_json, node_to_json
from sr_dist.sr.evolve.library.seed import Seed
from sr_dist.sr.evolve.model import EvolveModel, build_evolve
from sr_dist.sr.evolve.operators import Grammar, random_tree

from .conftest import info_for, step

GRAMMAR = Grammar(("x0", "x1", "x2"))


def tree(seed: int, depth: int = 3):
    return random_tree(np.random.default_rng(seed), GRAMMAR, depth)


def test_trees_survive_the_json_form_exactly() -> None:
    rng = np.random.default_rng(3)
    trees = [random_tree(rng, GRAMMAR, int(rng.integers(1, 6))) for _ in range(300)]
    trees.append(parse_formula("pi*x0**0.1 - 1e-300/(e + c0)", ["x0"]).tree)
    for original in trees:
        assert node_from_json(json.loads(json.dumps(node_to_json(original)))) == original


@pytest.mark.parametrize("bad", [None, [], ["add", None, None], ["num", "1", None, []], [1, None, None, []]])
def test_a_malformed_node_is_refused(bad) -> None:
    with pytest.raises(ValueError, match="not a stored node"):
        node_from_json(bad)


def test_a_second_model_reads_the_library_and_proposes_the_same(
        datasets, evaluators, counted_builds, tmp_path: Path) -> None:
    context = Context(info=info_for(datasets["sum"]))
    # A small library (two sources) keeps the test quick; the cache is the same for any.
    small = {"sources": ["power_law", "data_free"]}
    first = EvolveModel(batch_size=12, seed=2, library_cache=tmp_path, library=small)
    first.prepare(context)
    assert len(counted_builds) == 1
    assert len(list(tmp_path.glob("*.json"))) == 1

    again = EvolveModel(batch_size=12, seed=2, library_cache=tmp_path, library=small)
    plain = EvolveModel(batch_size=12, seed=2, library=small)
    again_context, plain_context = copy.deepcopy(context), copy.deepcopy(context)
    again.prepare(again_context)
    assert len(counted_builds) == 1  # read, not built
    for _ in range(2):
        assert step(again, again_context, evaluators["sum"]) == step(plain, plain_context, evaluators["sum"])
    assert len(counted_builds) == 2  # only the model without a cache built one
    assert again._libraries == plain._libraries


def test_other_library_settings_or_data_are_other_entries(datasets, counted_builds, tmp_path: Path) -> None:
    small, other = {"sources": ["data_free"]}, {"sources": ["data_free", "power_law"]}
    EvolveModel(library_cache=tmp_path, library=small).prepare(Context(info=info_for(datasets["sum"])))
    EvolveModel(library_cache=tmp_path, library=other).prepare(Context(info=info_for(datasets["sum"])))
    EvolveModel(library_cache=tmp_path, library=small).prepare(Context(info=info_for(datasets["product"])))
    assert len(counted_builds) == 3
    assert len(list(tmp_path.glob("*.json"))) == 3


def test_concurrent_builders_of_one_entry_build_once(tmp_path: Path) -> None:
    cache = LibraryCache(tmp_path / "nested" / "cache")
    builds: list[int] = []
    seeds = (Seed(tree(0), 0.25, "test"),)

    def build() -> tuple[Seed, ...]:
        builds.append(1)
        time.sleep(0.3)  # the other thread reaches the lock meanwhile
        return seeds

    results: list[tuple[Seed, ...]] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("k", build))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert builds == [1]
    assert results == [seeds, seeds, seeds]


def test_a_corrupt_entry_is_built_again_and_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = LibraryCache(tmp_path)
    seeds = (Seed(tree(1), None, "test"),)
    cache.path("k").write_text('{"format": 1, "seeds": [{"tree": [1, 2]}]}')
    assert cache.get("k", lambda: seeds) == seeds
    assert "could not be used" in caplog.text
    assert cache.get("k", lambda: pytest.fail("built again")) == seeds


def test_an_unusable_folder_costs_a_build_not_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    seeds = (Seed(tree(2), None, "test"),)
    assert LibraryCache(blocked).get("k", lambda: seeds) == seeds
    assert "unavailable" in caplog.text


def test_the_config_key_is_checked() -> None:
    assert build_evolve({"provider": "evolve", "library_cache": "~/x"}).library_cache is not None
    assert build_evolve({"provider": "evolve", "library_cache": None}).library_cache is None
    for bad in (3, ""):
        with pytest.raises(ModelConfigError, match="library_cache"):
            build_evolve({"provider": "evolve", "library_cache": bad})
