"""The named bars of the structure searches: one spelling for each meaning of "exact".

Errors are relative: an RMS residual over the RMS (or standard deviation) of the target.
Float64 least squares on a few hundred standardised rows reaches about 1e-14 on an exact law;
a law's constants fitted in float32 reach about 1e-7.
"""

from __future__ import annotations

__all__ = ["EXACT_SUPPORT", "NEAR", "NEAR_EXACT", "REFIT_BELOW"]

#: A support whose least-squares residual is below this is exact: the pursuit stops widening
#: it and prunes the terms it does not need.
EXACT_SUPPORT = 1e-9
#: Ranking bar: models below it are listed before every looser one, fewest terms first.
NEAR_EXACT = 1e-7
#: Seeds below this error on the sample are near-exact: the library places them first.
NEAR = 1e-6
#: Below this the error read from a gain (``|r|**2 - gain``) has lost the digits the bars above
#: need, so the support is refitted by least squares.
REFIT_BELOW = 1e-5
