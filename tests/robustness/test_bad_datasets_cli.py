"""Bad datasets through the real ``sr-dist`` CLI: one clear line, exit 2, before Ray starts.

tests/data checks ``load_dataset``'s messages; this is the end-to-end view: the message reaches
the user as one line naming the config key and the problem, and no cluster, actor or results row
was created (see ``cli_support``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.robustness.cli_support import assert_refused_before_ray, run_sr_dist, run_sr_dist_all

pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

ROWS = 50


def _table(y: list[str] | None = None, x: list[str] | None = None) -> str:
    rng = np.random.default_rng(0)
    xs = x or [str(float(v)) for v in rng.uniform(1, 2, ROWS)]
    ys = y or [str(float(v)) for v in rng.uniform(1, 2, ROWS)]
    return "x,z,y\n" + "".join(f"{a},{i},{b}\n" for i, (a, b) in enumerate(zip(xs, ys)))


def _with(values: dict[int, str], column: str = "y") -> str:
    base = [str(float(v)) for v in np.random.default_rng(1).uniform(1, 2, ROWS)]
    for row, value in values.items():
        base[row] = value
    return _table(y=base) if column == "y" else _table(x=base)


# (case id, file contents (None: do not create), extra overrides, fragments of the message)
CASES: list[tuple[str, str | None, list[str], list[str]]] = [
    ("nan target", _with({5: "nan"}), [], ["target column 'y'", "non-finite", "row 5"]),
    ("inf feature", _with({7: "inf"}, column="x"), [], ["feature column 'x'", "non-finite", "row 7"]),
    ("empty cell", _with({3: ""}), [], ["target column 'y'", "missing"]),
    ("constant target", _table(y=["3.0"] * ROWS), [], ["target is constant"]),
    ("missing target column", _table(), ["dataset.target=out"], ["target column 'out' not found", "x, z, y"]),
    ("empty file", "", [], ["is empty"]),
    ("header only", "x,y\n", [], ["0 rows", "at least 10"]),
    ("one row", "x,y\n1.0,2.0\n", [], ["has 1 row;", "at least 10"]),
    ("non-numeric", _with({4: "abc"}), [], ["column 'y' is not numeric", "'abc'"]),
    ("no such file", None, [], ["no such file"]),
    ("only a target", "y\n" + "".join(f"{i}\n" for i in range(ROWS)), [], ["at least one feature column"]),
    ("bad column name", _table().replace("x,z,y", "x 1,z,y", 1), [], ["'x 1'", "rename the column"]),
]


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory
             ) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    """Every case's file and ``sr-dist`` process, started together once for the module."""
    dirs = {name: tmp_path_factory.mktemp("bad-csv") for name, *_ in CASES}
    for name, contents, *_ in CASES:
        if contents is not None:
            (dirs[name] / "data.csv").write_text(contents)
    done = run_sr_dist_all({name: (dirs[name], ["dataset.source=csv:data.csv", "results.path=out",
                                                 *overrides], {})
                            for name, _, overrides, _ in CASES})
    return {name: (dirs[name], done[name]) for name in dirs}


@pytest.mark.parametrize("name, contents, overrides, fragments", CASES, ids=[c[0] for c in CASES])
def test_bad_csv_is_refused_before_ray(
        refusals: dict[str, tuple[Path, subprocess.CompletedProcess[str]]], name: str,
        contents: str | None, overrides: list[str], fragments: list[str]) -> None:
    cwd, done = refusals[name]
    line = assert_refused_before_ray(done, cwd, cwd / "out", "dataset.source",
                                     "could not be loaded", *fragments)
    print(f"{name}: {line}")


def test_bad_parquet_is_refused_before_ray(tmp_path: Path) -> None:
    pq.write_table(pa.table({"x": [1.0, 2.0] * 10, "y": [float("nan")] + [1.0, 2.0] * 9 + [3.0]}),
                   tmp_path / "d.parquet")
    done = run_sr_dist(tmp_path, "dataset.source=parquet:d.parquet", "results.path=out")
    assert_refused_before_ray(done, tmp_path, tmp_path / "out", "dataset.source",
                              "target column 'y'", "row 0")


def test_unknown_feynman_equation_suggests_names(tmp_path: Path) -> None:
    done = run_sr_dist(tmp_path, "dataset.source=feynman:I.6.20", "results.path=out")
    assert_refused_before_ray(done, tmp_path, tmp_path / "out", "dataset.source", "I.6.2")
