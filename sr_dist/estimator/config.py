"""The estimator's arguments as the CLI's config: Hydra overrides of ``sr_dist.conf``.

``SymbolicRegressor(max_seconds=60, agents=4)`` composes exactly the config
``sr-dist search.max_seconds=60 search.agents=4`` does, through the same Hydra config, schema
and checks (:func:`sr_dist.search.settings_from_config`): one settings path, so a bad value is
the same one-line ``SettingsError`` naming its key, and ``overrides()`` shows the command line
that reproduces a fit.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from sr_dist.formula import is_identifier

__all__ = ["compose_config", "hydra_value", "overrides_for"]

#: Estimator argument -> the config key it sets.
SEARCH_KEYS: Mapping[str, str] = {
    "agents": "search.agents",
    "max_seconds": "search.max_seconds",
    "max_candidates": "search.max_candidates",
    "max_turns": "search.max_turns",
    "target_nmse": "search.target_nmse",
    "seed": "search.seed",
    "ray_address": "ray.address",
    "results_path": "results.path",
}


def hydra_value(value: Any) -> str:
    """``value`` in Hydra's override grammar (strings quoted, so any text survives)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isnan(number):
            return "nan"
        if math.isinf(number):
            return "inf" if number > 0 else "-inf"
        return repr(number)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, Mapping):
        for key in value:
            if not (isinstance(key, str) and is_identifier(key)):
                raise ValueError(f"config keys must be identifiers, got {key!r}")
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if hasattr(value, "item"):  # a numpy scalar
        return hydra_value(value.item())
    raise ValueError(f"cannot write {value!r} ({type(value).__name__}) as a config value")


def _group_options(group: str, options: Mapping[str, Any] | None, argument: str) -> list[str]:
    if options is None:
        return []
    if not isinstance(options, Mapping):
        raise ValueError(f"{argument} must be a mapping of {group} keys to values (or None), "
                         f"got {type(options).__name__}")
    out = []
    for key, value in options.items():
        if not (isinstance(key, str) and is_identifier(key)):
            raise ValueError(f"{argument} keys must be {group} option names, got {key!r}")
        out.append(f"++{group}.{key}={hydra_value(value)}")
    return out


def overrides_for(params: Mapping[str, Any], *, units: Mapping[str, Any] | None = None,
                  resume: str | None = None, source: str | None = None) -> list[str]:
    """The Hydra overrides an estimator's parameters stand for (what ``sr-dist`` would take)."""
    model = params.get("model", "evolve")
    evaluator = params.get("evaluator", "cpu")
    for name, value in (("model", model), ("evaluator", evaluator)):
        if not (isinstance(value, str) and is_identifier(value.replace("-", "_"))):
            raise ValueError(f"{name} must be the name of a {name} preset (such as "
                             f"{'evolve, openai' if name == 'model' else 'cpu, gpu'}), got "
                             f"{value!r}; set its keys with {name}_options={{...}}")
    out = [f"model={model}", f"evaluator={evaluator}"]
    out += _group_options("model", params.get("model_options"), "model_options")
    out += _group_options("evaluator", params.get("evaluator_options"), "evaluator_options")
    for argument, key in SEARCH_KEYS.items():
        if argument in params:
            out.append(f"{key}={hydra_value(params[argument])}")
    if units is not None:
        if not isinstance(units, Mapping):
            raise ValueError("units must be a mapping from each variable and the target to its "
                             f"unit (such as {{'x0': 'm', 'x1': 's', 'y': 'm/s'}}), got {units!r}")
        out.append(f"dataset.units={hydra_value(dict(units))}")
    if source is not None:
        out += [f"dataset.source={hydra_value(source)}", "dataset.n=null"]
    if resume is not None:
        out.append(f"run.resume={hydra_value(resume)}")
    extra = params.get("overrides") or ()
    if isinstance(extra, str) or not isinstance(extra, Sequence) \
            or not all(isinstance(o, str) for o in extra):
        raise ValueError(f"overrides must be a sequence of KEY=VALUE strings, got {extra!r}")
    return out + list(extra)


def compose_config(overrides: Sequence[str]) -> Any:
    """``sr_dist.conf`` composed with ``overrides``, as the CLI composes it."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():  # inside a Hydra app: use its setup
        return compose("config", overrides=list(overrides))
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))
