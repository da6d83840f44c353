"""``Evaluator``: the stateful shell around the compiled buckets (cache, buckets, stats).

The host side parses, canonicalises and lowers formulas, groups them into shape buckets
(constant count x program size class), splits buckets into fixed-capacity batches, runs each
batch through one compiled executable and turns the device outputs into :class:`FitResult`s.
Every formula is fitted on its *canonical* tree (so results are shared by all spellings of the
same structure) and its constants are mapped back to the names the caller used.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    NamedTuple,
    Protocol,
    TypeVar,
)

import numpy as np

from sr_dist.candidate import RANK_METRICS
from sr_dist.evaluator.data_starts import DataHints, data_hints, hinted_restarts
from sr_dist.evaluator.devices import BackgroundQueue, DeviceRing, cpu_devices
from sr_dist.evaluator.losses import QUADRATIC_LOSSES, LossSpec, resolve_loss
from sr_dist.evaluator.metrics import check_metrics, extra_metrics
from sr_dist.evaluator.phases import wrap_phases
from sr_dist.evaluator.prepared import PreparedFormula
from sr_dist.evaluator.program import (
    LoweringError,
    Program,
    lower,
    lower_cached,
    pack_programs,
)
from sr_dist.evaluator.refine import needs_refit, refit_float64, split_sse
from sr_dist.evaluator.results import FitResult, Status, failed, nmse
from sr_dist.evaluator.starts import StartError, check_starts, start_vector
from sr_dist.formula import Formula, FormulaError, parse_formula

if TYPE_CHECKING:  # typing only: JAX is imported when an Evaluator is built
    import jax


class DatasetLike(Protocol):
    """What the evaluator needs from :class:`sr_dist.data.Dataset` (read-only)."""

    @property
    def feature_names(self) -> Sequence[str]: ...
    @property
    def X_train(self) -> np.ndarray: ...
    @property
    def y_train(self) -> np.ndarray: ...
    @property
    def X_val(self) -> np.ndarray: ...
    @property
    def y_val(self) -> np.ndarray: ...
    @property
    def X_test(self) -> np.ndarray: ...
    @property
    def y_test(self) -> np.ndarray: ...
    @property
    def content_hash(self) -> str: ...


@dataclass(frozen=True)
class SizeClass:
    """Register/program capacity of a bucket family."""

    name: str
    n_instr: int
    n_lits: int
    n_temps: int


#: Program size classes, smallest first; a formula goes to the first one it fits.
SIZE_CLASSES: tuple[SizeClass, ...] = (
    SizeClass("small", n_instr=48, n_lits=10, n_temps=10),
    SizeClass("large", n_instr=256, n_lits=64, n_temps=64),
)


@dataclass(frozen=True)
class Bucket:
    """A shape bucket: constant capacity x program size class.

    Formulas of one bucket share a compiled executable, so batches are grouped by this value
    (hashable) rather than by loose ints and names.
    """

    n_consts: int
    size: SizeClass

    @property
    def name(self) -> str:
        """The bucket's label in :meth:`Evaluator.stats` (``k4-small``)."""
        return f"k{self.n_consts}-{self.size.name}"


class BucketOverflow(Exception):
    """A program exceeds the largest bucket (too many constants, instructions or registers)."""


def bucket_for(prog: Program, const_buckets: Sequence[int]) -> Bucket:
    """The smallest bucket ``prog`` fits: the first constant capacity that holds its constants
    (constant-free programs get capacity 0) and the first size class that holds its program.

    Raises :class:`BucketOverflow` naming the limits when none does."""
    k = prog.n_consts
    if k == 0:
        kb = 0
    else:
        fits = [b for b in const_buckets if b >= k]
        if not fits:
            raise BucketOverflow(f"formula has {k} free constants; the largest bucket holds "
                                 f"{const_buckets[-1]}")
        kb = fits[0]
    for sc in SIZE_CLASSES:
        if (prog.n_instructions <= sc.n_instr and len(prog.literals) <= sc.n_lits
                and prog.n_temps <= sc.n_temps):
            return Bucket(kb, sc)
    big = SIZE_CLASSES[-1]
    raise BucketOverflow(
        f"program too large for the largest bucket ({prog.n_instructions} instructions, "
        f"{len(prog.literals)} literals, {prog.n_temps} registers; limits {big.n_instr}, "
        f"{big.n_lits}, {big.n_temps})")


@dataclass(frozen=True)
class EvaluatorOptions:
    """Options of :class:`Evaluator` (all keyword arguments of its constructor).

    Everything that can change a fitted value is part of the result-cache key (see
    :meth:`fit_key`); ``device``, ``cache_size``, ``batch_size``, ``host_devices``,
    ``spread_local`` and
    ``compilation_cache_dir`` are not.
    """

    restarts: int = 4
    max_iters: int = 40
    polish_iters: int = 4
    #: A multi-start fit runs on at most this many training rows (a fixed seeded subset), then
    #: ``polish_iters`` LM passes on all of them; its cost is proportional to the rows. 512
    #: fitted as exactly as 4096 on the fit-quality skeletons and gave 1.3 times the distinct
    #: candidates a second at 1,000 rows (docs/evaluator.md, "Large n").
    subsample: int = 512
    chunk_rows: int = 1024
    dtype: str = "float32"
    device: str = "cpu"
    layout: str = "auto"
    seed: int = 0
    cache_size: int = 100_000
    batch_size: int = 64
    ftol: float = 1e-6
    xtol: float = 1e-7
    patience: int = 3
    init_spread: float = 1.0
    const_buckets: tuple[int, ...] = (2, 4, 8, 16)
    compilation_cache_dir: str | None = None
    #: ``"lm"``: Levenberg-Marquardt with ``restarts`` (the default). ``"llmsr"``: LLM-SR /
    #: SR-Scientist compatibility: BFGS on the MSE from all ones, one start, all train rows
    #: (``restarts``, ``subsample`` and ``polish_iters`` are ignored), so scores compare with
    #: published ones.
    method: str = "lm"
    #: Variable projection (``method="lm"`` only): constants that enter linearly are solved by
    #: linear least squares inside the fit and LM iterates only on the others (lm.py).
    variable_projection: bool = True
    #: The fitting loss (docs/objectives.md): ``mse`` (least squares, the default), ``mae``,
    #: ``huber``, ``logcosh``, ``relative`` (squared relative error), or ``module:function``
    #: naming a trusted JAX function ``fn(y_pred, y_true) -> per-row losses``.
    loss: str = "mse"
    #: Huber's threshold, in the target's units (``loss="huber"`` only).
    huber_delta: float = 1.0
    #: Extra per-candidate metrics (``mae``, ``r2``, ``aic``, ``bic``, ``pearson_r``,
    #: ``spearman_r``), computed after the fit and returned in ``FitResult.metrics``.
    metrics: tuple[str, ...] = ()
    #: The metric results rank by (``search.rank_by``), stamped on every ``FitResult`` so every
    #: consumer (archive, best-so-far, listings) ranks the same way; it changes no fitted value.
    rank_by: str = "val_nmse"
    #: Refit near-exact fits (training NMSE below ``refine.REFINE_BELOW``) in float64 on the
    #: host and report their metrics in float64 (``method="lm"``, unweighted ``mse`` only;
    #: refine.py says why). At most ``refine_per_call`` refits per ``fit_many`` call, best
    #: first; near-exact formulas without constants only get float64 metrics, all of them.
    refine_float64: bool = True
    refine_per_call: int = 8
    #: A formula given a start (``fit_many(..., starts=)``: an offspring inheriting its
    #: parent's constants) gets a local search instead of the multi-start fit: restart 0 from
    #: the start, ``local_restarts - 1`` of the usual random restarts beside it, and at most
    #: ``local_iters`` LM passes (starts.py says why). ``method="lm"`` only.
    local_restarts: int = 1
    local_iters: int = 10
    #: A local search fits on at most this many of the fitting rows (a fixed random subset;
    #: 0: all of them). Its cost is proportional to the rows, and a start inherited from a
    #: fitted parent needs few rows to move; every split's metrics are still computed on all
    #: rows, and near-exact fits are still refined on all training rows (``refine_float64``).
    local_subsample: int = 256
    #: Restarts 1, 2, ... start a frequency inside ``sin``/``cos`` at the target's periodogram
    #: peaks along its variable, a shift inside a function at the variable's quantiles and a
    #: rate inside one at the inverse of its argument's typical size (data_starts.py); restart
    #: 0, the last restart (of three or more) and every other constant are unchanged.
    data_starts: bool = True
    #: CPU devices the batches are spread over (``device="cpu"`` only; devices.py): JAX runs
    #: one device's executions one at a time, so with 2 a batch is fitted while another is,
    #: on a second core. It takes effect where JAX has not started yet (an evaluator actor);
    #: elsewhere the devices JAX already has are used. The fitted values are the same.
    host_devices: int = 1
    #: With ``host_devices`` > 1: ``True`` spreads every batch; ``False`` keeps local searches
    #: on device 0, so the other devices take only full fits (multi-start, several times the
    #: cost), which fill a run's first seconds while its agents wait.
    spread_local: bool = True

    def fit_key(self) -> tuple[Any, ...]:
        return (self.method, self.variable_projection, self.restarts, self.max_iters,
                self.polish_iters, self.subsample, self.ftol,
                self.xtol, self.patience, self.dtype, self.seed, self.init_spread,
                self.chunk_rows, self.layout, self.const_buckets, self.loss, self.huber_delta,
                self.metrics, self.refine_float64, self.refine_per_call, self.local_restarts,
                self.local_iters, self.data_starts, self.local_subsample)


