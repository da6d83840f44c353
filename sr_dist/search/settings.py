"""A run's configuration as frozen, validated values.

Hydra hands ``run_search`` a ``DictConfig``; everything past this module works with the frozen
:class:`Settings` built here, so a bad value fails once, before Ray starts, with a message that
names the key (``search.agents must be a positive integer, got -1``). Nothing here touches Ray,
JAX or the disk, except resolving relative paths against a base directory.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sr_dist.evaluator import EvaluatorOptions

__all__ = [
    "AUTH_MODES",
    "DEVICES",
    "DatasetSettings",
    "EvaluatorSettings",
    "RaySettings",
    "ResultsSettings",
    "SearchSettings",
    "Settings",
    "SettingsError",
    "settings_from_config",
]

#: Values of ``ray.auth_mode`` (exported to Ray as ``RAY_AUTH_MODE``).
AUTH_MODES: tuple[str, ...] = ("disabled", "token")
#: Values of ``evaluator.device``.
DEVICES: tuple[str, ...] = ("cpu", "gpu")
#: ``evaluator`` keys the search layer consumes itself; every other key goes to the Evaluator.
_EVALUATOR_OWN_KEYS = frozenset(
    {"device", "max_batch", "max_wait_s", "warmup", "compilation_cache_dir", "num_gpus",
     "max_restarts"}
)
#: Options of ``sr_dist.evaluator.EvaluatorOptions`` a config may set (importing the evaluator
#: package does not import JAX); ``device`` and the cache directory are handled above.
_EVALUATOR_OPTIONS = frozenset(
    f.name for f in dataclasses.fields(EvaluatorOptions)
) - _EVALUATOR_OWN_KEYS
DEFAULT_JAX_CACHE = "~/.cache/sr-dist/jax"


class SettingsError(ValueError):
    """A configuration value that cannot work; ``key`` is its dotted name."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key} {message}")
        self.key = key


@dataclasses.dataclass(frozen=True)
class DatasetSettings:
    """Arguments of ``sr_dist.data.load_dataset``."""

    source: str
    target: str | None
    n: int | None
    seed: int
    noise: float
    split: tuple[float, float, float]


@dataclasses.dataclass(frozen=True)
class EvaluatorSettings:
    """The shared evaluator actor: placement, micro-batching and ``Evaluator`` options."""

    device: str
    max_batch: int
    max_wait_s: float
    warmup: bool
    compilation_cache_dir: str | None
    num_gpus: float
    #: Passed to ``Evaluator(dataset, **options)`` (``device`` included).
    options: Mapping[str, Any]
    #: How often Ray restarts a dead evaluator actor (its in-flight fits are resent).
    max_restarts: int = 3


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """Budgets and agent limits. ``None`` means "no limit" for the optional ones."""

    agents: int
    max_seconds: float
    max_candidates: int
    max_turns: int
    target_nmse: float | None
    seed: int
    max_tool_calls: int | None
    failure_budget: int | None
    stop_grace_s: float
    progress_interval_s: float


@dataclasses.dataclass(frozen=True)
class RaySettings:
    """How to reach Ray: ``address`` ``None`` starts a new local cluster."""

    address: str | None
    auth_mode: str
    num_cpus: int | None
    include_dashboard: bool

    @property
    def starts_cluster(self) -> bool:
        return self.address is None


