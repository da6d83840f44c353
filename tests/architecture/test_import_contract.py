"""The import contract (.importlinter) holds for the tree, and fails when a forbidden import appears.

The contract is the layering of docs/architecture.md: faces > orchestration > SR domain > agent
kit > pictures > results > numeric core, the agent kit generic, the numeric core free of Ray and Hydra,
and nothing importing the console scripts. ``lint-imports`` runs in a subprocess on the real
tree, and on copies of it with one forbidden import added.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("lint-imports")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "importlinter.cli"]
    return subprocess.run(
        [*command, "--config", str(root / ".importlinter"), "--no-cache"],
        cwd=root, capture_output=True, text=True, timeout=240,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def _copy_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(ROOT / "sr_dist", root / "sr_dist", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", root / ".importlinter")
    return root


def test_the_tree_keeps_the_contract() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


# (module to add, its import, the contract that must break)
VIOLATIONS = [
    ("sr_dist/tools/probe.py", "import sr_dist.sr.formula_tools\n", "The agent kit imports nothing"),
    ("sr_dist/agent/probe.py", "from sr_dist.search import run_search\n", "Layers:"),
    ("sr_dist/evaluator/probe.py", "import ray\n", "without Ray or Hydra"),
    ("sr_dist/results/probe.py", "from sr_dist.search.settings import Settings\n", "Layers:"),
    ("sr_dist/search/probe.py", "from sr_dist.cli import main\n", "Nothing imports the console scripts"),
    ("sr_dist/viz/probe.py", "import ray\n", "without Ray or Hydra"),
    ("sr_dist/results/probe.py", "from sr_dist.viz import load_run\n", "Layers:"),
]


@pytest.mark.slow
@pytest.mark.parametrize("module,line,contract", VIOLATIONS, ids=[v[0] for v in VIOLATIONS])
def test_a_forbidden_import_breaks_the_contract(tmp_path: Path, module: str, line: str, contract: str) -> None:
    root = _copy_tree(tmp_path)
    (root / module).write_text(f'"""A forbidden import, for the contract test."""\n\n{line}')
    done = _lint(root)
    assert done.returncode == 1, done.stdout + done.stderr
    broken = done.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken
    assert module.removesuffix(".py").replace("/", ".") in broken
