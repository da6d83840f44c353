"""A user's tools, checked by `make test`'s mypy gate (strict): the tool layer's types serve
user code (the default dict context, a typed context, the error kinds). Not collected by pytest."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sr_dist.tools import BaseTool, ErrorKind, ToolMetadata


@BaseTool.register("typing_example_tool")
class ExampleTool(BaseTool):
    metadata = ToolMetadata(name="typing_example_tool")

    def execute(self, expression: str, limit: int = 10) -> dict[str, Any]:
        parsed = self.parse_formula(expression)
        seen: Mapping[str, Any] = self.context
        return {"expression": parsed.to_str(), "limit": limit, "keys": sorted(seen)}


@dataclass(frozen=True)
class Episode:
    label: str


class Typed(BaseTool[Episode]):
    metadata = ToolMetadata(name="typing_typed_tool")

    def execute(self) -> dict[str, str]:
        label: str = self.context.label
        return {"label": label}


kind: str = ErrorKind.TIMEOUT
