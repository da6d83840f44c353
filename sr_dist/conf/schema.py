"""The run configuration's schema: one frozen dataclass per config group.

Each dataclass is the one place its group's keys, types and defaults live. :func:`register`
stores its defaults in Hydra's ``ConfigStore`` under the option name the group always had
(``dataset/feynman``, ``evaluator/cpu``, ``search/default``, ``ray/local``, ``results/local``), so
no YAML file repeats them; ``evaluator/gpu.yaml`` is the ``cpu`` option with ``device: gpu`` (a
Hydra defaults list). Each ``__post_init__`` checks its values and raises :class:`SettingsError`
naming the dotted key (``search.agents must be positive, got -1``).

The stored nodes are plain, untyped mappings on purpose. A typed node would make Hydra check
overrides while it composes, before sr-dist's code runs, and print its own multi-line error
with exit status 1; leaving the checks to the dataclasses keeps every bad value a one-line,
exit-2 ``configuration error`` that names its key, as the CLI documents. Nothing here imports
Ray or JAX.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from sr_dist.evaluator import EvaluatorOptions

__all__ = [
    "AUTH_MODES",
    "DEVICES",
    "GROUP_OPTIONS",
    "DatasetConfig",
    "EvaluatorConfig",
    "RayConfig",
    "ResultsConfig",
    "SearchConfig",
    "SettingsError",
    "TOOL_EXPERIENCE_MODES",
    "default_node",
    "register",
]

#: Values of ``ray.auth_mode`` (exported to Ray as ``RAY_AUTH_MODE``).
AUTH_MODES: tuple[str, ...] = ("disabled", "token")
#: Values of ``evaluator.device``.
DEVICES: tuple[str, ...] = ("cpu", "gpu")
#: Values of ``search.tool_experience`` (docs/tool-experience.md).
TOOL_EXPERIENCE_MODES: tuple[str, ...] = ("on", "read_only", "off")
#: Field metadata: the environment variable whose value, when set, replaces the default
#: (stored as an ``oc.env`` interpolation, resolved when the config is).
ENV = "sr_dist_env"
#: Field metadata: ``False`` for a field that is not a config key of its own.
KEY = "sr_dist_key"


class SettingsError(ValueError):
    """A configuration value that cannot work; ``key`` is its dotted name."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key} {message}")
        self.key = key


# --- value checks (each names its key in the error) --------------------------------------------

def int_value(value: Any, key: str, *, minimum: int | None = None, optional: bool = False) -> Any:
    """``value`` as an int (``None`` if ``optional``); bools and floats are refused."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(key, f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        word = "positive" if minimum == 1 else f"at least {minimum}"
        raise SettingsError(key, f"must be {word}, got {value!r}")
    return int(value)


def replicas_value(value: Any, key: str) -> int | str:
    """A replica count: a positive integer, or ``auto`` (worked out from the cluster)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SettingsError(key, f"must be a positive integer or 'auto', got {value!r}")
    return int(value)


def float_value(
    value: Any, key: str, *, positive: bool = False, non_negative: bool = False,
    optional: bool = False,
) -> Any:
    """``value`` as a float (``None`` if ``optional``); NaN and bools are refused."""
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


def str_value(value: Any, key: str, *, optional: bool = False,
              choices: tuple[str, ...] = ()) -> Any:
    """``value`` as a non-empty string (``None`` if ``optional``), one of ``choices`` if given."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(key, f"must be a non-empty string, got {value!r}")
    if choices and value not in choices:
        raise SettingsError(key, f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def bool_value(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise SettingsError(key, f"must be true or false, got {value!r}")
    return value


def tool_names(value: Any, key: str) -> tuple[str, ...] | None:
    """``search.tools``: ``None`` (every formula tool) or distinct formula tool names."""
    if value is None:
        return None
    # The one import of the formula tools' names in the config layer (lazy: it pulls numpy
    # and the agent kit, which composing a config does not need).
    from sr_dist.sr.formula_tools import FORMULA_TOOLS, OPT_IN_TOOLS

    known = ", ".join((*FORMULA_TOOLS, *OPT_IN_TOOLS))
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise SettingsError(key, "must be null (every formula tool) or a non-empty list of tool "
                                 f"names such as [{known}], got {value!r}")
    names: list[str] = []
    for name in value:
        if name not in FORMULA_TOOLS and name not in OPT_IN_TOOLS:
            raise SettingsError(key, f"names an unknown tool {name!r} (known: {known})")
        if name in names:
            raise SettingsError(key, f"names {name!r} twice")
        names.append(str(name))
    return tuple(names)


def experience_mode(value: Any, key: str) -> str:
    """``search.tool_experience``: one of :data:`TOOL_EXPERIENCE_MODES`; YAML 1.1 reads a bare
    ``on``/``off`` as a boolean, so ``true``/``false`` mean ``on``/``off``."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(str_value(value, key, choices=TOOL_EXPERIENCE_MODES))


