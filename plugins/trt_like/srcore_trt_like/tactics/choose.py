"""Tactic selection: for each layer, every implementation of the tactic table (:mod:`.table`) that
applies, timed on the layer's real shapes; the fastest wins (TensorRT's builder does the same with
its kernels).

Timing is :func:`.timing.best_times`: every candidate runs once to warm up (compiled code loads,
scratch grows), then a few rounds in a rotating order, keeping each one's best round (the least
disturbed on a shared machine; at one thread on the calling thread's own time, not the time other
processes held its core), plus the time its weights take to stream from memory. The
winner is remembered in the timing cache (:mod:`.timing_cache`), so a later build of the same
layer on the same machine and thread settings skips the timing, unless the choice was not
trusted: timed in wall time (more than one thread) while a core was taken, even after re-timing
(:mod:`.timing`); the build log says how many. Engine options: ``timing=False``
takes the first candidate (the table puts the usual winner first), ``timing_cache=False``
ignores the cache, ``mkl=False`` leaves MKL's GEMM out and ``exclude_tactics=[names]`` any tactics
by name (the last candidate standing is kept whatever the exclusions).

At more than one intra-op thread the engine runs on one of two thread pools, the OpenMP pool or
the OpenBLAS team; the large layers that have a team candidate are timed on both, and the pool
that took less in total wins (:func:`_choose_pool`).
"""
from __future__ import annotations

import hashlib
import logging
import math
import time
from typing import Any, Callable

import attrs
import numpy as np

from srcore.plugin import EngineBuildError
from srcore.plugin import drop_resident_pages, progress

from ..builder.network import Layer, Network
from ..builder.plan import Step
from ..kernels import mkl as mkl_gemm
from ..kernels import threads as _threads
from ..kernels.scratch import SCRATCH
from . import mkl as mkl_tactics
from . import table, timing_cache
from . import timing as _timing
from .blas_team import BLAS_TEAM
from .records import Candidate, Kernel
from .timing import best_times
from .timing import random_input as _random

log = logging.getLogger("srcore.trt_like")

#: the suffix of a tactic run on the calling thread by the plan's thread choice (``thread_plan.SOLO``)
SOLO = "@1t"


def candidates(layer: Layer, net: Network) -> list[Candidate]:
    """Every implementation that applies to ``layer``, best guess first."""
    out = table.candidates(layer, net)
    if not out:
        raise EngineBuildError(f"no trt_like implementation of a {layer.kind} layer ({layer.source})")
    return out


class StaleChoice(Exception):
    """A stored tactic choice this process cannot honour (the tactic is not offered here)."""


