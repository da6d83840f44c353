"""bench/propose.py end to end on a short history: the replays time the proposer, agree on
every proposal (one digest), and the table says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.propose import main


def test_a_short_history_replays_to_one_digest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "history.pkl"
    assert main(["--record", str(history), "--turns", "3", "--rows", "200",
                 "--sample-rows", "0"]) == 0
    assert main(["--replay", str(history), "--repeat", "2"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].split("|")
    replays, candidates, median, each, digest = (cell.strip() for cell in row[1:6])
    assert replays == "2" and int(candidates.replace(",", "")) > 0 and float(median) > 0
    assert len(each.split(", ")) == 2 and len(digest) == 16 and "/" not in digest