def units_value(value: Any, key: str, source: Any) -> str | dict[str, Any] | None:
    """``dataset.units``: ``None``, ``feynman`` (for a feynman source) or name -> unit, each
    unit readable (that the names match the dataset is checked when it is loaded)."""
    if value is None:
        return None
    if isinstance(value, str):
        if value.strip().lower() != "feynman":
            raise SettingsError(key, "must be null, 'feynman' or a mapping from each variable "
                                     f"and the target to its unit, got {value!r}")
        if not (isinstance(source, str) and source.startswith("feynman:")):
            raise SettingsError(key, f"is 'feynman' but dataset.source {source!r} is not a "
                                     "feynman: dataset; give a mapping name -> unit instead")
        return "feynman"
    if not isinstance(value, Mapping) or not value:
        raise SettingsError(key, "must be null, 'feynman' or a non-empty mapping from each "
                                 f"variable and the target to its unit, got {value!r}")
    # The formula language's unit reader (numeric core, no Ray or Hydra).
    from sr_dist.formula import Unit, UnitError

    units: dict[str, Any] = {}
    for name, unit in value.items():
        plain: Any = unit
        if isinstance(unit, (list, tuple)):
            plain = list(unit)
        elif isinstance(unit, int) and not isinstance(unit, bool):
            plain = str(unit)  # YAML reads a dimensionless `1` as a number
        try:
            Unit.coerce(plain)
        except UnitError as exc:
            raise SettingsError(f"{key}.{name}", f"is not a unit: {exc}") from None
        units[str(name)] = dict(plain) if isinstance(plain, Mapping) else plain
    return units


def split_kind_value(cfg: Any) -> None:
    """``dataset.split_kind``/``split_variable``/``weight``, and ``dataset.split`` given as a
    kind name (``split=ood``: that kind with the default fractions)."""
    from sr_dist.data.dataset import DEFAULT_SPLIT, SPLIT_KINDS

    p = cfg.GROUP
    kind = str_value(cfg.split_kind, f"{p}.split_kind", choices=SPLIT_KINDS)
    if isinstance(cfg.split, str):
        if cfg.split not in SPLIT_KINDS:
            raise SettingsError(f"{p}.split", "must be three fractions [train, val, test] or one "
                                f"of {', '.join(SPLIT_KINDS)}, got {cfg.split!r}")
        if kind != "random" and kind != cfg.split:
            raise SettingsError(f"{p}.split", f"is {cfg.split!r} but dataset.split_kind is "
                                f"{kind!r}; set one of them")
        kind = cfg.split
        _set(cfg, "split", DEFAULT_SPLIT)
    variable = str_value(cfg.split_variable, f"{p}.split_variable", optional=True)
    if kind == "ood" and variable is None:
        raise SettingsError(f"{p}.split_variable", "must name a variable for an ood split "
                            "(e.g. dataset.split_variable=x0: its highest values are the test "
                            "rows)")
    if kind != "ood" and variable is not None:
        raise SettingsError(f"{p}.split_variable", f"is only used by an ood split, not "
                            f"{kind!r}; drop it or set dataset.split=ood")
    _set(cfg, "split_kind", kind)
    _set(cfg, "split_variable", variable)
    weight = str_value(cfg.weight, f"{p}.weight", optional=True)
    if weight is not None and str(cfg.source).startswith("feynman:"):
        raise SettingsError(f"{p}.weight", "needs a csv: or parquet: source (a column of "
                            "weights); a feynman: dataset has none")
    _set(cfg, "weight", weight)


