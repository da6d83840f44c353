"""bench/screening.py: the pool's entry bar follows ``evolve``'s ranking, the table counts what a
screen skips and loses, and a short live search yields rows for every screen."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.screening import Bar, fitness_score, main, table


def test_the_bar_is_the_pool_sizeth_score_or_a_place_on_the_front() -> None:
    bar = Bar(pool_size=3, parsimony=0.1)
    assert bar.pool_bar() == math.inf and bar.front_bar(5) == math.inf
    bar.add("a", 1e-2, 4)   # score -2 + 0.4 = -1.6
    bar.add("b", 1e-4, 10)  # -4 + 1.0 = -3.0
    bar.add("a", 1e-9, 4)   # the same canonical form again: the first fit stands
    assert bar.pool_bar() == math.inf
    bar.add("c", 1e-1, 2)   # -1 + 0.2 = -0.8
    assert bar.pool_bar() == pytest.approx(-0.8)
    assert bar.front_bar(3) == pytest.approx(1e-1) and bar.front_bar(10) == pytest.approx(1e-4)
    # Enters the pool by score (-2 + 0.6 < -0.8) though dominated on the front.
    assert bar.joins(1e-2, 6)
    # Scores worse than the bar (-0.3 + 1.2) and dominated by "b" at complexity 10.
    assert not bar.joins(0.5, 12)
    assert bar.decades_above(0.5, 12) == pytest.approx(math.log10(0.5) + 1.2 + 0.8)
    # Below the pool's bar by score only through the front: at complexity 3 only "c" is held.
    assert fitness_score(0.09, 3, 0.1) > bar.pool_bar() and bar.joins(0.09, 3)
    assert bar.decades_above(0.09, 3) == pytest.approx(math.log10(0.09) + 1)
    assert bar.decades_above(math.inf, 12) == math.inf


def test_the_table_counts_skipped_searches_and_lost_entrants() -> None:
    rows = [{"joins": True, "start": 4.0, "after_1": 0.2},
            {"joins": False, "start": 6.0, "after_1": 2.5},
            {"joins": True, "start": -1.0, "after_1": -3.0},
            {"joins": False, "start": 1.5, "after_1": 1.2}]
    out = {(r["screen"], r["margin"]): r for r in table(rows, [1])}
    assert out[("start", 3.0)]["skipped"] == 0.5 and out[("start", 3.0)]["lost"] == 1
    assert out[("start", 5.0)]["skipped"] == 0.25 and out[("start", 5.0)]["lost"] == 0
    assert out[("after_1", 1.0)]["skipped"] == 0.5 and out[("after_1", 1.0)]["lost"] == 0
    assert all(r["joined"] == 2 for r in out.values())


def test_a_short_search_measures_every_screen(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "screen.json"
    assert main(["--turns", "3", "--rows", "200", "--passes", "1", "--json", str(out)]) == 0
    stored = json.loads(out.read_text())
    screens = {r["screen"] for r in stored["table"]}
    assert screens == {"start", "after_1"}
    assert stored["local_ms"] > 0 and stored["value_ms"] > 0
    assert all(0.0 <= r["skipped"] <= 1.0 and 0 <= r["lost"] <= r["joined"]
               for r in stored["table"])
    printed = capsys.readouterr().out
    assert "local searches over 3 turns" in printed and "| start | 5 |" in printed
