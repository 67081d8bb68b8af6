"""Building and running openvino engines.

``build(segment)`` is the ``EngineBuilder`` entry point: the segment graph becomes one
OpenVINO model (:mod:`.convert.model`), compiled once for the CPU device with the engine
options (:mod:`.options`): symbolic dims stay dynamic, so one compiled model serves every
input size. With ``timing`` on (the default) the engine is timed against the segment's graph
optimized on the next backends (as they run its nodes inside the model) and refused when it is slower:
OpenVINO's per-call overhead (tens of µs) does not pay off on a few small ops.

With ``nan_checks`` on (the default) the segment is built twice: with torch's NaN checks, and
for finite inputs only. When :mod:`.finite` proves a bound ``B`` under which the second model
computes no NaN and no infinity (so the checks could not fire) and the two differ, inputs all
within ``±B`` run the second, every other input the checked model, compiled at its first call.

At run time each calling thread has its own infer request. Inputs OpenVINO cannot take
(an empty tensor, a size the model's constant shapes reject) run node by node on the next
backends, like a signature trt_like has no plan for. A signature seen for the first time is
checked against srcore's shape rules (``Segment.specialize``) before OpenVINO runs it: OpenVINO
does not reject every size srcore's ops do (with one OpenMP thread its CPU plugin reshaped 9
values to (2, 0) for ``reshape(x, [2, -1])``), and such a call must fail, never answer.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from srcore.plugin import EngineBuildError, KernelError

from . import cache, device, finite
from .convert.model import build_model
from .options import EngineOptions, intra_op_threads, parse

#: the size a symbolic dim takes when the engine is timed at build
TRIAL_DIM = 4
#: seconds the build-time comparison may spend on one segment (after one warm-up call each),
#: and the most calls of each side it makes
TIMING_BUDGET = 0.25
TIMING_CALLS = 50
#: at more than one thread, how long the engine's block of timed calls runs at least: OpenBLAS's
#: idle worker spins this long (~0.1 s) after a threaded call of the fallback, on the core
#: OpenVINO's second thread needs (srcore_cpu's ``parallel.BLAS_SPIN_S``)
SPIN_S = 0.15
#: calls with fewer input values than this run the checked model: the bound test (2-4 µs for a
#: small array) would cost more than the checks it saves (see .finite)
FINITE_MIN_VALUES = 4096
#: signatures remembered as running node by node (the oldest is dropped beyond this)
MAX_UNPLANNED = 16
#: signatures remembered as checked against srcore's shape rules (forgotten all at once beyond this)
MAX_CHECKED = 1024
#: the values an int64 input may hold: OpenVINO's CPU plugin computes int64 in int32
INT32_RANGE = (np.iinfo(np.int32).min, np.iinfo(np.int32).max)


class Engine:
    """One segment compiled by OpenVINO; call it with the segment's inputs."""

    def __init__(self, segment):
        self.name = segment.name
        self.fallback = segment.fallback
        self._segment = segment
        #: input signatures srcore's shape rules accepted (checked once each, before OpenVINO runs them)
        self._checked: set[tuple] = set()
        self.options: EngineOptions = parse(dict(segment.options))
        ov = device.openvino()
        self._tensor = ov.Tensor
        if self.options.precision == "bf16":
            why = device.bf16_refusal()
            if why is not None:
                raise EngineBuildError(why)
        self.threads = self.options.threads or intra_op_threads()
        t0 = time.perf_counter()
        self.config = compile_config(self.options.precision, self.threads)
        self.cache_dir = self.options.cache_dir
        if self.cache_dir is not None:
            try:
                self.cache_dir.mkdir(parents=True, exist_ok=True)
            except OSError:   # a cache that cannot be written is no reason to refuse the segment
                self.cache_dir = None
        #: how softmax rows torch makes NaN are handled: None (no softmax deferred), or a note
        self.softmax_rows: str | None = None
        #: float inputs all within ±finite_bound run the model built without NaN checks, proven to
        #: give the checked model's answers there (.finite); None: every call runs the checked model
        self.finite_bound: float | None = None
        self.fast_n_ops: int | None = None
        self._deferred: list | None = None
        self._checked_compiled = None
        if self.options.nan_checks:
            # softmax row checks of attention blocks are left to OpenVINO's fused attention kernel
            # when it fuses them all (reduce._softmax); else the model is built again with the checks
            self._deferred = []
            model, self.input_dims = self._build(True, self._deferred)
            fast, _ = self._build(False, finite_only=True)
            static = all(None not in dims for dims in self.input_dims)
            small = static and sum(int(np.prod(dims)) for dims in self.input_dims) < FINITE_MIN_VALUES
            if not small and _op_kinds(fast) != _op_kinds(model):   # else no check to skip, or not worth it
                self.finite_bound = finite.input_bound(fast)
            if self.finite_bound is not None:
                # the checked model is compiled at the first call outside the bound (NaN, inf, huge)
                self._checked_model = model
                self.fast_n_ops = len(fast.get_ordered_ops())
                self.compiled = self._compile(fast)
            else:
                self.compiled = self._compile_checked(model)
        else:
            model, self.input_dims = self._build(False)
            self.compiled = self._compile(model)
        #: OpenVINO ops of the model with the NaN checks (of the model run, with nan_checks off)
        self.n_ops = len(model.get_ordered_ops())
        #: each input's dtype (float32, or int64: see .convert.model)
        self.input_dtypes = [np.dtype(np.int64) if p.get_element_type() == ov.Type.i64 else np.dtype(np.float32)
                             for p in model.get_parameters()]
        self._int_inputs = [i for i, dt in enumerate(self.input_dtypes) if dt.kind == "i"]
        #: calls run on the next backends because an int64 input left int32's range
        self.int_range_calls = 0
        self.compile_seconds = time.perf_counter() - t0
        self.n_inputs = len(self.input_dims)
        self.n_outputs = len(self.compiled.outputs)
        #: the segment's 0-d outputs, which the OpenVINO model gives as 1-element 1-d tensors
        self._scalar_outputs = tuple(i for i, v in enumerate(segment.graph.outputs)
                                     if getattr(v.type, "shape", None) == ())
        self._local = threading.local()
        self._lock = threading.Lock()
        #: input signature -> why it runs node by node (OpenVINO rejected it, or it is empty)
        self.unplanned: dict[tuple, str] = {}
        self.timed: tuple[float, float, tuple] | None = None
        self.timing_clock = "wall time"
        if self.options.timing and self.fallback is not None:
            self._time_against_fallback()

    def _build(self, nan_checks: bool, deferred: list | None = None, finite_only: bool = False):
        ov = device.openvino()
        return build_model(self._segment.graph, self.name, ov, _opset(ov), nan_checks, deferred, self.options.precision,
                           finite_only)

    def _compile_checked(self, model):
        """The compiled model with torch's NaN checks (built again with the softmax row checks
        when OpenVINO did not fuse every deferred softmax into its attention kernel)."""
        compiled = self._compile(model)
        if self._deferred:
            if unfused_softmax(compiled):
                model, _ = self._build(True)
                compiled = self._compile(model)
                self.softmax_rows = (f"{len(self._deferred)} attention softmax(es) not fused by OpenVINO: "
                                     f"row checks built in")
            else:
                self.softmax_rows = (f"{len(self._deferred)} attention softmax(es) fused by OpenVINO "
                                     f"(its kernel gives torch's NaN rows): no separate row check")
        return compiled

    def _with_checks(self):
        """The compiled model with the NaN checks, compiled at the first call that needs it."""
        if self._checked_compiled is None:
            with self._lock:
                if self._checked_compiled is None:
                    self._checked_compiled = self._compile_checked(self._checked_model)
                    self._checked_model = None
        return self._checked_compiled

    def _compile(self, model):
        config = self.config
        entry = None
        if self.cache_dir is not None:
            cache.name_by_position(model)
            try:   # one cache entry per model, so that srcore can tell which blobs are in use (see .cache)
                entry = cache.use_entry(self.cache_dir, cache.entry_key(model, config, device.openvino().__version__))
                config = {**config, "CACHE_DIR": str(entry)}
            except OSError:
                entry = None
        try:
            compiled = device.core().compile_model(model, "CPU", config)
        except Exception as exc:
            raise EngineBuildError(f"OpenVINO failed to compile the segment: {type(exc).__name__}: "
                                   f"{_last_line(exc)}") from exc
        if entry is not None and self.options.cache_limit_mb is not None:
            cache.evict(self.cache_dir, self.options.cache_limit_mb * 2**20, keep=entry)
        return compiled

    # -- running ------------------------------------------------------------------------------
    def _request(self, checked: bool):
        """This thread's ``[infer request, bound]`` of the compiled model (``checked``: of the one
        with the NaN checks, when the engine runs another for inputs within its bound); ``bound``
        holds per input the (array, shape, address) the request reads in place."""
        key = "checked" if checked else "main"
        state = getattr(self._local, key, None)
        if state is None:
            compiled = self._with_checks() if checked else self.compiled
            state = [compiled.create_infer_request(), [None] * self.n_inputs]
            setattr(self._local, key, state)
        return state

    def _outside_bound(self, xs) -> bool:
        """Whether an input holds a NaN, an infinity or a value beyond ±finite_bound, or the inputs
        are too small for the test to pay."""
        return sum(x.size for x in xs) < FINITE_MIN_VALUES or not finite.within(xs, self.finite_bound)

    def __call__(self, *xs):
        if len(xs) != self.n_inputs:
            raise KernelError(f"{self.name}: {len(xs)} inputs, expected {self.n_inputs}")
        key = tuple(x.shape for x in xs)
        if self.unplanned and key in self.unplanned:
            return self.fallback(*xs)
        if key not in self._checked:
            try:
                self._segment.specialize(key)
            except EngineBuildError as exc:   # sizes srcore's ops reject: the fallback raises their error
                return self._not_in_openvino(xs, exc)
            with self._lock:
                if len(self._checked) >= MAX_CHECKED:
                    self._checked.clear()
                self._checked.add(key)
        for i in self._int_inputs:
            x = xs[i]
            if x.dtype.kind not in "biu":
                raise KernelError(f"{self.name}: input {i} is {x.dtype}, expected an integer tensor (int64)")
            if x.size and not _in_int32(x):
                self.int_range_calls += 1   # OpenVINO would wrap it: this call runs node by node
                return self._outside(xs, "an int64 input outside int32's range")
        state = self._request(self.finite_bound is not None and self._outside_bound(xs))
        req, bound = state
        tensor = self._tensor
        dtypes = self.input_dtypes
        keep = []   # OpenVINO reads the arrays in place: the copies made here must live until infer() returns
        try:
            for i, x in enumerate(xs):
                want = dtypes[i]
                if x.dtype != want or not x.flags.c_contiguous:
                    x = np.ascontiguousarray(x, dtype=want)
                    keep.append(x)
                    bound[i] = None
                elif x.size == 0:
                    raise _Empty()
                else:
                    # the request reads its input tensors in place: an array at the address, of the
                    # shape, it already reads needs no new tensor (binding one costs 2.5-20 µs a call).
                    # The same array object is the common case and the cheap test (reading the
                    # address through __array_interface__ costs 1-2 µs)
                    b = bound[i]
                    if b is not None and b[0] is x and b[1] == x.shape:
                        continue
                    at = x.__array_interface__["data"][0]
                    if b is not None and b[2] == at and b[1] == x.shape:
                        bound[i] = (x, x.shape, at)
                        continue
                    bound[i] = (x, x.shape, at)
                if x.size == 0:
                    raise _Empty()
                req.set_input_tensor(i, tensor(x, shared_memory=True))
            # OpenVINO's Python infer() copies every output into a new array (share_outputs=False): the
            # engine returns those (copying the request's output tensors again cost a second memcpy)
            outs = req.infer().to_tuple()
            if self._scalar_outputs:
                outs = tuple(o.reshape(()) if i in self._scalar_outputs else o for i, o in enumerate(outs))
        except Exception as exc:   # an empty input, or sizes the model's constant shapes reject
            state[1] = [None] * self.n_inputs
            return self._not_in_openvino(xs, exc)
        return outs[0] if self.n_outputs == 1 else outs

    def _outside(self, xs, why: str):
        if self.fallback is None:
            raise KernelError(f"{self.name}: {why} does not run in OpenVINO and there is no fallback "
                              f"(Options.require_full_compilation, or no backend after openvino)")
        return self.fallback(*xs)

    def _not_in_openvino(self, xs, exc):
        sig = tuple(x.shape for x in xs)
        if isinstance(exc, _Empty):
            why = "an empty input"
        elif isinstance(exc, EngineBuildError):
            why = f"srcore's shape rules: {_last_line(exc)}"
        else:
            why = f"OpenVINO: {type(exc).__name__}: {_last_line(exc)}"
        if self.fallback is None:
            raise KernelError(f"{self.name}: inputs {_sig(sig)} do not run in OpenVINO ({why}) and there is no "
                              f"fallback (Options.require_full_compilation, or no backend after openvino)") from exc
        with self._lock:
            if len(self.unplanned) >= MAX_UNPLANNED:
                self.unplanned.pop(next(iter(self.unplanned)))
            self.unplanned[sig] = why
        return self.fallback(*xs)

    # -- the build-time comparison with the next backend ------------------------------------------
    def _trial_inputs(self) -> list[np.ndarray]:
        rng = np.random.default_rng(0)
        shapes = [[TRIAL_DIM if d is None else d for d in dims] for dims in self.input_dims]
        return [rng.integers(0, 2, s) if dt.kind == "i" else rng.standard_normal(s).astype(np.float32)
                for s, dt in zip(shapes, self.input_dtypes)]

    def _time_against_fallback(self) -> None:
        """Time the engine and the fallback on trial inputs (after a warm-up call each: the
        fallback builds its runtime then), alternating single calls at 1 thread, in blocks at more,
        and compare their best calls, which a busy machine's stalls do not move."""
        xs = self._trial_inputs()
        nxt = self._as_in_the_model()
        ov_times, next_times = [], []
        # one thread on both sides: CPU time, which leaves out the time a call waits for a core on
        # a busy machine (in wall time detection_head's engine took 19.7 ms at its best call against
        # cpu's 14.6 at load ~6, and fell back; its CPU time is 3.7 ms against 6.8). With more
        # threads CPU time would sum them: wall time, best calls
        clock = time.process_time if self.threads == 1 and intra_op_threads() == 1 else time.perf_counter
        self.timing_clock = "CPU time" if clock is time.process_time else "wall time"
        try:
            with np.errstate(all="ignore"):
                _timed(self, xs)
                _timed(nxt, xs)
                if self.threads == 1:
                    start = time.perf_counter()
                    while len(ov_times) < TIMING_CALLS and not self.unplanned:
                        ov_times.append(_timed(self, xs, clock))
                        next_times.append(_timed(nxt, xs, clock))
                        if len(ov_times) >= 3 and time.perf_counter() - start > TIMING_BUDGET:
                            break
                else:
                    # blocks, the engine's last and at least SPIN_S long: alternating single calls
                    # timed each engine call while the fallback's OpenBLAS worker spun on the second
                    # core, i.e. at 1-thread speed or worse (mlp_wide's engine at 2 threads: 25.6 ms
                    # against cpu's 23.0, so it fell back and ran at cpu's 1-thread speed)
                    next_times = self._block(nxt, xs, clock, 0.0)
                    ov_times = self._block(self, xs, clock, SPIN_S)
        except Exception:   # the trial sizes do not fit the segment (a constant reshape): keep the engine
            ov_times = []
        if self.unplanned or not ov_times:
            self.unplanned.clear()
            return
        # the best call of each side: on a loaded machine a call only ever gets slower (a thread
        # waits for its core), and with the few calls a slow segment allows (3 at ~1 s on cpu), a
        # quartile still took a stall: resnet_small's engine at 2 threads lost to cpu, 9x slower
        t_ov, t_next = min(ov_times), min(next_times)
        self.timed = (t_ov, t_next, tuple(x.shape for x in xs))
        if t_ov > t_next:
            raise EngineBuildError(
                f"slower in OpenVINO ({_us(t_ov)} per call) than node by node on {self._next_backends()} "
                f"({_us(t_next)}), timed at build ({self.timing_clock}) on inputs {_sig(self.timed[2])}; "
                f"engine_options={{'timing': False}} keeps such segments in OpenVINO")

    def _as_in_the_model(self):
        """What the engine is timed against: the segment's graph optimized, as the next backends
        run its nodes inside the model, not the unoptimized fallback (``Segment.fallback``), which
        runs them without the model's fusions: index_ops' float segment took 11.3 µs in OpenVINO,
        10.7 node by node unoptimized, 9.6 optimized, and kept in OpenVINO the model took 15 µs
        longer than on cpu alone (CPU time, Sapphire Rapids). A fallback that is not srcore's
        (a test's stand-in) or a graph the optimizer refuses is timed as it is."""
        fb = self.fallback
        optimized = getattr(fb, "optimized", None)
        if optimized is None:
            return fb
        try:
            return optimized()
        except Exception:   # noqa: BLE001 - the unoptimized fallback is still a valid comparison
            return fb

    def _block(self, fn, xs, clock, at_least: float) -> list[float]:
        """Calls of ``fn`` back to back: at least 3 and ``at_least`` seconds, at most
        :data:`TIMING_CALLS` (unless ``at_least`` is not reached) or half :data:`TIMING_BUDGET`."""
        times: list[float] = []
        start = time.perf_counter()
        while not self.unplanned:
            times.append(_timed(fn, xs, clock))
            spent = time.perf_counter() - start
            if len(times) >= 3 and spent >= at_least and (len(times) >= TIMING_CALLS or spent > TIMING_BUDGET / 2):
                break
        return times

    def _next_backends(self) -> str:
        return ", ".join(getattr(self.fallback, "backends", None) or ("the next backends",))

    # -- reports ---------------------------------------------------------------------------------
    def describe(self) -> str:
        dyn = [i for i, dims in enumerate(self.input_dims) if None in dims]
        ins = ", ".join("(" + ", ".join("?" if d is None else str(d) for d in dims) + ")" for dims in self.input_dims)
        lines = [f"OpenVINO {device.openvino().__version__.split('-')[0]} on {device.device_name()}: precision "
                 f"{self.options.precision}, {self.threads} thread(s), model cache "
                 f"{self.cache_dir if self.cache_dir is not None else 'off'}"
                 + ("" if self.options.nan_checks else ", nan_checks off (OpenVINO's NaN handling)"),
                 f"inputs {ins}: one compiled model{' with dynamic dims' if dyn else ''}, {self.n_ops} OpenVINO ops, "
                 f"built and compiled in {self.compile_seconds * 1e3:.1f} ms"]
        if self.finite_bound is not None:
            lines.append(f"inputs all within ±{self.finite_bound:.3g} run the model without NaN checks "
                         f"({self.fast_n_ops} ops: no value can overflow there, so the checks cannot fire), "
                         f"others (NaN, infinities, larger values) the checked one, compiled "
                         + ("at the first such call" if self._checked_compiled is None else "already"))
        if self.softmax_rows is not None:
            lines.append(self.softmax_rows)
        layers = runtime_layers(self.compiled)
        if layers:
            lines.append("runs as: " + ", ".join(layers))
        if self.timed is not None:
            t_ov, t_next, shapes = self.timed
            lines.append(f"timed at build ({self.timing_clock}) on inputs {_sig(shapes)}: {_us(t_ov)} per call in OpenVINO, "
                         f"{_us(t_next)} node by node on {self._next_backends()}")
        if self.int_range_calls:
            lines.append(f"{self.int_range_calls} call(s) ran node by node on {self._next_backends()}: an int64 "
                         f"input outside int32's range (OpenVINO computes int64 in int32)")
        for sig, why in list(self.unplanned.items()):
            lines.append(f"inputs {_sig(sig)} run node by node on {self._next_backends()} ({why})")
        return "\n".join(lines)