def _validate(opts: EvaluatorOptions) -> None:
    if opts.restarts < 1:
        raise ValueError("restarts must be >= 1")
    if opts.max_iters < 1:
        raise ValueError("max_iters must be >= 1")
    if opts.local_restarts < 1 or opts.local_iters < 1:
        raise ValueError("local_restarts and local_iters must be >= 1")
    if opts.local_subsample != 0 and opts.local_subsample < 64:
        raise ValueError("local_subsample must be 0 (all rows) or >= 64 rows")
    if opts.polish_iters < 0:
        raise ValueError("polish_iters must be >= 0")
    if opts.subsample < 64:
        raise ValueError("subsample must be >= 64 rows")
    if opts.chunk_rows < 8:
        raise ValueError("chunk_rows must be >= 8")
    if opts.dtype not in ("float32", "float64"):
        raise ValueError("dtype must be 'float32' or 'float64'")
    if opts.device not in ("cpu", "gpu", "cuda", "tpu"):
        raise ValueError("device must be 'cpu' or 'gpu'")
    if opts.layout not in ("auto", "map", "vmap"):
        raise ValueError("layout must be 'auto', 'map' or 'vmap'")
    if opts.method not in ("lm", "llmsr"):
        raise ValueError("method must be 'lm' or 'llmsr'")
    if opts.batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    if opts.host_devices < 1:
        raise ValueError(f"host_devices must be >= 1, got {opts.host_devices}")
    if not opts.const_buckets or sorted(opts.const_buckets) != list(opts.const_buckets):
        raise ValueError("const_buckets must be a non-empty increasing tuple")
    if opts.const_buckets[0] < 1:  # constant-free programs need no bucket of their own
        raise ValueError(f"const_buckets must be positive, got {opts.const_buckets}")
    check_metrics(opts.metrics)
    if opts.rank_by not in RANK_METRICS:
        raise ValueError(f"rank_by must be one of {', '.join(RANK_METRICS)}, got "
                         f"{opts.rank_by!r}")
    if not isinstance(opts.variable_projection, bool):
        raise ValueError("variable_projection must be true or false, got "
                         f"{opts.variable_projection!r}")


def _split_weights(dataset: Any) -> _PerSplit[np.ndarray] | None:
    """The dataset's sample weights per split (``w_train``/``w_val``/``w_test``), or ``None``
    when it has none or all are 1 (then the fit is exactly the unweighted one)."""
    parts = [getattr(dataset, name, None) for name in ("w_train", "w_val", "w_test")]
    if any(p is None for p in parts):
        return None
    arrays = [np.asarray(p, dtype=np.float64).ravel() for p in parts]
    if all(bool(np.all(a == 1.0)) for a in arrays):
        return None
    for a in arrays:
        if not (np.all(np.isfinite(a)) and np.all(a >= 0)):
            raise ValueError("sample weights must be finite and non-negative; replace NaN, "
                             "inf and negative weights (0 leaves a row out)")
    if not float(np.sum(arrays[0])) > 0:
        raise ValueError("the training rows' sample weights are all zero, so nothing can be "
                         "fitted: give some training rows a positive weight, or split the rows "
                         "differently (dataset.split, dataset.seed, dataset.split_kind)")
    return _PerSplit(arrays[0], arrays[1], arrays[2])


def _weighted_var(y: np.ndarray, w: np.ndarray) -> float:
    """Weighted population variance (NaN for an empty or weightless split)."""
    total = float(np.sum(w))
    if len(y) == 0 or not total > 0:
        return math.nan
    mean = float(np.sum(w * y)) / total
    return float(np.sum(w * (y - mean) ** 2)) / total


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


class _Chunks(NamedTuple):
    """Rows cut into fixed-size chunks (the kernels' data layout)."""

    X: np.ndarray  # (N, F, C) features
    y: np.ndarray  # (N, C) targets
    valid: np.ndarray  # (N, C) True on real rows, False on padding


