"""sr-dist-query: runs, Pareto fronts and SQL in three formats; one-line errors, exit 2."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from results_helpers import T0, rows_for

from sr_dist.query_cli import FRONT_COLUMNS, RUN_COLUMNS, format_table, main
from sr_dist.results import CandidateWriter, RunRecord, write_run

REPO = Path(__file__).resolve().parents[2]


def _cand(run_id, step, complexity, val, status="ok"):
    return rows_for(run_id, 1, step0=step, complexity=complexity, val_nmse=val, status=status)[0]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli") / "results"
    runs = {
        "run-a": [_cand("run-a", 0, 1, 0.5), _cand("run-a", 1, 3, 0.123456789),
                  _cand("run-a", 2, 2, 0.9), _cand("run-a", 3, 4, None, "nonfinite")],
        "run-b": [_cand("run-b", 0, 2, 0.25)],
    }
    for run_id, rows in runs.items():
        with CandidateWriter(root, run_id, "feynman:I.6.2", "evolve", background=False) as w:
            w.add(rows)
    write_run(root, RunRecord(
        run_id="run-a", dataset="feynman:I.6.2", model="evolve", started_at=T0, agents=2,
        config="search:\n  agents: 2\n",
    ).with_best(rows_for("run-a", 1)[0], 4).finished("completed", "max_seconds"))
    return root


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_default_prints_the_runs_as_a_table(capsys, root):
    code, out, err = _run(capsys, str(root))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == list(RUN_COLUMNS)
    assert set(lines[1]) <= {"-", " "}
    assert len(lines) == 3 and "run-a" in lines[2] and "completed" in lines[2]
    assert "2025-01-02 03:04:05" in lines[2]


def test_run_prints_its_pareto_front_in_each_format(capsys, root):
    code, out, _ = _run(capsys, str(root), "--run", "run-a", "--format", "json")
    front = json.loads(out)
    assert code == 0 and list(front[0]) == list(FRONT_COLUMNS)
    assert [(r["complexity"], r["val_nmse"]) for r in front] == [(1, 0.5), (3, 0.123456789)]

    code, out, _ = _run(capsys, str(root), "--run", "run-a", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [r["candidate_id"] for r in rows] == ["run-a:0:0:0", "run-a:0:1:0"]
    assert rows[0]["train_nmse"] == "0.1"

    code, out, _ = _run(capsys, str(root), "--run", "run-a")
    assert code == 0 and "0.1235" in out and "0.123456789" not in out  # %.4g in tables

    code, out, _ = _run(capsys, str(root), "--run", "run-a", "--format", "json", "--limit", "1")
    assert len(json.loads(out)) == 1


def test_sql_over_both_views(capsys, root):
    sql = ("SELECT c.run_id, count(*) AS n, any_value(r.status) AS status FROM candidates c "
           "LEFT JOIN runs r USING (run_id) GROUP BY c.run_id ORDER BY c.run_id")
    code, out, _ = _run(capsys, str(root), "--sql", sql, "--format", "json")
    assert code == 0
    assert json.loads(out) == [{"run_id": "run-a", "n": 4, "status": "completed"},
                               {"run_id": "run-b", "n": 1, "status": None}]
    code, out, _ = _run(capsys, str(root), "--sql", "SELECT * FROM candidates", "--limit", "2",
                        "--format", "csv")
    assert code == 0 and len(list(csv.DictReader(io.StringIO(out)))) == 2
    code, out, _ = _run(capsys, str(root), "--sql", "SELECT created_at FROM candidates LIMIT 1",
                        "--format", "json")
    assert json.loads(out)[0]["created_at"].startswith("2025-01-02T03:04:05")


ERROR_CASES = [
    ("missing path", ["{missing}"], "no results under"),
    ("unknown run", ["{root}", "--run", "nope"], "unknown run id 'nope' (known: run-a, run-b)"),
    ("bad sql", ["{root}", "--sql", "SELEC 1"], "SQL error: Parser Error"),
    ("unknown table", ["{root}", "--sql", "SELECT * FROM nope"], "SQL error: Catalog Error"),
    ("negative limit", ["{root}", "--limit", "-1"], "--limit must be at least 0"),
]


@pytest.mark.parametrize("argv,message", [c[1:] for c in ERROR_CASES],
                         ids=[c[0] for c in ERROR_CASES])
def test_errors_are_one_line_and_exit_2(capsys, root, tmp_path, argv, message):
    argv = [a.format(root=root, missing=tmp_path / "missing") for a in argv]
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("sr-dist-query: error: ")
    assert message in err


def test_as_a_real_process(root):
    ok = subprocess.run(
        [sys.executable, "-m", "sr_dist.query_cli", str(root), "--run", "run-b", "--format",
         "csv"], cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[1].startswith("2,")
    bad = subprocess.run(
        [sys.executable, "-m", "sr_dist.query_cli", str(root), "--sql", "SELECT nonsense("],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_table_format_aligns_and_formats():
    text = format_table(["name", "x"], [("a", 1.0 / 3), ("long name", None), ("b", 12345678.9)])
    assert text.splitlines() == [
        "name               x",  # numbers right-aligned, text left-aligned
        "---------  ---------",
        "a             0.3333",
        "long name",            # null prints as nothing; trailing blanks are dropped
        "b          1.235e+07",
    ]


def test_runs_listing_notes_candidates_without_a_runs_row(capsys, tmp_path):
    with CandidateWriter(tmp_path, "run-x", "d", "evolve", background=False) as w:
        w.add(rows_for("run-x", 2, dataset="d"))
    code, out, err = _run(capsys, str(tmp_path), "--format", "csv")
    assert code == 0 and out.strip() == ",".join(RUN_COLUMNS)
    assert "no runs rows yet; 2 candidate(s) in 1 run(s)" in err


def _scorable_root(tmp_path: Path) -> tuple[Path, str]:
    """A run on a rebuildable dataset whose best candidate is the exact I.12.2 law."""
    import math

    from sr_dist.results import candidate_row

    root = tmp_path / "results"
    run_id = "run-score"
    config = ("dataset:\n  source: feynman:I.12.2\n  n: 300\n  seed: 3\n  noise: 0.0\n"
              "  split: [0.7, 0.15, 0.15]\n")
    with CandidateWriter(root, run_id, "feynman:I.12.2", "evolve", background=False) as w:
        best = candidate_row({"expression": "c0*q1*q2/(epsilon*r**2)",
                              "constants": {"c0": 1 / (4 * math.pi)}, "status": "ok",
                              "val_nmse": 1e-14, "test_nmse": 1e-14, "complexity": 10},
                             run_id, 0, 0, 0, "evolve", "feynman:I.12.2")
        w.add([best])
    write_run(root, RunRecord(run_id=run_id, dataset="feynman:I.12.2", model="evolve",
                              started_at=T0, config=config)
              .with_best(best, 1).finished("completed", "target_nmse"))
    return root, run_id


def test_score_prints_llm_srbench_metrics_of_a_run(capsys, tmp_path):
    root, run_id = _scorable_root(tmp_path)
    code, out, err = _run(capsys, str(root), "--score", run_id, "--tau", "0.1", "0.001",
                          "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["run_id"] == run_id and row["split"] == "test"
    assert row["nmse"] < 1e-20 and row["r2"] == pytest.approx(1.0)
    assert row["acc_0.1"] == 1.0 and row["acc_0.001_worst5"] == 1.0
    assert row["n"] == 45  # 15% of 300 rows


def test_score_every_run_notes_the_ones_it_cannot_score(capsys, tmp_path, root):
    # `root`'s run-a has no dataset section in its config: noted and skipped, not fatal.
    scorable, run_id = _scorable_root(tmp_path)
    code, out, _ = _run(capsys, str(scorable), "--score", "--format", "csv")
    assert code == 0
    assert list(csv.DictReader(io.StringIO(out)))[0]["run_id"] == run_id
    code, out, err = _run(capsys, str(root), "--score")
    assert code == 0 and "run run-a not scored" in err and "dataset section" in err
    code, out, err = _run(capsys, str(root), "--score", "run-a")
    assert code == 2 and "dataset section" in err and len(err.strip().splitlines()) == 1
    code, _, err = _run(capsys, str(scorable), "--score", run_id, "--tau", "-1")
    assert code == 2 and "--tau" in err


def test_run_shows_each_front_formula_beside_its_simplified_form(capsys, tmp_path, root):
    scorable, run_id = _scorable_root(tmp_path)
    code, out, err = _run(capsys, str(scorable), "--run", run_id, "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["expression"] == "c0*q1*q2/(epsilon*r**2)"
    assert row["simplified"] == "q1*q2/(4*pi*epsilon*r**2)"
    code, out, _ = _run(capsys, str(scorable), "--run", run_id)
    header = out.splitlines()[0].split()
    assert header.index("simplified") == header.index("expression") + 1
    assert "q1*q2/(4*pi*epsilon*r**2)" in out
    # a run whose dataset cannot be rebuilt still lists its front, with a note
    code, out, err = _run(capsys, str(root), "--run", "run-a", "--format", "json")
    assert code == 0 and all(r["simplified"] is None for r in json.loads(out))
    assert "no simplified forms" in err and "dataset section" in err