def loss_value(value: Any, key: str) -> str:
    """``evaluator.loss``: a built-in loss, or a ``module:function`` path, imported and
    checked now (trusted config only), so a bad path fails before any actor starts."""
    from sr_dist.evaluator.losses import BUILTIN_LOSSES, LossError, resolve_loss

    name = str_value(value, key)
    if name not in BUILTIN_LOSSES:
        try:
            resolve_loss(name)
        except LossError as exc:
            raise SettingsError(key, f"is not usable: {exc}") from None
    return name


def metric_names(value: Any, key: str) -> tuple[str, ...]:
    """``search.metrics``: a list of extra metric names (empty: none)."""
    from sr_dist.evaluator.metrics import EXTRA_METRICS, check_metrics

    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise SettingsError(key, f"must be a list of metric names from {', '.join(EXTRA_METRICS)}"
                                 f" (e.g. [r2, mae]), got {value!r}")
    try:
        return check_metrics(tuple(value))
    except ValueError as exc:
        raise SettingsError(key, str(exc)) from None


def rank_by_value(value: Any, key: str, metrics: tuple[str, ...]) -> str:
    """``search.rank_by``: ``val_nmse`` (default), ``val_loss``, or one of ``search.metrics``."""
    from sr_dist.candidate import RANK_METRICS

    name = str_value(value, key, choices=RANK_METRICS)
    if name not in ("val_nmse", "val_loss", "r2") and name not in metrics:
        raise SettingsError(key, f"is {name!r}, which is not computed; add it to search.metrics "
                                 f"(search.metrics=[{name}])")
    return name


def _set(obj: object, name: str, value: Any) -> None:
    """Store a checked, normalised value on a frozen dataclass (inside ``__post_init__``)."""
    object.__setattr__(obj, name, value)



class _Group:
    """What every group dataclass shares: its group name and building from a mapping."""

    GROUP: ClassVar[str]

    @classmethod
    def config_keys(cls) -> tuple[str, ...]:
        """The group's config keys, in the order the config shows them."""
        return tuple(f.name for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                     if f.metadata.get(KEY, True))

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> Self:
        """Check a composed group; a key it lacks takes the default, an unknown one is refused."""
        unknown = sorted(str(k) for k in section if k not in cls.config_keys())
        if unknown:
            raise cls.unknown_key(unknown[0])
        return cls(**{str(k): v for k, v in section.items()})

    @classmethod
    def unknown_key(cls, key: str, known: tuple[str, ...] = ()) -> SettingsError:
        article = "an" if cls.GROUP[0] in "aeiou" else "a"
        names = ", ".join(sorted(known or cls.config_keys()))
        return SettingsError(f"{cls.GROUP}.{key}",
                             f"is not {article} {cls.GROUP} option (known: {names})")


# --- the groups --------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class DatasetConfig(_Group):
    """``dataset``: the arguments of ``sr_dist.data.load_dataset``."""

    GROUP: ClassVar[str] = "dataset"

    #: ``feynman:<Filename>`` from the embedded AI Feynman table, ``csv:<path>`` or
    #: ``parquet:<path>``.
    source: str = "feynman:I.12.11"
    #: Target column of a csv/parquet source (``None``: the last column).
    target: str | None = None
    #: Rows sampled for feynman sources; ignored for files.
    n: int | None = 10000
    seed: int = 0
    #: Gaussian noise added to the target, as a fraction of its standard deviation.
    noise: float = 0.0
    #: Train / validation / test fractions.
    split: tuple[float, float, float] = (0.7, 0.15, 0.15)
    #: Units of the variables and the target (``None``: unknown): ``feynman`` for a feynman
    #: source (the embedded units table), or a mapping name -> unit (``{x: m, t: s, v: m/s}``;
    #: a unit is text such as ``kg*m/s**2`` or a list of exponents over m, s, kg, K, V, A, cd,
    #: mol). With units, candidates are checked for dimensional consistency.
    units: str | Mapping[str, Any] | None = None
    # Issue 17 (objectives): how rows are split and weighted (docs/objectives.md).
    #: ``random`` (seeded, the default), ``ood`` (by ``split_variable``: its lowest values train,
    #: its highest test) or ``chronological`` (row order: the first rows train, the last test).
    #: ``dataset.split=ood`` is short for ``split_kind=ood`` with the default fractions.
    split_kind: str = "random"
    #: The ``ood`` split's variable.
    split_variable: str | None = None
    #: A csv/parquet column of per-row sample weights (not a feature; ``None``: all rows 1).
    weight: str | None = None

    def __post_init__(self) -> None:
        p = self.GROUP
        _set(self, "units", units_value(self.units, f"{p}.units", self.source))
        _set(self, "source", str_value(self.source, f"{p}.source"))
        split_kind_value(self)
        split = self.split
        if not isinstance(split, (list, tuple)) or len(split) != 3:
            raise SettingsError(f"{p}.split",
                                f"must be three fractions [train, val, test], got {split!r}")
        fractions = tuple(float_value(v, f"{p}.split", non_negative=True) for v in split)
        if fractions[0] <= 0 or abs(math.fsum(fractions) - 1.0) > 1e-9:  # as load_dataset checks
            raise SettingsError(f"{p}.split", "must sum to 1 with a positive train fraction, "
                                              f"got {list(fractions)}")
        _set(self, "split", (fractions[0], fractions[1], fractions[2]))
        _set(self, "target", str_value(self.target, f"{p}.target", optional=True))
        _set(self, "n", int_value(self.n, f"{p}.n", minimum=1, optional=True))
        _set(self, "seed", int_value(self.seed, f"{p}.seed", minimum=0))
        _set(self, "noise", float_value(self.noise, f"{p}.noise", non_negative=True))


