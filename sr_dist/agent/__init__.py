"""The agent loop and its context: an LLM (or the offline proposer) searching with tools.

``Agent(model, parser, catalog, context, limits).run()`` / ``await arun()`` returns an
:class:`AgentResult`; :func:`build_agent` wires one up for a dataset and an evaluator with the
formula tools. See ``docs/agent.md``.
"""

from sr_dist.agent.compaction import CompactionPolicy, TurnLog, render_conversation, summarize_result
from sr_dist.agent.factory import build_agent, parser_for, problem_info
from sr_dist.agent.loop import STOP_REASONS, Agent, AgentLimits, AgentResult, BestFormula
from sr_dist.agent.state import Candidate, CandidateArchive, EpisodeState, Submission
from sr_dist.context import Context

__all__ = [
    "Agent",
    "AgentLimits",
    "AgentResult",
    "BestFormula",
    "Candidate",
    "CandidateArchive",
    "CompactionPolicy",
    "Context",
    "EpisodeState",
    "STOP_REASONS",
    "Submission",
    "TurnLog",
    "build_agent",
    "parser_for",
    "problem_info",
    "render_conversation",
    "summarize_result",
]
