"""Fixtures for the analysis-tool tests: the shared small problem and its evaluator."""

from tests.support.agent_problem import agent_dataset, agent_evaluator  # noqa: F401 - pytest fixtures
