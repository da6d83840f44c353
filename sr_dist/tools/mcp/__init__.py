"""MCP tools in sr-dist's catalog: trusted stdio servers whose tools agents call like any other.

```python
from sr_dist.tools.mcp import start_mcp_tools

toolset = start_mcp_tools(cfg.servers)          # launch, initialize, list tools (bounded)
catalog = build_formula_catalog(ctx, extra=toolset.tools(reserved=FORMULA_TOOLS))
...
toolset.restart("robot")                         # after a timeout: a fresh process
toolset.close()
```

Server launch configuration is trusted: it comes only from Hydra config files or the command
line, never from a model's tool call. See ``docs/mcp.md``.
"""

from sr_dist.tools.mcp.config import MCPConfigError, MCPServerConfig, parse_servers
from sr_dist.tools.mcp.connection import MCPStartupError, ServerStatus
from sr_dist.tools.mcp.mapping import call_result, call_timeout_s, catalog_name, content_text, tool_metadata
from sr_dist.tools.mcp.toolset import BACKSTOP_S, MCPTool, MCPToolset, astart_mcp_tools, start_mcp_tools

__all__ = [
    "BACKSTOP_S",
    "MCPConfigError",
    "MCPServerConfig",
    "MCPStartupError",
    "MCPTool",
    "MCPToolset",
    "ServerStatus",
    "astart_mcp_tools",
    "call_result",
    "call_timeout_s",
    "catalog_name",
    "content_text",
    "parse_servers",
    "start_mcp_tools",
    "tool_metadata",
]
