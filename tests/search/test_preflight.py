"""``check_results_path`` and the ballast file: the early half of the disk faults (issue 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sr_dist.conf.record_dir import record_dir
from sr_dist.search.preflight import Ballast, check_results_path
from sr_dist.search.settings import SettingsError


def test_a_new_nested_path_is_made_and_left_clean(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    check_results_path(target)
    assert target.is_dir() and list(target.iterdir()) == []  # the probe is gone


def test_a_file_and_too_little_room_are_refused_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(SettingsError, match="is a file, not a directory: point it at"):
        check_results_path(tmp_path / "f")
    with pytest.raises(SettingsError, match="MiB free, less than the .* free some space"):
        check_results_path(tmp_path, min_free_bytes=1 << 62)


def test_the_ballast_holds_space_until_released(tmp_path: Path) -> None:
    ballast = Ballast(tmp_path, "run-1", size=4096)
    assert ballast.file.stat().st_size == 4096 and ballast.file.name.startswith(".")
    ballast.release()
    ballast.release()
    assert not ballast.file.exists()


def test_hydra_keeps_its_record_elsewhere_when_the_path_cannot_take_it(tmp_path: Path) -> None:
    assert record_dir(str(tmp_path / "new")) == str(tmp_path / "new")
    (tmp_path / "f").write_text("x")
    assert record_dir(str(tmp_path / "f")).endswith("sr-dist-hydra")

