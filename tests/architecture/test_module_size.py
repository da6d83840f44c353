"""One module, one job: no module of the SR domain grows past ``MAX_LINES``.

A module that passes it holds several algorithms (the seed library's ``seeding.py`` held eight
at 914 lines); split it by job, as :mod:`sr_dist.sr.evolve.library.sources` and
:mod:`sr_dist.sr.structure` are split, rather than raising the bar.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 500


def test_no_module_of_the_sr_domain_is_over_the_bar() -> None:
    sizes = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
             for path in (ROOT / "sr_dist" / "sr").rglob("*.py")}
    assert len(sizes) > 40
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}