#: ``evaluator`` keys that are ``EvaluatorOptions`` fields but that the search layer handles
#: itself (``compilation_cache_dir`` is resolved against the start directory first).
_OWN_OPTIONS = frozenset({"device", "compilation_cache_dir"})


@dataclasses.dataclass(frozen=True)
class EvaluatorConfig(_Group):
    """``evaluator`` (the ``cpu`` option): the shared evaluator actor and ``Evaluator`` options.

    Any other ``EvaluatorOptions`` field may be added (``+evaluator.layout=diagonal``); it lands
    in ``options``. The fit options' defaults are ``EvaluatorOptions``'s own.
    """

    GROUP: ClassVar[str] = "evaluator"

    #: Where constants are fitted: ``cpu`` or ``gpu`` (``evaluator=gpu`` sets it).
    device: str = "cpu"
    restarts: int = EvaluatorOptions.restarts
    dtype: str = EvaluatorOptions.dtype
    #: ``lm``: Levenberg-Marquardt with restarts (default); ``llmsr``: BFGS from all ones on the
    #: MSE, one start, as LLM-SR and SR-Scientist fit, for scores comparable with published ones.
    method: str = EvaluatorOptions.method
    #: Solve the constants that enter linearly exactly (separable least squares) and let LM
    #: move only the others (docs/evaluator.md); ``false`` fits every constant with LM.
    variable_projection: bool = EvaluatorOptions.variable_projection
    #: Micro-batching in the evaluator actor: the most formulas per ``fit_many``
    #: (``max_batch=1`` switches batching off) ...
    max_batch: int = 256
    #: ... and the longest an idle evaluator waits for batch-mates. 0 on the CPU, where a
    #: batch's cost per formula hardly depends on its size and waiting idled the evaluator
    #: (evaluator/gpu.yaml sets 0.02: wide batches are what a GPU is fast on).
    max_wait_s: float = 0.0
    #: Dispatch the next batch before the running one is read back, so the device fits one
    #: batch while the host packs the next and answers the last (the same results;
    #: docs/evaluator.md "Pipelining"). ``false``: one batch at a time.
    pipeline: bool = True
    #: Compile the common shape buckets before the search's clock starts. Off on the CPU: the
    #: search starts once the agents are prepared, and the evaluator compiles (or loads from
    #: the persistent cache) what its first requests need while they propose. evaluator=gpu
    #: turns it on (a GPU's compiles are longer and its first batches wider).
    warmup: bool = False
    #: JAX's persistent compilation cache (``None``: off); makes compiles one-off per machine.
    compilation_cache_dir: str | None = dataclasses.field(
        default="~/.cache/sr-dist/jax", metadata={ENV: "SR_DIST_JAX_CACHE_DIR"})
    #: GPUs the evaluator actor reserves when ``device`` is ``gpu`` (Ray schedules it on a node
    #: that has them); ignored on ``cpu``.
    num_gpus: float = 1
    #: How often Ray restarts a dead evaluator actor (its in-flight fits are resent).
    max_restarts: int = 3
    #: Evaluator actors (the pool): an integer, or ``auto`` (one per GPU the cluster has on
    #: ``gpu``; on ``cpu``, one per ``cpus_per_replica`` cores of the cluster). Formulas are
    #: routed to replicas by canonical key, so each structure is fitted once per run.
    replicas: Any = 1
    #: CPU cores each replica reserves and sizes XLA's CPU thread pool to (``cpu`` only).
    cpus_per_replica: int = 1
    #: Formulas queued per replica before new requests wait (backpressure, not memory growth).
    max_queue: int = 4096
    #: ``fit_many`` requests one agent may have in flight at once (the rest wait).
    max_in_flight: int = 4
    #: A queue latency target in seconds (``None``: none): each replica admits at most this
    #: much work (at its recent fit rate) and keeps batches that short; beyond it, requests
    #: wait to be admitted. For runs of many agents (docs/scaling.md).
    max_queue_s: float | None = None
    # Issue 17 (objectives): the fitting loss (docs/objectives.md).
    #: ``mse`` (default), ``mae``, ``huber``, ``logcosh``, ``relative``, or ``module:function``:
    #: a trusted JAX function ``fn(y_pred, y_true) -> per-row losses``.
    loss: str = EvaluatorOptions.loss
    #: Huber's threshold in the target's units (``loss=huber``).
    huber_delta: float = EvaluatorOptions.huber_delta
    #: The other ``EvaluatorOptions`` fields the config sets (not a key of its own).
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict, metadata={KEY: False})

    @classmethod
    def extra_options(cls) -> frozenset[str]:
        """``EvaluatorOptions`` fields a config may add beyond the group's own keys."""
        return frozenset(f.name for f in dataclasses.fields(EvaluatorOptions)) \
            - _OWN_OPTIONS - set(cls.config_keys())

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> EvaluatorConfig:
        p = cls.GROUP
        device = str_value(section.get("device", cls.device), f"{p}.device", choices=DEVICES)
        own, extra = set(cls.config_keys()), cls.extra_options()
        unknown = sorted(str(k) for k in section if k not in own and k not in extra)
        if unknown:
            raise cls.unknown_key(unknown[0], tuple(own | extra))
        options = {str(k): v for k, v in section.items() if k in extra}
        fields = {str(k): v for k, v in section.items() if k in own}
        return cls(**{**fields, "device": device, "options": options})

    def __post_init__(self) -> None:
        p = self.GROUP
        _set(self, "device", str_value(self.device, f"{p}.device", choices=DEVICES))
        _set(self, "compilation_cache_dir", str_value(
            self.compilation_cache_dir, f"{p}.compilation_cache_dir", optional=True))
        num_gpus = float_value(self.num_gpus, f"{p}.num_gpus", non_negative=True)
        if self.device == "gpu" and num_gpus == 0:
            raise SettingsError(f"{p}.num_gpus", "must be positive when evaluator.device=gpu")
        _set(self, "num_gpus", num_gpus)
        _set(self, "max_batch", int_value(self.max_batch, f"{p}.max_batch", minimum=1))
        _set(self, "max_wait_s", float_value(self.max_wait_s, f"{p}.max_wait_s",
                                             non_negative=True))
        _set(self, "warmup", bool_value(self.warmup, f"{p}.warmup"))
        _set(self, "pipeline", bool_value(self.pipeline, f"{p}.pipeline"))
        _set(self, "variable_projection", bool_value(self.variable_projection,
                                                     f"{p}.variable_projection"))
        _set(self, "max_restarts", int_value(self.max_restarts, f"{p}.max_restarts", minimum=0))
        _set(self, "replicas", replicas_value(self.replicas, f"{p}.replicas"))
        _set(self, "cpus_per_replica", int_value(self.cpus_per_replica, f"{p}.cpus_per_replica",
                                                 minimum=1))
        _set(self, "max_queue", int_value(self.max_queue, f"{p}.max_queue", minimum=1))
        _set(self, "max_in_flight", int_value(self.max_in_flight, f"{p}.max_in_flight",
                                              minimum=1))
        _set(self, "max_queue_s", float_value(self.max_queue_s, f"{p}.max_queue_s",
                                              positive=True, optional=True))
        _set(self, "restarts", int_value(self.restarts, f"{p}.restarts", minimum=1))
        _set(self, "dtype", str_value(self.dtype, f"{p}.dtype"))
        _set(self, "method", str_value(self.method, f"{p}.method"))
        _set(self, "loss", loss_value(self.loss, f"{p}.loss"))
        _set(self, "huber_delta", float_value(self.huber_delta, f"{p}.huber_delta",
                                              positive=True))
        options = dict(self.options)
        unknown = sorted(set(options) - self.extra_options())
        if unknown:
            raise self.unknown_key(unknown[0], tuple(set(self.config_keys()) | self.extra_options()))
        if options.get("const_buckets") is not None:
            options["const_buckets"] = tuple(options["const_buckets"])
        _set(self, "options", options)

    def evaluator_options(self) -> dict[str, Any]:
        """Keyword arguments of ``Evaluator(dataset, **options)`` (``device`` included)."""
        return {"restarts": self.restarts, "dtype": self.dtype, "method": self.method,
                "variable_projection": self.variable_projection, "loss": self.loss,
                "huber_delta": self.huber_delta, **self.options, "device": self.device}


