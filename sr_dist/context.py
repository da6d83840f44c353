"""The old home of :class:`~sr_dist.conversation.Context` (an agent's conversation), kept so
``from sr_dist.context import Context`` still works; new code imports :mod:`sr_dist.conversation`."""

from sr_dist.conversation import Context

__all__ = ["Context"]
