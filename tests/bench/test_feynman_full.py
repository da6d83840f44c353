"""bench/feynman_full.py: the problem lists, the clear failures (units not wired yet, peers not
installed), when the peers run, the tables, and that a rerun skips stored cells."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bench.feynman_full import (
    judge_peer,
    main,
    markdown,
    pending_peers,
    resolve_problems,
    setting_label,
)
from bench.peers_lib import PROBLEMS, PeerResult, gplearn_to_formula, literals_to_constants
from bench.scoring import Outcome, load_outcomes, save_outcomes


def test_problem_lists_are_the_whole_table_or_the_peers_list() -> None:
    everything = resolve_problems(["all"])
    assert len(everything) == len(set(everything)) == 100
    assert everything[:2] == ["I.6.2a", "I.6.2"]
    assert resolve_problems(["peers"]) == list(PROBLEMS) and len(PROBLEMS) == 34
    assert resolve_problems(["I.10.7", "II.6.15b"]) == ["I.10.7", "II.6.15b"]
    with pytest.raises(SystemExit, match="unknown AI Feynman problem.*I.99.9"):
        resolve_problems(["I.10.7", "I.99.9"])


def test_missing_peers_fail_before_anything_runs(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    if importlib.util.find_spec("pyoperon") is not None:
        pytest.skip("pyoperon is installed here")
    path = tmp_path / "f.json"
    assert main(["--units", "off", "--peers", "pyoperon", "--problems", "I.6.2a",
                 "--json", str(path)]) == 2
    err = capsys.readouterr().err
    assert "pyoperon" in err and ".[bench]" in err and not path.exists()
    assert main(["--units", "off", "--peers", "eureqa", "--json", str(path)]) == 2
    assert "unknown tool" in capsys.readouterr().err


def _cell(item: str, units: bool | None, exact: bool, tool: str = "sr-dist",
          nmse: float = 1e-14, status: str = "ok") -> Outcome:
    return Outcome(item=item, setting=setting_label(units, 0.0), tool=tool, budget_s=30.0,
                   n=10_000, status=status, truth="m*c**2", exact=exact, test_nmse=nmse,
                   wall_s=40.0)


def test_peers_run_where_some_sr_dist_cell_of_these_settings_is_not_exact() -> None:
    cells = [_cell("A", False, True), _cell("A", True, True),
             _cell("B", False, True), _cell("B", True, False),
             _cell("C", False, False)]
    assert not pending_peers(cells, "A", 0.0, 30.0, 10_000, [False, True])
    assert pending_peers(cells, "B", 0.0, 30.0, 10_000, [False, True])
    assert not pending_peers(cells, "B", 0.0, 30.0, 10_000, [False])
    assert pending_peers(cells, "C", 0.0, 30.0, 10_000, [False])
    assert not pending_peers(cells, "C", 0.0, 60.0, 10_000, [False])  # other budget
    assert not pending_peers(cells, "D", 0.0, 30.0, 10_000, [False])  # not run yet


def test_markdown_has_a_row_per_problem_and_totals_per_column() -> None:
    cells = [_cell("I.6.2a", False, True), _cell("I.6.2a", True, True),
             _cell("I.10.7", False, False, nmse=1e-6), _cell("I.10.7", True, True),
             _cell("I.10.7", None, False, tool="pyoperon", nmse=1e-5),
             _cell("I.12.1", False, False, status="timeout", nmse=None)]  # type: ignore[arg-type]
    text = markdown(cells, ["I.6.2a", "I.10.7", "I.12.1", "I.13.4"])
    assert "| problem | truth | sr-dist units off | sr-dist units on | pyoperon |" in text
    assert "| I.10.7 | `m*c**2` | no / 1.0e-06 / 40 | **yes** / 1.0e-14 / 40 | no / 1.0e-05 / 40 |" in text
    assert "| I.12.1 | `m*c**2` | timeout | · | · |" in text and "I.13.4" not in text
    assert "| sr-dist units off | 3 | 1 | 33% |" in text
    assert "| sr-dist units on | 2 | 2 | 100% |" in text
    assert "| pyoperon | 1 | 0 | 0% |" in text


def test_a_rerun_skips_cells_already_in_the_json(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "f.json"
    done = Outcome(item="I.6.2a", setting=setting_label(False, 0.0), tool="sr-dist",
                   budget_s=0.01, n=500, status="ok", truth="exp(-theta**2/2)/sqrt(2*pi)",
                   exact=True, test_nmse=1e-15, wall_s=1.0)
    save_outcomes(path, [done], [])
    # A new cell would be killed at once (limit 1.5 x 0.01 + 0.01 s) and stored as a timeout.
    assert main(["--units", "off", "--problems", "I.6.2a", "I.6.2", "--budget", "0.01",
                 "--grace", "0.01", "--n", "500", "--json", str(path)]) == 0
    outcomes, runs = load_outcomes(path)
    assert [(o.item, o.status) for o in outcomes] == [("I.6.2a", "ok"), ("I.6.2", "timeout")]
    assert len(runs) == 1
    assert "| I.6.2a |" in capsys.readouterr().out


def test_a_peer_model_is_judged_like_the_sr_dist_answer() -> None:
    # gplearn's form of I.12.1 (mu*Nn) and of a near miss, through peers_lib's converters.
    right, consts = literals_to_constants(gplearn_to_formula("mul(mu, mul(Nn, 1.0000001))"))
    near, near_consts = literals_to_constants(gplearn_to_formula("mul(mu, add(Nn, 0.01))"))
    base = {"tool": "gplearn", "problem": "I.12.1", "noise": 0.0, "budget_s": 30.0, "n": 1000,
            "truth": "mu*Nn"}
    hit = judge_peer(PeerResult(**base, status="ok", formula=right, constants=consts))
    assert (hit.status, hit.exact, hit.how, hit.setting) == ("ok", True, "symbolic", "noise=0")
    miss = judge_peer(PeerResult(**base, status="ok", formula=near, constants=near_consts))
    assert miss.status == "ok" and not miss.exact and miss.test_nmse is not None
    lost = judge_peer(PeerResult(**base, status="timeout", error="killed after 135 s"))
    assert (lost.status, lost.exact, lost.error) == ("timeout", False, "killed after 135 s")
