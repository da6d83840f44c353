"""The words an agent starts with: the system prompt and the first user message.

Pure functions of the task's facts. The data section is the ``data_summary`` tool's own text,
so the prompt and the tool never disagree; the tool section is whatever the parser writes
(nothing for native function calling, where the schemas travel as ``tools``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sr_dist.agent.messages import LoopMessages

__all__ = ["FORMULA_SYNTAX", "LOOP_MESSAGES", "system_prompt", "task_message", "nudge_message", "truncated_message"]

#: The formula language, as the model needs to know it.
FORMULA_SYNTAX = (
    "Formulas are written with the variable names, numbers, + - * / and ** (or ^), parentheses, "
    "the functions sin cos tan exp log sqrt abs tanh arcsin arccos arctan sinh cosh, and the "
    "numbers pi and e. Any other name (a, b, c1, k, ...) is a free constant that is fitted to "
    "the data for you, so write `a*x**b + c` rather than guessing numbers."
)


def system_prompt(
    *,
    variables: Sequence[str],
    target: str,
    data_text: str,
    tools_text: str = "",
    tool_names: Sequence[str] = (),
    description: str = "",
) -> str:
    """The system prompt: the task, the formula language, the data, how to work, the tools."""
    names = ", ".join(variables)
    work = [
        f"- Propose candidate formulas for {target} and evaluate them in batches"
        + (" with evaluate_formulas." if "evaluate_formulas" in tool_names else "."),
        "- Each result gives the fitted constants, the training and validation NMSE (mean squared "
        "error divided by the variance of the target: 0 is perfect, 1 is no better than the mean) "
        "and the complexity (node count). Prefer simple formulas; accuracy first.",
        "- Learn from the results: refine what works, drop what does not, try new structures.",
    ]
    work.extend(_analysis_lines(tool_names))
    if "best_formulas" in tool_names:
        work.append("- best_formulas lists the best candidates so far (older results get summarized).")
    if "submit_formula" in tool_names:
        work.append("- When a formula fits essentially perfectly, or you cannot improve it, call submit_formula.")
    if "run_python" in tool_names:
        work.append("- run_python runs your own Python (numpy, pandas, scipy) on the training data: "
                    "use it to test a hypothesis about the data before you propose formulas.")
    sections = [
        "You are a scientist doing symbolic regression: find a closed-form formula that predicts "
        f"the target {target} from the variables {names}.",
        FORMULA_SYNTAX,
    ]
    if description.strip():
        sections.append(f"About the data: {description.strip()}")
    sections.append(f"The training data:\n{data_text.strip()}")
    sections.append("How to work:\n" + "\n".join(work))
    if tools_text.strip():
        sections.append(tools_text.strip())
    return "\n\n".join(sections)


def _analysis_lines(tool_names: Sequence[str]) -> list[str]:
    """When to reach for each analysis tool the model has (one short line per kind)."""
    lines = []
    looks = [name for name in ("data_statistics", "variable_relationships", "separability_test",
                               "dimensional_groups") if name in tool_names]
    if looks:
        lines.append("- Analyse before guessing: " + ", ".join(looks) + " describe the training data "
                     "(integer or log-uniform columns, the best one-variable shapes, whether the target "
                     "splits into f(A)+g(B) or f(A)*g(B) or depends on x-y, x/y, ..., the dimensionless "
                     "groups). Solve a separable problem part by part.")
    fits = [name for name in ("fit_polynomial", "fit_power_law", "fit_rational") if name in tool_names]
    if fits:
        lines.append("- " + ", ".join(fits) + " fit closed forms in seconds and return formulas you can "
                     "pass to evaluate_formulas.")
    if "residual_analysis" in tool_names:
        lines.append("- For a formula that fits well but not perfectly, residual_analysis shows which "
                     "variables its error still depends on (a missing term) and where it fails.")
    return lines


def task_message(*, variables: Sequence[str], target: str) -> str:
    """The first user message (kept verbatim however long the conversation grows)."""
    return (
        f"Find a formula for {target} as a function of {', '.join(variables)}. "
        "Start by evaluating a batch of diverse candidate formulas."
    )


def nudge_message(tool_names: Sequence[str]) -> str:
    """What the model is told after a reply with no tool call."""
    names = ", ".join(tool_names)
    finish = " When you are confident in a formula, call submit_formula." if "submit_formula" in tool_names else ""
    return f"Your reply contained no tool call. Continue the search by calling a tool ({names}).{finish}"


def truncated_message() -> str:
    """What the model is told after a reply cut off at the token limit."""
    return (
        "Your last reply was cut off at the output token limit, so any tool call in it may be "
        "incomplete. Keep replies shorter: less reasoning and fewer formulas per call."
    )


#: The loop's notes, worded for the formula tools.
LOOP_MESSAGES = LoopMessages(nudge=nudge_message, truncated=truncated_message)
