"""The numeric core of the analysis tools: plain functions over numpy arrays.

One module per job (:mod:`.statistics`, :mod:`.relationships`, :mod:`.residuals`,
:mod:`.separability`, :mod:`.pi_groups`, :mod:`.closed_fits`). Nothing here knows about
tools, agents or datasets; :mod:`sr_dist.sr.analysis_tools` is the shell that feeds these
functions the training split and turns their results into text for the model.
"""

from sr_dist.sr.analysis._common import AnalysisRequestError
from sr_dist.sr.analysis.closed_fits import ClosedFit, FitRequestError, fit_polynomial, fit_power_law, fit_rational
from sr_dist.sr.analysis.pi_groups import buckingham_groups
from sr_dist.sr.analysis.relationships import variable_relationships
from sr_dist.sr.analysis.residuals import residual_analysis
from sr_dist.sr.analysis.separability import separability_test
from sr_dist.sr.analysis.statistics import data_statistics

__all__ = [
    "AnalysisRequestError",
    "ClosedFit",
    "FitRequestError",
    "buckingham_groups",
    "data_statistics",
    "fit_polynomial",
    "fit_power_law",
    "fit_rational",
    "residual_analysis",
    "separability_test",
    "variable_relationships",
]
