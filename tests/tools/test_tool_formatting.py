"""format_result_dict, ANSI stripping and truncation: the model-facing text."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from sr_dist.tools.formatting import format_result_dict, strip_ansi, truncate, truncation_marker


@dataclasses.dataclass(frozen=True)
class _Fit:
    expression: str
    nmse: float


# (value, expected text): the rendering table.
FORMAT_CASES: list[tuple[Any, str]] = [
    ({"expression": "x*y", "nmse": 0.1 + 0.2}, "expression: x*y\nnmse: 0.3"),
    ({"n": 3, "ok": True, "none": None}, "n: 3\nok: true\nnone: null"),
    ({"best": {"b": 1, "a": 2.0}}, 'best: {"b": 1, "a": 2.0}'),
    ({"r": [1.0e-12, 123456789.123]}, "r: [1e-12, 1.2345679e+08]"),
    ({"bad": [math.nan, math.inf, -math.inf]}, "bad: [NaN, Infinity, -Infinity]"),
    ({"message": "line one\nline two"}, "message: line one\nline two"),
    ({"nested": ["a\nb"]}, 'nested: ["a\\nb"]'),
    ({"fit": _Fit("x", 0.5)}, 'fit: {"expression": "x", "nmse": 0.5}'),
    ({"arr": np.array([1.5, 2.0]), "scalar": np.float32(0.25)}, "arr: [1.5, 2.0]\nscalar: 0.25"),
    ({"tags": {"b", "a"}}, 'tags: ["a", "b"]'),
    ("plain text", "plain text"),
    ([1, "two"], '[1, "two"]'),
    (2.0, "2.0"),
    ({"unicode": "σ²"}, "unicode: σ²"),
]


@pytest.mark.parametrize(("value", "expected"), FORMAT_CASES, ids=[str(i) for i in range(len(FORMAT_CASES))])
def test_format_result_dict_table(value: Any, expected: str) -> None:
    assert format_result_dict(value) == expected


def test_format_is_deterministic_and_keeps_key_order() -> None:
    value = {"z": 1, "a": [3, 2], "m": {"y": 1.25, "x": None}}
    assert format_result_dict(value) == format_result_dict(dict(value))
    assert format_result_dict(value).splitlines()[0] == "z: 1"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("\x1b[31mred\x1b[0m text", "red text"),
        ("\x1b[1;32;40mbold\x1b[m", "bold"),
        ("\x1b]0;window title\x07after", "after"),
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("cursor\x1b[2Kcleared\x1b[10;5H", "cursorcleared"),
        ("no escapes", "no escapes"),
    ],
)
def test_strip_ansi(raw: str, clean: str) -> None:
    assert strip_ansi(raw) == clean


def test_format_strips_ansi_from_values() -> None:
    assert format_result_dict({"log": "\x1b[33mwarn\x1b[0m"}) == "log: warn"


def test_truncate_leaves_short_text_alone() -> None:
    assert truncate("abc", 3) == ("abc", 0)


@pytest.mark.parametrize("length", [101, 150, 5000, 123_456])
def test_truncate_bounds_the_text_and_says_how_much_was_cut(length: int) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(length))
    out, cut = truncate(text, 100)
    assert len(out) <= 100
    assert out.endswith(truncation_marker(cut))
    kept = out[: len(out) - len(truncation_marker(cut))]
    assert text.startswith(kept)
    assert len(kept) + cut == length


def test_truncate_rejects_negative_bound() -> None:
    with pytest.raises(ValueError):
        truncate("x", -1)
