"""JSON Schema Draft 2020-12: compile once at registration, explain failures to the model.

Schemas are checked eagerly (a broken schema or a ``$ref`` that points nowhere is a
``ValueError`` when the tool is defined, not a surprise mid-run) and never fetch remote
references. Validation errors are turned into short reasons that name the failing argument.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Iterator

import jsonschema  # type: ignore[import-untyped]  # jsonschema ships no type stubs
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import Draft202012Validator

__all__ = ["compile_schema", "compile_parameters", "argument_errors", "output_errors", "describe_errors"]

_MAX_ERRORS = 5
_MAX_MESSAGE = 240


def _refs(node: Any, resolver: Any) -> Iterator[tuple[str, Any]]:
    """Every ``$ref``/``$dynamicRef`` with the resolver in scope at that point (``$id`` rebases).

    ``resolver`` is a ``referencing`` resolver (its class is not exported publicly, hence Any).
    """
    if isinstance(node, Mapping):
        if isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(referencing.jsonschema.DRAFT202012.create_resource(node))
        for key in ("$ref", "$dynamicRef"):
            if isinstance(node.get(key), str):
                yield node[key], resolver
        for key, value in node.items():
            if key in ("const", "enum", "default", "examples"):
                continue  # instance data, not subschemas
            yield from _refs(value, resolver)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item, resolver)


def compile_schema(schema: Mapping[str, Any], *, what: str = "schema") -> Draft202012Validator:
    """A validator for ``schema``; ``ValueError`` if the schema is invalid or a ``$ref`` dangles."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{what} must be a JSON Schema object, got {type(schema).__name__}")
    schema = copy.deepcopy(dict(schema))
    try:
        Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise ValueError(f"{what} is not a valid JSON Schema (Draft 2020-12) at {where}: {exc.message}") from None
    resource = referencing.jsonschema.DRAFT202012.create_resource(schema)
    registry: referencing.Registry[Any] = referencing.Registry().with_resource(
        resource.id() or "urn:sr-dist:tool-schema", resource
    )
    resolver = registry.resolver(base_uri=resource.id() or "urn:sr-dist:tool-schema")
    for ref, scope in _refs(schema, resolver):
        try:
            scope.lookup(ref)
        except referencing.exceptions.Unresolvable as exc:
            raise ValueError(f"{what} has an unresolvable $ref {ref!r}: {exc}") from None
    return Draft202012Validator(schema, registry=registry)


def compile_parameters(schema: Mapping[str, Any], *, what: str = "input schema") -> Draft202012Validator:
    """Like :func:`compile_schema`, and the schema must describe an object (keyword arguments)."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{what} must be a JSON Schema object, got {type(schema).__name__}")
    kind = schema.get("type")
    if kind != "object":
        raise ValueError(f'{what} must have "type": "object" (tools take named arguments), got {kind!r}')
    return compile_schema(schema, what=what)


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def _path_text(path: Any) -> str:
    parts = list(path)
    if not parts:
        return ""
    text = str(parts[0])
    for part in parts[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _describe(error: jsonschema.ValidationError, noun: str) -> list[str]:
    where = _path_text(error.absolute_path)
    prefix = f"{noun} {where!r}: " if where else ""
    # At the root the missing/unexpected things are themselves arguments; deeper they are fields.
    item = "field" if where else noun
    if error.validator == "required" and isinstance(error.instance, Mapping):
        missing = [n for n in error.validator_value if isinstance(n, str) and n not in error.instance]
        if missing:
            return [f"{prefix}missing required {item} {name!r}" for name in missing]
    if (
        error.validator == "additionalProperties"
        and error.validator_value is False
        and isinstance(error.instance, Mapping)
    ):
        known = set(error.schema.get("properties", {}))
        extras = [k for k in error.instance if k not in known]
        if extras:
            hint = f" (expected one of: {', '.join(sorted(known))})" if known else ""
            return [f"{prefix}unexpected {item} {k!r}{hint}" for k in extras]
    return [prefix + _clip(error.message)]


def describe_errors(validator: Draft202012Validator, instance: Any, noun: str) -> list[str]:
    """Readable, deterministic reasons why ``instance`` breaks the schema (empty when valid)."""
    errors = sorted(
        validator.iter_errors(instance), key=lambda e: ([str(p) for p in e.absolute_path], str(e.validator), e.message)
    )
    reasons: list[str] = []
    for error in errors:
        for reason in _describe(error, noun):
            if reason not in reasons:
                reasons.append(reason)
    if len(reasons) > _MAX_ERRORS:
        reasons = reasons[:_MAX_ERRORS] + [f"and {len(reasons) - _MAX_ERRORS} more problem(s)"]
    return reasons


def argument_errors(validator: Draft202012Validator, arguments: Any) -> list[str]:
    """Why ``arguments`` do not fit a tool's input schema, each naming the argument."""
    if not isinstance(arguments, Mapping):
        return [f"arguments must be a JSON object of named arguments, got {type(arguments).__name__}"]
    return describe_errors(validator, dict(arguments), "argument")


def output_errors(validator: Draft202012Validator, result: Any) -> list[str]:
    """Why a tool's result does not fit its declared output schema."""
    return describe_errors(validator, result, "field")
