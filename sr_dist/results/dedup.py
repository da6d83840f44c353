"""Which candidate ids a run's writer has accepted, in bounded memory.

A writer must drop every row it already wrote, but an exact set of a million-candidate run's
ids costs 100+ MB. The ids sr-dist makes are ``run:agent:step:index``
(:func:`sr_dist.results.schema.candidate_id`), and only a batch that was never acknowledged is
ever sent again: a :class:`~sr_dist.search.sink.WriterSink` has at most ``max_in_flight``
unacknowledged batches, each batch holds rows of one step, and an agent's steps only grow (a
resumed or restarted agent continues after its old steps). So when a batch of step ``s`` is
resent, the agent has sent at most ``max_in_flight - 1`` batches after it, i.e. fewer than
``max_in_flight`` steps above ``s``.

:class:`SeenIds` therefore keeps, per agent, the exact ids of the ``window_steps`` highest
steps it has seen (default 256, well above the sink's 32) and a *floor*: the highest step it
has dropped from that window; every id at or below the floor counts as seen. That is exact
for everything that can be resent. A step's indices are held as ranges (its batches are
contiguous runs of indices, so a step of 1,024 rows in 16 batches is one range), so the memory
is about ``agents x window_steps`` ranges, however long the run and however many rows a step
has. Ids that do not parse as this run's pattern (made by
hand, by another tool) fall back to an exact set.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["DEFAULT_WINDOW_STEPS", "SeenIds"]

#: Distinct steps per agent whose ids are kept exactly (must exceed the sink's max_in_flight).
DEFAULT_WINDOW_STEPS = 256


def _holds(ranges: list[int], index: int) -> bool:
    """Whether ``index`` is in ``ranges`` (flat ``[lo0, hi0, lo1, hi1, ...]``, half-open)."""
    for k in range(0, len(ranges), 2):
        if ranges[k] <= index < ranges[k + 1]:
            return True
    return False


def _insert(ranges: list[int], index: int) -> None:
    """Add ``index`` (not in ``ranges``), merging neighbours: a step's rows come as a few
    contiguous batches of indices, so a step usually costs one range, however many rows."""
    if ranges and ranges[-1] == index:  # the common case: the next index of the last batch
        ranges[-1] = index + 1
        return
    for k in range(0, len(ranges), 2):
        lo, hi = ranges[k], ranges[k + 1]
        if index == hi:
            if k + 2 < len(ranges) and ranges[k + 2] == index + 1:  # closes a gap
                ranges[k + 1] = ranges[k + 3]
                del ranges[k + 2:k + 4]
            else:
                ranges[k + 1] = index + 1
            return
        if index == lo - 1:
            ranges[k] = index
            return
        if index < lo:
            ranges[k:k] = [index, index + 1]
            return
    ranges.extend((index, index + 1))


class _AgentWindow:
    """One agent's exact window: step -> the candidate indices seen (as ranges), and the floor
    below it."""

    __slots__ = ("steps", "floor", "entries")

    def __init__(self) -> None:
        self.steps: dict[int, list[int]] = {}
        self.floor: int | None = None
        self.entries = 0


class SeenIds:
    """A set of candidate ids of one run with bounded memory (see the module docstring).

    Not thread-safe: the writer calls it under its own lock.
    """

    def __init__(self, run_id: str, window_steps: int = DEFAULT_WINDOW_STEPS,
                 ids: Iterable[str] = ()) -> None:
        if isinstance(window_steps, bool) or not isinstance(window_steps, int) \
                or window_steps < 1:
            raise ValueError(f"window_steps must be a positive integer, got {window_steps!r}")
        self.run_id = run_id
        self.window_steps = window_steps
        self._prefix = f"{run_id}:"
        self._agents: dict[int, _AgentWindow] = {}
        self._other: set[str] = set()
        for cid in ids:
            self.add(cid)

    def _parse(self, cid: str) -> tuple[int, int, int] | None:
        """``(agent, step, index)`` of an id in this run's canonical pattern, else ``None``."""
        if not cid.startswith(self._prefix):
            return None
        parts = cid[len(self._prefix):].split(":")
        if len(parts) != 3:
            return None
        try:
            agent, step, index = int(parts[0]), int(parts[1]), int(parts[2])
        except ValueError:
            return None
        if f"{agent}:{step}:{index}" != cid[len(self._prefix):]:  # "+1", "01", " 1": not ours
            return None
        return agent, step, index

    def __contains__(self, cid: object) -> bool:
        if not isinstance(cid, str):
            return False
        parsed = self._parse(cid)
        if parsed is None:
            return cid in self._other
        agent, step, index = parsed
        window = self._agents.get(agent)
        if window is None:
            return False
        if window.floor is not None and step <= window.floor:
            return True
        return _holds(window.steps.get(step, []), index)

    def add(self, cid: str) -> bool:
        """Record ``cid``; ``True`` when it is new, ``False`` when it counts as seen."""
        parsed = self._parse(cid)
        if parsed is None:
            if cid in self._other:
                return False
            self._other.add(cid)
            return True
        agent, step, index = parsed
        window = self._agents.get(agent)
        if window is None:
            window = self._agents[agent] = _AgentWindow()
        if window.floor is not None and step <= window.floor:
            return False
        ranges = window.steps.get(step)
        if ranges is None:
            ranges = window.steps[step] = []
        elif _holds(ranges, index):
            return False
        _insert(ranges, index)
        window.entries += 1
        if len(window.steps) > self.window_steps:
            lowest = min(window.steps)
            dropped = window.steps.pop(lowest)
            window.entries -= sum(dropped[k + 1] - dropped[k] for k in range(0, len(dropped), 2))
            window.floor = lowest if window.floor is None else max(window.floor, lowest)
        return True

    def last_steps(self) -> dict[int, int]:
        """The highest step seen per agent (a restarted agent must continue after it)."""
        out: dict[int, int] = {}
        for agent, window in self._agents.items():
            top = max(window.steps, default=window.floor)
            if top is not None:
                out[agent] = top
        return dict(sorted(out.items()))

    @property
    def ranges(self) -> int:
        """Index ranges held (what the memory is: a step's contiguous batches are one)."""
        return len(self._other) + sum(len(r) // 2 for w in self._agents.values()
                                      for r in w.steps.values())

    @property
    def entries(self) -> int:
        """Ids held exactly (the memory bound's measure)."""
        return len(self._other) + sum(w.entries for w in self._agents.values())

    def __len__(self) -> int:
        return self.entries
