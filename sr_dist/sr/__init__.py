"""The symbolic-regression domain on top of the generic agent kit.

The formula tools (:mod:`sr_dist.sr.formula_tools`), one episode's state and context
(:class:`EpisodeContext`, :class:`CandidateArchive`, :class:`EpisodeState`), the prompt, the
agent factory (:func:`build_agent`) and the offline ``evolve`` proposer (:mod:`sr_dist.sr.evolve`).
Importing this package registers the formula tools with ``BaseTool`` (:mod:`sr_dist.sr.catalog`
names them all) and the ``evolve`` provider with :func:`sr_dist.models.build_model`.
"""

from sr_dist.candidate import Candidate
from sr_dist.sr.catalog import build_formula_catalog
from sr_dist.sr.episode import EpisodeContext, EpisodeLimits
from sr_dist.sr.factory import build_agent, parser_for, problem_info
from sr_dist.sr.formula_tools import FORMULA_TOOLS, ListRecorder, formula_tool_context
from sr_dist.sr.state import CandidateArchive, EpisodeState, Submission

__all__ = [
    "FORMULA_TOOLS",
    "Candidate",
    "CandidateArchive",
    "EpisodeContext",
    "EpisodeLimits",
    "EpisodeState",
    "ListRecorder",
    "Submission",
    "build_agent",
    "build_formula_catalog",
    "formula_tool_context",
    "parser_for",
    "problem_info",
]
