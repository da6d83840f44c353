"""Model adapters behind one protocol: ``build_model(cfg)`` and what it returns.

Providers: ``openai`` (any OpenAI-compatible endpoint), ``anthropic`` (the optional extra),
``replay`` (a recorded transcript), ``evolve`` (the built-in offline proposer) and ``scripted``
(a seeded proposer for soak and load tests). Every model
has ``name``, ``tool_mode``, ``call(context, tools)`` and ``async acall(context, tools)``, and
fails only with :class:`ModelError`. See docs/models.md.
"""

from sr_dist.models.base import (
    ERROR_KINDS,
    TOOL_MODES,
    ModelConfigError,
    ModelError,
    ModelErrorKind,
    ModelProtocol,
    ModelResponse,
    Usage,
)
from sr_dist.models.factory import PROVIDERS, build_model
from sr_dist.models.replay import RecordingModel, ReplayModel, load_transcript, request_digest
from sr_dist.models.retry import RetryPolicy

__all__ = [
    "ERROR_KINDS",
    "PROVIDERS",
    "TOOL_MODES",
    "ModelConfigError",
    "ModelError",
    "ModelErrorKind",
    "ModelProtocol",
    "ModelResponse",
    "RecordingModel",
    "ReplayModel",
    "RetryPolicy",
    "Usage",
    "build_model",
    "load_transcript",
    "request_digest",
]
