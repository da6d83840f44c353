"""Read the seed documents' code samples and run them against sr-dist.

The seeds (``../shared/seeds/*.txt`` beside the repository) are plain text with no code fences,
so samples are found by shape: blank-line paragraphs that parse as Python (with at least one
statement that does something), a YAML mapping, a JSON object, lines of Python literals, or a
tab-separated table. Consecutive Python paragraphs form one sample (a docstring or a blank line
inside a class is kept whole). :func:`run_python` executes a sample with the seeds' package
names (``sr_harness.tools``, ``jharness.kernel``, ``jharness.toolkit``, ``harness``) mapped onto
sr-dist modules, so the text runs as written.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

__all__ = [
    "IMPORT_MAP",
    "SEEDS_DIR",
    "Sample",
    "extract",
    "load_samples",
    "run_python",
]

#: Where CI keeps the seed documents: ``shared/seeds`` next to the repository root.
SEEDS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "seeds"

#: Each seed package, and the sr-dist modules its names are looked up in (in order).
IMPORT_MAP: Mapping[str, tuple[str, ...]] = {
    "sr_harness.tools": ("sr_dist.tools",),
    "jharness.kernel": ("sr_dist.tools.kernel",),
    "jharness.toolkit": ("sr_dist.tools",),
    "harness": ("sr_dist.tools", "sr_dist.models", "sr_dist.conversation"),
}

Kind = Literal["python", "yaml", "json", "literal", "table"]

#: A first line that starts Python code (prose never starts like this and parses as well).
_CODE_START = re.compile(
    r"^(from [\w.]+ import |import \w|@\w|class \w|def \w|async def \w|[A-Za-z_][\w.]*\s*=[^=]|[A-Za-z_][\w.]*\()"
)
_YAML_START = re.compile(r"^[A-Za-z_][\w-]*:\s*$")
_MAX_PARAGRAPHS = 16


@dataclass(frozen=True, slots=True)
class Sample:
    """One code sample: where it starts (1-based line), what it is, and its text."""

    document: str
    line: int
    kind: Kind
    text: str
    #: Lines where the same text appears again (the seeds repeat samples in a translation).
    repeats: tuple[int, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.document[:3]}:{self.line}:{self.kind}"

    def table(self) -> list[list[str]]:
        """A table sample's rows, cells stripped of whitespace and backticks (header first)."""
        return [[cell.strip().strip("`") for cell in row.split("\t")] for row in self.text.splitlines()]


def _paragraphs(text: str) -> list[tuple[int, str]]:
    """Blank-line separated paragraphs with their first line number (indentation kept)."""
    out: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            if not current:
                start = number
            current.append(line.rstrip())
        elif current:
            out.append((start, "\n".join(current)))
            current = []
    if current:
        out.append((start, "\n".join(current)))
    return out


def _does_something(tree: ast.Module) -> bool:
    """Not just names or literals (a heading such as ``Validation`` parses as Python too)."""
    for node in tree.body:
        if not isinstance(node, ast.Expr):
            return True
        if any(isinstance(sub, ast.Call) for sub in ast.walk(node)):
            return True
    return False


