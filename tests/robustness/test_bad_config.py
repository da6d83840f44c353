"""Bad configuration through the real ``sr-dist`` CLI: exit 2, one line naming the key, no Ray.

tests/search/test_settings.py checks ``settings_from_config`` value by value; this runs the
console script for the refusals that come from elsewhere too (the model factory, the MCP launch
config) and checks each names its key and stops before Ray (see ``cli_support``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.robustness.cli_support import assert_refused_before_ray, run_sr_dist_all

pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

MISSING_VAR = "SR_DIST_ROBUSTNESS_UNSET_KEY"
OPENAI = ["model=openai", "model.model=m", "model.base_url=http://127.0.0.1:9/v1"]

# (case id, overrides, the key the line starts with, fragments it must contain)
CASES: list[tuple[str, list[str], str, list[str]]] = [
    ("unknown provider", ["model.provider=bogus"], "model", ["model.provider", "'bogus'", "openai"]),
    ("missing api key variable", [*OPENAI, f"model.api_key_env={MISSING_VAR}"], "model",
     [MISSING_VAR, "is not set", "model.api_key_env"]),
    ("default api key variable unset", ["model=deepseek"], "model", ["DEEPSEEK_API_KEY", "model.api_key_env"]),
    ("secret in the config", [*OPENAI, "+model.api_key=sk-not-a-real-key"], "model",
     ["model.api_key", "secrets do not belong in the config"]),
    ("unknown model key", [*OPENAI, "model.api_key_env=null", "+model.temprature=0.5"], "model",
     ["model.temprature"]),
    ("bad tool mode", [*OPENAI, "model.api_key_env=null", "model.tool_mode=smoke"], "model",
     ["model.tool_mode", "'smoke'"]),
    ("negative model timeout", [*OPENAI, "model.api_key_env=null", "model.timeout_s=-1"], "model",
     ["model.timeout_s"]),
    ("negative max_seconds", ["search.max_seconds=-30"], "search.max_seconds", ["positive", "-30"]),
    ("negative max_candidates", ["search.max_candidates=-1"], "search.max_candidates", ["-1"]),
    ("zero max_turns", ["search.max_turns=0"], "search.max_turns", ["positive"]),
    ("negative failure budget", ["search.failure_budget=-2"], "search.failure_budget", ["-2"]),
    ("negative agents", ["search.agents=-4"], "search.agents", ["positive"]),
    ("unknown search key", ["+search.agent=3"], "search.agent", ["is not a search option", "agents"]),
    ("unknown tool", ["search.tools=[evaluate_formulas,plot]"], "search.tools",
     ["unknown tool 'plot'", "submit_formula"]),
    ("bad device", ["evaluator.device=tpu"], "evaluator.device", ["cpu, gpu", "'tpu'"]),
    ("gpu without gpus", ["evaluator=gpu", "evaluator.num_gpus=0"], "evaluator.num_gpus", ["positive"]),
    ("unknown evaluator option", ["+evaluator.restart=3"], "evaluator.restart", []),
    ("bad auth mode", ["ray.auth_mode=none"], "ray.auth_mode", ["disabled", "token"]),
    ("negative dataset n", ["dataset.n=-5"], "dataset.n", []),
    ("bad split", ["dataset.split=[0.9,0.2,0.1]"], "dataset.split", ["sum to 1"]),
    ("mcp server without a command", ["servers=[{name: calc}]"], "servers", ["command"]),
]


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory
             ) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    """Every case's ``sr-dist`` process, started together once for the module."""
    dirs = {name: tmp_path_factory.mktemp("bad-config") for name, *_ in CASES}
    runs = {name: (dirs[name], ["dataset.source=feynman:I.6.2", "results.path=out", *overrides],
                   {"DEEPSEEK_API_KEY": ""} if name == "default api key variable unset" else {})
            for name, overrides, *_ in CASES}
    done = run_sr_dist_all(runs)
    return {name: (dirs[name], done[name]) for name in runs}


@pytest.mark.parametrize("name, overrides, key, fragments", CASES, ids=[c[0] for c in CASES])
def test_bad_config_names_its_key_before_ray(
        refusals: dict[str, tuple[Path, subprocess.CompletedProcess[str]]], name: str,
        overrides: list[str], key: str, fragments: list[str]) -> None:
    cwd, done = refusals[name]
    line = assert_refused_before_ray(done, cwd, cwd / "out", key, *fragments)
    print(f"{name}: {line}")
