"""``bench/evaluator.py`` rewrites only its own block of docs/benchmarks.md: the measurements
written by hand in the same section (and every other section) survive a run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import evaluator as bench_evaluator  # noqa: E402

HAND = "**Measured by hand: 4.0 times as many fits.**\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"


def _doc(path: Path, evaluator_body: str) -> None:
    path.write_text("# Benchmarks\n\n## Throughput\n\nkept\n\n## Evaluator\n\n"
                    + evaluator_body + "\n## Fit quality\n\nalso kept\n")


def test_a_run_replaces_its_block_and_nothing_else(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    _doc(doc, HAND + "\n" + bench_evaluator.BEGIN_MARK + "\n\nold table\n\n"
         + bench_evaluator.END_MARK + "\n")
    bench_evaluator.write_docs("| new | table |", "cmd", "notes", path=doc)
    text = doc.read_text()
    assert HAND in text and "old table" not in text and "| new | table |" in text
    assert "kept" in text and "also kept" in text
    bench_evaluator.write_docs("| newer |", "cmd", "notes", path=doc)  # again: one block
    text = doc.read_text()
    assert text.count(bench_evaluator.BEGIN_MARK) == 1 and "| new | table |" not in text
    assert HAND in text and text.index(HAND) < text.index("| newer |") < text.index("## Fit quality")


def test_a_section_without_the_marks_keeps_its_text_and_gets_the_block_at_its_end(
        tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    _doc(doc, HAND)
    bench_evaluator.write_docs("| t |", "cmd", "notes", path=doc)
    text = doc.read_text()
    assert HAND in text and text.index(HAND) < text.index("| t |") < text.index("## Fit quality")
    fresh = tmp_path / "empty.md"
    bench_evaluator.write_docs("| t |", "cmd", "notes", path=fresh)
    assert "## Evaluator" in fresh.read_text() and "| t |" in fresh.read_text()