@dataclasses.dataclass(frozen=True)
class SearchConfig(_Group):
    """``search``: budgets and agent limits. ``None`` means "no limit" for the optional ones."""

    GROUP: ClassVar[str] = "search"

    #: Agents running side by side, each with its own seed (derived from ``seed``).
    agents: int = 2
    #: Budgets: the run stops at whichever comes first (or when every agent has finished).
    #: ``max_seconds`` counts from when the agents start (Ray start-up and the evaluator's
    #: warm-up compile come before it); ``make run`` fits in 3 minutes with this default.
    max_seconds: float = 120
    max_candidates: int = 200000
    #: Model turns per agent.
    max_turns: int = 400
    #: Stop the run when a candidate's validation NMSE is at or below this (``None``: never).
    #: An exact law, refitted in float64, lands near 1e-30; rational approximants of a smooth
    #: law reach 1e-13 to 1e-17, and the old 1e-12 stopped runs on them before the law was found.
    target_nmse: float | None = 1.0e-20
    #: Seconds the run goes on after a candidate first reaches ``target_nmse``, so agents can
    #: simplify what they found (the ``evolve`` search offers a solution's reductions and
    #: rewrites, docs/evolve.md) before the run stops; it stops sooner once every agent has
    #: finished. 0: stop at once. With 5, AI Feynman read the same 97/89 and 99 of 186 exact
    #: answers got shorter, at a median of 2.4 s more a problem (docs/benchmarks.md).
    polish_s: float = 5.0
    seed: int = 0
    #: Tool calls per agent (``None``: no limit).
    max_tool_calls: int | None = None
    #: Consecutive failed turns before an agent gives up (``None``: never).
    failure_budget: int | None = 5
    #: Seconds agents get to finish their turn after a stop before they are killed.
    stop_grace_s: float = 10
    #: Seconds between progress log lines when stdout is not a terminal.
    progress_interval_s: float = 10
    #: The formula tools a run exposes to the model (``None``: all of them).
    tools: tuple[str, ...] | None = None
    #: Agent episodes one agent actor (process) hosts as concurrent asyncio tasks. 1 suits
    #: ``evolve`` (its turns compute on the CPU); raise it for agents that wait on a remote
    #: model (docs/scaling.md).
    agents_per_actor: int = 1
    #: Start a lost agent again (its actor died, its node was lost) on a surviving node, with
    #: a fresh context seeded from its best rows so far (docs/reliability.md).
    restart_lost_agents: bool = True
    #: Restarts per agent before a lost agent stays lost.
    max_agent_restarts: int = 3
    #: With ``dataset.units``: free constants are dimensionless (``true``), or each may carry
    #: any unit (``false``, as PySR allows: a formula is consistent when some units of its
    #: constants make it so).
    dimensionless_constants_only: bool = True
    # Issue 17 (objectives): extra metrics and the ranking metric (docs/objectives.md).
    #: Extra per-candidate metrics stored as result columns: ``mae``, ``r2``, ``aic``, ``bic``,
    #: ``pearson_r``, ``spearman_r`` (``[]``: none).
    metrics: tuple[str, ...] = ()
    #: What the archive, the best-so-far and selection rank by: ``val_nmse`` (default),
    #: ``val_loss`` (the fitting loss), or a metric of ``search.metrics``; ``r2``, ``pearson_r``
    #: and ``spearman_r`` rank higher first.
    rank_by: str = "val_nmse"
    #: Shared tool experience (docs/tool-experience.md): ``on`` appends what earlier agents of
    #: this run and earlier runs on this results path learned to the tool descriptions, and
    #: writes this run's; ``read_only`` only reads; ``off`` neither (the default: what a model
    #: is told then depends on the config and the data alone, and the runs of one sweep, which
    #: share the results path, stay independent of each other).
    tool_experience: str = "off"
    #: Limits of one ``run_python`` call (an opt-in tool, docs/run-python.md): CPU seconds,
    #: MiB of memory beyond the interpreter's, wall-clock seconds, MiB per written file, and
    #: characters kept of stdout and of stderr.
    run_python_cpu_s: int = 10
    run_python_memory_mb: int = 2048
    run_python_wall_s: float = 20
    run_python_file_mb: int = 16
    run_python_output_chars: int = 8000

    def __post_init__(self) -> None:
        p = self.GROUP
        _set(self, "agents", int_value(self.agents, f"{p}.agents", minimum=1))
        _set(self, "max_seconds", float_value(self.max_seconds, f"{p}.max_seconds",
                                              positive=True))
        _set(self, "max_candidates", int_value(self.max_candidates, f"{p}.max_candidates",
                                               minimum=1))
        _set(self, "max_turns", int_value(self.max_turns, f"{p}.max_turns", minimum=1))
        _set(self, "target_nmse", float_value(self.target_nmse, f"{p}.target_nmse",
                                              non_negative=True, optional=True))
        _set(self, "polish_s", float_value(self.polish_s, f"{p}.polish_s", non_negative=True))
        _set(self, "seed", int_value(self.seed, f"{p}.seed", minimum=0))
        _set(self, "max_tool_calls", int_value(self.max_tool_calls, f"{p}.max_tool_calls",
                                               minimum=1, optional=True))
        _set(self, "failure_budget", int_value(self.failure_budget, f"{p}.failure_budget",
                                               minimum=1, optional=True))
        _set(self, "stop_grace_s", float_value(self.stop_grace_s, f"{p}.stop_grace_s",
                                               non_negative=True))
        _set(self, "progress_interval_s", float_value(
            self.progress_interval_s, f"{p}.progress_interval_s", positive=True))
        _set(self, "tools", tool_names(self.tools, f"{p}.tools"))
        _set(self, "agents_per_actor", int_value(self.agents_per_actor, f"{p}.agents_per_actor",
                                                 minimum=1))
        _set(self, "restart_lost_agents", bool_value(self.restart_lost_agents,
                                                     f"{p}.restart_lost_agents"))
        _set(self, "max_agent_restarts", int_value(self.max_agent_restarts,
                                                   f"{p}.max_agent_restarts", minimum=0))
        _set(self, "dimensionless_constants_only", bool_value(
            self.dimensionless_constants_only, f"{p}.dimensionless_constants_only"))
        _set(self, "metrics", metric_names(self.metrics, f"{p}.metrics"))
        _set(self, "rank_by", rank_by_value(self.rank_by, f"{p}.rank_by", self.metrics))
        _set(self, "tool_experience", experience_mode(self.tool_experience,
                                                      f"{p}.tool_experience"))
        for name in ("run_python_cpu_s", "run_python_memory_mb", "run_python_file_mb",
                     "run_python_output_chars"):
            _set(self, name, int_value(getattr(self, name), f"{p}.{name}", minimum=1))
        _set(self, "run_python_wall_s", float_value(self.run_python_wall_s,
                                                    f"{p}.run_python_wall_s", positive=True))