@dataclasses.dataclass(frozen=True)
class ResultsSettings:
    path: Path
    flush_s: float


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything ``run_search`` needs, validated; ``config_yaml`` is stored in the runs row."""

    dataset: DatasetSettings
    evaluator: EvaluatorSettings
    search: SearchSettings
    ray: RaySettings
    results: ResultsSettings
    #: The ``model`` group as a plain dict, for ``sr_dist.models.build_model``.
    model: Mapping[str, Any]
    #: Trusted MCP server launch configs (``servers`` in the config).
    servers: tuple[Mapping[str, Any], ...]
    config_yaml: str
    #: ``run.resume``: the id of an earlier run this one continues (docs/reliability.md).
    resume: str | None = None


# --- field readers (each names its key in the error) -------------------------------------------

_MISSING = object()


def _get(section: Mapping[str, Any], prefix: str, key: str, default: Any = _MISSING) -> Any:
    if key in section:
        return section[key]
    if default is _MISSING:
        raise SettingsError(f"{prefix}.{key}", "is missing")
    return default


def _int(value: Any, key: str, *, minimum: int | None = None, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(key, f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        word = "positive" if minimum == 1 else f"at least {minimum}"
        raise SettingsError(key, f"must be {word}, got {value!r}")
    return int(value)


def _float(
    value: Any, key: str, *, positive: bool = False, non_negative: bool = False,
    optional: bool = False,
) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingsError(key, f"must be a number, got {value!r}")
    number = float(value)
    if math.isnan(number):
        raise SettingsError(key, "must be a number, got nan")
    if positive and not number > 0:
        raise SettingsError(key, f"must be positive, got {value!r}")
    if non_negative and number < 0:
        raise SettingsError(key, f"must not be negative, got {value!r}")
    return number


def _str(value: Any, key: str, *, optional: bool = False, choices: tuple[str, ...] = ()) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(key, f"must be a non-empty string, got {value!r}")
    if choices and value not in choices:
        raise SettingsError(key, f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise SettingsError(key, f"must be true or false, got {value!r}")
    return value


def _section(cfg: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    section = cfg.get(name)
    if not isinstance(section, Mapping):
        raise SettingsError(name, f"must be a config group (a mapping), got {section!r}")
    return section


def _resolve_path(text: str, base: Path) -> Path:
    path = Path(os.path.expanduser(text))
    return path if path.is_absolute() else (base / path)


# --- sections ----------------------------------------------------------------------------------

def _dataset(section: Mapping[str, Any], base: Path) -> DatasetSettings:
    source = _str(_get(section, "dataset", "source"), "dataset.source")
    # A relative csv:/parquet: path is resolved against the original working directory, so
    # Hydra's run directory and Ray's workers (which may run elsewhere) find the same file.
    scheme, sep, rest = source.partition(":")
    if sep and scheme in ("csv", "parquet") and rest.strip():
        source = f"{scheme}:{_resolve_path(rest.strip(), base)}"
    elif not sep and source.lower().endswith((".csv", ".parquet")):
        source = str(_resolve_path(source, base))
    split = _get(section, "dataset", "split", (0.7, 0.15, 0.15))
    if not isinstance(split, (list, tuple)) or len(split) != 3:
        raise SettingsError("dataset.split", f"must be three fractions [train, val, test], got {split!r}")
    fractions = tuple(_float(v, "dataset.split", non_negative=True) for v in split)
    if fractions[0] <= 0 or abs(math.fsum(fractions) - 1.0) > 1e-9:  # as load_dataset checks
        raise SettingsError("dataset.split", "must sum to 1 with a positive train fraction, "
                                             f"got {list(fractions)}")
    return DatasetSettings(
        source=source,
        target=_str(_get(section, "dataset", "target", None), "dataset.target", optional=True),
        n=_int(_get(section, "dataset", "n", None), "dataset.n", minimum=1, optional=True),
        seed=_int(_get(section, "dataset", "seed", 0), "dataset.seed", minimum=0),
        noise=_float(_get(section, "dataset", "noise", 0.0), "dataset.noise", non_negative=True),
        split=(fractions[0], fractions[1], fractions[2]),
    )


def _evaluator(section: Mapping[str, Any], base: Path) -> EvaluatorSettings:
    p = "evaluator"
    device = _str(_get(section, p, "device", "cpu"), f"{p}.device", choices=DEVICES)
    unknown = sorted(set(section) - _EVALUATOR_OWN_KEYS - _EVALUATOR_OPTIONS)
    if unknown:
        known = ", ".join(sorted(_EVALUATOR_OWN_KEYS | _EVALUATOR_OPTIONS))
        raise SettingsError(f"{p}.{unknown[0]}", f"is not an evaluator option (known: {known})")
    options: dict[str, Any] = {k: section[k] for k in section if k in _EVALUATOR_OPTIONS}
    if "const_buckets" in options and options["const_buckets"] is not None:
        options["const_buckets"] = tuple(options["const_buckets"])
    options["device"] = device
    cache = _get(section, p, "compilation_cache_dir", DEFAULT_JAX_CACHE)
    cache = _str(cache, f"{p}.compilation_cache_dir", optional=True)
    cache_dir = None if cache is None else str(_resolve_path(cache, base))
    num_gpus = _float(_get(section, p, "num_gpus", 1), f"{p}.num_gpus", non_negative=True)
    if device == "gpu" and num_gpus == 0:
        raise SettingsError(f"{p}.num_gpus", "must be positive when evaluator.device=gpu")
    return EvaluatorSettings(
        device=device,
        max_batch=_int(_get(section, p, "max_batch", 256), f"{p}.max_batch", minimum=1),
        max_wait_s=_float(_get(section, p, "max_wait_s", 0.02), f"{p}.max_wait_s",
                          non_negative=True),
        warmup=_bool(_get(section, p, "warmup", True), f"{p}.warmup"),
        compilation_cache_dir=cache_dir,
        num_gpus=num_gpus if device == "gpu" else 0.0,
        max_restarts=_int(_get(section, p, "max_restarts", 3), f"{p}.max_restarts", minimum=0),
        options=dict(options),
    )


def _search(section: Mapping[str, Any]) -> SearchSettings:
    p = "search"
    return SearchSettings(
        agents=_int(_get(section, p, "agents"), f"{p}.agents", minimum=1),
        max_seconds=_float(_get(section, p, "max_seconds"), f"{p}.max_seconds", positive=True),
        max_candidates=_int(_get(section, p, "max_candidates"), f"{p}.max_candidates", minimum=1),
        max_turns=_int(_get(section, p, "max_turns"), f"{p}.max_turns", minimum=1),
        target_nmse=_float(_get(section, p, "target_nmse", None), f"{p}.target_nmse",
                           non_negative=True, optional=True),
        seed=_int(_get(section, p, "seed", 0), f"{p}.seed", minimum=0),
        max_tool_calls=_int(_get(section, p, "max_tool_calls", None), f"{p}.max_tool_calls",
                            minimum=1, optional=True),
        failure_budget=_int(_get(section, p, "failure_budget", None), f"{p}.failure_budget",
                            minimum=1, optional=True),
        stop_grace_s=_float(_get(section, p, "stop_grace_s", 10.0), f"{p}.stop_grace_s",
                            non_negative=True),
        progress_interval_s=_float(_get(section, p, "progress_interval_s", 10.0),
                                   f"{p}.progress_interval_s", positive=True),
    )


def _ray(section: Mapping[str, Any]) -> RaySettings:
    p = "ray"
    address = _str(_get(section, p, "address", None), f"{p}.address", optional=True)
    if address is not None and address not in ("auto", "local") and "://" not in address \
            and ":" not in address:
        raise SettingsError(f"{p}.address",
                            f"must be null, auto, HOST:PORT or ray://HOST:PORT, got {address!r}")
    return RaySettings(
        address=None if address == "local" else address,
        auth_mode=_str(_get(section, p, "auth_mode", "disabled"), f"{p}.auth_mode",
                       choices=AUTH_MODES),
        num_cpus=_int(_get(section, p, "num_cpus", None), f"{p}.num_cpus", minimum=1,
                      optional=True),
        include_dashboard=_bool(_get(section, p, "include_dashboard", False),
                                f"{p}.include_dashboard"),
    )


def _results(section: Mapping[str, Any], base: Path) -> ResultsSettings:
    path = _str(_get(section, "results", "path"), "results.path")
    if "://" in path:
        raise SettingsError("results.path", f"must be a local or mounted directory, got {path!r} "
                            "(object-store URIs are not supported; see cluster/README.md)")
    return ResultsSettings(
        path=_resolve_path(path, base).resolve(),
        flush_s=_float(_get(section, "results", "flush_s", 2.0), "results.flush_s", positive=True),
    )


def _resume(section: Any) -> str | None:
    """``run.resume``: null, or a run id (``YYYYmmdd-HHMMSS-xxxxxx`` or any id a run used)."""
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise SettingsError("run", f"must be a config group (a mapping), got {section!r}")
    value = _str(section.get("resume"), "run.resume", optional=True)
    if value is not None and any(c in value for c in "/\\\n\x00"):
        raise SettingsError("run.resume", f"must be a run id, got {value!r}")
    return value


def settings_from_config(cfg: Any, base_dir: str | os.PathLike[str] | None = None) -> Settings:
    """Validate a run config (a Hydra ``DictConfig`` or a plain mapping).

    ``base_dir`` is what relative paths (``results.path``, ``csv:`` sources, the compilation
    cache) are relative to: the directory the user started ``sr-dist`` in (the default is the
    current directory). Raises :class:`SettingsError` naming the first bad key.
    """
    plain, yaml_text = _plain(cfg)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    model = plain.get("model")
    if not isinstance(model, Mapping):
        raise SettingsError("model", f"must be a config group (a mapping), got {model!r}")
    if "provider" not in model:
        raise SettingsError("model.provider", "is missing")
    servers = plain.get("servers") or []
    if not isinstance(servers, (list, tuple)) or not all(isinstance(s, Mapping) for s in servers):
        raise SettingsError("servers", f"must be a list of server configs, got {servers!r}")
    return Settings(
        dataset=_dataset(_section(plain, "dataset"), base),
        evaluator=_evaluator(_section(plain, "evaluator"), base),
        search=_search(_section(plain, "search")),
        ray=_ray(_section(plain, "ray")),
        results=_results(_section(plain, "results"), base),
        model=dict(model),
        servers=tuple(dict(s) for s in servers),
        resume=_resume(plain.get("run")),
        config_yaml=yaml_text,
    )


def _plain(cfg: Any) -> tuple[dict[str, Any], str]:
    """The config as plain containers (interpolations resolved) and as YAML text."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        container = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(container, dict)
        plain = {k: v for k, v in container.items() if k != "hydra"}
    elif isinstance(cfg, Mapping):
        plain = {str(k): v for k, v in cfg.items() if k != "hydra"}
    else:
        raise SettingsError("config", f"must be a mapping, got {type(cfg).__name__}")
    return plain, OmegaConf.to_yaml(OmegaConf.create(plain))
