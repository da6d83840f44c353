"""``dataset.units`` and ``search.dimensionless_constants_only``: composed, checked, loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_module

from sr_dist.formula import parse_unit
from sr_dist.search.run import prepare
from sr_dist.search.settings import SettingsError, settings_from_config


def _compose(*overrides: str) -> Any:
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_defaults_have_no_units_and_dimensionless_constants(tmp_path: Path) -> None:
    settings = settings_from_config(_compose(), base_dir=tmp_path)
    assert settings.dataset.units is None
    assert settings.search.dimensionless_constants_only is True


def test_feynman_units_reach_the_loaded_dataset(tmp_path: Path) -> None:
    cfg = _compose("dataset.source=feynman:I.12.11", "dataset.n=50", "dataset.units=feynman",
                   "search.dimensionless_constants_only=false", f"results.path={tmp_path}")
    prepared = prepare(cfg, base_dir=tmp_path)
    assert prepared.settings.search.dimensionless_constants_only is False
    units = prepared.dataset.units
    assert units is not None and units.target == parse_unit("N")


def test_a_mapping_of_units_for_a_table(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("x,t,v\n" + "\n".join(f"{i + 1},{i + 2},{(i + 1) / (i + 2)}" for i in range(12)))
    cfg = _compose(f"dataset.source=csv:{path}", "dataset.units={x:m,t:s,v:'m/s'}",
                   f"results.path={tmp_path / 'r'}")
    prepared = prepare(cfg, base_dir=tmp_path)
    assert prepared.dataset.units is not None
    assert prepared.dataset.units.as_text("v") == {"x": "m", "t": "s", "v": "m/s"}
    missing = _compose(f"dataset.source=csv:{path}", "dataset.units={x:m,v:'m/s'}",
                       f"results.path={tmp_path / 'r'}")
    with pytest.raises(SettingsError) as info:
        prepare(missing, base_dir=tmp_path)
    assert info.value.key == "dataset.units" and "no unit for t" in str(info.value)


BAD = [
    (["dataset.units=SI"], "dataset.units", "must be null, 'feynman' or a mapping"),
    (["dataset.source=csv:x.csv", "dataset.units=feynman"], "dataset.units",
     "is not a feynman: dataset"),
    (["dataset.units={x:furlong}"], "dataset.units.x", "unknown unit 'furlong'"),
    (["search.dimensionless_constants_only=maybe"], "search.dimensionless_constants_only",
     "must be true or false"),
]


@pytest.mark.parametrize("overrides, key, words", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_units_settings_name_their_key(overrides: list[str], key: str, words: str,
                                           tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_config(_compose(*overrides), base_dir=tmp_path)
    assert info.value.key == key and words in str(info.value)


def test_the_agent_gets_the_constants_rule_and_the_prompt_gets_the_units() -> None:
    import threading

    from sr_dist.data import load_dataset
    from sr_dist.evaluator import Evaluator
    from sr_dist.search.agent_run import AgentSpec, build_agent

    dataset = load_dataset("feynman:I.12.11", n=200, units="feynman")
    spec = AgentSpec(run_id="r", agent_id=1, seed=7, model={"provider": "evolve", "batch_size": 8},
                     model_label="evolve", dataset_name=dataset.name, max_turns=2,
                     dimensionless_constants_only=False)
    agent = build_agent(spec, dataset, Evaluator(dataset), None, threading.Event())
    assert agent.episode.dimensionless_constants is False
    assert "Units: q [kg*m**2/(s**2*V)]" in agent.context.system


def test_a_resumed_agent_starts_from_its_consistent_rows_first() -> None:
    from sr_dist.search.resume import best_distinct, prior_history

    rows = [
        {"expression": "x + t", "canonical": "t + x", "status": "ok", "val_nmse": 1e-12,
         "complexity": 3, "dimensionally_consistent": False, "units_mismatch": "x + t adds m to s"},
        {"expression": "c*x/t", "canonical": "c0*x/t", "status": "ok", "val_nmse": 1e-3,
         "complexity": 5, "dimensionally_consistent": True, "units_mismatch": None},
    ]
    best = best_distinct(rows, 2)
    assert [r["expression"] for r in best] == ["c*x/t", "x + t"]
    ((_, result),) = prior_history(best)
    assert [r["dimensionally_consistent"] for r in result.result["results"]] == [True, False]
