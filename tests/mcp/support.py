"""Shared helpers of the MCP tests: where the test servers are and how to configure them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

SERVERS = Path(__file__).parent / "servers"
FLAKY = SERVERS / "flaky_server.py"


def flaky(name: str = "flaky", *args: str, **keys: Any) -> dict[str, Any]:
    """A ``servers`` entry launching tests/mcp/servers/flaky_server.py with ``args``."""
    return {
        "name": name,
        "command": sys.executable,
        "args": [str(FLAKY), *args],
        "startup_timeout_s": 30,
        "call_timeout_s": 20,
        **keys,
    }