def compile_config(precision: str, threads: int) -> dict:
    """OpenVINO's CPU settings for an engine: one stream, latency-tuned, ``threads`` threads, no
    CPU pinning. Pinned threads wait for their core when other processes use it: on a busy
    2-core machine, mlp_tiny's call took 34 µs at the median but 3.9 ms at p90 pinned, 52 µs
    unpinned (one process, alternating blocks of calls)."""
    return {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}


class _Empty(Exception):
    """An input with no elements: OpenVINO's CPU plugin does not take them; the next backend does."""


def _opset(ov):
    """The opset module converters build with (14: MaxPool/AvgPool with torch's ceil rounding)."""
    import openvino.opset14 as opset

    return opset


def runtime_layers(compiled, limit: int = 12) -> list[str]:
    """What OpenVINO runs: ``"FullyConnected x3 [brgemm_avx2_FP32]"``, by execution order."""
    counts: dict[tuple[str, str], int] = {}
    try:
        for op in compiled.get_runtime_model().get_ordered_ops():
            rt = op.get_rt_info()
            kind = _rt(rt, "layerType") or op.get_type_name()
            if kind in ("Input", "Output", "Parameter", "Result", "Const", "Constant"):
                continue
            prim, prec = _rt(rt, "primitiveType"), _rt(rt, "runtimePrecision")
            tag = prim if prec.lower() in prim.lower() else f"{prim} {prec}".strip()
            counts[(kind, tag)] = counts.get((kind, tag), 0) + 1
    except Exception:   # the runtime model is a debugging aid; an OpenVINO without it still runs
        return []
    out = [f"{k}{f' x{n}' if n > 1 else ''}{f' [{t}]' if t else ''}" for (k, t), n in counts.items()]
    return out[:limit] + ([f"... {len(out) - limit} more kinds"] if len(out) > limit else [])


