"""CSV and Parquet datasets: happy paths and every bad-data error, on real files in tmp_path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sr_dist.data import DatasetError, load_dataset


def _rows(n: int = 20) -> list[list[float]]:
    return [[i * 0.5, (i % 7) + 1.0, 2.0 * i + 1.0] for i in range(n)]


def _csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    lines = [",".join(header)] + [",".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_csv_default_target_is_last_column(tmp_path: Path) -> None:
    path = _csv(tmp_path / "d.csv", ["x", "z", "y"], _rows())
    ds = load_dataset(f"csv:{path}")
    assert ds.feature_names == ("x", "z") and ds.target_name == "y"
    assert ds.X.dtype == np.float64 and ds.X.shape == (20, 2)
    np.testing.assert_array_equal(ds.y, [2.0 * i + 1.0 for i in range(20)])
    assert ds.ground_truth is None and ds.ground_truth_formula() is None
    assert ds.name == f"csv:{path}"
    assert "'y'" in ds.description and "20 rows" in ds.description and "x (observed" in ds.description


def test_csv_named_target_and_plain_path(tmp_path: Path) -> None:
    path = _csv(tmp_path / "d.csv", ["x", "z", "y"], _rows())
    ds = load_dataset(str(path), target="x")
    assert ds.feature_names == ("z", "y") and ds.target_name == "x"
    assert ds.source == str(path) and ds.name == f"csv:{path}"


def test_parquet_round_trip_and_hash_matches_csv(tmp_path: Path) -> None:
    rows = _rows(30)
    table = pa.table({
        "x": [r[0] for r in rows],
        "k": pa.array([int(r[1]) for r in rows], pa.int32()),
        "y": [r[2] for r in rows],
    })
    pq.write_table(table, tmp_path / "d.parquet")
    ds = load_dataset(f"parquet:{tmp_path / 'd.parquet'}", seed=4)
    plain = load_dataset(str(tmp_path / "d.parquet"), seed=4)
    assert ds.feature_names == ("x", "k") and ds.X[:, 1].dtype == np.float64
    assert ds.content_hash == plain.content_hash
    csv_path = _csv(tmp_path / "d.csv", ["x", "k", "y"], [[r[0], int(r[1]), r[2]] for r in rows])
    assert load_dataset(f"csv:{csv_path}", seed=4).content_hash == ds.content_hash


def test_n_caps_rows_with_a_seeded_subset(tmp_path: Path) -> None:
    path = _csv(tmp_path / "d.csv", ["x", "z", "y"], _rows(100))
    a = load_dataset(f"csv:{path}", n=40, seed=2)
    b = load_dataset(f"csv:{path}", n=40, seed=2)
    assert a.n == 40 and a.content_hash == b.content_hash
    assert np.all(np.diff(a.X[:, 0]) > 0)  # kept in file order
    assert "subset" in a.description
    assert load_dataset(f"csv:{path}", n=1000).n == 100


def test_noise_on_tables(tmp_path: Path) -> None:
    path = _csv(tmp_path / "d.csv", ["x", "z", "y"], _rows(200))
    clean = load_dataset(f"csv:{path}")
    noisy = load_dataset(f"csv:{path}", noise=0.2, seed=1)
    assert not np.array_equal(clean.y, noisy.y)
    assert 0.15 < np.std(noisy.y - clean.y) / np.std(clean.y) < 0.25


# (header, rows, kwargs, message): one bad-data case each
BAD_TABLES = [
    (["x", "z", "y"], _rows(), {"target": "out"}, "target column 'out' not found; columns are: x, z, y"),
    (["x", "name", "y"], [[1, f"s{i}", i] for i in range(20)], {}, "column 'name' is not numeric"),
    (["x", "z", "y"], [[1, 2, "" if i == 3 else i] for i in range(20)], {},
     "target column 'y' has 1 missing or non-finite value (first at row 3)"),
    (["x", "z", "y"], [[1, 2, "inf" if i in (5, 8) else i] for i in range(20)], {},
     "has 2 missing or non-finite values (first at row 5)"),
    (["x", "z", "y"], [[1, 2, "nan" if i == 0 else i] for i in range(20)], {}, "(first at row 0)"),
    (["x", "z", "y"], [[i, "" if i == 7 else 2, i] for i in range(20)], {},
     "feature column 'z' has 1 missing or non-finite value (first at row 7)"),
    (["x", "z", "y"], [[i, "-inf" if i == 2 else 1, i] for i in range(20)], {},
     "feature column 'z'"),
    (["x", "z", "y"], _rows(9), {}, "has 9 rows; at least 10 are needed"),
    (["x", "z", "y"], [], {}, "has 0 rows"),
    (["x", "z", "y"], [[i, i, 4.0] for i in range(20)], {}, "target is constant"),
    (["x 1", "z", "y"], _rows(), {}, "column name 'x 1' cannot be a formula variable"),
    (["sin", "z", "y"], _rows(), {}, "column name 'sin'"),
    (["pi", "z", "y"], _rows(), {}, "rename the column"),
    (["1x", "z", "y"], _rows(), {}, "column name '1x'"),
    (["x", "x", "y"], _rows(), {}, "duplicate column names: x"),
    (["y"], [[i] for i in range(20)], {}, "at least one feature column"),
    (["x", "flag", "y"], [[i, "true", i] for i in range(20)], {}, "column 'flag' is not numeric (type bool)"),
]


@pytest.mark.parametrize(("header", "rows", "kwargs", "message"), BAD_TABLES,
                         ids=[case[3][:40] for case in BAD_TABLES])
def test_bad_csv(tmp_path: Path, header: list[str], rows: list, kwargs: dict,
                 message: str) -> None:
    path = _csv(tmp_path / "bad.csv", header, rows)
    with pytest.raises(DatasetError) as info:
        load_dataset(f"csv:{path}", **kwargs)
    assert message in str(info.value)


def test_non_numeric_error_shows_an_example_value(tmp_path: Path) -> None:
    path = _csv(tmp_path / "bad.csv", ["x", "z", "y"],
                [[i, "oops" if i == 4 else i, i] for i in range(20)])
    with pytest.raises(DatasetError, match=r"column 'z' is not numeric .*'oops' in row 4"):
        load_dataset(f"csv:{path}")


def test_empty_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DatasetError, match="is empty"):
        load_dataset(f"csv:{tmp_path / 'empty.csv'}")
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(f"csv:{tmp_path / 'nope.csv'}")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DatasetError, match="cannot read Parquet file"):
        load_dataset(f"parquet:{tmp_path / 'junk.parquet'}")
    with pytest.raises(DatasetError, match="is a directory"):
        load_dataset(f"csv:{tmp_path}")


def test_parquet_non_numeric_and_nulls(tmp_path: Path) -> None:
    base = {"x": list(range(20)), "y": [float(i) for i in range(20)]}
    pq.write_table(pa.table({**base, "s": [str(i) + "a" for i in range(20)],
                             "t": [float(i) for i in range(20)]}), tmp_path / "s.parquet")
    with pytest.raises(DatasetError, match="column 's' is not numeric"):
        load_dataset(f"parquet:{tmp_path / 's.parquet'}")
    target = [float(i) for i in range(20)]
    target[6] = None  # type: ignore[call-overload]
    pq.write_table(pa.table({"x": list(range(20)), "y": target}), tmp_path / "n.parquet")
    with pytest.raises(DatasetError, match=r"1 missing or non-finite value \(first at row 6\)"):
        load_dataset(f"parquet:{tmp_path / 'n.parquet'}")
