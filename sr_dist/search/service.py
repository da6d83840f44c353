"""The shared evaluator as an asyncio service: requests in, micro-batches to the Evaluator.

:class:`BatchingEvaluator` is what the ``EvaluatorActor`` holds. Callers ``await
fit_many(expressions, agent_id)`` concurrently; a background task takes batches from the
:class:`~sr_dist.search.batching.MicroBatcher` and runs ``Evaluator.fit_many`` in a worker
thread, one batch at a time (one device), so the event loop keeps accepting requests while a
batch is being fitted; requests that arrive meanwhile form the next batch. The Evaluator's own
cache makes a canonical formula fitted once per run, whichever agent proposed it first.

No Ray here: the service runs in any event loop (tests use ``asyncio.run``).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sr_dist.formula import Node, free_constant_prefix, render
from sr_dist.search.batching import Batch, MicroBatcher
from sr_dist.search.latency import LatencyHistogram

__all__ = [
    "BatchingEvaluator",
    "EvaluationFailed",
    "FitsMany",
    "KEY_CACHE_SIZE",
    "memo_key",
    "search_warmup",
    "warmup_formulas",
]


class FitsMany(Protocol):
    """What the service needs from ``sr_dist.evaluator.Evaluator``."""

    def fit_many(self, formulas: list[Any],
                 starts: Sequence[Any] | None = None) -> list[Any]: ...

    def stats(self) -> dict[str, Any]: ...


class EvaluationFailed(RuntimeError):
    """The evaluator raised for a whole batch (not a bad formula: those get a status)."""


#: Batches the fit-rate estimate spans.
_RATE_WINDOW = 8

#: Largest constant count the search warms up (bigger buckets compile when first used).
_WARMUP_MAX_CONSTS = 8

#: Formula texts whose canonical key the service keeps (least recently used dropped first):
#: the key is a parse, and a run proposes the same texts again and again.
KEY_CACHE_SIZE = 16384


def memo_key(key: Callable[[str], str], size: int = KEY_CACHE_SIZE) -> Callable[[str], str]:
    """``key`` remembered for the last ``size`` texts (one thread: the service's event loop)."""
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size!r}")
    kept: collections.OrderedDict[str, str] = collections.OrderedDict()

    def cached(text: str) -> str:
        found = kept.get(text)
        if found is not None:
            kept.move_to_end(text)
            return found
        value = kept[text] = key(text)
        if len(kept) > size:
            kept.popitem(last=False)
        return value

    return cached


def _polynomial(variable: str, constants: Sequence[str]) -> Node:
    """``c0 + c1*x + c2*x**2 + ...`` in ``variable``, one term per constant (the bare variable
    for none), built as a tree so no text rewriting can mangle a variable's name."""
    x = Node("var", name=variable)
    if not constants:
        return x
    tree = Node("const", name=constants[0])
    for i, name in enumerate(constants[1:], start=1):
        power = x if i == 1 else Node("pow", (x, Node("num", value=float(i))))
        tree = Node("add", (tree, Node("mul", (Node("const", name=name), power))))
    return tree


def warmup_formulas(variable: str, const_counts: Sequence[int], *,
                    avoid: Sequence[str] = ()) -> list[str]:
    """One polynomial in ``variable`` per constant count: fitting them compiles the buckets
    the search will use, before the agents start waiting on them.

    ``avoid`` are the dataset's other variables: no constant takes one of their names (a
    constant named like a variable would parse as that variable and land in another bucket).
    """
    prefix = free_constant_prefix((variable, *avoid))
    return [render(_polynomial(variable, [f"{prefix}{i}" for i in range(k)])) for k in const_counts]


def search_warmup(feature_names: Sequence[str], const_buckets: Sequence[int]) -> list[str]:
    """What the evaluator actor fits before a search: the small-program buckets up to 8
    constants (or the smallest bucket), on the first variable."""
    counts = [k for k in const_buckets if k <= _WARMUP_MAX_CONSTS] or [const_buckets[0]]
    return warmup_formulas(feature_names[0], counts, avoid=feature_names)


class _Waiter:
    """A request waiting to be admitted (see ``BatchingEvaluator._wait_for_room``)."""

    __slots__ = ("size", "event", "admitted")

    def __init__(self, size: int) -> None:
        self.size = size
        self.event = asyncio.Event()
        self.admitted = False


@dataclass(frozen=True)
class _Running:
    """A batch taken from the queue: dispatched (``handle``, the evaluator's ``begin``), or
    to be fitted whole (``None``)."""

    batch: Batch
    handle: Any
    started: float


