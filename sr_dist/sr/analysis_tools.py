"""The analysis tools: what an agent learns about the data before and between its guesses.

A thin shell over :mod:`sr_dist.sr.analysis`: each tool reads the **training split only**
(``dataset.X_train`` / ``y_train``; validation and test rows never reach an analysis, so the
model cannot tune its guesses to them), calls one pure function, returns its full structured
dict as the result and a short text for the model. Bad arguments are a failed result with
``reason`` saying how to fix them, as ``evaluate_formulas`` does, never an exception.
``residual_analysis`` fits its formula through the same path as ``evaluate_formulas``, so that
fit is recorded as a candidate like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sr_dist.formula import evaluate_numpy, parse_formula
from sr_dist.sr.analysis import (
    AnalysisRequestError,
    buckingham_groups,
    data_statistics,
    fit_polynomial,
    fit_power_law,
    fit_rational,
    residual_analysis,
    separability_test,
    variable_relationships,
)
from sr_dist.sr.analysis.closed_fits import ClosedFit
from sr_dist.sr.analysis.separability import NEAR_SCORE, SEPARABLE_SCORE, SYMMETRY_MAX_VARS
from sr_dist.sr.formula_tools import FormulaTool, format_nmse
from sr_dist.tools.base import BaseTool
from sr_dist.tools.formatting import significant
from sr_dist.tools.metadata import ToolMetadata

__all__ = [
    "ANALYSIS_TOOLS",
    "MAX_LISTED",
    "DataStatistics",
    "DimensionalGroups",
    "FitPolynomial",
    "FitPowerLaw",
    "FitRational",
    "ResidualAnalysis",
    "SeparabilityTest",
    "VariableRelationships",
    "train_arrays",
]

#: The analysis tools, in the order they are shown to the model (after data_summary).
ANALYSIS_TOOLS: tuple[str, ...] = (
    "data_statistics", "variable_relationships", "separability_test", "dimensional_groups",
    "fit_polynomial", "fit_power_law", "fit_rational", "residual_analysis",
)
#: Variables (or tests, rows) listed in a tool's text at most; the text says how many were left out.
MAX_LISTED = 12
#: Text budget of every analysis tool (its result keeps everything).
_MAX_CHARS = 6000
#: Training rows the per-variable shape fits use at most (a seeded subset of a larger split).
RELATIONSHIP_ROWS = 4000


def train_arrays(dataset: Any) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], str]:
    """``(X_train, y_train, feature names, target name)`` as float arrays: the only data an
    analysis tool sees."""
    names = tuple(dataset.feature_names)
    y = np.asarray(dataset.y_train, dtype=float).ravel()
    X = np.asarray(dataset.X_train, dtype=float).reshape(len(y), -1)
    return X, y, names, str(getattr(dataset, "target_name", "y") or "y")


def _failure(reason: str) -> dict[str, Any]:
    return {"success": False, "reason": reason}


def _left_out(total: int, shown: int, what: str) -> list[str]:
    return [f"  ... and {total - shown} more {what} (in the full result)"] if total > shown else []


def _num(value: Any) -> str:
    return significant(value, 4)


def _chosen(variables: Sequence[str] | None, names: Sequence[str]) -> list[str] | str:
    """The requested variables (all when ``None``) or the reason they cannot be used."""
    if variables is None:
        return list(names)
    chosen = list(dict.fromkeys(str(v) for v in variables))
    if not chosen:
        return f"variables is empty: name at least one of {', '.join(names)}, or omit it to use all."
    unknown = [v for v in chosen if v not in names]
    if unknown:
        return f"unknown variable(s) {', '.join(unknown)}; the variables are {', '.join(names)}."
    return chosen


class _AnalysisTool(FormulaTool):
    """An analysis tool: the training arrays from the context."""

    def _train(self) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], str]:
        return train_arrays(self.context.dataset)


# --------------------------------------------------------------------------- data_statistics


def _column_line(name: str, stats: dict[str, Any]) -> str:
    if "min" not in stats:
        return f"  {name}: no finite values"
    q = stats["quantiles"]
    flags = [stats["sign"]]
    if stats["integer"]:
        flags.append(f"integer ({stats['distinct']} distinct)")
    if stats["log_uniform"]:
        flags.append("log-uniform")
    if stats["non_finite"]:
        flags.append(f"{stats['non_finite']} non-finite")
    if stats["outliers"]:
        first = stats["outlier_rows"][0]
        flags.append(f"{stats['outliers']} outlier(s), e.g. row {first['row']} = {_num(first['value'])}")
    return (f"  {name}: {_num(stats['min'])} .. {_num(stats['max'])}, q01 {_num(q['q01'])}, median "
            f"{_num(q['q50'])}, q99 {_num(q['q99'])}, std {_num(stats['std'])}; " + ", ".join(flags))


@BaseTool.register("data_statistics")
class DataStatistics(_AnalysisTool):
    metadata = ToolMetadata(name="data_statistics", read_only=True, idempotent=True, max_result_chars=_MAX_CHARS)

    def execute(self) -> dict[str, Any]:
        """Statistics of each variable and the target on the training data: range, quantiles,
        sign, whether the values are integers, whether a positive variable is spread evenly on
        a log scale (log-uniform: think power laws), and outliers (robust z-score above 6)."""
        X, y, names, target = self._train()
        return data_statistics(X, y, names, target)

    def format_result_dict(self, result: Any) -> str:
        variables = result["variables"]
        lines = [f"Training rows: {result['rows']}. name: min .. max, quantiles, std; flags"]
        shown = list(variables.items())[:MAX_LISTED]
        lines += [_column_line(name, stats) for name, stats in shown]
        lines += _left_out(len(variables), len(shown), "variable(s)")
        lines.append(_column_line(f"{result['target']} (target)", result["target_stats"]))
        return "\n".join(lines)


# --------------------------------------------------------------------------- variable_relationships


@BaseTool.register("variable_relationships")
class VariableRelationships(_AnalysisTool):
    metadata = ToolMetadata(name="variable_relationships", read_only=True, idempotent=True,
                            max_result_chars=_MAX_CHARS)

    def execute(self) -> dict[str, Any]:
        """How the target depends on each variable alone, on the training data: Pearson and
        Spearman correlation, mutual information (nats), monotonicity, and the best of a few
        one-variable shapes (linear, log, power, exp, periodic; each plus a constant) with its
        NMSE and fitted formula. A low NMSE means that variable alone explains the target."""
        X, y, names, _ = self._train()
        if len(y) > RELATIONSHIP_ROWS:
            rows = np.sort(np.random.default_rng(0).choice(len(y), RELATIONSHIP_ROWS, replace=False))
            X, y = X[rows], y[rows]
        return variable_relationships(X, y, names)

    def format_result_dict(self, result: Any) -> str:
        variables = result["variables"]
        order = sorted(variables, key=lambda n: -(variables[n]["mutual_information"] or 0.0))
        lines = [f"Each variable alone against the target ({result['rows']} training rows), most "
                 "informative first: pearson, spearman, mutual information; monotonicity; best shape"]
        for name in order[:MAX_LISTED]:
            v = variables[name]
            best = v["best"]
            shape = (f"{best['shape']} (nmse {format_nmse(best['train_nmse'])}): {best['formula']}"
                     if best else "none (too few rows or a constant target)")
            lines.append(f"  {name}: r {_num(v['pearson'])}, rho {_num(v['spearman'])}, MI "
                         f"{_num(v['mutual_information'])}; {v['monotonicity']}; {shape}")
        lines += _left_out(len(order), min(len(order), MAX_LISTED), "variable(s)")
        return "\n".join(lines)


# --------------------------------------------------------------------------- residual_analysis


@BaseTool.register("residual_analysis")
class ResidualAnalysis(_AnalysisTool):
    metadata = ToolMetadata(name="residual_analysis", idempotent=True, max_result_chars=_MAX_CHARS)

    def execute(self, expression: str) -> dict[str, Any]:
        """Fit a formula (like evaluate_formulas, and recorded as a candidate) and analyse its
        residual (target - prediction) on the training data: which variables the residual
        still depends on and in what shape (a missing term), whether the error grows with the
        prediction or a variable (heteroscedasticity: try a relative or multiplicative form),
        and the worst rows.

        Args:
            expression: The formula to fit and analyse, e.g. "a*x0 + b".
        """
        _, (candidate,) = self._fit([str(expression)])
        if not candidate.ok:
            return _failure(f"the formula could not be fitted (status {candidate.status}: "
                            f"{candidate.error or 'no details'}); fix it and call residual_analysis again.")
        X, y, names, _ = self._train()
        try:
            prediction = evaluate_numpy(parse_formula(candidate.expression, names), X, names,
                                        dict(candidate.constants))
        except ValueError as exc:  # FormulaError included: the evaluator read it, this parser did not
            return _failure(f"the fitted formula could not be evaluated here ({exc}); write it in "
                            "plain formula syntax and call residual_analysis again.")
        analysis = residual_analysis(X, y, prediction, names)
        return {"candidate": candidate.brief(), **analysis}

    def format_result_dict(self, result: Any) -> str:
        cand = result["candidate"]
        constants = ", ".join(f"{k}={significant(v, 5)}" for k, v in (cand.get("constants") or {}).items())
        head = (f"Fitted {cand['expression']}" + (f" [{constants}]" if constants else "")
                + f": train_nmse={format_nmse(result['train_nmse'])} "
                f"val_nmse={format_nmse(cand.get('val_nmse'))} (recorded as a candidate).")
        if result.get("exact"):
            return head + " The residual is rounding error: nothing is left to explain."
        lines = [head]
        depends = result["still_depends_on"]
        variables = result["variables"]
        if depends:
            lines.append("The residual still depends on (share of its variance one shape explains):")
            for name in depends[:MAX_LISTED]:
                v = variables[name]
                lines.append(f"  {name}: {v['shape']} explains {_num(v['explained'])} "
                             f"(rho {_num(v['spearman'])}): residual ~ {v['shape_formula']}")
            lines += _left_out(len(depends), min(len(depends), MAX_LISTED), "variable(s)")
        else:
            lines.append("No single variable explains the residual (each shape explains < 5% of it): "
                         "what is left is noise or an interaction of several variables.")
        hetero = [f"{label} (rho {_num(h['spearman'])})"
                  for label, h in result["heteroscedasticity"].items() if h["flagged"]]
        lines.append("Heteroscedastic: |residual| grows with " + ", ".join(hetero[:MAX_LISTED])
                     if hetero else "Not heteroscedastic: the error's size does not follow the "
                     "prediction or any variable.")
        if result["worst_rows"]:
            lines.append("Worst training rows (row: variables -> target vs prediction):")
            for row in result["worst_rows"]:
                values = ", ".join(f"{k}={_num(v)}" for k, v in list(row["values"].items())[:MAX_LISTED])
                lines.append(f"  {row['row']}: {values} -> {_num(row['target'])} vs {_num(row['prediction'])}")
        return "\n".join(lines)


# --------------------------------------------------------------------------- separability_test


def _score_text(verdict: dict[str, Any]) -> str:
    word = {"separable": "YES", "not separable": "no"}.get(verdict["verdict"], "undetermined")
    return word if verdict["score"] is None else f"{word} ({_num(verdict['score'])})"


def _split_text(split: dict[str, Any] | None) -> str:
    if split is None:
        return "none"
    a, b = (", ".join(g) for g in split["groups"])
    return f"[{a}] vs [{b}] ({_num(split['score'])})"


@BaseTool.register("separability_test")
class SeparabilityTest(_AnalysisTool):
    metadata = ToolMetadata(name="separability_test", read_only=True, idempotent=True,
                            max_result_chars=_MAX_CHARS)

    def execute(self, groups: list[list[str]] | None = None) -> dict[str, Any]:
        """Test, AI Feynman style, whether the target splits into parts: additive
        f(A) + g(B) or multiplicative f(A) * g(B) for two groups of variables A and B, and
        whether it depends on a pair of variables x, y only through x-y, x+y, x*y or x/y.
        The verdicts are the structure core's, the same tests the offline proposer runs: a
        smooth surrogate restricted to the structure (e.g. no terms mixing A and B; on
        log|f| for products) is fitted on 3/4 of the training rows, and its relative error
        on the rest is the score: separable (or symmetric) when the score is below 0.002
        and a free surrogate is not 4 times better; undetermined when even the free
        surrogate does not fit. Split a separable problem and solve the parts one by one.

        Args:
            groups: Two lists of variable names, e.g. [["x0", "x1"], ["x2"]]; variables in
                neither group may enter both parts. Omit to test each variable against all
                the others and to search the best split.
        """
        X, y, names, _ = self._train()
        try:
            return separability_test(X, y, names, groups)
        except AnalysisRequestError as exc:
            return _failure(str(exc))

    def format_result_dict(self, result: Any) -> str:
        s = result["surrogate"]
        if "note" in result:
            head = f"{result['note']}."
        elif s["holdout_error"] is None:
            head = "The free surrogate could not be fitted: every verdict is undetermined."
        else:
            trust = ("" if s["holdout_error"] < SEPARABLE_SCORE else f" (above {_num(SEPARABLE_SCORE)}: noise "
                     "or a rough fit, so a split scoring about as well is undetermined, not refuted)")
            head = (f"Free surrogate: degree-{s['degree']} Chebyshev basis ({s['terms']} terms), held-out "
                    f"relative error {_num(s['holdout_error'])}{trust}.")
        lines = [head + f" Separable? held-out relative error of the split model (YES below {_num(SEPARABLE_SCORE)}):"]
        tests = result["tests"]
        for test in tests[:MAX_LISTED]:
            a, b = (", ".join(g) for g in test["groups"])
            extra = "".join(f"; the target does not depend on {', '.join(g)}" for g in test["no_effect"])
            lines.append(f"  [{a}] vs [{b}]: additive {_score_text(test['additive'])}, "
                         f"multiplicative {_score_text(test['multiplicative'])}{extra}")
        lines += _left_out(len(tests), min(len(tests), MAX_LISTED), "test(s)")
        best = result.get("best_split")
        if best is not None:
            lines.append(f"Best split (at most 2 variables on one side): additive {_split_text(best['additive'])}, "
                         f"multiplicative {_split_text(best['multiplicative'])}")
        symmetries = result["symmetries"]
        found = sorted((x for x in symmetries if x["symmetric"] or x["near"]), key=lambda x: x["score"])
        if found:
            lines.append(f"Symmetries ({len(symmetries)} tested; held-out error of the pair model, yes "
                         f"when accepted, near below {_num(NEAR_SCORE)}):")
            lines += [f"  depends on {x['pair'][0]}, {x['pair'][1]} only through {x['kind']}: "
                      f"{'yes' if x['symmetric'] else 'near'} ({_num(x['score'])})" for x in found[:MAX_LISTED]]
            lines += _left_out(len(found), min(len(found), MAX_LISTED), "symmetry(ies)")
        elif symmetries:
            lines.append(f"No pair symmetry (x-y, x+y, x*y, x/y) found among {len(symmetries)} tested.")
        else:
            lines.append(f"Pair symmetries not tested (the surrogate tells them for 2 to {SYMMETRY_MAX_VARS} "
                         "variables only).")
        return "\n".join(lines)


# --------------------------------------------------------------------------- dimensional_groups


@BaseTool.register("dimensional_groups")
class DimensionalGroups(_AnalysisTool):
    metadata = ToolMetadata(name="dimensional_groups", read_only=True, idempotent=True,
                            max_result_chars=_MAX_CHARS)

    def execute(self) -> dict[str, Any]:
        """Dimensional analysis (Buckingham pi) from the dataset's units: the dimensionless
        groups of the variables and a product of powers of the variables with the target's
        units (the prefactor), so that target = prefactor * phi(groups); with no groups the
        units fix the formula up to a constant. Says so when the data has no units."""
        dataset = self.context.dataset
        return buckingham_groups(getattr(dataset, "units", None), str(getattr(dataset, "target_name", "y")))

    def format_result_dict(self, result: Any) -> str:
        if not result["has_units"]:
            return f"No units: {result['reason']}."
        groups = result["groups"]
        units = ", ".join(f"{n} [{u}]" for n, u in list(result["units"].items())[:MAX_LISTED + 1])
        lines = [f"Units: {units}. Dimension matrix rank {result['rank']}; "
                 f"{len(groups)} dimensionless group(s): "
                 + (", ".join(g["formula"] for g in groups[:MAX_LISTED]) or "none")]
        lines += _left_out(len(groups), min(len(groups), MAX_LISTED), "group(s)")
        if result["prefactor"] is None:
            lines.append(f"{result['reason']}.")
            return "\n".join(lines)
        lines.append(f"Prefactor with the target's units: {result['prefactor']['formula']}.")
        lines.append(f"So {result['form']} for some function phi. A power-law guess to evaluate: "
                     f"{result['suggestion']}")
        return "\n".join(lines)


# --------------------------------------------------------------------------- closed-form fits


def _fit_text(fit: dict[str, Any]) -> str:
    note = f" ({fit['note']})" if fit.get("note") else ""
    return (f"{fit['kind'].replace('_', ' ')} in {', '.join(fit['variables'])}: "
            f"train_nmse={format_nmse(fit['train_nmse'])}, {fit['terms']} term(s){note}.\n"
            f"  formula (numbers written in, pass it to evaluate_formulas as is): {fit['formula']}\n"
            f"  template (free constants, to refit): {fit['template']}")


class _ClosedFitTool(_AnalysisTool):
    """A closed-form fit on the chosen training columns; a bad request is a failed result."""

    def _run(self, variables: list[str] | None, fit: Any, *args: Any) -> dict[str, Any]:
        X, y, names, _ = self._train()
        chosen = _chosen(variables, names)
        if isinstance(chosen, str):
            return _failure(chosen)
        columns = [names.index(v) for v in chosen]
        keep = np.all(np.isfinite(X[:, columns]), axis=1) & np.isfinite(y)
        try:
            result: ClosedFit = fit(X[keep][:, columns], y[keep], chosen, *args)
        except AnalysisRequestError as exc:
            return _failure(str(exc))
        return result.as_dict()

    def format_result_dict(self, result: Any) -> str:
        return _fit_text(result)


@BaseTool.register("fit_polynomial")
class FitPolynomial(_ClosedFitTool):
    metadata = ToolMetadata(name="fit_polynomial", read_only=True, idempotent=True, max_result_chars=_MAX_CHARS)

    def execute(self, variables: list[str] | None = None, degree: int = 2) -> dict[str, Any]:
        """Least-squares polynomial in the chosen variables with every term up to the total
        degree, on the training data (terms that contribute nothing are dropped). Returns the
        formula with its coefficients written in, a template with free constants and the
        train NMSE. Seconds, not minutes: use it to test a polynomial idea or get a baseline.

        Args:
            variables: The variables to use (default: all).
            degree: Highest total degree, 1 to 6.
        """
        return self._run(variables, fit_polynomial, degree)


@BaseTool.register("fit_power_law")
class FitPowerLaw(_ClosedFitTool):
    metadata = ToolMetadata(name="fit_power_law", read_only=True, idempotent=True, max_result_chars=_MAX_CHARS)

    def execute(self, variables: list[str] | None = None) -> dict[str, Any]:
        """Power law target = c * x1**b1 * x2**b2 * ... in the chosen variables, fitted on
        logs of the training data (log|target| against log x, so it minimises relative error)
        by robust least squares (Huber weights: a few rows off the law do not bend the
        exponents; the same fit the offline proposer uses). Needs strictly positive variables and a target of one sign (a negative
        target is fitted as -c * ...); otherwise it says so. Returns the formula with numbers,
        a template with free constants and the train NMSE.

        Args:
            variables: The variables to use (default: all).
        """
        return self._run(variables, fit_power_law)


@BaseTool.register("fit_rational")
class FitRational(_ClosedFitTool):
    metadata = ToolMetadata(name="fit_rational", read_only=True, idempotent=True, max_result_chars=_MAX_CHARS)

    def execute(self, variables: list[str] | None = None, numerator_degree: int = 1,
                denominator_degree: int = 1) -> dict[str, Any]:
        """Rational function P(x) / (1 + Q(x)) in the chosen variables, with polynomials P and
        Q of the given total degrees, fitted on the training data by linearised least squares
        (then reweighted so the true error is minimised). Returns the formula with numbers, a
        template with free constants and the train NMSE, and warns when the denominator
        crosses zero on the data.

        Args:
            variables: The variables to use (default: all).
            numerator_degree: Total degree of P, 0 to 6.
            denominator_degree: Total degree of Q, 1 to 6.
        """
        return self._run(variables, fit_rational, numerator_degree, denominator_degree)
