"""Quiet by default: a run's console shows sr-dist's own lines; Ray's and JAX's go to the log.

Where the other lines come from, and where they go unless ``--verbose`` (or ``hydra.verbose``):

- Python logging of other libraries (``jax._src.xla_bridge``'s platform warnings, ``ray``'s
  logger, ``py.warnings``): the console handler of ``conf/hydra/job_logging/sr_dist.yaml`` keeps
  :class:`OwnRecords` only (sr-dist's loggers, and anyone's errors); the file handler writes
  everything to the job log, ``<results.path>/_hydra/<stamp>/sr-dist.log``. Ray's ``ray`` logger
  prints through its own handler and does not propagate; :func:`route_ray_logging` hands it to
  the root logger's handlers instead.
- Native lines Ray's C++ core prints on the driver's stderr while it starts (``network_util.cc:
  Failed to determine local IP ...`` on a host without a route out): :func:`native_stderr_to`
  points file descriptor 2 at the job log around ``ray.init``.
- The actors' output that Ray forwards to the driver (``log_to_driver``): :func:`route_worker_output`
  replaces Ray's printer with one that prints sr-dist's own lines (the actors' ``sr_dist``
  loggers write them in the console's format, :func:`setup_actor_logging`) and logs the rest to
  the job log: tracebacks and error lines at ERROR, so they reach the console too. Only when
  there is a job log (``sr-dist``): called from Python (the estimator, a notebook) the actors'
  output is printed by Ray as usual, for there is nowhere else it would be kept.

Errors stay on the console whoever logs them: a quiet run hides noise, never a failure.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

__all__ = [
    "CONSOLE_FORMAT",
    "VERBOSE_ENV",
    "OwnRecords",
    "is_error_line",
    "is_own_line",
    "keeps_worker_output",
    "log_file",
    "native_stderr_to",
    "route_ray_logging",
    "route_worker_output",
    "setup_actor_logging",
    "verbose",
]

#: Set (to ``1``) by ``sr-dist --verbose``: the console shows every library's lines.
VERBOSE_ENV = "SR_DIST_VERBOSE"
#: How sr-dist's log records read on the console (the job_logging config uses the same).
CONSOLE_FORMAT = "[%(levelname)s] %(name)s: %(message)s"
#: The logger the actors' other output is logged to (the job log only).
WORKER_OUTPUT_LOGGER = "ray_workers"

_OWN_LINE = re.compile(r"(sr-dist[: ]|\[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\] sr_dist[.:])")


def verbose() -> bool:
    """Whether the user asked to see everything: ``--verbose`` or ``hydra.verbose=true``
    (which sets the root logger to DEBUG)."""
    return os.environ.get(VERBOSE_ENV) == "1" or logging.getLogger().isEnabledFor(logging.DEBUG)


class OwnRecords(logging.Filter):
    """The console's filter: sr-dist's warnings and anyone's errors; with ``--verbose`` anyone's
    warnings; with ``hydra.verbose`` (its loggers at DEBUG) everything those loggers say."""

    def filter(self, record: logging.LogRecord) -> bool:
        if logging.getLogger(record.name).getEffectiveLevel() <= logging.DEBUG:
            return True  # hydra.verbose=true (or =[names]) asked for this logger's records
        if record.levelno >= logging.ERROR:
            return True
        if record.levelno < logging.WARNING:
            return False
        own = record.name == "sr_dist" or record.name.startswith("sr_dist.")
        return own or os.environ.get(VERBOSE_ENV) == "1"


def is_own_line(line: str) -> bool:
    """A line of output that is sr-dist's: its prints (``sr-dist: ...``) or its log records."""
    return _OWN_LINE.match(line) is not None


