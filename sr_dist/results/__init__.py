"""Results: the Arrow schemas, the atomic Parquet writer, and the query helpers.

See ``docs/results.md`` for the layout on disk and how to query it with pyarrow or DuckDB.
"""

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