def _chunks(X: np.ndarray, y: np.ndarray, chunk: int, dtype: np.dtype[Any]) -> _Chunks:
    """(n, F) rows -> (N, F, C) chunks, (N, C) targets and (N, C) row-valid mask."""
    n, f = X.shape
    n_chunks = max(1, -(-n // chunk))
    pad = n_chunks * chunk - n
    Xp = np.concatenate([np.asarray(X, dtype=dtype), np.zeros((pad, f), dtype)], axis=0)
    yp = np.concatenate([np.asarray(y, dtype=dtype), np.zeros(pad, dtype)])
    w = np.concatenate([np.ones(n, bool), np.zeros(pad, bool)])
    Xc = np.ascontiguousarray(Xp.reshape(n_chunks, chunk, f).transpose(0, 2, 1))
    return _Chunks(Xc, yp.reshape(n_chunks, chunk), w.reshape(n_chunks, chunk))


#: The most formulas a compiled fit call holds on the CPU (``batch_size`` still caps it): a CPU
#: fit runs all its lanes' LM bookkeeping in lockstep (kernels.py), so a batch of 5 padded to
#: 64 would pay for 64, while a group of 40 split into calls of 16 pays about 1 ms a call.
#: Measured on a recorded stream of a default search (bench/evaluator_stream.py): 16 and 8
#: both 7% faster than 64 with a second executable of 8 for small batches.
CPU_CAPACITY = 16


def batch_capacity(batch_size: int, mode: str) -> int:
    """The capacity fit batches are cut to and padded to: ``batch_size``, on the CPU
    (``mode == "map"``) at most :data:`CPU_CAPACITY`."""
    return min(batch_size, CPU_CAPACITY) if mode == "map" else batch_size


def initial_constants(key: str, seed: int, restarts: int, k: int, spread: float) -> np.ndarray:
    """Deterministic restart points from (canonical key, seed): restart 0 is all ones (what
    LLM-SR starts from), the others log-uniform magnitudes in 10^[-spread, spread] with random
    signs. Never depends on batch position, so a batch fit equals a lone fit."""
    digest = hashlib.blake2b(f"{seed}\x00{key}".encode(), digest_size=8).digest()
    rng = np.random.default_rng(int.from_bytes(digest, "little"))
    out = np.ones((restarts, k), dtype=np.float64)
    if restarts > 1 and k:
        mags = 10.0 ** rng.uniform(-spread, spread, size=(restarts - 1, k))
        signs = np.where(rng.random((restarts - 1, k)) < 0.5, -1.0, 1.0)
        out[1:] = mags * signs
    return out


@dataclass
class _Stats:
    compiles: int = 0
    compile_s: float = 0.0
    fits: int = 0
    evaluations: int = 0
    cache_hits: int = 0
    invalid: int = 0
    errors: int = 0
    nonfinite: int = 0
    batches: int = 0
    batch_formulas: int = 0
    fit_s: float = 0.0
    submitted: int = 0
    refined: int = 0
    #: Fits that were local searches from a given start (a subset of ``fits``).
    local_fits: int = 0
    buckets: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Job:
    """One unique canonical structure to fit."""

    canonical: str
    program: Program
    k: int
    complexity: int
    bucket: Bucket
    #: The given start in canonical order (a local search), or None (the multi-start fit).
    start: tuple[float, ...] | None = None
    #: The formula, whose canonical tree (constants ``c0..c{k-1}``) ``data_starts`` reads.
    formula: Formula | PreparedFormula | None = None


_T = TypeVar("_T")

#: Formula texts whose parse an ``Evaluator`` keeps (least recently used dropped first). A run
#: sees the same texts again and again (agents repeat themselves and each other); parsing one
#: costs far more than serving its fit from the result cache. About 2.5 KiB each.
PARSE_CACHE_SIZE = 8192


class _PerSplit(NamedTuple, Generic[_T]):
    """One value per dataset split, in the kernels' split order (train, validation, test)."""

    train: _T
    val: _T
    test: _T


class _CacheKey(NamedTuple):
    """Result-cache key: a fitted structure is reusable only on the same data and options."""

    dataset: str  # the dataset's content hash
    canonical: str
    fit_key: tuple[Any, ...]  # EvaluatorOptions.fit_key()


class _Metrics(NamedTuple):
    """Fit quality of one structure (``None`` where not computed)."""

    train_mse: float | None
    train_nmse: float | None
    val_nmse: float | None
    test_nmse: float | None
    r2: float | None
    train_loss: float | None = None
    val_loss: float | None = None
    #: The requested extra metrics (``EvaluatorOptions.metrics``), name -> value.
    extra: tuple[tuple[str, float | None], ...] = ()


_NO_METRICS = _Metrics(None, None, None, None, None)


class _Entry(NamedTuple):
    """A fitted canonical structure as the result cache keeps it: constants by canonical
    position (``c0, c1, ...``), so every spelling of the structure can be served from it."""

    status: Status
    error: str | None
    constants: tuple[float, ...]
    metrics: _Metrics
    fit_s: float
    iterations: int
    #: Fitted by a local search from a given start (a later request without a start refits it).
    local: bool = False


class _HostFit(NamedTuple):
    """A batch's fit outputs read back to the host (the fields of ``kernels.FitOutput``)."""

    consts: np.ndarray  # (B, K)
    fit_sse: np.ndarray  # (B,)
    iters: np.ndarray  # (B,)
    split_sse: np.ndarray  # (B, 3)
    split_bad: np.ndarray  # (B, 3)
    split_loss: np.ndarray  # (B, 3)


class _Launched(NamedTuple):
    """A dispatched batch whose device outputs have not been read yet."""

    jobs: list[_Job]
    bucket: Bucket
    local: bool
    pending: Any  # kernels.FitOutput of device arrays
    device: int = 0  # its index in the evaluator's DeviceRing


class _DeviceData(NamedTuple):
    """The fitting data on one device (see ``Evaluator._prepare_data``)."""

    fit: tuple[Any, ...]
    polish: tuple[Any, ...] | None
    every: tuple[Any, ...]
    floors: Any
    local: tuple[tuple[Any, ...], Any] | None


@dataclass
class PendingFits:
    """A ``fit_many`` call begun (its batches dispatched) but not finished (``Evaluator.begin``
    and ``Evaluator.finish``): what ``finish`` needs to read the fits back and answer."""

    results: list[Any]  # FitResult | None per item (failures decided at the start)
    parsed: list[Any]  # Formula | PreparedFormula | None per item
    jobs: dict[str, _Job]
    launched: list[_Launched]
    failed: dict[str, _Entry]  # batches that failed to dispatch
    started_at: float
    compile_s: float
    #: The results, once finished (a later call's ``finish`` finishes the older calls first).
    answer: list[Any] | None = None
    #: What stopped its finishing (reading back, refining or caching raised): ``finish``
    #: raises it again for this call, and the calls begun after it still finish.
    error: BaseException | None = None


class _PredictItem(NamedTuple):
    """One formula of an ``evaluate_many`` call, lowered, with its constant values."""

    position: int  # in the caller's list
    program: Program
    constants: np.ndarray


class Evaluator:
    """Batched constant fitting of many formulas against one dataset.

    ``fit_many(formulas)`` accepts strings or :class:`Formula`s and returns one
    :class:`FitResult` per input, in order; it never raises for a bad entry. See
    :class:`EvaluatorOptions` for the options.
    """

    def __init__(self, dataset: DatasetLike, **options: Any) -> None:
        if "metrics" in options and options["metrics"] is not None:
            options["metrics"] = tuple(options["metrics"])
        self.options = EvaluatorOptions(**options)
        _validate(self.options)
        opts = self.options
        weights = _split_weights(dataset)
        self._loss: LossSpec = resolve_loss(opts.loss, opts.huber_delta,
                                            weighted=weights is not None)
        self._weights = weights
        if opts.compilation_cache_dir or os.environ.get("SR_DIST_JAX_CACHE_DIR"):
            enable_persistent_cache(opts.compilation_cache_dir
                                    or os.environ["SR_DIST_JAX_CACHE_DIR"])
        if opts.dtype == "float64":
            import jax

            # Process-global: every array the evaluator creates has an explicit dtype, so
            # float32 evaluators in the same process are unaffected.
            # (jax.config.update is unannotated in jax 0.10, hence the ignore.)
            jax.config.update("jax_enable_x64", True)  # type: ignore[no-untyped-call]
        import jax

        platform = {"gpu": "gpu", "cuda": "gpu", "cpu": "cpu", "tpu": "tpu"}[opts.device]
        try:
            devices = (cpu_devices(opts.host_devices) if platform == "cpu"
                       else jax.devices(platform)[:1])
        except RuntimeError as exc:
            raise ValueError(f"device {opts.device!r} is not available to JAX: {exc}") from exc
        self._device = devices[0]
        self._ring = DeviceRing(devices)
        self._mode = opts.layout if opts.layout != "auto" else (
            "map" if platform == "cpu" else "vmap")
        self.dataset = dataset
        self.feature_names = tuple(dataset.feature_names)
        self._np_dtype = np.dtype(opts.dtype)
        self._lock = threading.Lock()
        self._cache: OrderedDict[_CacheKey, _Entry] = OrderedDict()
        self._parsed: OrderedDict[str, Formula] = OrderedDict()
        self._parse_lock = threading.Lock()
        self._stats = _Stats()
        #: Calls begun and not yet finished, oldest first: a later call serves the structures
        #: they fit from the cache once they are finished, as if it had come after them.
        self._unfinished: deque[PendingFits] = deque()
        self._last_read = 0.0  # when the last batch was read back (busy time is not counted twice)
        self._hints: DataHints | None = None
        #: Fit executables by (FitKey, device index, local rows): see ``_launch``.
        self._executables: dict[tuple[Any, int, bool], Any] = {}
        #: The other devices' compiles: queued, and the seconds of each one done.
        self._compiling: set[tuple[Any, int, bool]] = set()
        self._device_compiles: list[float] = []
        self._background = BackgroundQueue("evaluator-device-compiles")
        self._prepare_data()
        self._placed = self._place_data()

    def _data_hints(self) -> DataHints:
        """The training rows' :class:`DataHints`, computed on first use (``data_starts``)."""
        if self._hints is None:
            ds = self.dataset
            X = np.asarray(ds.X_train, dtype=np.float64).reshape(len(ds.y_train), -1)
            self._hints = data_hints(X, np.asarray(ds.y_train, dtype=np.float64).ravel(),
                                     self.feature_names)
        return self._hints

    # ------------------------------------------------------------------ data
    def _prepare_data(self) -> None:
        ds, opts, dt = self.dataset, self.options, self._np_dtype
        Xtr = np.asarray(ds.X_train, dtype=np.float64).reshape(len(ds.y_train), -1)
        ytr = np.asarray(ds.y_train, dtype=np.float64).ravel()
        Xva = np.asarray(ds.X_val, dtype=np.float64).reshape(len(ds.y_val), -1)
        yva = np.asarray(ds.y_val, dtype=np.float64).ravel()
        Xte = np.asarray(ds.X_test, dtype=np.float64).reshape(len(ds.y_test), -1)
        yte = np.asarray(ds.y_test, dtype=np.float64).ravel()
        if len(ytr) == 0:
            raise ValueError("the dataset has no training rows")
        f = len(self.feature_names)
        for X in (Xtr, Xva, Xte):
            if X.shape[1] != f and X.shape[0]:
                raise ValueError(f"X has {X.shape[1]} columns, feature_names has {f}")
        self._n_train = len(ytr)
        self._var = _PerSplit(float(np.var(ytr)), float(np.var(yva)) if len(yva) else math.nan,
                              float(np.var(yte)) if len(yte) else math.nan)
        self._sizes = _PerSplit(len(ytr), len(yva), len(yte))
        wts = self._weights
        self._wsum: _PerSplit[float] = _PerSplit(*(float(n) for n in self._sizes))
        if wts is not None:
            self._wsum = _PerSplit(*(float(np.sum(w)) for w in wts))
            self._var = _PerSplit(*(_weighted_var(yy, w) for yy, w in
                                    zip((ytr, yva, yte), wts)))
        if self._loss.name == "relative" and np.any(ytr == 0):
            raise ValueError("loss 'relative' divides by the target, but "
                             f"{int(np.sum(ytr == 0))} training targets are 0; choose another "
                             "evaluator.loss or drop those rows")
        w_train = wts.train if wts is not None else np.ones(len(ytr))
        if self._n_train > opts.subsample and opts.method == "lm":
            rng = np.random.default_rng(opts.seed)
            rows = np.sort(rng.choice(self._n_train, opts.subsample, replace=False))
            fit_X, fit_y, fit_w = Xtr[rows], ytr[rows], w_train[rows]
            polish: tuple[np.ndarray, np.ndarray] | None = (Xtr, ytr)
        else:
            fit_X, fit_y, fit_w = Xtr, ytr, w_train
            polish = None
        self._chunk = min(opts.chunk_rows, _round_up(len(fit_y), 64))
        eps = float(np.finfo(dt).eps)

        def floor(yy: np.ndarray) -> float:
            return (16.0 * eps) ** 2 * float(np.dot(yy, yy))

        put = self._put
        fit = _chunks(fit_X, fit_y, self._chunk, dt)
        self._n_fit_rows = int(fit.valid.sum())
        # Plain tuples on the device: the kernels take (X, y, valid) positionally.
        self._fit_data: tuple[jax.Array, jax.Array, jax.Array] = (
            put(fit.X), put(fit.y), put(fit.valid))
        self._polish_data: tuple[jax.Array, jax.Array, jax.Array] | None = None
        if polish is not None and opts.polish_iters > 0:
            pol = _chunks(*polish, self._chunk, dt)
            self._polish_data = (put(pol.X), put(pol.y), put(pol.valid))
        X_all = np.concatenate([Xtr, Xva.reshape(-1, f), Xte.reshape(-1, f)], axis=0)
        y_all = np.concatenate([ytr, yva, yte])
        split = np.concatenate([np.full(len(ytr), 1), np.full(len(yva), 2),
                                np.full(len(yte), 3)]).astype(np.int32)
        every = _chunks(X_all, y_all, self._chunk, dt)
        sc = np.zeros(every.valid.shape, np.int32)
        sc[every.valid] = split
        self._all_data: tuple[jax.Array, ...] = (
            put(every.X), put(every.y), put(sc))
        self._floors = put(np.array(
            [floor(fit_y), floor(ytr) if polish is not None else 0.0], dtype=dt))
        # The local searches' rows on the CPU: a fixed random subset of the fitting rows (plain
        # mse only; a weighted or robust loss keeps all of them; a GPU's rows run in parallel).
        self._local_fit: tuple[tuple[jax.Array, jax.Array, jax.Array], jax.Array] | None = None
        self._n_local_rows = self._n_fit_rows
        m = opts.local_subsample
        if 0 < m < len(fit_y) and opts.method == "lm" and self._loss.plain and self._mode == "map":
            rows = np.sort(np.random.default_rng([opts.seed, 1]).choice(len(fit_y), m,
                                                                        replace=False))
            loc = _chunks(fit_X[rows], fit_y[rows], min(opts.chunk_rows, _round_up(m, 64)), dt)
            self._local_fit = ((put(loc.X), put(loc.y), put(loc.valid)),
                               put(np.array([floor(fit_y[rows]), 0.0], dtype=dt)))
            self._n_local_rows = m
        if not self._loss.plain:
            self._objective_data(fit, polish, every, (fit_w, w_train, wts), dt)

    def _objective_data(self, fit: _Chunks, polish: tuple[np.ndarray, np.ndarray] | None,
                        every: _Chunks, weights: tuple[Any, ...], dt: np.dtype[Any]) -> None:
        """The device data of a loss other than plain mse: the valid-row masks become float
        sample weights (0 on padding), the split table gains a weight row, and the floors
        hold no rounding floor (a robust loss has no SSE floor to stop at) but the scale
        ``tau`` of the mae/user-loss IRLS weights (1e-6 of the target's spread)."""
        put = self._put
        fit_w, w_train, wts = weights

        def spread(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
            out = np.zeros(valid.shape, dtype=dt)
            out[valid] = values
            return out

        self._fit_data = (self._fit_data[0], self._fit_data[1], put(spread(fit_w, fit.valid)))
        if self._polish_data is not None and polish is not None:
            pol = _chunks(*polish, self._chunk, dt)
            self._polish_data = (self._polish_data[0], self._polish_data[1],
                                 put(spread(w_train, pol.valid)))
        w_all = (np.concatenate(list(wts)) if wts is not None
                 else np.ones(int(every.valid.sum())))
        self._all_data = (*self._all_data, put(spread(w_all, every.valid)))
        y_train = np.asarray(self.dataset.y_train, dtype=np.float64).ravel()
        scale = float(np.std(y_train)) or 1.0
        self._floors = put(np.array([0.0, 0.0, 1e-6 * scale], dtype=dt))

    def _place_data(self) -> list[_DeviceData]:
        """The fitting data on every device of the ring (the first holds it already)."""
        import jax

        here = _DeviceData(self._fit_data, self._polish_data, self._all_data, self._floors,
                           self._local_fit)
        return [here] + [jax.device_put(here, dev) for dev in self._ring.devices[1:]]

    def _put(self, a: Any) -> jax.Array:
        """Copy a host array to the evaluator's device."""
        import jax

        placed: jax.Array = jax.device_put(a, self._device)
        return placed

    # ------------------------------------------------------------------ public API
    def fit_many(self, formulas: Iterable[str | Formula | PreparedFormula],
                 starts: Sequence[Mapping[str, float] | None] | None = None) -> list[FitResult]:
        """Fit every formula's free constants on the train split; one result per input.

        ``starts`` (optional, one entry per formula): a mapping of the formula's constant names
        to starting values, or ``None``. A formula with a start gets a local search from it
        (``local_restarts``, ``local_iters``) instead of the multi-start fit; constants the
        start does not name start at 1. A structure already fitted is served from the cache
        either way, except that a request without a start refits one that was only searched
        locally. ``ValueError`` for a ``starts`` list of the wrong length; a start that does
        not suit its formula makes that formula ``invalid``."""
        return self.finish(self.begin(formulas, starts))

    def begin(self, formulas: Iterable[str | Formula | PreparedFormula],
              starts: Sequence[Mapping[str, float] | None] | None = None) -> PendingFits:
        """The first half of :meth:`fit_many`: parse, look up the cache and dispatch the fits
        (JAX runs them asynchronously); :meth:`finish` reads them back and answers.

        A caller that begins the next call before it finishes this one keeps the device busy
        while the host packs one call and answers the other. Calls are answered in the order
        they were begun (finishing one finishes the older ones first), and a structure that an
        unfinished call fits is not fitted again: it is served from the cache once that call is
        finished. So ``begin(a); begin(b); finish(b); finish(a)`` answers as ``fit_many(a);
        fit_many(b)`` does."""
        items = list(formulas)
        given = check_starts(starts, len(items))
        with self._lock:
            return self._begin(items, given)

    @staticmethod
    def wait(pending: PendingFits) -> None:
        """Block until the device is done with a begun call (no lock held: other calls can be
        begun meanwhile); errors are left for :meth:`finish` to report."""
        for item in pending.launched:
            try:
                for leaf in item.pending:
                    leaf.block_until_ready()
            except Exception:  # noqa: BLE001
                continue

    def finish(self, pending: PendingFits) -> list[FitResult]:
        """Read a begun call's fits back (waiting for the device), cache them and return one
        result per formula (older unfinished calls are finished first; a finished call
        returns its results again). ``ValueError`` for a call this evaluator did not begin.
        When finishing a call raises, that call's ``finish`` raises the error (later tries a
        ``RuntimeError`` caused by it), and the calls begun after it finish as usual."""
        with self._lock:
            if pending.error is not None:
                raise RuntimeError("this call's fits could not be read back (the cause says "
                                   "why); begin it again") from pending.error
            if pending.answer is None and not any(p is pending for p in self._unfinished):
                raise ValueError("finish() takes what this evaluator's begin() returned")
            while pending.answer is None:
                oldest = self._unfinished.popleft()
                try:
                    oldest.answer = self._finish(oldest)
                except Exception as exc:
                    oldest.error = exc
                    if oldest is pending:
                        raise
            return pending.answer

    def fit(self, formula: str | Formula | PreparedFormula) -> FitResult:
        """Fit one formula (a batch of one)."""
        return self.fit_many([formula])[0]

    def stats(self) -> dict[str, Any]:
        """Counters since construction: compiles, fits, cache hits, fits/s and batch figures."""
        s = self._stats
        return {
            "compiles": s.compiles,
            "compile_s": round(s.compile_s, 4),
            "fits": s.fits,
            "local_fits": s.local_fits,
            "cache_hits": s.cache_hits,
            "submitted": s.submitted,
            "invalid": s.invalid,
            "errors": s.errors,
            "nonfinite": s.nonfinite,
            "refined": s.refined,
            "batches": s.batches,
            "mean_batch_size": (s.batch_formulas / s.batches) if s.batches else 0.0,
            "fit_s": round(s.fit_s, 4),
            "fits_per_s": (s.fits / s.fit_s) if s.fit_s > 0 else 0.0,
            "evaluations": s.evaluations,
            "buckets": dict(s.buckets),
            "cache_entries": len(self._cache),
            "layout": self._mode,
            "device": str(self._device),
            "host_devices": len(self._ring.devices),
            "device_batches": list(self._ring.batches()),
            "device_compiles": len(self._device_compiles),
            "device_compile_s": round(sum(self._device_compiles), 4),
            "rows": {"train": self._sizes.train, "val": self._sizes.val,
                     "test": self._sizes.test, "fit": self._n_fit_rows,
                     "local": self._n_local_rows},
        }

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    def evaluate_many(
        self, formulas: Sequence[str | Formula | PreparedFormula],
        constants: Sequence[Mapping[str, float] | None] | None = None,
        X: np.ndarray | None = None,
    ) -> np.ndarray:
        """Value-only predictions, shape (len(formulas), n_rows), float64 on the host.

        ``constants[i]`` maps formula i's original constant names to values (missing names
        raise ``ValueError``); ``X`` defaults to the train split. Raises ``FormulaError`` for a
        formula that does not parse.
        """
        preds = self._evaluate(formulas, constants, X)
        return np.asarray(preds, dtype=np.float64)

    predict = evaluate_many

    # ------------------------------------------------------------------ internals
    def parse(self, item: str | Formula | PreparedFormula) -> Formula | PreparedFormula:
        """``item`` parsed against the dataset's variables, from the evaluator's parse cache
        (the Ray shell keys its micro-batches by canonical form with it, so a formula is parsed
        once per process, not once for the key and again for the fit); ``FormulaError`` for
        text that does not parse, or for a ``Formula`` (or a formula prepared by an agent:
        ``prepared.py``) over variables the dataset lacks."""
        if isinstance(item, PreparedFormula) and item.feature_names != self.feature_names:
            item = item.text  # prepared for other columns: its names may mean other things here
        if isinstance(item, (Formula, PreparedFormula)):
            unknown = [v for v in item.variables if v not in self.feature_names]
            if unknown:
                raise FormulaError(f"unknown variable(s) {unknown}; the dataset has "
                                   f"{list(self.feature_names)}")
            return item
        if not isinstance(item, str):
            raise FormulaError(f"a formula must be a string or Formula, got {type(item).__name__}")
        with self._parse_lock:
            known = self._parsed.get(item)
            if known is not None:
                self._parsed.move_to_end(item)
                return known
        parsed = parse_formula(item, variables=self.feature_names)  # raises for bad text: not kept
        with self._parse_lock:
            self._parsed[item] = parsed
            while len(self._parsed) > PARSE_CACHE_SIZE:
                self._parsed.popitem(last=False)
        return parsed

    def _bucket_for(self, prog: Program) -> Bucket:
        return bucket_for(prog, self.options.const_buckets)

    def _begin(self, items: list[Any],
               starts: Sequence[Mapping[str, Any] | None]) -> PendingFits:
        stats = self._stats
        stats.submitted += len(items)
        fit_key = self.options.fit_key()
        results: list[FitResult | None] = [None] * len(items)
        parsed: list[Formula | PreparedFormula | None] = [None] * len(items)
        jobs: dict[str, _Job] = {}
        local_ok = self.options.method == "lm"
        for i, item in enumerate(items):
            text = item.text if isinstance(item, (Formula, PreparedFormula)) else (
                item if isinstance(item, str) else repr(item))
            try:
                f = self.parse(item)
            except FormulaError as exc:
                results[i] = failed(text, "invalid", str(exc))
                stats.invalid += 1
                continue
            except Exception as exc:  # noqa: BLE001 - a bad entry must not take down the batch
                results[i] = failed(text, "error", f"{type(exc).__name__}: {exc}")
                stats.errors += 1
                continue
            start: tuple[float, ...] | None = None
            given = starts[i]
            if given is not None and local_ok:
                try:
                    start = tuple(start_vector(given, f.constants, f.canonical_constants))
                except StartError as exc:
                    results[i] = failed(text, "invalid", str(exc), f.canonical, f.complexity)
                    stats.invalid += 1
                    continue
            parsed[i] = f
            ckey = _CacheKey(self.dataset.content_hash, f.canonical, fit_key)
            known = self._cache.get(ckey)
            if known is not None and (start is not None or not known.local):
                continue
            if self._fitting(f.canonical, full=start is None):
                continue  # an unfinished call fits it: served from the cache at finish()
            pending = jobs.get(f.canonical)
            if pending is not None:
                if pending.start is not None and start is None:  # a full fit serves both
                    jobs[f.canonical] = replace(pending, start=None)
                continue
            try:
                if isinstance(f, PreparedFormula):
                    prog = f.program  # lowered by the agent that proposed it
                else:
                    consts = [f"c{j}" for j in range(len(f.canonical_constants))]
                    prog = lower(f.canonical_tree, self.feature_names, consts)
                bucket = self._bucket_for(prog)
            except LoweringError as exc:
                results[i] = failed(text, "invalid", str(exc), f.canonical, f.complexity)
                stats.invalid += 1
                parsed[i] = None
                continue
            except BucketOverflow as exc:
                results[i] = failed(text, "error", str(exc), f.canonical, f.complexity)
                stats.errors += 1
                parsed[i] = None
                continue
            except Exception as exc:  # noqa: BLE001
                results[i] = failed(text, "error", f"lowering failed: {type(exc).__name__}: "
                                    f"{exc}", f.canonical, f.complexity)
                stats.errors += 1
                parsed[i] = None
                continue
            jobs[f.canonical] = _Job(f.canonical, prog, len(f.canonical_constants), f.complexity,
                                     bucket, start, f)

        started = time.perf_counter()
        failed_out, launched, compile_s = self._launch_jobs(list(jobs.values()))
        begun = PendingFits(results, parsed, jobs, launched, failed_out, started, compile_s)
        self._unfinished.append(begun)
        return begun

    def _fitting(self, canonical: str, full: bool) -> bool:
        """Whether an unfinished call fits ``canonical`` in a way that serves this request (a
        full fit serves every request; a local search only requests with a start)."""
        return any(job is not None and not (full and self._is_local(job))
                   for job in (p.jobs.get(canonical) for p in self._unfinished))

    def _finish(self, pending: PendingFits) -> list[FitResult]:
        stats = self._stats
        fit_key = self.options.fit_key()
        results, parsed, jobs = pending.results, pending.parsed, pending.jobs
        fresh = self._read_jobs(pending)
        self._wrap_phases(fresh, jobs)
        self._refine(fresh, {f.canonical: f for f in parsed if f is not None and f.canonical in jobs})
        if self.options.metrics:
            self._add_extra_metrics(jobs, fresh)
        for canon, entry in fresh.items():
            if entry.status != "error":  # internal failures are retried next time, not cached
                self._cache[_CacheKey(self.dataset.content_hash, canon, fit_key)] = entry
        while len(self._cache) > self.options.cache_size:
            self._cache.popitem(last=False)

        served: set[str] = set()
        for i, pf in enumerate(parsed):
            if pf is None:
                continue
            f = pf
            ckey = _CacheKey(self.dataset.content_hash, f.canonical, fit_key)
            found = fresh.get(f.canonical)
            cached = found is None or f.canonical in served
            if found is None:
                found = self._cache.get(ckey)
                if found is None:  # evicted, or its fit in an earlier call failed
                    results[i] = failed(f.text, "error", "internal: result missing from cache",
                                        f.canonical, f.complexity)
                    stats.errors += 1
                    continue
                self._cache.move_to_end(ckey)
            if cached:
                stats.cache_hits += 1
            served.add(f.canonical)
            results[i] = self._result(f, found, cached)
        return [r for r in results if r is not None]

    def _wrap_phases(self, fresh: dict[str, _Entry], jobs: Mapping[str, _Job]) -> None:
        """Move fitted phases by whole turns into [-pi, pi] (phases.py); the metrics stand (the
        values are the same up to rounding, and a near-exact fit is refined from here)."""
        for canon, entry in fresh.items():
            job = jobs.get(canon)
            # Nothing moves unless a constant lies past a half turn: most fits stop here,
            # before the canonical tree is rebuilt and walked.
            if entry.status != "ok" or job is None or job.formula is None \
                    or ("sin" not in canon and "cos" not in canon) \
                    or not any(abs(v) > math.pi for v in entry.constants):
                continue
            wrapped = wrap_phases(job.formula.canonical_tree, [f"c{j}" for j in range(job.k)],
                                  entry.constants)
            if wrapped is not None:
                fresh[canon] = entry._replace(constants=wrapped)

    def _refine(self, fresh: dict[str, _Entry],
                formulas: Mapping[str, Formula | PreparedFormula]) -> None:
        """Refit the best near-exact fresh fits in float64 (refine.py), recompute near-exact
        constant-free ones' metrics in float64, and replace the entries that got better."""
        opts = self.options
        if not opts.refine_float64 or opts.method != "lm" or not self._loss.plain \
                or self._weights is not None or opts.loss != "mse":
            return
        todo = sorted(((e.metrics.train_nmse or 0.0, c) for c, e in fresh.items()
                       if e.status == "ok" and c in formulas
                       and needs_refit(e.metrics.train_nmse)))
        # Formulas without constants only get float64 metrics (one pass over the rows): they
        # take none of the refits' ``refine_per_call``.
        plain = [c for _, c in todo if len(fresh[c].constants) == 0]
        fitted = [c for _, c in todo if len(fresh[c].constants) > 0]
        ds = self.dataset
        splits = [(ds.X_train, ds.y_train), (ds.X_val, ds.y_val), (ds.X_test, ds.y_test)]
        for canon in plain + fitted[: opts.refine_per_call]:
            entry = fresh[canon]
            tree = formulas[canon].canonical_tree
            try:
                c = refit_float64(tree, self.feature_names, entry.constants, ds.X_train,
                                  ds.y_train)
                # No better constants: the batched fit's, with its metrics in float64.
                c = np.asarray(entry.constants, dtype=np.float64) if c is None else c
                sse, bad = split_sse(tree, self.feature_names, c, splits)
            except Exception:  # noqa: BLE001 - a failed refit keeps the batched fit
                continue
            better = self._entry(c, sse, bad, entry.fit_s, entry.iterations)._replace(
                local=entry.local)
            old, new = entry.metrics.train_nmse, better.metrics.train_nmse
            if better.status == "ok" and new is not None and old is not None and new < old:
                fresh[canon] = better
                self._stats.refined += 1

    def _result(self, f: Formula | PreparedFormula, entry: _Entry, cached: bool) -> FitResult:
        if entry.status == "error":
            self._stats.errors += 1
            return failed(f.text, "error", entry.error or "internal error", f.canonical,
                          f.complexity)
        by_name = {name: float(entry.constants[j])
                   for j, name in enumerate(f.canonical_constants)}
        constants = {name: by_name[name] for name in f.constants}  # the caller's order
        m = entry.metrics
        if entry.status == "nonfinite" and not cached:
            self._stats.nonfinite += 1
        return FitResult(
            expression=f.text, canonical=f.canonical, status=entry.status, error=entry.error,
            constants=constants, complexity=f.complexity, train_mse=m.train_mse,
            train_nmse=m.train_nmse, val_nmse=m.val_nmse, test_nmse=m.test_nmse, r2=m.r2,
            fit_s=entry.fit_s, cached=cached, iterations=entry.iterations,
            train_loss=m.train_loss, val_loss=m.val_loss, metrics=dict(m.extra),
            rank_by=self.options.rank_by, local=entry.local)

    @staticmethod
    def _is_local(job: _Job) -> bool:
        """A local search (a start and constants to search); else it joins the full fits."""
        return job.start is not None and job.bucket.n_consts > 0

    def _launch_jobs(self, jobs: list[_Job]
                     ) -> tuple[dict[str, _Entry], list[_Launched], float]:
        """Dispatch unique structures bucket by bucket, every batch before any is read: with
        JAX's asynchronous dispatch the host packs the next batch while the device runs the
        previous one. (Executions on one JAX CPU device run one at a time, so this overlaps
        host work, not two batches.) Returns the batches that failed to dispatch, the
        dispatched ones and the seconds spent compiling for them."""
        groups: dict[tuple[Bucket, bool], list[_Job]] = {}
        for job in jobs:
            groups.setdefault((job.bucket, self._is_local(job)), []).append(job)
        failed_out: dict[str, _Entry] = {}
        cap = batch_capacity(self.options.batch_size, self._mode)
        launched: list[_Launched] = []
        compile_s = 0.0
        for (bucket, local), group in groups.items():
            for start in range(0, len(group), cap):
                batch = group[start:start + cap]
                try:
                    pending, compiled, device = self._launch(batch, bucket, local)
                except Exception as exc:  # noqa: BLE001 - report, never raise out of fit_many
                    self._fail(failed_out, batch, exc)
                    continue
                launched.append(_Launched(batch, bucket, local, pending, device))
                compile_s += compiled
        return failed_out, launched, compile_s

    def _read_jobs(self, pending: PendingFits) -> dict[str, _Entry]:
        """Read a call's dispatched batches back; canonical -> cache entry. Its fit seconds
        are the wall time from its dispatch (or the previous read, whichever is later) to
        its last read, less its compiles, shared equally by its fits."""
        out = dict(pending.failed)
        for item in pending.launched:
            try:
                p = item.pending
                host = _HostFit(np.asarray(p.consts), np.asarray(p.fit_sse), np.asarray(p.iters),
                                np.asarray(p.split_sse), np.asarray(p.split_bad),
                                np.asarray(p.split_loss))
            except Exception as exc:  # noqa: BLE001
                self._fail(out, item.jobs, exc)
                continue
            finally:
                self._ring.release(item.device, len(item.jobs))
            out.update(self._collect(item.jobs, item.bucket, host, item.local))
        now = time.perf_counter()
        elapsed = now - max(pending.started_at, self._last_read) - pending.compile_s
        self._last_read = now
        fitted = sum(len(item.jobs) for item in pending.launched)
        if fitted:
            self._stats.fit_s += max(elapsed, 0.0)
            per = max(elapsed, 0.0) / fitted
            for item in pending.launched:
                for job in item.jobs:
                    entry = out.get(job.canonical)
                    if entry is not None and entry.status != "error":
                        out[job.canonical] = entry._replace(fit_s=per)
        return out

    @staticmethod
    def _fail(out: dict[str, _Entry], batch: list[_Job], exc: Exception) -> None:
        msg = f"batch failed: {type(exc).__name__}: {exc}"
        for job in batch:
            out[job.canonical] = _Entry("error", msg, (), _NO_METRICS, 0.0, 0)

    def _launch(self, batch: list[_Job], bucket: Bucket,
                local: bool = False) -> tuple[Any, float, int]:
        """Pack a batch, get its bucket's executable and dispatch it (returns the device arrays,
        the seconds spent compiling for it and the index of the device in the ring). The batch
        goes to a device that has the executable; where none has, device 0 compiles it, and
        the other devices compile theirs in the background (``_compile_elsewhere``).
        ``local``: every job has a start; restart 0 begins there (a local search)."""
        from sr_dist.evaluator import kernels as _k
        from sr_dist.evaluator.interpreter import Layout
        from sr_dist.evaluator.kernels import FitKey
        from sr_dist.evaluator.lm import LMOptions

        opts = self.options
        cap = batch_capacity(opts.batch_size, self._mode)
        f = len(self.feature_names)
        kb, sc = bucket.n_consts, bucket.size
        code, meta, lits = pack_programs(
            [j.program for j in batch], n_vars=f, n_consts=kb, n_lits=sc.n_lits,
            n_instr=sc.n_instr, capacity=cap,
            linear=(opts.variable_projection and opts.method == "lm"
                    and self._loss.name in QUADRATIC_LOSSES))
        if local:
            restarts = opts.local_restarts
        else:
            restarts = 1 if opts.method == "llmsr" else opts.restarts  # llmsr: all ones only
        init = np.zeros((cap, restarts, kb), dtype=self._np_dtype)
        for i, job in enumerate(batch):
            if kb:
                full = np.ones((restarts, kb))
                started = local and job.start is not None
                if not (started and restarts == 1):  # else the start is the whole guess
                    full[:, :job.k] = initial_constants(job.canonical, opts.seed, restarts,
                                                         job.k, opts.init_spread)
                if opts.data_starts and job.formula is not None and restarts > 1:
                    full[:, :job.k] = hinted_restarts(job.formula.canonical_tree,
                                                      [f"c{j}" for j in range(job.k)],
                                                      full[:, :job.k], self._data_hints())
                if started:
                    full[0, :job.k] = job.start
                init[i] = full
        layout = Layout(f, kb, sc.n_lits, sc.n_temps)
        lm = LMOptions(max_iters=opts.local_iters if local else opts.max_iters, ftol=opts.ftol,
                       xtol=opts.xtol, patience=opts.patience)
        key = FitKey(layout, sc.n_instr, cap, restarts, lm, opts.polish_iters, self._mode,
                     opts.dtype, opts.method, self._loss,
                     keep_start=local and kb > 0 and self._mode == "map")
        subset = local and kb > 0 and self._placed[0].local is not None
        arrays = (code, meta, lits.astype(self._np_dtype), init, np.int32(len(batch)))
        spread = not local or opts.spread_local
        ready = [i for i in range(len(self._ring.devices) if spread else 1)
                 if (key, i, subset) in self._executables]
        device = self._ring.take(len(batch), ready)
        try:
            data = self._device_data(device, subset)
            # The key, the device and the rows fix every argument's shape and placement, so
            # the executable is looked up once, not signed (flattened, described) every batch.
            exe, compile_s = self._executables.get((key, device, subset)), 0.0
            if exe is None:
                exe, compile_s = _k.COMPILED.get("fit", key, self._placed_args(device, arrays,
                                                                               data))
                self._executables[(key, device, subset)] = exe
            if compile_s:
                self._stats.compiles += 1
                self._stats.compile_s += compile_s
            if spread:
                self._compile_elsewhere(key, subset, arrays)
            # The batch's host arrays go to the executable as they are: it places them on its
            # device, at about a quarter of the cost of a device_put first (bench/devices.py).
            return exe(*arrays, *data), compile_s, device
        except Exception:
            self._ring.release(device, len(batch))
            raise

    def _device_data(self, device: int, subset: bool) -> tuple[Any, ...]:
        """The data arguments of a fit executable on ``device``: its fitting rows (the local
        searches' rows where ``subset``), polish rows, all rows and floors."""
        placed = self._placed[device]
        fit_data, polish_data, floors = placed.fit, placed.polish, placed.floors
        if subset and placed.local is not None:
            (fit_data, floors), polish_data = placed.local, None
        return (fit_data, polish_data, placed.every, floors)

    def _placed_args(self, device: int, arrays: tuple[Any, ...],
                     data: tuple[Any, ...]) -> tuple[Any, ...]:
        """A fit executable's arguments with the batch's ``arrays`` on ``device``, as a compile
        needs them (their placement is part of the executable)."""
        import jax

        return (*jax.device_put(arrays, self._ring.devices[device]), *data)

    def _compile_elsewhere(self, key: Any, subset: bool, arrays: tuple[Any, ...]) -> None:
        """Queue the compiles of ``key`` for the devices that lack it, on the background
        thread: until one is done, that device is given none of the bucket's batches."""
        from sr_dist.evaluator import kernels as _k

        for device in range(1, len(self._ring.devices)):
            slot = (key, device, subset)
            if slot in self._executables or slot in self._compiling:
                continue
            self._compiling.add(slot)

            def compile_one(slot: tuple[Any, int, bool] = slot) -> None:
                args = self._placed_args(slot[1], arrays, self._device_data(slot[1], slot[2]))
                exe, seconds = _k.COMPILED.get("fit", slot[0], args)
                self._executables[slot] = exe
                self._device_compiles.append(seconds)

            self._background.submit(compile_one)

    def wait_for_compiles(self, timeout: float | None = None) -> bool:
        """Block until the other devices' background compiles (``host_devices``) are done;
        ``False`` if ``timeout`` seconds ran out first. For benchmarks and tests: a fit never
        needs to wait for them."""
        return self._background.wait(timeout)

    def _collect(self, batch: list[_Job], bucket: Bucket,
                 host: _HostFit, local: bool = False) -> dict[str, _Entry]:
        st = self._stats
        st.batches += 1
        st.batch_formulas += len(batch)
        st.fits += len(batch)
        if local:
            st.local_fits += len(batch)
        st.buckets[bucket.name] = st.buckets.get(bucket.name, 0) + 1
        out: dict[str, _Entry] = {}
        for i, job in enumerate(batch):
            entry = self._entry(host.consts[i, :job.k], host.split_sse[i],
                                host.split_bad[i], 0.0, int(host.iters[i]),
                                host.split_loss[i])
            out[job.canonical] = entry._replace(local=local)
        return out

    def _entry(self, cvec: np.ndarray, sse: np.ndarray, bad: np.ndarray, fit_s: float,
               iters: int, lsum: np.ndarray | None = None) -> _Entry:
        mses: list[float | None] = []
        losses: list[float | None] = []
        plain = self._loss.plain
        for s in range(3):
            n = self._sizes[s]
            wsum = self._wsum[s]
            if n == 0 or not wsum > 0:  # an empty split, or one whose rows all weigh 0
                mses.append(None)
                losses.append(None)
            elif bad[s] > 0 or not math.isfinite(float(sse[s])):
                mses.append(math.inf)
                losses.append(math.inf)
            else:
                mses.append(float(sse[s]) / n if plain else float(sse[s]) / wsum)
                total = float(sse[s] if lsum is None else lsum[s])
                losses.append(total / (n if plain else wsum) if math.isfinite(total)
                              else math.inf)
        nm = [None if m is None else nmse(m, v) for m, v in zip(mses, self._var)]
        status: Status = "ok"
        error: str | None = None
        if any(int(b) > 0 for b in bad) or not all(math.isfinite(float(v)) for v in cvec) or any(
                m is not None and not math.isfinite(m) for m in mses):
            status = "nonfinite"
            where = [name for name, b, m in zip(("train", "validation", "test"), bad, mses)
                     if int(b) > 0 or (m is not None and not math.isfinite(m))]
            error = ("prediction is not finite on "
                     + ", ".join(f"{int(b)} {name} rows" for name, b in
                                 zip(("train", "validation", "test"), bad) if int(b) > 0)
                     if any(int(b) for b in bad) else
                     f"non-finite loss on {', '.join(where) or 'fit'}")
        r2 = None if nm[1] is None else 1.0 - nm[1]
        metrics = _Metrics(mses[0], nm[0], nm[1], nm[2], r2, losses[0], losses[1])
        return _Entry(status, error, tuple(float(v) for v in cvec), metrics, fit_s, iters)

    def _add_extra_metrics(self, jobs: Mapping[str, _Job], fresh: dict[str, _Entry]) -> None:
        """Fill the requested extra metrics of the fresh ``ok`` entries (one prediction pass
        on the train and validation rows for the whole set, bucketed like any prediction)."""
        todo = [(c, jobs[c], e) for c, e in fresh.items() if e.status == "ok" and c in jobs]
        if not todo:
            return
        ds = self.dataset
        ytr = np.asarray(ds.y_train, dtype=np.float64).ravel()
        yva = np.asarray(ds.y_val, dtype=np.float64).ravel()
        wts = self._weights
        w_train = wts.train if wts is not None else np.ones(len(ytr))
        w_val = wts.val if wts is not None else np.ones(len(yva))
        items = [_PredictItem(i, job.program, np.asarray(entry.constants, np.float64))
                 for i, (_, job, entry) in enumerate(todo)]
        f = len(self.feature_names)
        # One pass over train and validation rows together: one row shape, one compile.
        rows = np.concatenate([np.asarray(ds.X_train, dtype=np.float64).reshape(len(ytr), f),
                               np.asarray(ds.X_val, dtype=np.float64).reshape(len(yva), f)])
        pred = self._predict_programs(items, rows)
        pred_tr = pred[:, :len(ytr)]
        pred_va = pred[:, len(ytr):] if len(yva) else None
        for i, (canon, job, entry) in enumerate(todo):
            values = extra_metrics(
                self.options.metrics, y_train=ytr, pred_train=pred_tr[i].astype(np.float64),
                w_train=w_train, y_val=yva,
                pred_val=None if pred_va is None else pred_va[i].astype(np.float64),
                w_val=w_val, n_constants=job.k, r2=entry.metrics.r2)
            fresh[canon] = entry._replace(
                metrics=entry.metrics._replace(extra=tuple(values.items())))

    def _evaluate(self, formulas: Sequence[str | Formula | PreparedFormula],
                  constants: Sequence[Mapping[str, float] | None] | None,
                  X: np.ndarray | None) -> np.ndarray:
        # A prepared formula has no tree as written: predictions come from its text's parse.
        parsed = [self.parse(f.text if isinstance(f, PreparedFormula) else f) for f in formulas]
        if constants is None:
            constants = [None] * len(parsed)
        if len(constants) != len(parsed):
            raise ValueError("constants must have one entry per formula")
        data = np.asarray(self.dataset.X_train if X is None else X, dtype=np.float64)
        if data.ndim != 2 or data.shape[1] != len(self.feature_names):
            raise ValueError(f"X must be (n, {len(self.feature_names)})")
        progs: list[_PredictItem] = []
        for i, (f, cmap) in enumerate(zip(parsed, constants)):
            assert isinstance(f, Formula)
            prog = lower_cached(f.tree, self.feature_names, tuple(f.constants))
            values = dict(cmap or {})
            missing = [c for c in f.constants if c not in values]
            if missing:
                raise ValueError(f"formula {i}: no value for constants {missing}")
            progs.append(_PredictItem(i, prog, np.array([values[c] for c in f.constants],
                                                        np.float64)))
        return self._predict_programs(progs, data)

    def _predict_programs(self, progs: Sequence[_PredictItem], data: np.ndarray) -> np.ndarray:
        """Predictions (len(progs), n) of lowered programs on rows ``data`` (n, F), row
        ``item.position`` for each item, batched by bucket."""
        from sr_dist.evaluator import kernels as _k
        from sr_dist.evaluator.interpreter import Layout
        from sr_dist.evaluator.kernels import PredictKey

        n = data.shape[0]
        chunk = min(self.options.chunk_rows, _round_up(max(n, 1), 64))
        Xd = self._put(_chunks(data, np.zeros(n), chunk, self._np_dtype).X)
        out = np.empty((len(progs), n), dtype=self._np_dtype)
        groups: dict[Bucket, list[_PredictItem]] = {}
        for item in progs:
            groups.setdefault(self._bucket_for(item.program), []).append(item)
        cap = self.options.batch_size
        f_count = len(self.feature_names)
        put = self._put
        for bucket, group in groups.items():
            kb, sc = bucket.n_consts, bucket.size
            for start in range(0, len(group), cap):
                batch = group[start:start + cap]
                code, meta, lits = pack_programs([b.program for b in batch], n_vars=f_count,
                                                 n_consts=kb, n_lits=sc.n_lits,
                                                 n_instr=sc.n_instr, capacity=cap)
                cv = np.zeros((cap, kb), dtype=self._np_dtype)
                for j, b in enumerate(batch):
                    cv[j, :len(b.constants)] = b.constants
                key = PredictKey(Layout(f_count, kb, sc.n_lits, sc.n_temps), sc.n_instr, cap,
                                 self._mode, self.options.dtype)
                args = (put(code), put(meta), put(lits.astype(self._np_dtype)), put(cv),
                        put(np.int32(len(batch))), Xd)
                exe, compile_s = _k.COMPILED.get("predict", key, args)
                if compile_s:
                    self._stats.compiles += 1
                    self._stats.compile_s += compile_s
                pred = np.asarray(exe(*args)).reshape(cap, -1)[:, :n]
                self._stats.evaluations += len(batch)
                for j, b in enumerate(batch):
                    out[b.position] = pred[j]
        return out


def enable_persistent_cache(path: str) -> None:
    """Turn on JAX's persistent compilation cache at ``path`` (process-global), and keep the
    traced bucket programs beside it (``path/traced``, see traced.py)."""
    import jax

    from sr_dist.evaluator.kernels import COMPILED
    from sr_dist.evaluator.traced import TracedStore

    os.makedirs(path, exist_ok=True)
    # jax.config.update is unannotated in jax 0.10, hence the ignores.
    jax.config.update("jax_compilation_cache_dir", path)  # type: ignore[no-untyped-call]
    jax.config.update(  # type: ignore[no-untyped-call]
        "jax_persistent_cache_min_compile_time_secs", 0.5)
    COMPILED.use_store(TracedStore(os.path.join(path, "traced")))


__all__ = [
    "PARSE_CACHE_SIZE",
    "initial_constants",
    "SIZE_CLASSES",
    "Bucket",
    "BucketOverflow",
    "DatasetLike",
    "Evaluator",
    "EvaluatorOptions",
    "PendingFits",
    "SizeClass",
    "bucket_for",
    "enable_persistent_cache",
]
