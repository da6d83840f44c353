"""Shared fixtures for the model adapter tests: a conversation, a tool list, a recorded sleep."""

from __future__ import annotations

from typing import Any

import pytest

from sr_dist.conversation import Context

SECRET = "sk-test-0123456789abcdef"

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "evaluate_formulas",
            "description": "Fit and score candidate formulas.",
            "parameters": {
                "type": "object",
                "properties": {"formulas": {"type": "array", "items": {"type": "string"}}},
                "required": ["formulas"],
            },
        },
    }
]


class Sleeps(list[float]):
    """A ``sleep`` that records how long it was asked to wait instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def context() -> Context:
    return Context(
        system="You propose formulas.",
        messages=[{"role": "user", "content": "Find f(x) for the data."}],
    )


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def env() -> dict[str, str]:
    """A private environment for ``build_model(getenv=env.get)``: tests never read the real one."""
    return {"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": SECRET}


@pytest.fixture
def tools() -> list[dict[str, Any]]:
    return [dict(t) for t in TOOLS]


@pytest.fixture
def secret() -> str:
    return SECRET
