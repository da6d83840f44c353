"""Real MCP server processes for the MCP tests: our flaky test server and mcp-server-time.

``mcp-server-time`` (PyPI) needs ``mcp>=2.3,<3``, the same as sr-dist, so it is expected in the
test environment. Where it is missing, it is installed into its own virtualenv for the session;
the tests that need it are skipped only when the package index cannot be reached.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import venv
from typing import Any

import pytest

from tests.support.agent_problem import agent_dataset, agent_evaluator  # noqa: F401 - pytest fixtures


@pytest.fixture(scope="session")
def time_server(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A ``servers`` entry for the third-party ``mcp-server-time`` (UTC as the local zone)."""
    args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
    if importlib.util.find_spec("mcp_server_time") is not None:
        python = sys.executable
    else:
        home = tmp_path_factory.mktemp("mcp-server-time-venv")
        venv.EnvBuilder(with_pip=True).create(home)
        python = str(home / "bin" / "python")
        install = subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "mcp-server-time"],
            capture_output=True, text=True, timeout=600,
        )
        if install.returncode != 0:
            unreachable = any(
                hint in install.stderr
                for hint in ("Could not find a version", "Failed to establish", "NewConnectionError", "Temporary failure")
            )
            if unreachable:
                pytest.skip(f"mcp-server-time could not be installed (package index unreachable): {install.stderr[-300:]}")
            raise RuntimeError(f"installing mcp-server-time failed:\n{install.stderr[-2000:]}")
    return {"name": "time", "command": python, "args": args, "startup_timeout_s": 60, "call_timeout_s": 30}
