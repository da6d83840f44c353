"""Datasets for sr-dist: the embedded AI Feynman table and CSV / Parquet tables.

``load_dataset("feynman:I.6.2")`` samples an equation; ``load_dataset("csv:data.csv")`` reads a
table; ``dataset_from_arrays(X, y)`` takes arrays in memory. All give a frozen :class:`Dataset`
with a seeded split and a stable content hash.
"""

from .dataset import (
    DEFAULT_SPLIT,
    MIN_ROWS,
    SPLIT_KINDS,
    Dataset,
    DatasetError,
    DatasetUnitsError,
    Splits,
)
from .feynman import (
    FeynmanEquation,
    FeynmanVariable,
    feynman_equation,
    feynman_equation_units,
    feynman_equations,
    feynman_units,
)
from .loaders import (
    ARRAYS_SCHEME,
    DEFAULT_FEYNMAN_N,
    FEYNMAN_UNITS,
    SCHEMES,
    check_feature_names,
    check_weights,
    dataset_from_arrays,
    load_dataset,
    resolve_units,
    sample_feynman,
)

__all__ = [
    "ARRAYS_SCHEME",
    "DEFAULT_FEYNMAN_N",
    "DEFAULT_SPLIT",
    "FEYNMAN_UNITS",
    "MIN_ROWS",
    "SCHEMES",
    "SPLIT_KINDS",
    "Dataset",
    "DatasetError",
    "DatasetUnitsError",
    "FeynmanEquation",
    "FeynmanVariable",
    "Splits",
    "check_feature_names",
    "check_weights",
    "dataset_from_arrays",
    "feynman_equation",
    "feynman_equation_units",
    "feynman_equations",
    "feynman_units",
    "load_dataset",
    "resolve_units",
    "sample_feynman",
]