def choose_tactics(net: Network, options: dict[str, Any], *, name: str = "engine",
                   chosen: list[tuple[str, dict]] | None = None, keep: dict[int, Step] | None = None,
                   pool: list[str] | None = None) -> list[Step]:
    """One :class:`Step` per layer, in order: the chosen tactic's name and kernel (views: none).

    ``chosen`` (a serialized plan's): per layer that is not a view, the tactic's name and its
    stored layout; nothing is timed and stored layouts are not laid out again (raises
    :class:`StaleChoice` when a tactic is not among this process's candidates). ``name`` labels
    the progress bar and the log. ``keep``: steps already chosen, by ``id(layer)``, taken as they are;
    ``pool``: a one-item list, the thread pool (given: not chosen again; empty: filled in)."""
    timing = options.get("timing", True) and chosen is None
    tolerance = float(options.get("memory_tolerance", MEMORY_TOLERANCE))
    cache = timing_cache.get() if options.get("timing_cache", True) and chosen is None else None
    pools = _Pools(net, options)
    pre_ranked: dict[int, list[tuple[str, float]]] = {}
    if pool:
        pool_name = pool[0]
    else:
        pool_name = POOL
        if timing and pools.contested:
            pool_name, pre_ranked = _choose_pool(pools, cache, name)
        if pool is not None:
            pool.append(pool_name)
    pool = pool_name
    keep = keep or {}
    stored = iter(chosen) if chosen is not None else None
    steps = []
    timed = 0
    taken: list[_timing.Taken] = []     # the layers timed while a core was taken
    untrusted = 0
    for layer in progress(net.layers, f"{name}: tactics", total=len(net.layers), unit="layer"):
        if layer.kind == "reshape":
            steps.append(Step(layer, "view", None))
            continue
        if id(layer) in keep:
            steps.append(keep[id(layer)])
            continue
        if stored is not None:
            tactic, layout = next(stored, (None, None))
        if all(net.tensors[t].size == 0 for t in layer.outputs):
            # nothing to compute (a zero-size dim): kernels and compilers need not handle it
            steps.append(Step(layer, "empty", _nothing))
            continue
        if stored is not None:
            # a stored plan names its tactics in the pool it was built for: offer both pools' names
            by_name = {c.name: c for c in pools.candidates(layer, POOL)}
            by_name.update((c.name, c) for c in pools.candidates(layer, BLAS) if c.name not in by_name)
            # a step the plan's thread choice runs on the calling thread (``thread_plan.SOLO``)
            solo = isinstance(tactic, str) and tactic.endswith(SOLO)
            if solo:
                tactic = tactic[:-len(SOLO)]
            if tactic not in by_name:
                raise StaleChoice(f"its {layer.kind} layer ({layer.source or 'no source'}) uses tactic {tactic!r}, "
                                  f"which this process does not offer for it (offered: {', '.join(by_name)})")
            c = by_name[tactic]
            kernel = c.restore(layout) if layout and c.restore is not None else c.build()
            if solo:
                steps.append(Step(layer, c.name + SOLO, _threads.run_solo(kernel.fn), c.precision, kernel.layout))
                continue
            steps.append(Step(layer, c.name, kernel.fn, c.precision, kernel.layout))
            continue
        cands = pools.candidates(layer, pool)
        chosen_c = cands[0]
        if len(cands) > 1 and timing:
            key = timing_cache.layer_key(layer, net, [c.name for c in cands] + [f"memory_tolerance={tolerance}"])
            known = cache.lookup(key) if cache is not None else None
            by_name = {c.name: c for c in cands}
            times = pre_ranked.get(id(layer))
            if times is not None:    # timed when the pool was chosen
                ranked = [(by_name[n], t) for n, t in times if n in by_name]
                chosen_c, kept = decide(cache, key, ranked, layer, tolerance, cands,
                                        id(layer) not in pools.untrusted)
                untrusted += not kept
            elif known in by_name:
                chosen_c = by_name[known]
                log.debug("%s: %s %s: %s (timing cache)", name, layer.kind, _shape(net, layer), known)
            else:
                with _timing.watch() as found:
                    ranked = rank(cands, layer, net)
                chosen_c, kept = decide(cache, key, ranked, layer, tolerance, cands, _timing.trusted(found))
                timed += 1
                taken += found
                log.debug("%s: %s %s: %s -> %s", name, layer.kind, _shape(net, layer),
                          ", ".join(f"{c.name} {s * 1e3:.3f} ms ({_held(c, layer) / 2**20:.1f} MiB)"
                                    for c, s in ranked), chosen_c.name)
                if not kept:
                    untrusted += 1
                    log.debug("%s: %s %s: timed while a core was taken, not cached", name, layer.kind,
                              _shape(net, layer))
        kernel = chosen_c.build()
        steps.append(Step(layer, chosen_c.name, kernel.fn, chosen_c.precision, kernel.layout))
        _release_raw(layer)
    if cache is not None:
        cache.save()
    if timed or pre_ranked:
        SCRATCH.release()   # sized for the largest candidate timed; the winners regrow what they need
        log.info("%s: timed the tactics of %d layer(s)", name, timed + len(pre_ranked))
    if taken or untrusted:
        log.info("%s: %d layer(s) timed while a core was taken (this process's threads waiting for one "
                 "%d%%+ of a round) were re-timed; %d choice(s) still timed so are not kept in the timing cache",
                 name, len(taken), round(_timing.TAKEN * 100), untrusted)
    return steps


#: the engine's intra-op threads (more than one) are numba's OpenMP pool, MKL's on the same
#: libgomp, with numpy's OpenBLAS on the calling thread ...
POOL = "pool"
#: ... or, for its large GEMMs and convs, a team of Python threads each running OpenBLAS on one
#: thread on fixed parts of the layer (:mod:`..kernels.blas_team`)
BLAS = "blas"


