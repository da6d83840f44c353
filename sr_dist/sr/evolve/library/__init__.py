"""The seed library of the offline proposer: named sources over the structure core, in one order.

:mod:`.assemble` builds a problem's library from the sources in :mod:`.sources`; the basis of
sparse sums (:mod:`.basis`), the shape catalogs (:mod:`.shapes`), the target transforms
(:mod:`.transforms`) and small tree builders (:mod:`.blocks`) are shared by the sources. The
numeric searches themselves (pursuit, surrogates, power laws, rational fits) live in
:mod:`sr_dist.sr.structure`, which holds no formula trees.
"""

from sr_dist.sr.evolve.library.assemble import build_library, library_for_info, seed_library
from sr_dist.sr.evolve.library.sample import sample_from_info
from sr_dist.sr.structure.sample import Sample

__all__ = ["Sample", "build_library", "library_for_info", "sample_from_info", "seed_library"]
