"""What a fitted formula leaves unexplained: which variables its residual still depends on
(and in what shape), whether the error's size grows with the prediction or a variable
(heteroscedasticity), and the worst rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sr_dist.sr.analysis._common import nmse, spearman
from sr_dist.sr.analysis.relationships import best_shape, fit_shapes

__all__ = ["DEPENDS_EXPLAINED", "EXACT_NMSE", "HETERO_RHO", "residual_analysis"]

#: A variable "still matters" when one-variable shape in it explains at least this share of
#: the residual's variance (pure noise against any of the shapes stays well below 1%).
DEPENDS_EXPLAINED = 0.05
#: A residual NMSE below this is rounding error: there is nothing left to analyse.
EXACT_NMSE = 1e-12
#: |Spearman rho| between |residual| and a quantity above which the error is called
#: heteroscedastic in it.
HETERO_RHO = 0.2
#: Rows listed by default among the worst.
WORST_ROWS = 5


def residual_analysis(X: np.ndarray, y: np.ndarray, prediction: np.ndarray, names: Sequence[str],
                      *, worst: int = WORST_ROWS) -> dict[str, Any]:
    """The residual ``y - prediction`` on the rows given (the tools pass the training split).

    ``variables`` holds, per variable, Spearman's rho with the residual, the best one-variable
    shape of the residual in it with ``explained`` (1 - that shape's NMSE on the residual) and
    ``depends``; ``still_depends_on`` lists the variables that matter, most explained first.
    ``heteroscedasticity`` gives rho between |residual| and the prediction and each variable.
    """
    X = np.asarray(X, dtype=float).reshape(len(y), -1)
    y = np.asarray(y, dtype=float)
    prediction = np.asarray(prediction, dtype=float)
    residual = y - prediction
    finite = np.isfinite(residual) & np.all(np.isfinite(X), axis=1)
    out: dict[str, Any] = {"rows": int(len(y)), "non_finite_rows": int((~finite).sum())}
    r, Xf, pf = residual[finite], X[finite], prediction[finite]
    rows = np.flatnonzero(finite)
    if r.size < 5:
        return {**out, "exact": False, "train_nmse": float("inf"), "variables": {},
                "still_depends_on": [], "heteroscedasticity": {}, "worst_rows": []}
    score = nmse(y[finite], pf)
    spread = float(np.std(y[finite])) or 1.0
    out.update({"train_nmse": score, "bias": float(r.mean()) / spread,
                "exact": bool(score < EXACT_NMSE)})
    variables: dict[str, Any] = {}
    if not out["exact"]:
        for j, name in enumerate(names):
            fits = fit_shapes(Xf[:, j], r, name)
            shape = best_shape(fits)
            explained = max(0.0, 1.0 - shape.train_nmse)
            variables[name] = {"spearman": spearman(Xf[:, j], r), "shape": shape.shape,
                               "shape_formula": shape.formula, "explained": explained,
                               "depends": bool(explained >= DEPENDS_EXPLAINED)}
    out["variables"] = variables
    out["still_depends_on"] = sorted((n for n, v in variables.items() if v["depends"]),
                                     key=lambda n: -variables[n]["explained"])
    size = np.abs(r)
    hetero: dict[str, Any] = {}
    if not out["exact"]:
        against = {"prediction": pf, **{name: Xf[:, j] for j, name in enumerate(names)}}
        for label, values in against.items():
            rho = spearman(values, size)
            hetero[label] = {"spearman": rho, "flagged": bool(rho is not None and abs(rho) > HETERO_RHO)}
    out["heteroscedasticity"] = hetero
    order = np.argsort(-size)[:max(0, int(worst))]
    out["worst_rows"] = [
        {"row": int(rows[i]), "values": {name: float(Xf[i, j]) for j, name in enumerate(names)},
         "target": float(y[rows[i]]), "prediction": float(pf[i]), "residual": float(r[i])}
        for i in order
    ]
    return out