def log_file() -> str | None:
    """The job log: the root logger's handler named ``file`` (Hydra's job_logging config,
    ``conf/hydra/job_logging/sr_dist.yaml``); None outside ``sr-dist`` (a test, a notebook)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler) and handler.get_name() == "file":
            return str(handler.baseFilename)
    return None


@contextlib.contextmanager
def native_stderr_to(path: str | None) -> Iterator[None]:
    """File descriptor 2 points at ``path`` inside the block (native code writes there, not
    through ``sys.stderr``); nothing changes when ``path`` is None or cannot be opened."""
    if path is None:
        yield
        return
    try:
        target = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(target, 2)
    os.close(target)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def route_ray_logging() -> None:
    """Ray's ``ray`` logger through the root logger's handlers (console filter, job log)
    instead of its own stderr handler; call after ``import ray``."""
    ray_logger = logging.getLogger("ray")
    for handler in list(ray_logger.handlers):
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            ray_logger.removeHandler(handler)
    ray_logger.propagate = True


#: The first line of a Python traceback, and the lines that chain one traceback to the next.
_TRACEBACK_START = re.compile(r"(Exception Group )?Traceback \(most recent call last\):")
_TRACEBACK_CHAIN = re.compile(r"(During handling of the above exception|The above exception "
                              r"was the direct cause)")
#: A line another library writes at level ERROR or above: ``RuntimeError: ...``,
#: ``ERROR:jax:...``, ``Fatal Python error: ...``, ``CRITICAL``.
_ERROR_LINE = re.compile(r"\w*(Error|Exception):|\bERROR\b|\bFatal\b|\bFATAL\b|\bCRITICAL\b")


def is_error_line(line: str) -> bool:
    """A line that reports an error (of level ERROR or above), whoever wrote it."""
    return _ERROR_LINE.search(line) is not None or _TRACEBACK_CHAIN.match(line) is not None


def _forward(data: dict[str, Any], printer: Any, events: Any = None,
             tracebacks: set[Any] | None = None) -> None:
    """Ray's printer for sr-dist's lines of a batch; the job log for the others (of the
    autoscaler's, only its events, as Ray's own printer does), at ERROR (so on the console
    too) for tracebacks and error lines: a quiet run never hides a failure.

    ``tracebacks``: the pids whose output is inside a traceback (a traceback may span batches);
    a block runs from ``Traceback (most recent call last):`` to its first unindented line, the
    ``XxxError: ...`` line."""
    lines = [str(line) for line in data.get("lines", ())]
    if data.get("pid") == "autoscaler":
        lines = list(events(lines)) if events is not None else []
    inside = _TRACEBACKS if tracebacks is None else tracebacks
    pid = data.get("pid")
    who = data.get("actor_name") or data.get("task_name")
    prefix = f"({who} pid={pid}) " if who else f"(pid={pid}) "
    log = logging.getLogger(WORKER_OUTPUT_LOGGER)
    own: list[str] = []  # consecutive own lines, printed together and in order
    for line in lines:
        if is_own_line(line):
            own.append(line)
            continue
        if own:
            printer({**data, "lines": own})
            own = []
        if _TRACEBACK_START.match(line.lstrip()):
            inside.add(pid)
            error = True
        elif pid in inside:
            error = True
            if line and not line[0].isspace():  # the exception's own line ends the block
                inside.discard(pid)
        else:
            error = is_error_line(line)
        log.log(logging.ERROR if error else logging.INFO, "%s%s", prefix, line)
    if own:
        printer({**data, "lines": own})


#: :func:`_forward`'s default record of the pids inside a traceback.
_TRACEBACKS: set[Any] = set()


def keeps_worker_output() -> bool:
    """Whether a run should route the actors' output (:func:`route_worker_output`): quiet,
    with a job log to keep what the console leaves out. From Python (the estimator, a
    notebook) there is none, so Ray prints the actors' output as usual."""
    return not verbose() and log_file() is not None


def route_worker_output() -> bool:
    """Replace Ray's printer of the actors' output with :func:`_forward`; returns whether it
    could (Ray keeps the printer in private modules: another Ray version leaves it as is)."""
    try:
        from ray._private import worker  # type: ignore[attr-defined,unused-ignore]
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:
        return False
    names = [name for name, _ in getattr(dispatcher, "handlers", [])]
    if "ray_print_logs" not in names or not hasattr(worker, "print_to_stdstream"):
        return False
    printer = functools.partial(worker.print_to_stdstream, ignore_prefix=False)
    dispatcher.remove_handler("ray_print_logs")
    events = getattr(worker, "filter_autoscaler_events", None)
    dispatcher.add_handler("ray_print_logs", functools.partial(
        _forward, printer=printer, events=events, tracebacks=set()))
    return True


def setup_actor_logging() -> None:
    """In an actor: sr-dist's warnings on stderr in the console's format, so the driver can
    tell them from Ray's and JAX's lines (idempotent)."""
    logger = logging.getLogger("sr_dist")
    if any(getattr(h, "_sr_dist", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(CONSOLE_FORMAT))
    handler.setLevel(logging.WARNING)
    handler._sr_dist = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.propagate = False  # a root handler Ray may set up would print them twice
