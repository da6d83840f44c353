"""The soak bench end to end on a tiny target: its table's rows appear and the counts agree
(rows sent == rows written == DuckDB rows == distinct candidate ids)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.soak import main


@pytest.mark.usefixtures("ray_cluster")
def test_a_tiny_soak_prints_its_rows_and_counts_match(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "soak.json"
    code = main(["--candidates", "2000", "--agents", "2", "--structures", "16",
                 "--calls-per-turn", "2", "--flush-s", "0.5", "--results", str(tmp_path / "r"),
                 "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    for label in ("10%", "50%", "100%"):
        assert f"| {label} |" in printed
    assert "counts match" in printed and "memory at 100% / 10%" in printed

    report = json.loads(out.read_text())
    points, final = report["points"], report["final"]
    assert [p["label"] for p in points] == ["10%", "50%", "100%"] and report["missed"] == []
    counts = [p["candidates"] for p in points]
    assert counts == sorted(counts) and counts[0] >= 200 and counts[-1] >= 2000
    assert all(p["on_disk"] > 0 and p["files"] >= 1 for p in points[1:])
    last = points[-1]
    assert last["agent_processes"] == 2 and len(last["evaluator_mib"]) == 1
    assert all(last[k] for k in ("driver_mib", "writer_mib", "agent_max_mib"))
    assert final["counts_match"] and final["status"] == "completed"
    assert final["stop_reason"] == "max_candidates"
    assert final["rows_sent"] == final["duckdb_rows"] == final["duckdb_distinct"] >= 2000
    assert final["files"] >= 1 and final["bytes"] > 0
    assert set(report["memory_ratio"]) == {"driver", "writer", "agent (max)", "evaluator 0"}


def test_rolling_options_are_passed_only_where_the_results_config_has_them(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bench import soak

    args = soak.build_parser().parse_args(["--roll-files", "8", "--no-compact",
                                           "--set", "search.seed=3"])
    have = set(soak.ResultsConfig.config_keys())
    config, skipped = soak.overrides(args, tmp_path)
    for key, text in (("roll_files", "results.roll_files=8"), ("compact", "results.compact=false")):
        assert (text in config) == (key in have) and (f"results.{key}" in skipped) != (key in have)
    assert config[-1] == "search.seed=3" and f"results.path={tmp_path}" in config
    monkeypatch.setattr(soak.ResultsConfig, "config_keys",
                        classmethod(lambda cls: ("path", "flush_s", "roll_files", "compact")))
    config, skipped = soak.overrides(args, tmp_path)
    assert "results.roll_files=8" in config and "results.compact=false" in config
    assert skipped == [] and not any(c.startswith("results.roll_s") for c in config)

