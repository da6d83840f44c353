"""Schema inference from signatures, type hints and Google-style docstrings."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

import pytest

from sr_dist.tools import BaseTool, ToolMetadata
from sr_dist.tools.schema import infer_parameters, parse_docstring, type_to_schema

# (annotation, expected schema): the behaviour table for single annotations.
TYPE_CASES: list[tuple[Any, dict[str, Any]]] = [
    (str, {"type": "string"}),
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (bool, {"type": "boolean"}),
    (list[str], {"type": "array", "items": {"type": "string"}}),
    (list[list[float]], {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}),
    (list, {"type": "array"}),
    (tuple[float, ...], {"type": "array", "items": {"type": "number"}}),
    (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (dict[str, Any], {"type": "object"}),
    (dict, {"type": "object"}),
    (Literal["fast", "exact"], {"type": "string", "enum": ["fast", "exact"]}),
    (Literal[1, 2, 3], {"type": "integer", "enum": [1, 2, 3]}),
    (Literal["a", 1], {"enum": ["a", 1]}),
    (str | None, {"type": ["string", "null"]}),
    (Optional[int], {"type": ["integer", "null"]}),
    (Optional[Literal["a", "b"]], {"type": ["string", "null"], "enum": ["a", "b", None]}),
    (list[int] | None, {"type": ["array", "null"], "items": {"type": "integer"}}),
    (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    (Any, {}),
    (Annotated[int, "How many restarts."], {"type": "integer", "description": "How many restarts."}),
    (
        tuple[str, int],
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "minItems": 2, "maxItems": 2},
    ),
]


@pytest.mark.parametrize(("annotation", "expected"), TYPE_CASES, ids=[repr(c[0]) for c in TYPE_CASES])
def test_type_to_schema_table(annotation: Any, expected: dict[str, Any]) -> None:
    assert type_to_schema(annotation) == expected


@pytest.mark.parametrize("annotation", [set[bytes], dict[int, str], complex, object.__class__, Literal[b"x"]])
def test_unsupported_annotations_raise_value_error_naming_the_place(annotation: Any) -> None:
    with pytest.raises(ValueError, match="param 'p'"):
        type_to_schema(annotation, "param 'p'")


def _documented(
    expression: str,
    limit: int = 10,
    mode: Literal["fast", "exact"] = "fast",
    tags: list[str] | None = None,
) -> dict[str, Any]:
    """Inspect an expression and report
    what it contains.

    A second paragraph.

    Args:
        expression: Expression supplied by the model,
            continued on a second line.
        limit (int): Maximum number of returned items.
        mode: How hard to look.

    Returns:
        Structured inspection results.

    Raises:
        ValueError: never mentioned to the model.
    """
    return {}


def test_infer_parameters_reads_hints_defaults_and_arg_docs() -> None:
    schema = infer_parameters(_documented)
    assert schema == {
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "description": "Expression supplied by the model, continued on a second line.",
            },
            "limit": {"type": "integer", "description": "Maximum number of returned items.", "default": 10},
            "mode": {
                "type": "string",
                "enum": ["fast", "exact"],
                "description": "How hard to look.",
                "default": "fast",
            },
            "tags": {"type": ["array", "null"], "items": {"type": "string"}, "default": None},
        },
        "required": ["expression"],
        "additionalProperties": False,
    }


def test_docstring_description_is_the_text_before_args() -> None:
    description, args = parse_docstring(_documented.__doc__)
    assert description == "Inspect an expression and report what it contains.\n\nA second paragraph."
    assert set(args) == {"expression", "limit", "mode"}
    assert "ValueError" not in description and "Structured" not in description


def test_kwargs_allow_extra_properties_and_varargs_are_not_offered() -> None:
    def fn(a: int, *rest: int, **extra: Any) -> dict[str, Any]:
        return {}

    schema = infer_parameters(fn)
    assert schema["additionalProperties"] is True
    assert list(schema["properties"]) == ["a"]


def test_unannotated_parameter_accepts_anything() -> None:
    def fn(a, b: int = 1):  # type: ignore[no-untyped-def]
        return {}

    assert infer_parameters(fn)["properties"]["a"] == {}


def test_positional_only_without_default_is_rejected() -> None:
    def fn(a: int, /) -> dict[str, Any]:
        return {}

    with pytest.raises(ValueError, match="positional-only"):
        infer_parameters(fn)


class _Inferred(BaseTool):
    metadata = ToolMetadata(name="inferred_tool")

    def execute(self, expression: str, limit: int = 10) -> dict[str, Any]:
        """Inspect an expression.

        Args:
            expression: Expression supplied by the model.
            limit: Maximum number of returned items.
        """
        return {"expression": expression, "limit": limit}


class _Explicit(BaseTool):
    metadata = ToolMetadata(
        name="explicit_tool",
        description="Declared description.",
        parameters={"type": "object", "properties": {"expression": {"type": "string", "minLength": 3}}},
    )

    def execute(self, expression: str, limit: int = 10) -> dict[str, Any]:
        """Docstring description that must lose."""
        return {"expression": expression}


def test_base_tool_infers_description_and_parameters() -> None:
    tool = _Inferred()
    assert tool.metadata.description == "Inspect an expression."
    assert tool.metadata.parameters is not None
    assert tool.metadata.parameters["required"] == ["expression"]
    assert tool.spec.name == "inferred_tool"
    assert tool.spec.parameters["properties"]["limit"]["default"] == 10


def test_explicit_metadata_wins_over_inference() -> None:
    tool = _Explicit()
    assert tool.metadata.description == "Declared description."
    assert tool.metadata.parameters == {
        "type": "object",
        "properties": {"expression": {"type": "string", "minLength": 3}},
    }
    short = tool(expression="ab")  # the explicit minLength is what is enforced
    assert not short.ok and short.meta_data["error_kind"] == "invalid_tool_call"
    assert tool(expression="abc").ok


def test_unsupported_hint_fails_when_the_class_is_registered() -> None:
    with pytest.raises(ValueError, match="'blob'"):

        @BaseTool.register("bad_hint_tool")
        class Bad(BaseTool):
            def execute(self, blob: bytes) -> dict[str, Any]:
                return {}