def _python(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return _does_something(tree)


def _python_run(paragraphs: list[tuple[int, str]], i: int) -> int:
    """How many paragraphs from ``i`` form one Python sample (0: none starts here)."""
    if not _CODE_START.match(paragraphs[i][1]):
        return 0
    best = 0
    for j in range(i, min(len(paragraphs), i + _MAX_PARAGRAPHS)):
        text = paragraphs[j][1]
        if j > i and not (text[:1].isspace() or _CODE_START.match(text) or text.startswith(('"""', ")", "]", "}"))):
            break
        if _python("\n\n".join(p for _, p in paragraphs[i : j + 1])):
            best = j - i + 1
    return best


def _other_kind(text: str) -> Kind | None:
    lines = text.splitlines()
    if len(lines) > 1 and all("\t" in line for line in lines):
        return "table"
    if text.startswith("{"):
        try:
            if isinstance(json.loads(text), dict):
                return "json"
        except ValueError:
            pass
        try:
            if all(isinstance(ast.literal_eval(line), dict) for line in lines):
                return "literal"
        except (ValueError, SyntaxError):
            pass
    if _YAML_START.match(lines[0]) and len(lines) > 1 and all(line[:1].isspace() for line in lines[1:]):
        try:
            if isinstance(yaml.safe_load(text), dict):
                return "yaml"
        except yaml.YAMLError:
            pass
    return None


def extract(text: str, document: str = "<text>") -> tuple[Sample, ...]:
    """Every sample in a seed document, in order; a repeated text is one sample with ``repeats``."""
    paragraphs = _paragraphs(text)
    found: list[Sample] = []
    i = 0
    while i < len(paragraphs):
        line, body = paragraphs[i]
        run = _python_run(paragraphs, i)
        if run:
            found.append(Sample(document, line, "python", "\n\n".join(p for _, p in paragraphs[i : i + run])))
            i += run
            continue
        kind = _other_kind(body)
        if kind is not None:
            found.append(Sample(document, line, kind, body))
        i += 1
    unique: dict[str, Sample] = {}
    for sample in found:
        first = unique.get(sample.text)
        if first is None:
            unique[sample.text] = sample
        else:
            unique[sample.text] = Sample(first.document, first.line, first.kind, first.text, (*first.repeats, sample.line))
    return tuple(unique.values())


def load_samples(seeds_dir: Path = SEEDS_DIR) -> dict[str, tuple[Sample, ...]]:
    """``{document name: samples}`` for every ``*.txt`` seed in ``seeds_dir``."""
    return {path.name: extract(path.read_text(encoding="utf-8"), path.name) for path in sorted(seeds_dir.glob("*.txt"))}


class _MappedModule(types.ModuleType):
    """A seed package whose names resolve to sr-dist objects (``overrides`` first)."""

    def __init__(self, name: str, targets: tuple[str, ...], overrides: Mapping[str, Any]) -> None:
        super().__init__(name)
        self._targets = targets
        self._overrides = overrides

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr in ("_targets", "_overrides"):
            raise AttributeError(attr)
        if attr in self._overrides:
            return self._overrides[attr]
        for target in self._targets:
            module = importlib.import_module(target)
            if hasattr(module, attr):
                return getattr(module, attr)
        raise ImportError(
            f"the seed imports {attr!r} from {self.__name__!r}, which is mapped to "
            f"{', '.join(self._targets)}; none of them has it"
        )


def _importer(overrides: Mapping[str, Any]) -> Any:
    real = builtins.__import__

    def seed_import(
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: tuple[str, ...] | list[str] | None = (),
        level: int = 0,
    ) -> Any:
        targets = IMPORT_MAP.get(name) if level == 0 else None
        if targets is None:
            if level == 0 and name.split(".")[0] in {key.split(".")[0] for key in IMPORT_MAP}:
                raise ImportError(f"the seed import {name!r} is not mapped to sr-dist (see IMPORT_MAP)")
            return real(name, globals, locals, fromlist or (), level)
        if not fromlist:
            raise ImportError(f"write `from {name} import ...`; `import {name}` is not mapped")
        module = _MappedModule(name, targets, overrides)
        for attr in fromlist:
            getattr(module, attr)  # fail here, naming what is missing
        return module

    return seed_import


def run_python(
    sample: Sample,
    namespace: dict[str, Any] | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Execute a Python sample in ``namespace`` (shared by a document's samples) and return it.

    ``overrides`` supplies names the seed packages export that sr-dist spells differently;
    test doubles for helpers a sample calls but does not define go into ``namespace``.
    """
    if sample.kind != "python":
        raise ValueError(f"sample {sample.id} is {sample.kind}, not Python")
    names = namespace if namespace is not None else {}
    names.setdefault("__name__", f"seed_{sample.document[:3]}_sample")
    seeded = dict(vars(builtins))
    seeded["__import__"] = _importer(overrides or {})
    names["__builtins__"] = seeded
    exec(compile(sample.text, f"<{sample.document}:{sample.line}>", "exec"), names)  # noqa: S102 - the seed's own code
    return names
