"""bench/library_digest.py: the committed digests match the libraries the code builds now.

The whole list runs in minutes (``bench/library_digest.py --check``); here three small
problems of it (a one-variable Feynman law with and without units, and a synthetic draw) stand
guard in every ``make test``, and the comparison itself is checked to fail where it should.
The digests hold for the float kernels they were written with (``numerics``; CI's machine): on a
machine whose numpy or BLAS kernels differ the guard skips and says how to make a baseline.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.library_digest import (
    compare,
    digest,
    load_digests,
    numerics,
    problem_list,
    rendered_library,
    written_with,
)

GUARDS = ("feynman:I.6.2a:off", "feynman:I.6.2a:on", "synth:1:6")


def test_every_listed_problem_has_a_committed_digest() -> None:
    stored = load_digests()
    listed = problem_list()
    assert len(listed) == 70
    assert [p for p in listed if p not in stored] == []
    assert set(GUARDS) <= set(listed)


def test_the_digests_name_the_numerics_they_were_written_with() -> None:
    here = numerics()
    assert here.startswith(f"numpy {np.__version__} ") and "; " in here
    assert written_with() is not None and written_with().startswith("numpy ")


@pytest.mark.parametrize("problem", GUARDS)
def test_the_library_is_the_committed_one(problem: str) -> None:
    if numerics() != written_with():
        pytest.skip(f"the digests were written with {written_with()}, this machine runs {numerics()}: "
                    "write a baseline at your base commit (bench/library_digest.py --write --file F)")
    entries = rendered_library(problem)
    assert compare(problem, digest(entries), load_digests()[problem]) is None


def test_a_changed_library_is_reported_with_the_block_where_it_parts() -> None:
    entries = [f"c0*x{k}" for k in range(200)]
    stored = digest(entries)
    assert compare("p", digest(entries), stored) is None
    moved = entries[:130] + ["c0*x0 + c1"] + entries[130:]
    line = compare("p", digest(moved), stored)
    assert line is not None and "201 entries against 200" in line and "entry 128" in line
    assert "no committed digest" in (compare("p", stored, None) or "")
