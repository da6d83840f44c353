"""``run_python``: the model's own analysis code, run on a copy of the training split.

Off by default (:data:`~sr_dist.sr.formula_tools.OPT_IN_TOOLS`): a run enables it by naming it
in ``search.tools``. The code runs in :func:`~sr_dist.sr.sandbox.run_sandboxed` (a separate,
confined process with CPU, memory, file, process, wall and output limits); a limit it hits is
a tool failure the model reads, never an exception in the agent. docs/run-python.md says what
the sandbox does and does not protect against.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sr_dist.sr.formula_tools import FormulaTool
from sr_dist.sr.sandbox import SETUP_FAILED, run_sandboxed
from sr_dist.tools.base import BaseTool
from sr_dist.tools.metadata import ToolMetadata

__all__ = ["MAX_CODE_CHARS", "RunPython"]

#: Longest program accepted (a longer one is a model-visible failure).
MAX_CODE_CHARS = 20000

_WHY = {
    "cpu": "it used up its CPU time ({cpu_s} s)",
    "memory": "it ran out of memory ({memory_mb} MiB)",
    "wall": "it ran past its wall-clock limit ({wall_s} s) and was killed",
    "file_size": "it wrote a file larger than {file_mb} MiB",
    "processes": "it started more processes than allowed ({processes})",
}


@BaseTool.register("run_python")
class RunPython(FormulaTool):
    metadata = ToolMetadata(name="run_python", read_only=True, max_result_chars=12000)

    def execute(self, code: str) -> dict[str, Any]:
        """Run your own Python on a copy of the training data, to analyse it (no formula is
        fitted or recorded). Defined for the code: X (rows by variables, numpy), y (the
        target), df (a pandas DataFrame of the variables and the target), names (the variable
        names), target (the target's name), and each variable by its name; numpy (np),
        pandas (pd) and scipy can be imported. Print what you want to see: stdout and stderr
        come back, truncated when long. The code has no network, can write only in its
        working directory, and is stopped when it passes its CPU, memory or time limit.

        Args:
            code: A Python program; print its findings.
        """
        if not code.strip():
            return {"success": False, "reason": "code is empty: send a Python program that prints what it finds."}
        if len(code) > MAX_CODE_CHARS:
            return {"success": False,
                    "reason": f"code has {len(code)} characters; at most {MAX_CODE_CHARS} are accepted."}
        dataset = self.context.dataset
        X = np.asarray(dataset.X_train, dtype=float).reshape(len(dataset.y_train), -1)
        limits = self.context.run_python
        run = run_sandboxed(code, X, np.asarray(dataset.y_train, dtype=float),
                            tuple(dataset.feature_names),
                            str(getattr(dataset, "target_name", "y") or "y"), limits)
        body: dict[str, Any] = {"exit": run.exit, "stdout": run.stdout, "stderr": run.stderr,
                                "limit_hit": run.limit_hit, "truncated": run.truncated,
                                "isolation": dict(run.isolation)}
        if run.ok:
            return body
        if run.limit_hit in _WHY:
            why = "the code was stopped: " + _WHY[run.limit_hit].format(**vars(limits))
        elif run.exit == SETUP_FAILED:
            why = "the sandbox could not be set up, so the code did not run (see stderr)"
        else:
            why = f"the code failed with exit status {run.exit}"
        return {"success": False, "reason": why + ".", **body}

    def format_result_dict(self, result: Any) -> str:
        if result.get("success") is False and "exit" not in result:
            return str(result.get("reason", ""))
        parts = []
        stdout, stderr = result.get("stdout") or "", result.get("stderr") or ""
        if result.get("success") is not False:
            parts.append(f"exit {result.get('exit')}"
                         + (" (output truncated)" if result.get("truncated") else ""))
            if stdout:
                parts.append("stdout:\n" + stdout)
            if stderr:
                parts.append("stderr:\n" + stderr)
            if not stdout and not stderr:
                parts.append("(no output: print what you want to see)")
        elif stdout:
            parts.append("stdout:\n" + stdout)
        return "\n".join(parts)
