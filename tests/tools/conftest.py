"""Fixtures for the tool-layer tests: the shared small problem and its real evaluator (formula helpers)."""

from tests.support.agent_problem import agent_dataset, agent_evaluator  # noqa: F401 - pytest fixtures
