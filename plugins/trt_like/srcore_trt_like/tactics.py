"""Tactic selection: for each layer, every implementation that applies, timed on the layer's
real shapes; the fastest wins (TensorRT's builder does the same with its kernels).

Implementations register per layer kind: :data:`TACTICS` holds ``(name, factory)`` pairs,
``factory(layer, net)`` returning ``fn(*inputs, *outputs)`` or None when it does not apply;
:data:`FAMILIES` holds functions returning several named candidates at once (every conv
algorithm that applies), each a kernel or a :class:`Lazy` one built only when needed. The numpy implementations (``layers_numpy.py``) are always
candidates.

Timing runs every candidate once to warm it up (compiled code loads, scratch grows), then
a few rounds in a rotating order, keeping each one's best round (the least disturbed on a
shared machine). The winner is remembered in the timing cache (:mod:`.timing_cache`), so
a later build of the same layer on the same machine and thread settings skips the timing.
Engine options: ``timing=False`` takes the first candidate (the registered order puts the
usual winner first), ``timing_cache=False`` ignores the cache, ``mkl=False`` leaves MKL's
GEMM out and ``exclude_tactics=[names]`` any tactics by name (the last candidate standing is
kept whatever the exclusions).
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from srcore.errors import EngineBuildError

from . import layers_numpy, timing_cache
from .tactic_timing import WEIGHT_STREAM_BYTES_PER_S
from .network import Layer, Network

Factory = Callable[[Layer, Network], Any]
#: layer kind -> candidate implementations, best guess first
TACTICS: dict[str, list[tuple[str, Factory]]] = {}
#: layer kind -> ``family(layer, net) -> [(name, fn), ...]``
FAMILIES: dict[str, list[Callable]] = {}
#: layer kind -> ``predicate(layer, net)``: whether the layer has candidates threaded on numba's
#: OpenMP pool (``fn.blas == "omp"``) at more than one intra-op thread
OMP_KINDS: dict[str, Callable[[Layer, Network], bool]] = {}
_LOADED: list[bool] = []
#: timing rounds per layer (after one warm-up call of each candidate)
ROUNDS = 3


class Lazy:
    """A candidate built only when it is needed: for the timing, or as the timing cache's known
    winner (laying out every conv algorithm's weights for nothing made a warm rebuild 2-3x
    slower). ``blas`` is known before the build (the one-pool rules filter on it)."""

    __slots__ = ("build", "blas", "_fn")

    def __init__(self, build: Callable[[], Callable], blas: str | None = None):
        self.build, self.blas, self._fn = build, blas, None

    def get(self) -> Callable:
        if self._fn is None:
            self._fn = self.build()
        return self._fn


def materialize(fn):
    """The kernel of a candidate (building a :class:`Lazy` one)."""
    return fn.get() if isinstance(fn, Lazy) else fn


def register(kind: str, name: str, factory: Factory, first: bool = True) -> None:
    """Add a candidate implementation for layers of ``kind``."""
    lst = TACTICS.setdefault(kind, [])
    lst.insert(0, (name, factory)) if first else lst.append((name, factory))


def _load() -> None:
    if _LOADED:
        return
    for kind, factory in layers_numpy.FACTORIES.items():
        register(kind, "numpy", factory, first=False)
    from . import compiled  # noqa: F401  (registers the compiled tactics)
    _LOADED.append(True)


def candidates(layer: Layer, net: Network) -> list[tuple[str, Callable]]:
    """Every implementation that applies to ``layer``, best guess first."""
    _load()
    out = []
    for family in FAMILIES.get(layer.kind, ()):
        out.extend(family(layer, net))
    for name, factory in TACTICS.get(layer.kind, ()):
        fn = factory(layer, net)
        if fn is not None:
            out.append((name, fn))
    if not out:
        raise EngineBuildError(f"no trt_like implementation of a {layer.kind} layer ({layer.source})")
    return out


def choose_tactics(net: Network, options: dict[str, Any]) -> list[tuple[Layer, Callable | None]]:
    """``(layer, kernel)`` for every layer, in order (``None`` for views); each kernel has a
    ``tactic`` attribute naming the implementation chosen."""
    timing = options.get("timing", True)
    cache = timing_cache.get() if options.get("timing_cache", True) else None
    one_blas = _one_blas(options)
    on_caller = _blas_on_caller(net, one_blas is not None)
    steps = []
    for layer in net.layers:
        if layer.kind == "reshape":
            steps.append((layer, None))
            continue
        if all(net.tensors[t].size == 0 for t in layer.outputs):
            # nothing to compute (a zero-size dim): kernels and compilers need not handle it
            steps.append((layer, _named(_nothing, "empty")))
            continue
        every = candidates(layer, net)
        cands = [c for c in every if not excluded(c[0], options)] or every
        if one_blas and any(getattr(fn, "blas", None) == one_blas for _, fn in cands):
            cands = [c for c in cands if getattr(c[1], "blas", one_blas) == one_blas]
        if on_caller:
            cands = [(n, fn if getattr(fn, "blas", None) in ("omp", "mkl") else _on_caller(on_caller, fn))
                     for n, fn in cands]
        name, fn = cands[0]
        if len(cands) > 1 and timing:
            key = timing_cache.layer_key(layer, net, [n for n, _ in cands])
            known = cache.lookup(key) if cache is not None else None
            by_name = dict(cands)
            if known in by_name:
                name, fn = known, by_name[known]
            else:
                name, fn = rank([(n, materialize(f)) for n, f in cands], layer, net)[0]
                if cache is not None:
                    cache.store(key, name)
        steps.append((layer, _named(materialize(fn), name)))
    if cache is not None:
        cache.save()
    return steps


def _nothing(*arrays) -> None:
    """The kernel of a layer whose outputs are empty."""


def _one_blas(options: dict[str, Any]) -> str | None:
    """With more than one intra-op thread and MKL available: ``"mkl"``, the one threaded BLAS the
    engine's layers should use wherever they can. Two threaded BLAS in one engine fight: the
    threads each leaves spinning after a call steal the cores the other needs (MKL's 2-thread
    64x4096x4096 SGEMM alternating with numpy's: 6.6 -> 11.4 ms)."""
    from . import mkl_gemm

    if not options.get("mkl", True) or mkl_gemm.intra_op_threads() <= 1:
        return None
    return "mkl" if mkl_gemm.library() is not None else None


def _blas_on_caller(net: Network, mkl: bool = False):
    """At more than one intra-op thread, an engine with layers that thread on numba's OpenMP pool
    (:data:`OMP_KINDS`) or on MKL (``mkl``: its GNU layer is the same libgomp pool) keeps OpenBLAS
    off its own threads: OpenBLAS's workers spin for ~0.1 s after a threaded call, on the core the
    OpenMP team needs (a 2-thread OpenBLAS GEMM alternating with a 2-thread packed conv: 9.1 ms a
    pair instead of 2.1; transformer_block_explicit's attention products on OpenBLAS between MKL
    GEMMs: 3.4 -> 16-60 ms). Returns the wrapper that runs a candidate with OpenBLAS on the
    calling thread, or None."""
    from . import parallel

    if parallel.threads() <= 1:
        return None
    _load()
    if mkl or any(OMP_KINDS.get(layer.kind, _never)(layer, net) for layer in net.layers):
        return parallel.on_caller
    return None


def _on_caller(wrap, fn):
    if isinstance(fn, Lazy):
        return Lazy(lambda: wrap(fn.get()), fn.blas)
    return wrap(fn)


def _never(layer: Layer, net: Network) -> bool:
    return False


def excluded(name: str, options: dict[str, Any]) -> bool:
    """Whether engine options rule tactic ``name`` out (``mkl=False``; ``exclude_tactics=[...]``)."""
    if name.startswith("mkl") and not options.get("mkl", True):
        return True
    return name in options.get("exclude_tactics", ())


def _named(fn, name):
    try:
        fn.tactic = name
        return fn
    except AttributeError:  # a builtin or a numba dispatcher: wrap once
        def call(*a):
            return fn(*a)
        call.tactic = name
        return call


def rank(cands: list[tuple[str, Callable]], layer: Layer, net: Network, seed: int = 0):
    """``cands`` fastest first, timed on random data of the layer's shapes (constants as they are);
    a candidate that raises is last."""
    rng = np.random.default_rng(seed)
    args = [net.constants[t] if t in net.constants else rng.standard_normal(net.shape(t)).astype(np.float32)
            for t in layer.inputs]
    args += [np.empty(net.shape(t), np.float32) for t in layer.outputs]
    best = [float("inf")] * len(cands)
    ok = []
    for i, (_, fn) in enumerate(cands):
        try:
            fn(*args)   # warm-up: compiled code loads, scratch grows
            ok.append(i)
        except Exception:  # a tactic that cannot run these shapes is just not chosen
            pass
    for r in range(ROUNDS):
        for k in range(len(ok)):
            i = ok[(k + r) % len(ok)]
            t0 = time.perf_counter()
            cands[i][1](*args)
            best[i] = min(best[i], time.perf_counter() - t0)
    # timed hot, a layer finds its weights in cache; run back to back in the network it streams them
    # from memory: charge each candidate for its laid-out weights (see tactic_timing.py)
    # (a candidate that does not say streams the layer's constants as given)
    given = sum(a.nbytes for a in layer.attrs.values() if isinstance(a, np.ndarray))
    best = [b + getattr(fn, "weight_bytes", given) / WEIGHT_STREAM_BYTES_PER_S for b, (_, fn) in zip(best, cands)]
    order = sorted(range(len(cands)), key=lambda i: best[i])
    return [cands[i] for i in order]