class _Pools:
    """An engine's candidates under each pool (:data:`POOL`, :data:`BLAS`) at more than one intra-op
    thread. Which is faster depends on the machine (MKL's packed SGEMM at 2 threads took 39 ms
    where OpenBLAS on one thread took 30 on mlp_wide's 4096x4096 layer on an AVX2 AMD EPYC, and
    the AVX-512 packed conv 2-3x OpenBLAS's time; on Intel both win), so the builder times both
    (:func:`_choose_pool`), never guesses by vendor."""

    def __init__(self, net: Network, options: dict[str, Any]):
        self.net, self.options = net, options
        self.threads = _threads.count()
        self.one_blas = _one_blas(options)
        threaded_mkl = self.one_blas is not None and any(
            layer.kind in ("gemm", "attention") and _work(layer, net) >= _threads.PARALLEL_MIN_WORK
            or layer.kind == "gemm" and mkl_tactics.splits(layer, net)
            for layer in net.layers)
        self.on_caller = _blas_on_caller(net, threaded_mkl)
        #: ids of the contested layers whose timing on the chosen pool was not trusted (:mod:`.timing`)
        self.untrusted: set[int] = set()
        #: the layers with a candidate on the Python team (large products at >1 thread)
        self.contested = [layer for layer in net.layers if layer.kind != "reshape"
                          and not all(net.tensors[t].size == 0 for t in layer.outputs)
                          and any(c.blas == BLAS_TEAM for c in self._every(layer))]

    def _every(self, layer: Layer) -> list[Candidate]:
        every = candidates(layer, self.net)
        return [c for c in every if not excluded(c.name, self.options)] or every

    def candidates(self, layer: Layer, pool: str) -> list[Candidate]:
        """``layer``'s candidates when the engine runs on ``pool``."""
        every = self._every(layer)
        team = [c for c in every if c.blas == BLAS_TEAM]
        if pool == BLAS and team:
            # the team's tactics, and those that run on the calling thread (OpenBLAS on it): the
            # layer is never slower on the team's engine than its 1-thread tactics (resnet_small's
            # stem took 5.8 ms on im2col_gemm_team where simd_direct took 4.3). Every one of them is
            # held to one OpenBLAS thread, whatever its record says: the numpy conv (blas None, a
            # plain np.matmul) ran OpenBLAS's own 2 threads, won two of resnet_small's 512-channel
            # layers at build by using the second core, and left OpenBLAS's worker spinning ~0.1 s
            # after each call on the core the team needs (40 ms of CPU per 50 ms engine call), so the
            # team's governors saw waits and ran every team tactic on the caller
            return team + [_on_caller(_threads.on_caller, c) for c in every if c.blas in (None, "openblas")]
        cands = [c for c in every if c.blas != BLAS_TEAM] or every
        if self.one_blas and any(c.blas == self.one_blas for c in cands) \
                and _work(layer, self.net) >= _threads.PARALLEL_MIN_WORK:
            # (numba's OpenMP regions run on the libgomp pool MKL's GNU layer uses: one pool, no fight;
            # packed_sgemm_split was left out here, and on the AMD EPYC MKL's GEMMs lose to it)
            cands = [c for c in cands if c.blas in (None, "omp") or c.blas == self.one_blas]
        # on the team, OpenBLAS stays off its own threads everywhere: they spin after a call
        wrap = self.on_caller if pool == POOL else _threads.on_caller
        if wrap:
            cands = [c if c.blas in ("omp", "mkl", BLAS_TEAM) else _on_caller(wrap, c) for c in cands]
        return cands


#: the order in which the pools' blocks are timed: each pool twice, ABBA, each candidate keeping its
#: best of both passes. One pass each on the loaded 2-vCPU Sapphire Rapids VM picked the team for
#: mlp_wide in one of four cold builds (its total then 28 ms against the pool's 20-26 ms in the
#: others) and the timing cache kept that choice: the engine ran 1.7x slower than on the pool (MKL
#: at 2 threads) for good; a load spike during one block now has to recur in the other pass
POOL_PASSES = (POOL, BLAS, BLAS, POOL)