class BatchingEvaluator:
    """Micro-batches concurrent ``fit_many`` calls into one evaluator (see module docstring).

    Args:
        evaluator: the Evaluator (anything with ``fit_many`` and ``stats``).
        max_batch, max_wait_s: the batching policy (``max_batch=1`` turns batching off).
        key: canonical key of an expression, for the cross-agent duplicate count.
        clock: monotonic seconds.
        max_queue: the most formulas queued before new requests wait (``None``: no bound).
        max_queue_s: a latency target (``None``: none): at the rate recent batches went, the
            queue admits at most this many seconds of work and a batch takes at most that
            long, so no formula waits in the queue much longer than about twice this. Requests
            beyond it wait to be admitted (``held_back``), which is where a saturated pool
            makes agents wait.
        pipeline: with an evaluator that has ``begin``, ``wait`` and ``finish``, dispatch the
            next batch while the device still fits the last one (see ``_loop``); ``False``:
            one batch at a time.
    """

    def __init__(
        self,
        evaluator: FitsMany,
        max_batch: int,
        max_wait_s: float,
        key: Callable[[str], str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_queue: int | None = None,
        max_queue_s: float | None = None,
        pipeline: bool = True,
    ) -> None:
        if max_queue is not None and max_queue < 1:
            raise ValueError(f"max_queue must be at least 1, got {max_queue!r}")
        if max_queue_s is not None and not max_queue_s > 0:
            raise ValueError(f"max_queue_s must be positive, got {max_queue_s!r}")
        self._evaluator = evaluator
        #: Dispatch the next batch while the device still fits the last one (needs the
        #: evaluator's ``begin``, ``wait`` and ``finish``; see ``_loop``).
        self._pipeline = pipeline and all(callable(getattr(evaluator, name, None))
                                          for name in ("begin", "wait", "finish"))
        self._batcher: MicroBatcher[Any] = MicroBatcher(
            max_batch, max_wait_s, memo_key(key) if key is not None else None)
        self._clock = clock
        self._max_queue = max_queue
        self._max_queue_s = max_queue_s
        #: Formulas per second of recent batches (see ``_note_rate``), which turns
        #: ``max_queue_s`` into a queue bound and a batch size.
        self._rate: float | None = None
        self._recent: collections.deque[tuple[int, float]] = collections.deque(maxlen=_RATE_WINDOW)
        #: Requests waiting to be admitted, oldest first, and the formulas of those admitted
        #: but not yet queued.
        self._line: collections.deque[_Waiter] = collections.deque()
        self._reserved = 0
        self._held_back = 0
        self._hold = LatencyHistogram()
        self._latency = LatencyHistogram()
        self._futures: dict[int, asyncio.Future[tuple[Any, ...]]] = {}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._busy_s = 0.0
        self._idle_since: float | None = None
        self._failed_batches = 0
        self._warmup: dict[str, Any] = {}
        self._prefit: dict[str, Any] = {}

    # -- requests -----------------------------------------------------------------------------

    async def fit_many(self, expressions: Sequence[Any], agent_id: int = 0,
                       starts: Sequence[Any] | None = None) -> list[Any]:
        """Fit ``expressions`` (texts or prepared formulas, batched with other callers'); one
        result per expression.
        ``starts``: one start (constant values for a local search, or None) per expression.

        With ``max_queue`` or ``max_queue_s`` set, a request that would overfill the queue
        waits to be admitted until batches have made room (a request is never split or
        refused: one larger than the bound goes in alone once the queue is empty). Queue waits
        (``queue_wait``) count from admission; the wait for admission is ``held_back``, and
        ``latency`` is arrival to results.
        """
        self._ensure_running()
        arrived = self._clock()
        texts = list(expressions)
        await self._wait_for_room(len(texts), arrived)
        ticket, done = self._batcher.submit(agent_id, texts, self._clock(), starts)
        if done is not None:
            return list(done.results)
        future: asyncio.Future[tuple[Any, ...]] = asyncio.get_running_loop().create_future()
        self._futures[ticket] = future
        assert self._wake is not None
        self._wake.set()
        try:
            results = list(await future)
        except asyncio.CancelledError:
            self._batcher.cancel(ticket)
            self._futures.pop(ticket, None)
            self._admit()
            raise
        self._latency.record(self._clock() - arrived)
        return results

    def _full(self, size: int) -> bool:
        depth = self._batcher.queue_depth + self._reserved
        if depth == 0:
            return False
        if self._max_queue is not None and depth + size > self._max_queue:
            return True
        return (self._max_queue_s is not None and self._rate is not None
                and (depth + size) / self._rate > self._max_queue_s)

    def _batch_limit(self) -> int | None:
        """The batch size that fits in ``max_queue_s`` at the recent rate (``None``: no cap)."""
        if self._max_queue_s is None or self._rate is None:
            return None
        return max(1, int(self._rate * self._max_queue_s))

    async def _wait_for_room(self, size: int, arrived: float) -> None:
        """Admit a request of ``size`` formulas: at once when there is room and nobody is
        waiting, otherwise in arrival order (first come, first admitted: a large request
        waiting for the queue to drain is not overtaken by small ones forever). Each waiter
        has its own event and only the admitted ones are woken, so thousands of waiting
        requests cost nothing per batch."""
        if not self._line and not self._full(size):
            return
        self._held_back += 1
        waiter = _Waiter(size)
        self._line.append(waiter)
        try:
            await waiter.event.wait()
        except asyncio.CancelledError:
            if waiter.admitted:
                self._reserved -= size
            else:
                self._line.remove(waiter)
            self._admit()
            raise
        self._reserved -= size  # the caller queues its formulas next, without yielding
        self._hold.record(self._clock() - arrived)

    def _admit(self) -> None:
        """Admit waiting requests, oldest first, while they fit (their formulas count as
        queued from here until they are submitted)."""
        while self._line and not self._full(self._line[0].size):
            waiter = self._line.popleft()
            waiter.admitted = True
            self._reserved += waiter.size
            waiter.event.set()

    def expect(self, agent_ids: Sequence[int]) -> None:
        """The agents still running: a batch goes as soon as each has a request queued."""
        self._batcher.expect(list(agent_ids))
        if self._wake is not None:
            self._wake.set()

    async def warmup(self, formulas: Sequence[str], local: bool = False) -> dict[str, Any]:
        """Fit ``formulas`` directly (compiling their buckets), then forget their results so the
        search's fit counts start clean; ``local``: also as local searches (from all-ones
        starts), compiling those executables. Returns what it cost."""
        before = self._evaluator.stats()
        start = self._clock()
        if local:  # first: a cached full fit would serve a local request
            await asyncio.to_thread(self._evaluator.fit_many, list(formulas),
                                    starts=[{} for _ in formulas])
        await asyncio.to_thread(self._evaluator.fit_many, list(formulas))
        clear = getattr(self._evaluator, "clear_cache", None)
        if callable(clear):
            clear()
        after = self._evaluator.stats()
        self._warmup = {
            "seconds": round(self._clock() - start, 3),
            "formulas": len(formulas),
            "fits": int(after.get("fits", 0)) - int(before.get("fits", 0)),
            "compiles": int(after.get("compiles", 0)) - int(before.get("compiles", 0)),
            "compile_s": round(float(after.get("compile_s", 0.0))
                               - float(before.get("compile_s", 0.0)), 3),
        }
        return dict(self._warmup)

    async def prefit(self, formulas: Sequence[str]) -> dict[str, Any]:
        """Fit ``formulas`` and keep their results cached (a resumed run's old structures, so
        the agents' re-proposals are cache hits). Their fits are not search fits."""
        before = self._evaluator.stats()
        start = self._clock()
        await asyncio.to_thread(self._evaluator.fit_many, list(formulas))
        after = self._evaluator.stats()
        self._prefit = {
            "seconds": round(self._clock() - start, 3),
            "formulas": len(formulas),
            "fits": int(after.get("fits", 0)) - int(before.get("fits", 0)),
        }
        return dict(self._prefit)

    def _note_rate(self, formulas: int, seconds: float) -> None:
        """The rate over the last ``_RATE_WINDOW`` batches: their formulas over their seconds
        (a batch of cache hits takes milliseconds; averaging per-batch rates would let one such
        batch multiply the estimate, a ratio of sums weighs it by the time it took)."""
        if formulas <= 0 or seconds <= 0:
            return
        self._recent.append((formulas, seconds))
        total_s = sum(t for _, t in self._recent)
        self._rate = sum(n for n, _ in self._recent) / total_s if total_s > 0 else None

    def stats(self) -> dict[str, Any]:
        """The evaluator's stats, the batching stats under ``batching``, the warm-up's cost
        under ``warmup`` and a resumed run's pre-fit under ``prefit`` (``search_fits`` = fits
        minus those two)."""
        merged = dict(self._evaluator.stats())
        batching = self._batcher.stats()
        merged["batching"] = batching.as_dict()
        merged["queue_depth"] = batching.queue_depth
        merged["busy_s"] = round(self._busy_s, 4)
        merged["failed_batches"] = self._failed_batches
        merged["queue_wait"] = batching.queue_wait
        merged["latency"] = self._latency.summary()
        merged["held_back"] = {"requests": self._held_back, "wait": self._hold.summary()}
        merged["recent_formulas_per_s"] = None if self._rate is None else round(self._rate, 2)
        merged["warmup"] = dict(self._warmup)
        merged["prefit"] = dict(self._prefit)
        merged["search_fits"] = (int(merged.get("fits", 0)) - int(self._warmup.get("fits", 0))
                                 - int(self._prefit.get("fits", 0)))
        return merged

    async def close(self) -> None:
        """Stop the batching task; pending callers get :class:`EvaluationFailed`."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        for future in self._futures.values():
            if not future.done():
                future.set_exception(EvaluationFailed("the evaluator was shut down"))
        self._futures.clear()

    # -- the batching loop --------------------------------------------------------------------

    def _ensure_running(self) -> None:
        if self._task is not None and not self._task.done():
            return
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="sr-dist-batcher")

    async def _loop(self) -> None:
        """Take due batches and fit them. With an evaluator that can begin a call before the
        last one is finished (``begin``, ``wait`` and ``finish``: ``Evaluator``'s), the next due
        batch is dispatched while the device still fits the running one, so it fits one batch
        while the host packs the next and answers the last. A running batch the device is done
        with, or with no other batch due, is finished first: its callers are waiting."""
        assert self._wake is not None
        wake = self._wake
        running: _Running | None = None
        device_done: asyncio.Future[None] | None = None  # the running batch's device work
        while True:
            limit = self._batch_limit()
            if running is not None:
                assert device_done is not None
                batch = None
                if not device_done.done():
                    batch = self._batcher.take(self._clock(), limit=limit)
                    if batch is None:  # wait for a request or for the device, whichever first
                        woken = asyncio.ensure_future(wake.wait())
                        either: set[asyncio.Future[Any]] = {device_done, woken}
                        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                        woken.cancel()
                        wake.clear()
                        continue
                following = None
                if batch is not None:
                    self._admit()
                    following = await self._begin(batch)
                await self._finish(running)
                running, device_done = following, None
                if following is not None and following.handle is not None:
                    device_done = self._device_done(following)
                continue
            wait = self._batcher.wait_time(self._clock(), self._idle_since, limit)
            if wait is None or wait > 0:
                try:
                    await asyncio.wait_for(wake.wait(), timeout=wait)
                except TimeoutError:
                    pass
                wake.clear()
                continue
            batch = self._batcher.take(self._clock(), idle_since=self._idle_since, limit=limit)
            if batch is not None:
                self._admit()
                started = await self._begin(batch)
                if started is not None and started.handle is None:  # no pipelining
                    await self._finish(started)
                elif started is not None:
                    running, device_done = started, self._device_done(started)

    def _device_done(self, running: _Running) -> asyncio.Future[None]:
        """Resolves when the device is done with ``running`` (a worker thread waits for it)."""
        return asyncio.ensure_future(asyncio.to_thread(
            self._evaluator.wait, running.handle))  # type: ignore[attr-defined]

    async def _begin(self, batch: Batch) -> _Running | None:
        """Dispatch ``batch`` where the evaluator can (``None`` if that failed: its callers
        have their error); otherwise it is fitted whole by :meth:`_finish`."""
        start = self._clock()
        if not self._pipeline:
            return _Running(batch, None, start)
        try:
            handle = await asyncio.to_thread(self._evaluator.begin,  # type: ignore[attr-defined]
                                             list(batch.items),
                                             list(batch.starts) if batch.starts else None)
        except Exception as exc:  # noqa: BLE001 - one bad batch must not stop the service
            self._fail(batch, exc)
            self._account(start, len(batch.expressions))
            return None
        return _Running(batch, handle, start)

    async def _finish(self, running: _Running) -> None:
        batch = running.batch
        try:
            if running.handle is not None:
                results = await asyncio.to_thread(self._evaluator.finish,  # type: ignore[attr-defined]
                                                  running.handle)
            elif batch.starts:
                results = await asyncio.to_thread(self._evaluator.fit_many,
                                                  list(batch.items), list(batch.starts))
            else:
                results = await asyncio.to_thread(self._evaluator.fit_many, list(batch.items))
            completions = self._batcher.complete(batch, results)
        except Exception as exc:  # noqa: BLE001 - one bad batch must not stop the service
            self._fail(batch, exc)
            return
        finally:
            self._account(running.started, len(batch.expressions))
        for done in completions:
            future = self._futures.pop(done.ticket, None)
            if future is not None and not future.done():
                future.set_result(done.results)

    def _fail(self, batch: Batch, exc: Exception) -> None:
        self._failed_batches += 1
        error = EvaluationFailed(f"evaluating a batch of {len(batch.expressions)} formulas "
                                 f"failed: {type(exc).__name__}: {exc}")
        for ticket in {ticket for ticket, _, _ in batch.slots}:
            self._batcher.cancel(ticket)
            future = self._futures.pop(ticket, None)
            if future is not None and not future.done():
                future.set_exception(error)

    def _account(self, started: float, formulas: int) -> None:
        """Busy time from a batch's start (or the last batch's end, if later: pipelined
        batches overlap) to its end; the evaluator counts as idle from here."""
        now = self._clock()
        busy = max(0.0, now - max(started, self._idle_since or started))
        self._idle_since = now
        self._busy_s += busy
        self._note_rate(formulas, busy)