@dataclasses.dataclass(frozen=True)
class RayConfig(_Group):
    """``ray``: how to reach Ray; ``address`` ``None`` (or ``local``) starts a new local cluster."""

    GROUP: ClassVar[str] = "ray"

    #: ``None``: start a new local cluster (shut down at the end); ``auto``: join the cluster
    #: this node belongs to; ``HOST:PORT``: a cluster's GCS; ``ray://HOST:10001``: Ray Client.
    address: str | None = None
    #: ``RAY_AUTH_MODE``, always set explicitly: ``disabled`` suits the single-machine cluster
    #: sr-dist starts itself; ``token`` joins a cluster that requires it (docs/running.md).
    auth_mode: str = "disabled"
    #: CPUs of a new local cluster (``None``: all of this machine's).
    num_cpus: int | None = None
    #: Ray's dashboard for a new local cluster (needs ``ray[default]``).
    include_dashboard: bool = False

    def __post_init__(self) -> None:
        p = self.GROUP
        address = str_value(self.address, f"{p}.address", optional=True)
        if address is not None and address not in ("auto", "local") and "://" not in address \
                and ":" not in address:
            raise SettingsError(f"{p}.address", "must be null, auto, HOST:PORT or "
                                                f"ray://HOST:PORT, got {address!r}")
        _set(self, "address", None if address == "local" else address)
        _set(self, "auth_mode", str_value(self.auth_mode, f"{p}.auth_mode", choices=AUTH_MODES))
        _set(self, "num_cpus", int_value(self.num_cpus, f"{p}.num_cpus", minimum=1,
                                         optional=True))
        _set(self, "include_dashboard", bool_value(self.include_dashboard,
                                                   f"{p}.include_dashboard"))

    @property
    def starts_cluster(self) -> bool:
        return self.address is None


