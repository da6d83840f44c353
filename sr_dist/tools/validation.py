"""JSON Schema Draft 2020-12: compile once at registration, explain failures to the model.

Schemas are checked eagerly (a broken schema or a ``$ref`` that points nowhere is a
``ValueError`` when the tool is defined, not a surprise mid-run) and never fetch remote
references. Validation errors are turned into short reasons that name the failing argument.

Integers: JSON Schema counts ``5.0`` as an integer, Python does not (``range(5.0)`` raises).
Input validators therefore treat only ``int`` as ``integer``, and :func:`check_arguments`
turns a whole float the schema wants as an integer into an ``int`` when a call is bound, so
the tool receives ``5``; a float it cannot turn exactly is refused there, as the model's error.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import jsonschema  # type: ignore[import-untyped]  # jsonschema ships no type stubs
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import Draft202012Validator

__all__ = [
    "compile_schema",
    "compile_parameters",
    "check_arguments",
    "CheckedArguments",
    "argument_errors",
    "output_errors",
    "describe_errors",
    "MAX_EXACT_INTEGER",
]

_MAX_ERRORS = 5
_MAX_MESSAGE = 240
#: Whole floats up to this magnitude are exactly the integer the model wrote; beyond it a
#: float may already have rounded (``12345678901234567890.0``), so it is refused, not turned.
MAX_EXACT_INTEGER = 2**53
#: Coercion passes per call (a coerced value can make a conditional subschema apply).
_MAX_COERCION_PASSES = 8


def _is_python_int(checker: Any, instance: Any) -> bool:
    del checker
    return isinstance(instance, int) and not isinstance(instance, bool)


#: Draft 2020-12 where ``integer`` means a Python ``int`` (``5.0`` is a number, not an integer).
_InputValidator = jsonschema.validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_python_int),
)


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
    return _compile(schema, what, Draft202012Validator)


def _compile(schema: Mapping[str, Any], what: str, kind: Any) -> Draft202012Validator:
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
    return cast(Draft202012Validator, kind(schema, registry=registry))


def compile_parameters(schema: Mapping[str, Any], *, what: str = "input schema") -> Draft202012Validator:
    """Like :func:`compile_schema`, and the schema must describe an object (keyword arguments).

    The validator is Draft 2020-12 with ``integer`` meaning a Python ``int``, so that
    :func:`check_arguments` can find the whole floats it must turn into ints.
    """
    if not isinstance(schema, Mapping):
        raise ValueError(f"{what} must be a JSON Schema object, got {type(schema).__name__}")
    kind = schema.get("type")
    if kind != "object":
        raise ValueError(f'{what} must have "type": "object" (tools take named arguments), got {kind!r}')
    return _compile(schema, what, _InputValidator)


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


def _wants_integer(error: jsonschema.ValidationError) -> bool:
    types = error.validator_value
    return error.validator == "type" and (types == "integer" or (isinstance(types, list) and "integer" in types))


def _whole_float(value: Any) -> bool:
    return isinstance(value, float) and value.is_integer()


def _describe(error: jsonschema.ValidationError, noun: str) -> list[str]:
    where = _path_text(error.absolute_path)
    prefix = f"{noun} {where!r}: " if where else ""
    if _wants_integer(error) and _whole_float(error.instance):
        return [
            (
                f"{prefix}{error.instance!r} is too large to be an exact integer; "
                "send it as an integer without a decimal point or exponent"
            )
        ]
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
    return _reasons(validator.iter_errors(instance), noun)


def _reasons(found: Iterable[Any], noun: str) -> list[str]:
    """:func:`describe_errors` for errors already found (one validation pass, not two)."""
    errors = sorted(found, key=lambda e: ([str(p) for p in e.absolute_path], str(e.validator), e.message))
    reasons: list[str] = []
    for error in errors:
        for reason in _describe(error, noun):
            if reason not in reasons:
                reasons.append(reason)
    if len(reasons) > _MAX_ERRORS:
        reasons = reasons[:_MAX_ERRORS] + [f"and {len(reasons) - _MAX_ERRORS} more problem(s)"]
    return reasons


@dataclass(frozen=True, slots=True)
class CheckedArguments:
    """A call's arguments as they will be passed, and why they cannot be (empty: they fit).

    ``coerced`` names each argument path whose whole float was turned into an ``int``.
    """

    arguments: Mapping[str, Any]
    reasons: tuple[str, ...] = ()
    coerced: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.reasons


def _integer_spots(error: jsonschema.ValidationError, found: set[tuple[Any, ...]]) -> None:
    """Paths where a subschema wants an integer and got a whole float it can take exactly."""
    if _wants_integer(error) and _whole_float(error.instance) and abs(error.instance) <= MAX_EXACT_INTEGER:
        found.add(tuple(error.absolute_path))
    for sub in error.context or ():
        _integer_spots(sub, found)


def _with_value(node: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``node`` with the value at ``path`` replaced (containers on the way are copied)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(node, Mapping):
        out = dict(node)
        out[head] = _with_value(node[head], rest, value)
        return out
    items = list(node)
    items[head] = _with_value(items[head], rest, value)
    return tuple(items) if isinstance(node, tuple) else items


def _value_at(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def check_arguments(validator: Draft202012Validator, arguments: Any) -> CheckedArguments:
    """Bind-time check: whole floats where the schema wants integers become ints, then validate.

    Coercion follows the schema as jsonschema applies it (``$ref``, ``items``, ``anyOf`` ...),
    because the places are found from the validator's own errors. Only validators made by
    :func:`compile_parameters` report those places; with another validator nothing is coerced.
    """
    if not isinstance(arguments, Mapping):
        return CheckedArguments(
            {}, (f"arguments must be a JSON object of named arguments, got {type(arguments).__name__}",)
        )
    current: dict[str, Any] = dict(arguments)
    coerced: list[str] = []
    for _ in range(_MAX_COERCION_PASSES):
        errors = list(validator.iter_errors(current))
        spots: set[tuple[Any, ...]] = set()
        for error in errors:
            _integer_spots(error, spots)
        if not spots:  # nothing left to coerce: these errors are the answer
            return CheckedArguments(current, tuple(_reasons(errors, "argument")), tuple(coerced))
        for path in sorted(spots, key=lambda p: [str(part) for part in p]):
            current = _with_value(current, path, int(_value_at(current, path)))
            coerced.append(_path_text(path))
    reasons = describe_errors(validator, current, "argument")
    return CheckedArguments(current, tuple(reasons), tuple(coerced))


def argument_errors(validator: Draft202012Validator, arguments: Any) -> list[str]:
    """Why ``arguments`` do not fit a tool's input schema, each naming the argument.

    Whole floats that :func:`check_arguments` would turn into integers are not errors.
    """
    return list(check_arguments(validator, arguments).reasons)


def output_errors(validator: Draft202012Validator, result: Any) -> list[str]:
    """Why a tool's result does not fit its declared output schema."""
    return describe_errors(validator, result, "field")
