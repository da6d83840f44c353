"""A run's configuration as frozen, validated values.

Hydra hands ``run_search`` a ``DictConfig``; everything past this module works with the frozen
:class:`Settings` built here, so a bad value fails once, before Ray starts, with a message that
names the key (``search.agents must be positive, got -1``). The keys, their types, defaults and
checks are the config groups' schema, :mod:`sr_dist.conf.schema`; this module adds what depends
on where ``sr-dist`` was started (relative paths) and the groups without a schema of their own
(``model``, ``servers``, ``run``). Nothing here touches Ray, JAX or the disk, except resolving
relative paths against a base directory.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sr_dist.conf.schema import (
    AUTH_MODES,
    DEVICES,
    DatasetConfig,
    EvaluatorConfig,
    RayConfig,
    ResultsConfig,
    SearchConfig,
    SettingsError,
    str_value,
)

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

#: The ``dataset`` group, its csv/parquet path resolved against the start directory.
DatasetSettings = DatasetConfig
#: The ``search`` group as the schema checked it (``tools``: ``None`` means every formula tool).
SearchSettings = SearchConfig
#: The ``ray`` group (``address`` ``None`` starts a new local cluster).
RaySettings = RayConfig


@dataclasses.dataclass(frozen=True)
class EvaluatorSettings:
    """The shared evaluator actor: placement, micro-batching and ``Evaluator`` options."""

    device: str
    max_batch: int
    max_wait_s: float
    warmup: bool
    compilation_cache_dir: str | None
    #: 0 on ``cpu``; ``evaluator.num_gpus`` on ``gpu``.
    num_gpus: float
    #: Passed to ``Evaluator(dataset, **options)`` (``device`` included).
    options: Mapping[str, Any]
    #: How often Ray restarts a dead evaluator actor (its in-flight fits are resent).
    max_restarts: int = 3
    #: Evaluator actors in the pool (``auto``: worked out from the cluster when the run starts).
    replicas: int | str = 1
    #: CPU cores per replica (reserved, and the size of its XLA CPU thread pool) on ``cpu``.
    cpus_per_replica: int = 1
    #: Formulas queued per replica before new requests wait.
    max_queue: int = 4096
    #: ``fit_many`` requests one agent may have in flight at once.
    max_in_flight: int = 4
    #: Queue latency target per replica, seconds (``None``: none).
    max_queue_s: float | None = None
    #: Dispatch the next batch before the running one is read back (``evaluator.pipeline``).
    pipeline: bool = True


@dataclasses.dataclass(frozen=True)
class ResultsSettings:
    """The ``results`` group, ``path`` resolved against the start directory."""

    path: Path
    flush_s: float
    roll_files: int = 32
    roll_s: float | None = 120.0
    target_file_mb: float = 256.0
    compact: bool = True


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


def _section(cfg: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    section = cfg.get(name)
    if not isinstance(section, Mapping):
        raise SettingsError(name, f"must be a config group (a mapping), got {section!r}")
    return section


def _resolve_path(text: str, base: Path) -> Path:
    path = Path(os.path.expanduser(text))
    return path if path.is_absolute() else (base / path)


# --- what depends on the start directory -------------------------------------------------------

def _dataset(section: Mapping[str, Any], base: Path) -> DatasetSettings:
    dataset = DatasetConfig.from_section(section)
    # A relative csv:/parquet: path is resolved against the original working directory, so
    # Hydra's run directory and Ray's workers (which may run elsewhere) find the same file.
    source = dataset.source
    scheme, sep, rest = source.partition(":")
    if sep and scheme in ("csv", "parquet") and rest.strip():
        source = f"{scheme}:{_resolve_path(rest.strip(), base)}"
    elif not sep and source.lower().endswith((".csv", ".parquet")):
        source = str(_resolve_path(source, base))
    return dataclasses.replace(dataset, source=source)


def _evaluator(section: Mapping[str, Any], base: Path) -> EvaluatorSettings:
    evaluator = EvaluatorConfig.from_section(section)
    cache = evaluator.compilation_cache_dir
    return EvaluatorSettings(
        device=evaluator.device,
        max_batch=evaluator.max_batch,
        max_wait_s=evaluator.max_wait_s,
        warmup=evaluator.warmup,
        compilation_cache_dir=None if cache is None else str(_resolve_path(cache, base)),
        num_gpus=evaluator.num_gpus if evaluator.device == "gpu" else 0.0,
        max_restarts=evaluator.max_restarts,
        replicas=evaluator.replicas,
        cpus_per_replica=evaluator.cpus_per_replica,
        max_queue=evaluator.max_queue,
        max_in_flight=evaluator.max_in_flight,
        max_queue_s=evaluator.max_queue_s,
        pipeline=evaluator.pipeline,
        options=evaluator.evaluator_options(),
    )


def _results(section: Mapping[str, Any], base: Path) -> ResultsSettings:
    results = ResultsConfig.from_section(section)
    return ResultsSettings(path=_resolve_path(results.path, base).resolve(),
                           flush_s=results.flush_s, roll_files=results.roll_files,
                           roll_s=results.roll_s, target_file_mb=results.target_file_mb,
                           compact=results.compact)


def _resume(section: Any) -> str | None:
    """``run.resume``: null, or a run id (``YYYYmmdd-HHMMSS-xxxxxx`` or any id a run used)."""
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise SettingsError("run", f"must be a config group (a mapping), got {section!r}")
    value: str | None = str_value(section.get("resume"), "run.resume", optional=True)
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
    search = SearchConfig.from_section(_section(plain, "search"))
    evaluator = _evaluator(_section(plain, "evaluator"), base)
    if search.metrics or search.rank_by != "val_nmse":
        # search.metrics / rank_by are computed and stamped by the evaluator (issue 17).
        evaluator = dataclasses.replace(evaluator, options={
            **evaluator.options, "metrics": search.metrics, "rank_by": search.rank_by})
    return Settings(
        dataset=_dataset(_section(plain, "dataset"), base),
        evaluator=evaluator,
        search=search,
        ray=RayConfig.from_section(_section(plain, "ray")),
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
        plain = {str(k): v for k, v in container.items() if k != "hydra"}
    elif isinstance(cfg, Mapping):
        plain = {str(k): v for k, v in cfg.items() if k != "hydra"}
    else:
        raise SettingsError("config", f"must be a mapping, got {type(cfg).__name__}")
    return plain, OmegaConf.to_yaml(OmegaConf.create(plain))
