"""No private name crosses a module boundary: a leading underscore means "this module's own".

A name ``_x`` may be imported only inside the package that defines it when it is a module
(``sr_dist.sr.analysis._common`` from ``sr_dist.sr.analysis.*``), and never when it is a
function, class or constant: what another module needs is public, documented and kept stable.
The check reads every ``from ... import`` of ``sr_dist`` and ``bench`` with the ast module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("sr_dist", "bench")


def _first_party(module: str) -> bool:
    """Ours: sr_dist, bench, and the bench scripts that import each other by file name (a
    third party's private names, such as Ray's, are its own business)."""
    top = module.split(".")[0]
    return top in CHECKED or (ROOT / "bench" / f"{top}.py").exists()


def _package_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1])


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(path: Path, source: str | None = None) -> list[str]:
    """``file:line: what`` for each private name ``path`` imports from another module."""
    tree = ast.parse(source if source is not None else path.read_text(), filename=str(path))
    package = _package_of(path)
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if not _first_party(module):
                continue
            hops = module.split(".")
            for i, part in enumerate(hops):
                # A private module may be imported only from inside the package holding it.
                if _private(part) and not package.startswith(".".join(hops[:i])):
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno}: module {module}")
                    break
            for alias in node.names:
                if _private(alias.name) and not (module and _is_module(module, alias.name)
                                                 and package.startswith(module)):
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name} from {module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if not _first_party(alias.name):
                    continue
                hops = alias.name.split(".")
                for i, part in enumerate(hops):
                    if _private(part) and not package.startswith(".".join(hops[:i])):
                        out.append(f"{path.relative_to(ROOT)}:{node.lineno}: module {alias.name}")
                        break
    return out


def _is_module(package: str, name: str) -> bool:
    base = ROOT.joinpath(*package.split("."))
    return (base / f"{name}.py").exists() or (base / name / "__init__.py").exists()


def test_no_private_name_is_imported_across_modules() -> None:
    found = [line for top in CHECKED for path in sorted((ROOT / top).rglob("*.py"))
             for line in private_imports(path)]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(("where", "source", "bad"), [
    ("sr_dist/sr/probe.py", "from sr_dist.sr.formula_tools import _helper\n", True),
    ("sr_dist/sr/probe.py", "from .formula_tools import _helper\n", True),
    ("sr_dist/search/probe.py", "from sr_dist.sr.analysis._common import rows\n", True),
    ("sr_dist/sr/analysis/probe.py", "from sr_dist.sr.analysis._common import rows\n", False),
    ("sr_dist/sr/analysis/probe.py", "from sr_dist.sr.analysis import _common\n", False),
    ("sr_dist/sr/probe.py", "from sr_dist.sr.formula_tools import FormulaTool as _Base\n", False),
    ("sr_dist/sr/probe.py", "from __future__ import annotations\n", False),
    ("bench/probe.py", "from peers_lib import _json_safe\n", True),
    ("sr_dist/search/probe.py", "from ray._private import ray_logging\n", False),
])
def test_the_check_tells_private_imports_from_public_ones(where: str, source: str, bad: bool) -> None:
    assert bool(private_imports(ROOT / where, source)) is bad