def _choose_pool(pools: _Pools, cache, name: str) -> tuple[str, dict[int, list[tuple[str, float]]]]:
    """The pool the engine runs on: the one whose contested layers took less time in total, each
    layer at its fastest candidate on that pool, every pool timed as a block (one pool's spinning
    threads must not slow the other's timing), twice (:data:`POOL_PASSES`), each candidate at its
    best pass. Returns the pool and, per contested layer (by id),
    the ``(candidate name, seconds)`` timed on it (empty when the timing cache knew the pool)."""
    net = pools.net
    key = "pool:" + hashlib.sha256("|".join(
        timing_cache.layer_key(layer, net, [c.name for c in pools.candidates(layer, p)])
        for layer in pools.contested for p in (POOL, BLAS)).encode()).hexdigest()[:24]
    known = cache.lookup(key) if cache is not None else None
    if known in (POOL, BLAS):
        log.debug("%s: thread pool %s (timing cache)", name, known)
        return known, {}
    times: dict[str, dict[int, dict[str, float]]] = {POOL: {}, BLAS: {}}
    doubt: dict[str, dict[int, int]] = {POOL: {}, BLAS: {}}   # untrusted passes per layer
    for pool in POOL_PASSES:
        for layer in pools.contested:
            with _timing.watch() as found:
                ranked = rank(pools.candidates(layer, pool), layer, net)
            if not _timing.trusted(found):
                doubt[pool][id(layer)] = doubt[pool].get(id(layer), 0) + 1
            seen = times[pool].setdefault(id(layer), {})
            for c, s in ranked:
                seen[c.name] = min(s, seen.get(c.name, math.inf))
            log.debug("%s: %s %s on %s: %s", name, layer.kind, _shape(net, layer), pool,
                      ", ".join(f"{c.name} {s * 1e3:.3f} ms" for c, s in ranked))
    times = {p: {i: sorted(seen.items(), key=lambda kv: kv[1]) for i, seen in by_layer.items()}
             for p, by_layer in times.items()}
    total = {p: sum(r[0][1] for r in times[p].values()) for p in times}
    builds = 0
    if cache is not None:   # each pool at its least total over the builds that timed it (timing_cache)
        total, builds = cache.merge(key, total)
    pool = BLAS if total[BLAS] < total[POOL] else POOL
    log.info("%s: %d layer(s) large enough to split: %.3f ms on the OpenMP pool, %.3f ms on the OpenBLAS "
             "team -> %s", name, len(pools.contested), total[POOL] * 1e3, total[BLAS] * 1e3, pool)
    # a layer is in doubt on a pool when no pass of it there was trusted (each candidate keeps its best pass)
    in_doubt = {p: {i for i, n in by_layer.items() if n == POOL_PASSES.count(p)} for p, by_layer in doubt.items()}
    pools.untrusted = in_doubt[pool]
    if cache is not None and (not in_doubt[POOL] | in_doubt[BLAS] or builds >= timing_cache.EVIDENCE_BUILDS):
        cache.store(key, pool)
    return pool, times[pool]


def _release_raw(layer: Layer) -> None:
    """The layer's raw weights are laid out (or read in place by its kernel): their pages of the model
    file leave the resident set now rather than after the whole network, so that a build never
    holds every raw weight and every laid-out one at once (they fault back in if a kernel reads
    them as they are)."""
    drop_resident_pages([v for v in layer.attrs.values() if isinstance(v, np.ndarray)])


def _shape(net: Network, layer: Layer) -> str:
    return "x".join(map(str, net.shape(layer.outputs[0])))