@dataclasses.dataclass(frozen=True)
class ResultsConfig(_Group):
    """``results``: where the Parquet datasets go, how often rows are flushed, and how the
    flush files are rolled and compacted (docs/results.md)."""

    GROUP: ClassVar[str] = "results"

    #: Where ``candidates/`` and ``runs/`` are written (a local path or shared storage).
    path: str = "results"
    #: Seconds between flushes of buffered candidate rows (each flush commits one file).
    flush_s: float = 2.0
    #: Flush files that are merged into one rolled file (0: never roll).
    roll_files: int = 32
    #: Age in seconds of the oldest flush file that triggers a roll (null: count only).
    roll_s: float | None = 120.0
    #: Largest file rolling and compaction write, in MiB.
    target_file_mb: float = 256.0
    #: Compact the run's files into as few as possible when the run ends.
    compact: bool = True

    def __post_init__(self) -> None:
        path = str_value(self.path, "results.path")
        if "://" in path:
            raise SettingsError("results.path", f"must be a local or mounted directory, got "
                                f"{path!r} (object-store URIs are not supported; see "
                                "cluster/README.md)")
        _set(self, "path", path)
        _set(self, "flush_s", float_value(self.flush_s, "results.flush_s", positive=True))
        roll_files = int_value(self.roll_files, "results.roll_files", minimum=0)
        if roll_files == 1:
            raise SettingsError("results.roll_files", "must be 0 (never roll) or at least 2, "
                                "got 1 (rolling one file into one does nothing)")
        _set(self, "roll_files", roll_files)
        _set(self, "roll_s", float_value(self.roll_s, "results.roll_s", positive=True,
                                         optional=True))
        _set(self, "target_file_mb", float_value(self.target_file_mb, "results.target_file_mb",
                                                 positive=True))
        _set(self, "compact", bool_value(self.compact, "results.compact"))


