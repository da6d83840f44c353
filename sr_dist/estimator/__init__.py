"""sr-dist from Python: ``SymbolicRegressor``, a scikit-learn style estimator (docs/python.md).

A face like the console scripts: it composes the CLI's config, runs ``run_search`` and reads
the results; nothing below it imports it.
"""

from sr_dist.estimator.exports import ExportMismatch
from sr_dist.estimator.regressor import NotFittedError, SymbolicRegressor

__all__ = ["ExportMismatch", "NotFittedError", "SymbolicRegressor"]
