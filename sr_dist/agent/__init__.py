"""The generic agent loop and its context: a model searching with tools, for any task.

``Agent(model, parser, catalog, context, limits, episode=...).run()`` / ``await arun()`` returns
an :class:`AgentResult`. The loop knows nothing of symbolic regression: what it needs from the
task it asks an :class:`Episode`. The formula-search wiring (``build_agent``, the formula tools,
the episode context) is in :mod:`sr_dist.sr`. See ``docs/agent.md``.
"""

from sr_dist.agent.episode import Episode, EpisodeReport, NoEpisode
from sr_dist.agent.history_window import CompactionPolicy, TurnLog, render_conversation, summarize_result
from sr_dist.agent.loop import STOP_REASONS, Agent, AgentLimits, AgentResult, StopReason
from sr_dist.agent.messages import LoopMessages
from sr_dist.conversation import Context

__all__ = [
    "Agent",
    "AgentLimits",
    "AgentResult",
    "CompactionPolicy",
    "Context",
    "Episode",
    "EpisodeReport",
    "LoopMessages",
    "NoEpisode",
    "STOP_REASONS",
    "StopReason",
    "TurnLog",
    "render_conversation",
    "summarize_result",
]