# --- Hydra's ConfigStore -----------------------------------------------------------------------

#: (group, option name, schema): the options the ConfigStore holds; ``conf/config.yaml`` picks
#: them in its defaults list.
GROUP_OPTIONS: tuple[tuple[str, str, type[_Group]], ...] = (
    ("dataset", "feynman", DatasetConfig),
    ("evaluator", "cpu", EvaluatorConfig),
    ("search", "default", SearchConfig),
    ("ray", "local", RayConfig),
    ("results", "local", ResultsConfig),
)


def _node_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def default_node(schema: type[_Group]) -> dict[str, Any]:
    """A group's defaults as a plain mapping, as the ConfigStore holds them (see the module
    docstring for why untyped); a field with an environment variable becomes ``oc.env``."""
    node: dict[str, Any] = {}
    for field in dataclasses.fields(schema):  # type: ignore[arg-type]
        if not field.metadata.get(KEY, True):
            continue
        value = _node_value(field.default)
        if field.metadata.get(ENV):
            fallback = "null" if value is None else f"'{value}'"
            value = f"${{oc.env:{field.metadata[ENV]},{fallback}}}"
        node[field.name] = value
    return node


def register() -> None:
    """Store every group option's defaults in Hydra's ConfigStore (idempotent); importing
    ``sr_dist.conf`` calls it, so every compose of ``sr_dist.conf`` sees them."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for group, name, schema in GROUP_OPTIONS:
        store.store(group=group, name=name, node=default_node(schema), provider="sr_dist")
