"""From an agent's fits to candidate rows: the recorder the formula tools call.

The formula tools call ``recorder(fits, agent_id=, step=, tool_call_id=)`` once per tool call.
:class:`CandidateRecorder` turns the fits into ``CANDIDATE_SCHEMA`` rows with deterministic ids
``run:agent:step:index`` and hands them to a sink (in a Ray run, the result writer actor). The
index runs on across the tool calls of one turn, so two ``evaluate_formulas`` calls in the same
turn never produce the same id. A resumed agent passes ``step_offset`` (the last step its run
wrote), so its steps, and with them its ids, continue after the old ones.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from sr_dist.results import candidate_row

__all__ = ["CandidateRecorder", "RowSink"]

RowSink = Callable[[list[dict[str, Any]]], None]


class CandidateRecorder:
    """A ``FitRecorder`` for one agent of one run (thread-safe: tools run in worker threads)."""

    def __init__(self, run_id: str, agent_id: int, model: str, dataset: str, sink: RowSink,
                 step_offset: int = 0) -> None:
        if isinstance(step_offset, bool) or not isinstance(step_offset, int) or step_offset < 0:
            raise ValueError(f"step_offset must be a non-negative integer, got {step_offset!r}")
        self.run_id = run_id
        self.step_offset = step_offset
        self.agent_id = int(agent_id)
        self.model = model
        self.dataset = dataset
        self._sink = sink
        self._lock = threading.Lock()
        self._next_index: dict[int, int] = {}
        self.recorded = 0

    def rows(self, fits: Sequence[Any], *, step: int, tool_call_id: str | None) -> list[dict[str, Any]]:
        """The rows for ``fits`` (reserves their indices within ``step``, shifted by the offset)."""
        step = int(step) + self.step_offset
        with self._lock:
            start = self._next_index.get(step, 0)
            self._next_index[step] = start + len(fits)
            self.recorded += len(fits)
        return [
            candidate_row(fit, self.run_id, self.agent_id, step, start + i, self.model,
                          self.dataset, tool_call_id=tool_call_id)
            for i, fit in enumerate(fits)
        ]

    def __call__(self, fits: Sequence[Any], *, agent_id: int, step: int,
                 tool_call_id: str | None) -> None:
        if int(agent_id) != self.agent_id:
            raise ValueError(f"recorder of agent {self.agent_id} got fits of agent {agent_id}")
        if fits:
            self._sink(self.rows(fits, step=step, tool_call_id=tool_call_id))
