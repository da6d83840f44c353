"""JSON Schema inferred from a Python signature, its type hints and its Google-style docstring.

A tool author writes an annotated ``execute`` (or function) once; the model-facing description
and parameter schema come from it, so the two never drift apart. Unsupported annotations are a
``ValueError`` at definition time, naming the parameter, rather than a wrong schema at run time.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections import abc
from collections.abc import Callable
from typing import Any, Literal, Union

__all__ = ["infer_parameters", "infer_description", "own_docstring", "parse_docstring", "type_to_schema"]

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?|Todo)\s*:\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and its ``Args:`` entries.

    The description is the text before the first section header (``Args:``, ``Returns:`` ...),
    whitespace-normalised per paragraph; argument descriptions may continue on indented lines.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        header = _SECTION.match(line)
        if header and (not line.startswith(" ")):
            section = header.group(1).lower()
            current, arg_indent = None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in ("args", "arguments", "parameters", "params") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        entry = _ARG_LINE.match(line.strip())
        if entry and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = entry.group(1).lstrip("*")
            args[current] = entry.group(2).strip()
        elif current is not None:
            args[current] = (args[current] + " " + line.strip()).strip()
    paragraphs = "\n".join(description).strip().split("\n\n")
    text = "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())
    return text, args


def own_docstring(fn: Callable[..., Any]) -> str | None:
    """``fn``'s own docstring; never one inherited from the method it overrides.

    ``inspect.getdoc`` would fall back to a parent class's docstring for an undocumented
    override, describing a tool by what its parent does.
    """
    doc = getattr(fn, "__doc__", None)
    return doc if isinstance(doc, str) else None


def infer_description(fn: Callable[..., Any]) -> str:
    """The docstring text before ``Args:`` (empty when there is no docstring)."""
    return parse_docstring(own_docstring(fn))[0]


_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _literal_schema(values: tuple[Any, ...], where: str) -> dict[str, Any]:
    kinds: set[str] = set()
    for value in values:
        if value is None:
            kinds.add("null")
        elif type(value) in _SCALARS:
            kinds.add(_SCALARS[type(value)])
        else:
            raise ValueError(f"{where}: Literal values must be str, int, float, bool or None, got {value!r}")
    schema: dict[str, Any] = {"enum": list(values)}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """Allow ``null`` too, as a type list when possible (clearer errors, OpenAI-friendly)."""
    if "enum" in schema:
        out = dict(schema)
        out["enum"] = [*schema["enum"], *([] if None in schema["enum"] else [None])]
        if isinstance(schema.get("type"), str):
            out["type"] = [schema["type"], "null"]
        return out
    if isinstance(schema.get("type"), str):
        return {**schema, "type": [schema["type"], "null"]}
    if not schema:
        return schema
    return {"anyOf": [schema, {"type": "null"}]}


def type_to_schema(annotation: Any, where: str = "annotation") -> dict[str, Any]:
    """JSON Schema for one annotation; ``where`` names the parameter in error messages."""
    if annotation is inspect.Parameter.empty or annotation is Any or annotation is object:
        return {}
    if annotation is None or annotation is type(None):
        return {"type": "null"}
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = type_to_schema(args[0], where)
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**inner, "description": " ".join(notes)} if notes else inner
    if origin is Literal:
        return _literal_schema(args, where)
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        has_none = len(members) < len(args)
        if len(members) == 1:
            inner = type_to_schema(members[0], where)
        else:
            inner = {"anyOf": [type_to_schema(m, where) for m in members]}
        return _nullable(inner) if has_none else inner
    if annotation in (list, tuple, set, frozenset) or origin in (list, set, frozenset):
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = type_to_schema(args[0], f"{where} item")
        return schema
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": type_to_schema(args[0], f"{where} item")}
        return {
            "type": "array",
            "prefixItems": [type_to_schema(a, f"{where} item") for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if annotation is dict or origin is dict:
        schema = {"type": "object"}
        if args:
            if args[0] is not str:
                raise ValueError(f"{where}: dict keys must be str (JSON object keys), got {args[0]!r}")
            value_schema = type_to_schema(args[1], f"{where} value")
            if value_schema:
                schema["additionalProperties"] = value_schema
        return schema
    if origin is not None:
        if origin in (abc.Sequence, abc.MutableSequence, abc.Iterable, abc.Collection):
            return {"type": "array", **({"items": type_to_schema(args[0], f"{where} item")} if args else {})}
        if origin in (abc.Mapping, abc.MutableMapping):
            return type_to_schema(dict[args[0], args[1]] if args else dict, where)  # type: ignore[valid-type]
    raise ValueError(
        f"{where}: cannot express {annotation!r} as JSON Schema; use str, int, float, bool, "
        "list[T], dict[str, T], Literal[...] or T | None, or declare ToolMetadata(parameters=...)"
    )


def _json_default(value: Any) -> tuple[bool, Any]:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False, None
    return True, value


def infer_parameters(fn: Callable[..., Any], *, skip: tuple[str, ...] = ("self", "cls")) -> dict[str, Any]:
    """The input schema (a JSON Schema object) for calling ``fn`` with keyword arguments.

    Each named parameter becomes a property (type from its hint, description from ``Args:``);
    parameters without a default are required; ``**kwargs`` allows extra properties; ``*args``
    and positional-only parameters cannot be passed by keyword, so they are not offered.
    """
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - unresolvable forward refs etc.
        raise ValueError(f"cannot resolve the type hints of {getattr(fn, '__qualname__', fn)!r}: {exc}") from exc
    _, arg_docs = parse_docstring(own_docstring(fn))
    owner = getattr(fn, "__qualname__", getattr(fn, "__name__", "function"))
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra_allowed = False
    for name, param in signature.parameters.items():
        if name in skip:
            continue
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            extra_allowed = True
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            if param.kind is inspect.Parameter.POSITIONAL_ONLY and param.default is inspect.Parameter.empty:
                raise ValueError(f"{owner}: parameter {name!r} is positional-only; tools are called by keyword")
            continue
        schema = dict(type_to_schema(hints.get(name, param.annotation), f"{owner}: parameter {name!r}"))
        if name in arg_docs and arg_docs[name]:
            schema["description"] = arg_docs[name]
        if param.default is inspect.Parameter.empty:
            required.append(name)
        else:
            ok, default = _json_default(param.default)
            if ok:
                schema["default"] = default
        properties[name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = extra_allowed
    return out