def unfused_softmax(compiled) -> bool:
    """Whether OpenVINO runs a Softmax layer of its own (one it did not fuse into an attention
    kernel). Without a runtime model to read, assume so (the checked model is then built)."""
    try:
        return any(_rt(op.get_rt_info(), "layerType").lower() in ("softmax", "logsoftmax")
                   for op in compiled.get_runtime_model().get_ordered_ops())
    except Exception:
        return True


def _op_kinds(model) -> list[str]:
    return sorted(op.get_type_name() for op in model.get_ordered_ops())


def _rt(info, key: str) -> str:
    return info[key].astype(str) if key in info else ""


def _in_int32(x: np.ndarray) -> bool:
    if x.dtype.itemsize <= 4 and x.dtype.kind in "biu" and x.dtype != np.uint32:
        return True
    return INT32_RANGE[0] <= int(x.min()) and int(x.max()) <= INT32_RANGE[1]


def _timed(fn, xs, clock=time.perf_counter) -> float:
    t0 = clock()
    fn(*xs)
    return clock() - t0


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-2 else f"{seconds * 1e3:.2f} ms"


def _sig(shapes) -> str:
    return ", ".join("(" + ", ".join(map(str, s)) + ")" for s in shapes)


def _last_line(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[-1][:300] if lines else type(exc).__name__


def build(segment) -> Engine:
    """``EngineBuilder.build``: the compiled engine of ``segment`` (see :class:`srcore.plugin.Segment`)."""
    return Engine(segment)


def load(data):
    raise EngineBuildError("srcore-openvino keeps no serialized engines: segments are rebuilt at load, and "
                           "OpenVINO's model cache (engine option cache_dir) makes the compile step fast")
