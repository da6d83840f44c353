"""sr_dist.results and sr_dist.search load their names on first use (sr_dist/lazy_exports.py):
importing them pulls in none of the heavy libraries, every exported name resolves to its home
module's object, and a package whose ``__all__`` and lazy names differ fails at import."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from sr_dist.lazy_exports import lazy_exports

PACKAGES = ("sr_dist.results", "sr_dist.search")
HEAVY = ("pandas", "duckdb", "pyarrow.dataset", "ray", "jax", "hydra")


def test_importing_the_packages_loads_no_heavy_library() -> None:
    script = (f"import sys, json\nimport {', '.join(PACKAGES)}\n"
              f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_is_its_home_modules_object(package: str) -> None:
    module = importlib.import_module(package)
    homes = module._HOME  # noqa: SLF001 - the table under test
    assert sorted(module.__all__) == sorted(homes) == dir(module)
    for name in module.__all__:
        value = getattr(module, name)
        assert value is getattr(importlib.import_module(homes[name]), name)
        assert name in vars(module)  # kept: the next access is a plain lookup
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nothing'"):
        module.nothing  # noqa: B018


def test_a_name_in_all_without_a_home_is_refused() -> None:
    with pytest.raises(ValueError, match=r"__all__ and the lazy names differ: \['extra'\]"):
        lazy_exports("some.package", {"name": "some.module"}, ["name", "extra"])
