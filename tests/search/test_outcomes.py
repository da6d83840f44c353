"""How a run can end: the closed table of ``runs.status`` and ``stop_reason`` (issue 14, item 2).

The table is data (``RUN_OUTCOMES``); these cases check that the driver's decisions can only
produce its pairs, that a record refuses any other pair, and that docs/reliability.md prints
the same table users read.
"""

from __future__ import annotations

import itertools
import re
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sr_dist.results import RUN_OUTCOMES, RunRecord, status_of
from sr_dist.search.decisions import decide_stop, final_outcome
from sr_dist.search.settings import SearchSettings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"

#: Every stop reason the driver can pass to final_outcome: decide_stop's answers, the agents'
#: own reasons it may take over, what the driver sets itself, and nonsense.
REASONS = sorted({r for reasons in RUN_OUTCOMES.values() for r in reasons if r}
                 | {"model_error:auth", "lost", "killed", "internal_error", "bogus"})
SIGNALS = [None, int(signal.SIGINT), int(signal.SIGTERM), int(signal.SIGHUP)]
ERRORS = [None, "RuntimeError: boom"]


@pytest.mark.parametrize("reason, signum, error", list(itertools.product(REASONS, SIGNALS, ERRORS)))
def test_every_ending_is_a_pair_of_the_table(reason: str, signum: int | None,
                                             error: str | None) -> None:
    status, stop = final_outcome(reason, signal_number=signum, error=error)
    assert stop in RUN_OUTCOMES[status], (status, stop)
    assert status != "running"
    if signum is not None:
        assert (status, stop) == ("interrupted", "interrupted")
    elif error is not None:
        assert status == "failed"  # completed never goes with an error
    if reason == "error":
        assert status != "completed"


def test_the_table_is_closed_and_each_reason_has_one_status() -> None:
    assert set(RUN_OUTCOMES) == {"running", "completed", "interrupted", "failed"}
    seen: dict[str, str] = {}
    for status, reasons in RUN_OUTCOMES.items():
        for reason in reasons:
            assert reason not in seen, f"{reason} goes with {seen.get(reason)} and {status}"
            seen[str(reason)] = status
    assert status_of("error") == "failed" and status_of("bogus") is None
    assert "error" not in RUN_OUTCOMES["completed"]


@pytest.mark.parametrize("agent_reasons", [["max_turns"], ["max_turns", "max_turns"],
                                           ["killed"], ["lost", "max_turns"], ["submitted"],
                                           ["model_error:auth"], ["cancelled", "cancelled"]])
def test_decide_stop_only_answers_with_reasons_of_the_table(agent_reasons: list[str]) -> None:
    budget = SearchSettings(max_seconds=60, max_candidates=100, target_nmse=None)
    reason = decide_stop(budget, elapsed_s=1.0, candidates=1, best_val_nmse=None,
                         agents_running=0, agent_reasons=agent_reasons)
    assert reason is not None and status_of(reason) in ("completed", "failed")


def test_a_record_refuses_a_pair_outside_the_table() -> None:
    record = RunRecord(run_id="r", dataset="d", model="m", started_at=datetime.now(UTC))
    with pytest.raises(ValueError, match="cannot end 'completed' with stop_reason 'error'"):
        record.finished("completed", "error")
    with pytest.raises(ValueError, match="RUN_OUTCOMES"):
        record.finished("interrupted", "max_seconds")
    done = record.finished("interrupted", "interrupted", signal="SIGTERM")
    assert (done.status, done.stop_reason, done.signal) == ("interrupted", "interrupted",
                                                            "SIGTERM")
    assert record.finished("completed", "max_seconds", signal="SIGTERM").signal is None


def test_docs_print_the_same_table() -> None:
    text = DOCS.read_text()
    section = text[text.index("## How a run ends"):]
    rows = re.findall(r"^\| `(\w+)` \| (.+?) \|", section, flags=re.M)
    # The reasons are the backticked words outside parentheses (those explain them).
    documented = {status: set(re.findall(r"`([\w:]+)`", re.sub(r"\([^)]*\)", "", cell)))
                  for status, cell in rows}
    expected = {status: {r or "null" for r in reasons} for status, reasons in RUN_OUTCOMES.items()}
    assert documented == expected