def _work(layer: Layer, net: Network) -> float:
    """Multiply-adds of a matrix-product layer (others: unbounded). Below the threading threshold a
    product runs on one thread on either BLAS, so the one-BLAS rule has nothing to prevent and the
    timing decides (MKL's call costs ~20 us more than OpenBLAS's on mlp_tiny's 1x64 @ 64x64)."""
    if layer.kind == "gemm":
        n, k = layer.attrs["weight"].shape
        return net.tensors[layer.inputs[0]].size // max(k, 1) * n * k
    if layer.kind == "attention":
        B, L, E3 = net.shape(layer.inputs[0])
        return 2 * B * L * L * (E3 // 3)
    return float("inf")


def _nothing(*arrays) -> None:
    """The kernel of a layer whose outputs are empty."""


def _one_blas(options: dict[str, Any]) -> str | None:
    """With more than one intra-op thread and MKL available: ``"mkl"``, the one threaded BLAS the
    engine's layers should use wherever they can. Two threaded BLAS in one engine fight: the
    threads each leaves spinning after a call steal the cores the other needs (MKL's 2-thread
    64x4096x4096 SGEMM alternating with numpy's: 6.6 -> 11.4 ms)."""
    if not options.get("mkl", True) or mkl_gemm.intra_op_threads() <= 1:
        return None
    return "mkl" if mkl_gemm.library() is not None else None


def _blas_on_caller(net: Network, mkl: bool = False):
    """At more than one intra-op thread, an engine with layers that thread on numba's OpenMP pool
    (:func:`.table.threaded`) or on MKL (``mkl``: its GNU layer is the same libgomp pool) keeps
    OpenBLAS off its own threads: OpenBLAS's workers spin for ~0.1 s after a threaded call, on the
    core the OpenMP team needs (a 2-thread OpenBLAS GEMM alternating with a 2-thread packed conv:
    9.1 ms a pair instead of 2.1; transformer_block_explicit's attention products on OpenBLAS
    between MKL GEMMs: 3.4 -> 16-60 ms). Returns the wrapper that runs a kernel with OpenBLAS on
    the calling thread, or None."""
    if _threads.count() <= 1:
        return None
    if mkl or any(table.threaded(layer, net) for layer in net.layers):
        return _threads.on_caller
    return None


def _on_caller(wrap: Callable, cand: Candidate) -> Candidate:
    def build() -> Kernel:
        k = cand.build()
        return attrs.evolve(k, fn=wrap(k.fn))

    def restore(layout) -> Kernel:
        k = cand.restore(layout)
        return attrs.evolve(k, fn=wrap(k.fn))
    return attrs.evolve(cand, build=build, restore=restore if cand.restore is not None else None)


def excluded(name: str, options: dict[str, Any]) -> bool:
    """Whether engine options rule tactic ``name`` out (``mkl=False``; the NCHW16c 1x1 and depthwise splits
    with ``nchwc_split`` / ``nchwc_rows`` unset or false; ``nchwc=False``: every NCHW16c kernel;
    ``exclude_tactics=[...]``)."""
    if name.startswith("mkl") and not options.get("mkl", True):
        return True
    small = name.startswith(("pointwise_", "depthwise_"))   # (the dense conv's splits are always offered)
    if small and name.endswith(("_nchw16c_omp", "_nchw16c_h8_omp")) and not options.get("nchwc_split", False):
        return True
    if small and name.endswith(("_nchw16c_rows_omp", "_nchw16c_h8_rows_omp")) and not options.get("nchwc_rows", False):
        return True
    # (a fused layer's tactic is named after its conv's, "dense_nchw16c_omp+max_pool": nchwc=False rules it out too)
    if name.split("+")[0].endswith(("_nchw16c", "_nchw16c_h8", "_nchw16c_omp", "_nchw16c_rows_omp", "_nchw16c_h8_omp",
                                    "_nchw16c_h8_rows_omp")) \
            and options.get("nchwc") is False:
        return True   # (on NCHW convs too, tactics/conv.py)
    return name in options.get("exclude_tactics", ())


#: a tactic within this fraction of the fastest that holds fewer weight bytes wins (engine option
#: ``memory_tolerance``): resnet_small's tactics timed within a few percent of each other on a
#: loaded machine, and a Winograd F(4x4) winner held 4x its layer's raw weights (36 MiB for one
#: 512-channel layer, 16 % of the process) for a gain under the timing's noise
MEMORY_TOLERANCE = 0.05


def _held(cand: Candidate, layer: Layer) -> int:
    """Bytes of weights the (built) candidate keeps resident: what it laid out, but no more than a
    call reads (MKL reserves a packed buffer far larger than what it writes); a tactic that lays
    nothing out reads the layer's constants in place."""
    k = cand.build()
    laid = sum(a.nbytes for a in k.layout.values() if isinstance(a, np.ndarray))
    if not laid:
        return sum(a.nbytes for a in layer.attrs.values() if isinstance(a, np.ndarray))
    return laid if k.weight_bytes is None else min(laid, k.weight_bytes)


def lean(ranked: list[tuple[Candidate, float]], layer: Layer, tolerance: float,
         order: list[Candidate] | None = None) -> Candidate:
    """Of the candidates within ``tolerance`` of the fastest (``ranked``: fastest first), the one
    holding the fewest weight bytes; of equals, the first in ``order`` (the tactic table's, best
    guess first), else the faster. Why the table's order: within the tolerance the timed order of
    equals is the noise of one build (resnet_small's 56x56 convs' top two swapped between the
    four pool passes of one build under load), and a fixed order makes every build pick alike."""
    fastest = ranked[0][1]
    near = [c for c, s in ranked if s <= fastest * (1 + tolerance)]
    if len(near) < 2 or math.isinf(fastest):
        return ranked[0][0]
    index = {id(c): i for i, c in enumerate(order if order is not None else near)}
    return min(near, key=lambda c: (_held(c, layer), index.get(id(c), len(index))))


def decide(cache, key: str, ranked: list[tuple[Candidate, float]], layer: Layer, tolerance: float,
           order: list[Candidate], trusted: bool) -> tuple[Candidate, bool]:
    """The candidate a layer gets from this build's ``ranked`` timings (fastest first) pooled with
    the evidence of the earlier builds in the timing cache (each candidate at its least time,
    :meth:`.timing_cache.TimingCache.merge`), and whether the choice is kept as the layer's winner:
    when this build's timing was ``trusted``, or after :data:`.timing_cache.EVIDENCE_BUILDS` builds."""
    kept = trusted
    if cache is not None:
        by_name = {c.name: c for c, _ in ranked}
        best, builds = cache.merge(key, {c.name: s for c, s in ranked})
        ranked = sorted(((by_name[n], s) for n, s in best.items()), key=lambda p: p[1])
        kept = trusted or builds >= timing_cache.EVIDENCE_BUILDS
    chosen = lean(ranked, layer, tolerance, order)
    if kept and cache is not None:
        cache.store(key, chosen.name)
    return chosen, kept


#: a rank that took more CPU time than this (seconds) ... of a layer whose fastest candidate takes
#: less than this is timed again (:func:`rank`): small layers' rounds take ~10-60 ms a rank
RERANK_CPU_S, RERANK_LAYER_S = 0.25, 100e-6


def rank(cands: list[Candidate], layer: Layer, net: Network, seed: int = 0) -> list[tuple[Candidate, float]]:
    """``(candidate, seconds)`` fastest first, timed on random data of the layer's shapes (constants
    as they are; a small layer timed again when its rank loaded code: :data:`RERANK_CPU_S`); a
    candidate that raises is last (``inf``). Each is charged for streaming its
    laid-out weights (a candidate that does not say streams the layer's constant attributes as given)."""
    rng = np.random.default_rng(seed)
    args = [net.constants[t] if t in net.constants else _random(net.tensors[t], rng) for t in layer.inputs]
    args += [np.empty(net.shape(t), net.tensors[t].storage) for t in layer.outputs]
    kernels = [c.build() for c in cands]
    if _threads.count() > 1:
        # a governed kernel's first call runs on the calling thread alone (threads.Governor), so
        # best_times' warm-up call would leave its team's first run (threads started, per-thread
        # buffers touched) inside the timed rounds: one more call first
        for k in kernels:
            try:
                k.fn(*args)
            except Exception:   # best_times' warm-up skips it
                pass
    given = sum(a.nbytes for a in layer.attrs.values() if isinstance(a, np.ndarray))
    calls = [(lambda fn=k.fn: fn(*args)) for k in kernels]
    weights = [given if k.weight_bytes is None else k.weight_bytes for k in kernels]
    cpu = time.process_time()
    best = best_times(calls, skip_failures=True, weight_bytes=weights)
    if time.process_time() - cpu > RERANK_CPU_S and min(best) < RERANK_LAYER_S:
        # the process loaded (or compiled) its candidates' code in this rank, and a small layer's
        # rounds read slow beside it: res2net's first 1x1 conv timed its 2-3 us SIMD tactics at
        # 7-14 us (1.5 s wall of loads in that rank) and took a 9 us BLAS one; again at once, 3.3 us
        best = best_times(calls, skip_failures=True, weight_bytes=weights)
    order = sorted(range(len(cands)), key=lambda i: best[i])
    return [(cands[i], best[i]) for i in order]
