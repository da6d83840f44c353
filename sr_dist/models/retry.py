"""Bounded retries with exponential backoff, shared by every network adapter.

The policy is a value and the delay is a pure function of it, so both are tested without
sleeping; :func:`call_with_retries` is the only place that waits. Which failures are worth
another attempt is decided where the error is made (``ModelError.retryable``, from
:func:`classify_status`), not here.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from sr_dist.models.base import ModelError, ModelErrorKind

__all__ = [
    "RETRYABLE_STATUSES",
    "RetryPolicy",
    "call_with_retries",
    "classify_status",
    "parse_retry_after",
]

T = TypeVar("T")

#: HTTP statuses worth another attempt besides every 5xx.
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many attempts, and how long to wait between them.

    The wait before attempt ``n + 1`` is ``base_delay_s * 2 ** (n - 1)`` capped at
    ``max_delay_s``, shortened by up to ``jitter`` (a fraction) at random so many agents that
    failed together do not retry together. A server's ``Retry-After`` replaces the backoff,
    capped at ``max_retry_after_s``.
    """

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    jitter: float = 0.2
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.base_delay_s < 0 or self.max_delay_s < 0 or self.max_retry_after_s < 0:
            raise ValueError("retry delays must not be negative")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter is a fraction in [0, 1], got {self.jitter}")

    @classmethod
    def from_retries(cls, max_retries: int, base_delay_s: float = 0.5, max_delay_s: float = 8.0) -> RetryPolicy:
        """From the config's view: ``max_retries`` extra attempts after the first."""
        if max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {max_retries}")
        return cls(max_attempts=max_retries + 1, base_delay_s=base_delay_s, max_delay_s=max_delay_s)

    def delay_s(self, attempt: int, retry_after_s: float | None = None, rand: float = 0.0) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based); ``rand`` in [0, 1)."""
        if retry_after_s is not None and retry_after_s >= 0:
            return min(retry_after_s, self.max_retry_after_s)
        backoff = min(self.base_delay_s * (2.0 ** max(attempt - 1, 0)), self.max_delay_s)
        return backoff * (1.0 - self.jitter * rand)


def classify_status(status: int) -> tuple[ModelErrorKind, bool]:
    """``(kind, retryable)`` for an HTTP error status."""
    if status == 429:
        return ModelErrorKind.RATE_LIMITED, True
    if status == 408:
        return ModelErrorKind.TIMEOUT, True
    if status in RETRYABLE_STATUSES:
        return ModelErrorKind.TRANSIENT, True
    if status >= 500:
        return ModelErrorKind.SERVER_ERROR, True
    if status in (401, 403):
        return ModelErrorKind.AUTH, False
    if status == 404:
        return ModelErrorKind.NOT_FOUND, False
    if 400 <= status < 500:
        return ModelErrorKind.BAD_REQUEST, False
    return ModelErrorKind.BAD_RESPONSE, False


def parse_retry_after(headers: Mapping[str, str] | None, now: datetime | None = None) -> float | None:
    """The server's wait hint in seconds: ``retry-after-ms``, or ``Retry-After`` as seconds or an HTTP date."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            return value if value >= 0 else None
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return value if value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def call_with_retries(
    attempt: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
) -> T:
    """Run ``attempt`` until it succeeds, raises a non-retryable :class:`ModelError`, or the
    policy's attempts are spent; the error raised reports how many attempts were made."""
    for n in range(1, policy.max_attempts + 1):
        try:
            return attempt()
        except ModelError as err:
            if not err.retryable or n == policy.max_attempts:
                raise err.with_attempts(n) from err
            sleep(policy.delay_s(n, err.retry_after_s, rand()))
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover
