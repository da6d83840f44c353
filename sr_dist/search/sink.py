"""An agent's side of the result writer: send row batches, keep each until it is acknowledged.

The writer actor acknowledges a batch (its ``add`` returns) only once the rows are in a
committed Parquet file. :class:`WriterSink` sends without waiting but keeps every batch with
its ``ObjectRef`` until then, and at most ``max_in_flight`` of them per agent (so a slow disk
slows the agent, not its memory). When the writer dies, Ray restarts it behind the same
handle and every call that was in flight fails with a ``RayActorError``: the sink sends those
batches again (the restarted writer drops the rows that had reached disk), with a backoff,
for up to ``resend_for_s``. Only then does it give up and count the rows as lost.

Plain Python (no actor): the agent actor makes one per hosted episode, tests drive it with any
object whose ``add.remote(rows, resend)`` returns an ``ObjectRef``.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any

from ray.exceptions import RayActorError

__all__ = ["MAX_ROWS_IN_FLIGHT", "RESEND_FOR_S", "WriterSink"]

log = logging.getLogger(__name__)

#: Unacknowledged row batches an agent may have before it waits for one (acks wait for a
#: flush, about ``results.flush_s``; the writer's dedup window must exceed this).
MAX_ROWS_IN_FLIGHT = 32
#: How long the sink keeps resending a batch to a writer that is down before giving up.
RESEND_FOR_S = 300.0
#: First and longest pause between resends.
BACKOFF_S = (0.2, 5.0)


class _Batch:
    __slots__ = ("rows", "ref")

    def __init__(self, rows: list[dict[str, Any]], ref: Any) -> None:
        self.rows = rows
        self.ref = ref


class WriterSink:
    """Sends row batches to the writer actor and holds each until it is durably written.

    Counters: ``sent`` (batches), ``resent`` (batches sent again after the writer died),
    ``errors`` (batches given up: their rows are lost) and ``lost_rows``.
    """

    def __init__(self, handle: Any, max_in_flight: int = MAX_ROWS_IN_FLIGHT, *,
                 resend_for_s: float = RESEND_FOR_S,
                 backoff_s: tuple[float, float] = BACKOFF_S) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight!r}")
        self._handle = handle
        self._max = max_in_flight
        self._resend_for_s = resend_for_s
        self._backoff = backoff_s
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._pending: collections.deque[_Batch] = collections.deque()
        #: Batches taken off the queue and being waited for (``drain`` waits for them too).
        self._settling = 0
        self._outage = False
        self.sent = 0
        self.resent = 0
        self.errors = 0
        self.lost_rows = 0

    @property
    def in_flight(self) -> int:
        """Batches sent and not yet acknowledged."""
        with self._lock:
            return len(self._pending) + self._settling

    def __call__(self, rows: list[dict[str, Any]]) -> None:
        batch = _Batch(rows, self._handle.add.remote(rows, False))
        with self._lock:
            self.sent += 1
            self._pending.append(batch)
            oldest = self._take_locked() if len(self._pending) > self._max else None
        if oldest is not None:
            self._settle(oldest)

    def drain(self) -> None:
        """Wait until every batch sent so far is acknowledged (or given up)."""
        while True:
            with self._lock:
                batch = self._take_locked() if self._pending else None
                if batch is None:
                    while self._settling:
                        self._settled.wait()
                    return
            self._settle(batch)

    def _take_locked(self) -> _Batch:
        self._settling += 1
        return self._pending.popleft()

    def _settle(self, batch: _Batch) -> None:
        try:
            self._wait(batch)
        finally:
            with self._lock:
                self._settling -= 1
                self._settled.notify_all()

    def _wait(self, batch: _Batch) -> None:
        deadline: float | None = None
        pause = self._backoff[0]
        while True:
            try:
                # (not ray.get: the same wait, without Ray's warning about blocking calls in
                # an async actor; this runs in a tool's or drain's worker thread)
                batch.ref.future().result()
                if deadline is None:  # acknowledged at the first send: the writer is up
                    self._outage = False
                return
            except RayActorError as exc:  # died or restarting: Ray brings it back, send again
                now = time.monotonic()
                deadline = now + self._resend_for_s if deadline is None else deadline
                if now >= deadline:
                    self._lose(batch, f"the result writer was unavailable for "
                                      f"{self._resend_for_s:.0f} s: {_brief(exc)}")
                    return
                if not self._outage:  # once per outage, not once per batch
                    self._outage = True
                    log.warning("result writer unavailable (%s); resending the batches it did "
                                "not acknowledge", _brief(exc))
                time.sleep(pause)
                pause = min(pause * 2, self._backoff[1])
                batch.ref = self._handle.add.remote(batch.rows, True)
                with self._lock:
                    self.resent += 1
            except Exception as exc:  # noqa: BLE001 - the writer refused (e.g. disk failed)
                self._lose(batch, _brief(exc))
                return

    def _lose(self, batch: _Batch, why: str) -> None:
        with self._lock:
            self.errors += 1
            self.lost_rows += len(batch.rows)
        log.error("%d candidate row(s) could not be written and are lost: %s",
                  len(batch.rows), why)


def _brief(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__
