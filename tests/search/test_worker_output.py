"""How a quiet run forwards the actors' output (sr_dist/search/quiet.py ``_forward``): sr-dist's
lines to Ray's printer, tracebacks and other libraries' errors to the console at ERROR, the rest
to the job log at INFO. Table-driven, on batches as Ray hands them over; no Ray needed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from sr_dist.search import quiet

OWN = "[ERROR] sr_dist.search.actors: agent 0 crashed"
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/x/agent.py", line 3, in run',
    "    step()",
    "RuntimeError: the model went away",
]
ERR, INF, P = logging.ERROR, logging.INFO, "printed"

CASES: dict[str, tuple[list[list[str]], list[tuple[Any, str]]]] = {
    "sr-dist's crash, then its traceback": (
        [[OWN, *TRACEBACK, "W0000 jax platform note"]],
        [(P, OWN)] + [(ERR, line) for line in TRACEBACK] + [(INF, "W0000 jax platform note")],
    ),
    "a traceback split over two batches": (
        [TRACEBACK[:2], [*TRACEBACK[2:], "after"]],
        [(ERR, line) for line in TRACEBACK] + [(INF, "after")],
    ),
    "chained tracebacks": (
        [[*TRACEBACK, "", "During handling of the above exception, another exception occurred:",
          "", *TRACEBACK]],
        [(ERR, line) for line in TRACEBACK] + [
            (INF, ""), (ERR, "During handling of the above exception, another exception occurred:"),
            (INF, "")] + [(ERR, line) for line in TRACEBACK],
    ),
    "other libraries' error lines": (
        [["ERROR:jax:backend failed", "Fatal Python error: Segmentation fault",
          "CRITICAL: disk full", "ValueError: bad shape", "Error: no device"]],
        [(ERR, "ERROR:jax:backend failed"), (ERR, "Fatal Python error: Segmentation fault"),
         (ERR, "CRITICAL: disk full"), (ERR, "ValueError: bad shape"), (ERR, "Error: no device")],
    ),
    "noise stays in the job log": (
        [["WARNING:jax:no GPU found", "INFO:ray: started", "an error-free error_count=0 line",
          "  indented, outside any traceback"]],
        [(INF, "WARNING:jax:no GPU found"), (INF, "INFO:ray: started"),
         (INF, "an error-free error_count=0 line"), (INF, "  indented, outside any traceback")],
    ),
    "own lines keep their order around others": (
        [[OWN, "ERROR:jax:x", "[WARNING] sr_dist.search.driver: slow"]],
        [(P, OWN), (ERR, "ERROR:jax:x"), (P, "[WARNING] sr_dist.search.driver: slow")],
    ),
}


@pytest.mark.parametrize("batches, want", CASES.values(), ids=list(CASES))
def test_forward(batches: list[list[str]], want: list[tuple[Any, str]],
                 caplog: pytest.LogCaptureFixture) -> None:
    got: list[tuple[Any, str]] = []

    def printer(data: dict[str, Any]) -> None:
        got.extend((P, line) for line in data["lines"])

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append((record.levelno, record.getMessage().removeprefix(prefix)))

    prefix = "(AgentActor pid=7) "
    logger = logging.getLogger(quiet.WORKER_OUTPUT_LOGGER)
    handler = Collect(level=logging.DEBUG)
    logger.addHandler(handler)
    try:
        with caplog.at_level(logging.INFO, logger=quiet.WORKER_OUTPUT_LOGGER):
            inside: set[Any] = set()
            for lines in batches:
                quiet._forward({"pid": 7, "actor_name": "AgentActor", "lines": lines}, printer,
                               tracebacks=inside)
    finally:
        logger.removeHandler(handler)
    assert got == want
    assert not inside  # every traceback ended


def test_a_traceback_is_tracked_per_process() -> None:
    inside: set[Any] = set()
    seen: list[tuple[int, str]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.levelno, record.getMessage()))

    logger = logging.getLogger(quiet.WORKER_OUTPUT_LOGGER)
    handler, level = Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        quiet._forward({"pid": 1, "lines": TRACEBACK[:2]}, print, tracebacks=inside)
        quiet._forward({"pid": 2, "lines": ["  an indented progress line"]}, print,
                       tracebacks=inside)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert inside == {1}
    assert seen[-1] == (logging.INFO, "(pid=2)   an indented progress line")


def test_the_console_filter_keeps_the_error_lines() -> None:
    keep = quiet.OwnRecords()
    record = logging.LogRecord(quiet.WORKER_OUTPUT_LOGGER, logging.ERROR, __file__, 1,
                               "(AgentActor pid=7) RuntimeError: boom", None, None)
    logger = logging.getLogger(quiet.WORKER_OUTPUT_LOGGER)
    level = logger.level
    logger.setLevel(logging.INFO)  # as in a quiet run (not hydra.verbose)
    try:
        assert keep.filter(record)
        record.levelno = logging.INFO
        assert not keep.filter(record)
    finally:
        logger.setLevel(level)


def test_actor_output_is_routed_only_where_a_job_log_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(quiet.VERBOSE_ENV, raising=False)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [h for h in root.handlers if h.get_name() != "file"])
    level = root.level
    root.setLevel(logging.INFO)
    try:
        assert not quiet.keeps_worker_output()  # run_search from Python: Ray prints as usual
        job_log = logging.FileHandler(tmp_path / "sr-dist.log", delay=True)
        job_log.set_name("file")  # as Hydra's job_logging config names it
        root.addHandler(job_log)
        assert quiet.keeps_worker_output()
        monkeypatch.setenv(quiet.VERBOSE_ENV, "1")  # --verbose: everything on the console
        assert not quiet.keeps_worker_output()
    finally:
        root.setLevel(level)
