"""bench/library_probe.py: the first exact seed's rank and source, and the hits per source."""

from __future__ import annotations

from bench.library_probe import ProbeResult, probe, source_table


def _result(problem: str, source: str | None, sources: set[str]) -> ProbeResult:
    rank = None if source is None else 3
    return ProbeResult(problem, rank, source, "c0*x", 100, 0.1, False, frozenset(sources), 0.0, "x")


def test_the_table_counts_first_and_any_exact_hits_per_source() -> None:
    table = source_table([
        _result("a", "power_law/monomials", {"power_law/monomials", "decomposition"}),
        _result("b", "decomposition", {"decomposition"}),
        _result("c", None, set()),
    ])
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()[2:]}
    assert rows["decomposition"] == "| decomposition | 1 | 2 |"
    assert rows["power_law/monomials"] == "| power_law/monomials | 1 | 1 |"
    assert rows["(none)"].startswith("| (none) | 1 |")


def test_a_one_variable_law_is_found_in_the_library_with_its_source() -> None:
    result = probe("I.6.2a", 2000, False, 64, 32, every_source=True)
    assert result.rank is not None and result.rank < 64, result.line(64)
    assert result.source in result.exact_sources
    assert "EXACT at rank" in result.line(64) and result.source in result.line(64)
