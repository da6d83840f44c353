"""Datasets for sr-dist: the embedded AI Feynman table and CSV / Parquet tables.

``load_dataset("feynman:I.6.2")`` samples an equation; ``load_dataset("csv:data.csv")`` reads a
table. Both give a frozen :class:`Dataset` with a seeded split and a stable content hash.
"""

from .dataset import DEFAULT_SPLIT, MIN_ROWS, Dataset, DatasetError, Splits
from .feynman import FeynmanEquation, FeynmanVariable, feynman_equation, feynman_equations
from .loaders import DEFAULT_FEYNMAN_N, SCHEMES, load_dataset, sample_feynman

__all__ = [
    "DEFAULT_FEYNMAN_N",
    "DEFAULT_SPLIT",
    "MIN_ROWS",
    "SCHEMES",
    "Dataset",
    "DatasetError",
    "FeynmanEquation",
    "FeynmanVariable",
    "Splits",
    "feynman_equation",
    "feynman_equations",
    "load_dataset",
    "sample_feynman",
]
