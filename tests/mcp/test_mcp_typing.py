"""``sr_dist/tools/mcp`` type-checks under ``mypy --strict`` (skipped where mypy is not installed).

The MCP client crosses threads, event loops and process boundaries; strict typing is what keeps
a result a ``ToolCallResult`` on every one of those paths.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_mcp_package_passes_mypy_strict() -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install mypy)")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental", "sr_dist/tools/mcp"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
