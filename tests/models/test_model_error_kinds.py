"""Model error kinds are a closed set: a ``StrEnum`` whose members are the old plain strings."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pytest

import sr_dist.models
from sr_dist.models import ERROR_KINDS, ModelError, ModelErrorKind
from sr_dist.models.circuit import CIRCUIT_OPEN
from sr_dist.models.retry import classify_status

#: The strings transcripts, stop reasons and results have always stored; they must not change.
STORED_KINDS = (
    "rate_limited", "server_error", "timeout", "transient", "connection", "auth", "not_found",
    "bad_request", "bad_response", "config", "replay_exhausted", "replay_mismatch", "circuit_open",
)


def test_error_kinds_are_the_enum_values_as_plain_strings() -> None:
    assert isinstance(ERROR_KINDS, tuple)
    assert ERROR_KINDS == STORED_KINDS
    assert all(type(kind) is str for kind in ERROR_KINDS)
    assert tuple(ModelErrorKind) == tuple(ModelErrorKind(k) for k in STORED_KINDS)
    assert CIRCUIT_OPEN is ModelErrorKind.CIRCUIT_OPEN


@pytest.mark.parametrize("kind", STORED_KINDS)
def test_a_string_kind_becomes_the_member_and_still_reads_as_the_string(kind: str) -> None:
    err = ModelError("boom", kind=kind)
    assert err.kind is ModelErrorKind(kind)
    assert err.kind == kind and f"model_error:{err.kind}" == f"model_error:{kind}"
    assert f"[{kind}]" in str(err) and f"kind={kind!r}" in repr(err)
    stored = err.to_dict()
    assert type(stored["kind"]) is str and json.loads(json.dumps(stored))["kind"] == kind
    assert ModelError.from_dict(stored).kind is err.kind
    back = pickle.loads(pickle.dumps(err))
    assert back.kind is err.kind


def test_an_unknown_kind_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown model error kind 'meltdown'; expected one of rate_limited, "):
        ModelError("boom", kind="meltdown")
    with pytest.raises(ValueError, match="'timeout_soon'"):
        ModelError.from_dict({"message": "m", "kind": "timeout_soon"})


@pytest.mark.parametrize("status", [400, 401, 403, 404, 408, 409, 418, 425, 429, 500, 503, 302])
def test_status_classification_returns_members(status: int) -> None:
    kind, _ = classify_status(status)
    assert isinstance(kind, ModelErrorKind)


def test_no_kind_is_parsed_by_prefix_in_the_models_package() -> None:
    """A closed set is compared by member, never by ``kind.startswith(...)``."""
    offenders: list[str] = []
    for path in sorted(Path(sr_dist.models.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in ("startswith", "endswith"):
                continue
            receiver = ast.unparse(node.func.value)
            if "kind" in receiver.lower():
                offenders.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []
