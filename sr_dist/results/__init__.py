"""Results: the Arrow schemas, the atomic Parquet writer, and the query helpers.

See ``docs/results.md`` for the layout on disk and how to query it with pyarrow or DuckDB.

The names below are loaded on first use: the agents' and the evaluator's processes import
``sr_dist.results.schema`` or ``.simplified`` and need neither pyarrow's dataset layer nor
pandas nor DuckDB, which the query helpers bring (about half a second of every process's start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sr_dist.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from sr_dist.results.dedup import SeenIds
    from sr_dist.results.layout import partition_value
    from sr_dist.results.metrics import (
        DEFAULT_TAUS,
        RunScore,
        ScoreError,
        load_run_dataset,
        regression_metrics,
        score_run,
        split_predictions,
    )
    from sr_dist.results.query import (
        PARETO_METRICS,
        Results,
        ResultsNotFound,
        agent_progress,
        best_candidate,
        duckdb_connection,
        existing_candidate_ids,
        open_results,
        pareto_front,
        read_run,
        retry_on_swap,
        summarize_run,
    )
    from sr_dist.results.run_data import read_run_data, run_data_path, write_run_data
    from sr_dist.results.schema import (
        CANDIDATE_SCHEMA,
        OK_STATUS,
        RUN_OUTCOMES,
        RUN_STATUSES,
        RUNS_SCHEMA,
        RowError,
        RunRecord,
        candidate_id,
        candidate_row,
        constants_from_json,
        constants_json,
        normalize_row,
        status_of,
        utc_now,
    )
    from sr_dist.results.selection import SELECTION_RULES, front_scores, select_candidate
    from sr_dist.results.writer import (
        AddResult,
        CandidateWriter,
        ResultsWriteError,
        WriterStats,
        write_run,
    )

__all__ = [
    "DEFAULT_TAUS",
    "SELECTION_RULES",
    "front_scores",
    "select_candidate",
    "RunScore",
    "ScoreError",
    "load_run_dataset",
    "read_run_data",
    "run_data_path",
    "write_run_data",
    "regression_metrics",
    "split_predictions",
    "score_run",
    "CANDIDATE_SCHEMA",
    "OK_STATUS",
    "PARETO_METRICS",
    "RUNS_SCHEMA",
    "RUN_OUTCOMES",
    "RUN_STATUSES",
    "AddResult",
    "CandidateWriter",
    "Results",
    "ResultsNotFound",
    "ResultsWriteError",
    "RowError",
    "RunRecord",
    "SeenIds",
    "WriterStats",
    "agent_progress",
    "best_candidate",
    "candidate_id",
    "candidate_row",
    "constants_from_json",
    "constants_json",
    "duckdb_connection",
    "existing_candidate_ids",
    "normalize_row",
    "status_of",
    "open_results",
    "pareto_front",
    "partition_value",
    "read_run",
    "retry_on_swap",
    "summarize_run",
    "utc_now",
    "write_run",
]

_HOME = {
    "SeenIds": "sr_dist.results.dedup",
    "partition_value": "sr_dist.results.layout",
    "DEFAULT_TAUS": "sr_dist.results.metrics",
    "RunScore": "sr_dist.results.metrics",
    "ScoreError": "sr_dist.results.metrics",
    "load_run_dataset": "sr_dist.results.metrics",
    "regression_metrics": "sr_dist.results.metrics",
    "score_run": "sr_dist.results.metrics",
    "split_predictions": "sr_dist.results.metrics",
    "PARETO_METRICS": "sr_dist.results.query",
    "Results": "sr_dist.results.query",
    "ResultsNotFound": "sr_dist.results.query",
    "agent_progress": "sr_dist.results.query",
    "best_candidate": "sr_dist.results.query",
    "duckdb_connection": "sr_dist.results.query",
    "existing_candidate_ids": "sr_dist.results.query",
    "open_results": "sr_dist.results.query",
    "pareto_front": "sr_dist.results.query",
    "read_run": "sr_dist.results.query",
    "retry_on_swap": "sr_dist.results.query",
    "summarize_run": "sr_dist.results.query",
    "read_run_data": "sr_dist.results.run_data",
    "run_data_path": "sr_dist.results.run_data",
    "write_run_data": "sr_dist.results.run_data",
    "CANDIDATE_SCHEMA": "sr_dist.results.schema",
    "OK_STATUS": "sr_dist.results.schema",
    "RUN_OUTCOMES": "sr_dist.results.schema",
    "RUN_STATUSES": "sr_dist.results.schema",
    "RUNS_SCHEMA": "sr_dist.results.schema",
    "RowError": "sr_dist.results.schema",
    "RunRecord": "sr_dist.results.schema",
    "candidate_id": "sr_dist.results.schema",
    "candidate_row": "sr_dist.results.schema",
    "constants_from_json": "sr_dist.results.schema",
    "constants_json": "sr_dist.results.schema",
    "normalize_row": "sr_dist.results.schema",
    "status_of": "sr_dist.results.schema",
    "utc_now": "sr_dist.results.schema",
    "SELECTION_RULES": "sr_dist.results.selection",
    "front_scores": "sr_dist.results.selection",
    "select_candidate": "sr_dist.results.selection",
    "AddResult": "sr_dist.results.writer",
    "CandidateWriter": "sr_dist.results.writer",
    "ResultsWriteError": "sr_dist.results.writer",
    "WriterStats": "sr_dist.results.writer",
    "write_run": "sr_dist.results.writer",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOME, __all__)
