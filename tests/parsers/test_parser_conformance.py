"""Runs the conformance table in ``cases.py`` against the real parsers."""

from __future__ import annotations

import pytest

from sr_dist.parsers import ParseResult, UnreadableCall, get_parser
from sr_dist.tools.types import ToolCall

from .cases import CASES, Case


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conformance(case: Case) -> None:
    parser = get_parser(case.parser, **case.options)
    result = parser.parse(case.text, native_calls=case.native)

    assert isinstance(result, ParseResult)
    got = [(c.name, dict(c.arguments), c.id) for c in result.calls]
    assert got == [(n, a, i) for n, a, i in case.calls]
    assert all(isinstance(c, ToolCall) for c in result.calls)
    assert len(result.errors) == case.errors, result.errors
    # The outcome shape: one outcome per call, unreadable ones in place, every id set and distinct.
    assert all(isinstance(o, (ToolCall, UnreadableCall)) for o in result.outcomes)
    unreadable = [(i, o.name, o.id) for i, o in enumerate(result.outcomes) if isinstance(o, UnreadableCall)]
    assert unreadable == list(case.unreadable)
    assert len(result.outcomes) == len(case.calls) + len(case.unreadable)
    ids = [o.id for o in result.outcomes]
    assert all(ids) and len(set(ids)) == len(ids), ids
    assert len(result.problems) == case.errors - len(case.unreadable), result.problems
    assert all(isinstance(u.reason, str) and u.reason.strip() for u in result.unreadable)
    assert result.ok == (case.errors == 0)
    assert all(isinstance(e, str) and e.strip() for e in result.errors)
    joined = "\n".join(result.errors)
    for fragment in case.error_has:
        assert fragment in joined, (fragment, result.errors)


def test_case_ids_are_unique() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
