"""Building, loading and running trt_like engines.

``build(segment)`` and ``load(segment)`` are the ``EngineBuilder`` entry points. For every
concrete input signature the engine has a plan: the segment's graph with concrete shapes becomes
a network (``builder/convert.py``), pointwise runs are fused (``builder/fusion.py``), each layer
gets the fastest of its tactics (``tactics/choose.py``), and the plan (``builder/plan.py``) is one
generated function over an arena. A plan the model carries (``srcore build``) or the engine cache
holds is restored instead (``store.py``). A segment whose input shapes are all static is planned
at load and the engine *is* that function; otherwise plans are made for the optimization profiles
(``prepare``) and on first use of any other signature.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from srcore.plugin import EngineBuildError, EngineOptionError, KernelError, SrcoreFormatError
from srcore.plugin import TensorType
from srcore.plugin import EngineData

from .builder.convert import _per_tensor, build_network
from .builder.network import DATA_DTYPES, PLAIN_DTYPES
from .builder.support import HALF
from .builder.convert import _cast_in as _cast_input
from .builder.attention_fusion import fuse_attention
from .builder.channels_last import channels_last_to_nchw
from .builder.norm_fusion import fuse_channel_norm, fuse_global_norm, fuse_rms_norm
from .builder.resize_add import fuse_resize_add
from .builder.resize_pad import fuse_resize_pad
from .builder.shuffle import fuse_channel_shuffle
from .builder.fusion import (MAX_OPS, collapse_reshapes, drop_unread, fuse_cat_permute, fuse_conv_activation, fuse_conv_add,
                             fuse_conv_avg_pool, fuse_conv_pool, fuse_norm_activation, fuse_pad_conv1d, fuse_pointwise,
                             fuse_squeeze_excite, fuse_swish)
from .builder.plan import Plan
from .options import check_options
from .serialize import FORMAT, dump_plan
from .kernels.contexts import CONTEXTS
from .kernels.resident import release_compiler_code
from .store import PlanStore, release_pages
from .tactics.layout_choice import choose_layout
from .tactics.block_fuse import fuse_blocks
from .tactics.segment import compile_small, compile_untimed
from .tactics.thread_plan import choose_threads

log = logging.getLogger("srcore.trt_like")

#: plans kept per dynamic engine (input signatures); the oldest is dropped beyond this
MAX_PLANS = 16

#: the size a symbolic dim takes in the load-time conversion check of a dynamic engine
TRIAL_DIM = 3


class Engine:
    """One segment compiled for trt_like; ``entry`` is the callable the runtime calls."""

    def __init__(self, segment):
        self.segment = segment
        self.name = segment.name
        self.graph = segment.graph
        self.options = check_options(dict(segment.options))
        self.store = PlanStore(segment, self.options)
        self.plans: dict[tuple, Plan] = {}
        #: input signature -> where its plan came from: "built", "serialized" or "cache"
        self.origin: dict[tuple, str] = {}
        #: the node-by-node runner of the segment (``Segment.fallback``), for signatures with no plan
        self.fallback = segment.fallback
        #: input signature -> why it has no plan (its calls go to ``fallback``)
        self.unplanned: dict[tuple, str] = {}
        self.build_seconds: dict[tuple, float] = {}
        self._lock = threading.Lock()
        types = [v.type for v in self.graph.inputs]
        for v, t in zip(self.graph.inputs, types):
            if (not isinstance(t, TensorType) or t.shape is None
                    or t.dtype != "float32" and not _shape_only(v) and not _per_tensor(t)
                    and t.dtype not in DATA_DTYPES and not _cast_in(v, t)):
                raise EngineBuildError(f"{self.name}: input %{v.name} is {t}; engines take float32 tensors "
                                       f"(or 8-bit ones quantized per tensor, or indices and masks) of known rank")
        self.static = all(all(isinstance(d, int) for d in t.shape) for t in types)
        if self.static:
            plan = self.plan_for(tuple(tuple(t.shape) for t in types))
            self.entry = plan.run
        else:
            if not self.store.stored:
                self._check_converts(types)
            self.entry = self._dynamic_entry()
            for shapes in self.store.signatures():   # the profiles the engine was built for
                self.prepare(shapes)
        self.entry.describe = self.describe
        self.entry.profile = self.profile
        self.entry.memory = self.memory
        self.entry.prepare = self.prepare
        self.entry.serialize = self.serialize
        self.entry.engine = self

    # -- plans ------------------------------------------------------------------------------
    def plan_for(self, shapes: tuple[tuple[int, ...], ...]) -> Plan:
        plan = self.plans.get(shapes)
        if plan is not None:
            return plan
        with self._lock:
            plan = self.plans.get(shapes)
            if plan is None:
                t0 = time.perf_counter()
                found = self.store.load(shapes)
                if found is not None:
                    plan, origin = found
                else:
                    plan, origin = make_plan(self.segment, shapes, self.options, self.name), "built"
                    self.store.save(shapes, plan)
                seconds = self.build_seconds[shapes] = time.perf_counter() - t0
                log.info("%s: plan for inputs %s %s in %.1f ms (%d layers)", self.name, _sig(shapes),
                         _ORIGIN[origin], seconds * 1e3, len(plan.steps))
                if len(self.plans) >= MAX_PLANS:
                    old = next(iter(self.plans))
                    self.plans.pop(old)
                    self.origin.pop(old, None)
                # the raw weights are laid out: their file pages go before the warm-up run, which
                # reads back only those a chosen tactic uses as they are (the peak was both at once)
                release_pages(self.store.constants.values())
                release_compiler_code()
                _warm(plan, shapes, self.name)
                release_compiler_code()   # the kernels are bound: LLVM's code is not needed to run them
                self.plans[shapes] = plan
                self.origin[shapes] = origin
        return plan

    def prepare(self, shapes) -> None:
        """Make the plan for inputs of ``shapes`` now (an optimization profile), so that the first
        call with them pays nothing; a signature no plan can be made for goes to the fallback."""
        self.entry_for(tuple(tuple(int(d) for d in s) for s in shapes))

    def serialize(self) -> EngineData:
        """Every plan made so far, as a serialized engine (what ``srcore build`` writes)."""
        plans, arrays = [], {}
        for i, (shapes, plan) in enumerate(list(self.plans.items())):
            meta, plan_arrays = dump_plan(plan, shapes, self.options, constants=self.store.constants)
            plans.append(meta)
            arrays.update((f"p{i}.{k}", a) for k, a in plan_arrays.items())
        return EngineData("trt_like", {"format": FORMAT, "engine": self.name, "plans": plans}, arrays)

    def entry_for(self, shapes: tuple[tuple[int, ...], ...]):
        """What runs inputs of these ``shapes``: their plan, or, when no plan can be made (a
        size some layer's tactics cannot take, or a builder bug), the segment run node by
        node on the next backends (``Segment.fallback``); without one, the planning error."""
        if shapes in self.unplanned:
            return self.fallback
        try:
            return self.plan_for(shapes).run
        except (SrcoreFormatError, EngineOptionError):   # a damaged stored plan, a bad option: the user's to see
            raise
        except Exception as exc:   # any planning failure; a run-time error is the plan's to report
            why = f"{type(exc).__name__}: {exc}"
            if self.fallback is None:
                sig = ", ".join(f"({', '.join(map(str, s))})" for s in shapes)
                raise KernelError(f"{self.name}: no plan for inputs {sig} ({why}) and no fallback "
                                  f"(Options.require_full_compilation, or no backend after this one)") from exc
            with self._lock:
                if len(self.unplanned) >= MAX_PLANS:
                    self.unplanned.pop(next(iter(self.unplanned)))
                self.unplanned[shapes] = why
            return self.fallback

    def _check_converts(self, types) -> None:
        """Convert the segment once with every symbolic dim at a trial size, so that a converter
        refusing a node (an EngineBuildError) does so at load, where the partitioner falls back
        to cpu, not on the first run of some shape, where nothing can."""
        trial = [tuple(d if isinstance(d, int) else TRIAL_DIM for d in t.shape) for t in types]
        try:
            g = self.segment.specialize(trial)
        except Exception:   # the trial sizes do not fit this graph (a reshape, a cat): plans will tell
            return
        build_network(g)

    def _dynamic_entry(self):
        plans = self.plans
        entry_for = self.entry_for
        name = self.name
        n = len(self.graph.inputs)

        def run(*xs):
            if len(xs) != n:
                raise KernelError(f"{name}: {len(xs)} inputs, expected {n}")
            key = tuple(x.shape for x in xs)
            plan = plans.get(key)
            if plan is None:
                return entry_for(key)(*xs)
            return plan.run(*xs)
        return run

    def _fallback_backends(self) -> str:
        return ", ".join(getattr(self.fallback, "backends", None) or ("the next backends",))

    # -- reports ------------------------------------------------------------------------------
    def memory(self) -> dict[str, int]:
        """The arenas of the plans made so far, summed (bytes; ``tensors``: planned intermediates)."""
        tot = {"arena_bytes": 0, "lower_bound_bytes": 0, "no_reuse_bytes": 0, "tensors": 0}
        for plan in list(self.plans.values()):
            for k, v in plan.memory().items():
                tot[k] += v
        return tot

    def profile(self, *inputs, rounds: int = 5) -> list[tuple[str, float]]:
        """``(layer, seconds)`` per layer of the plan for ``inputs``: each layer timed on its own
        (best of ``rounds``), on the buffers of one real run (``srcore bench --per-op``)."""
        shapes = tuple(tuple(x.shape) for x in inputs)
        if self.entry_for(shapes) is self.fallback:
            label = f"{self.name}: node by node on {self._fallback_backends()} (no plan for these shapes)"
            return [(label, _best_time(self.fallback, inputs, rounds))]
        return self.plan_for(shapes).profile(*inputs, rounds=rounds)

    def describe(self) -> str:
        lines = []
        for shapes, plan in self.plans.items():
            sig = ", ".join(f"({', '.join(map(str, s))})" for s in shapes)
            secs = self.build_seconds.get(shapes, 0.0)
            mem = plan.memory()
            lines.append(f"plan for inputs {sig}: {len(plan.steps)} layers, arena {plan.arena_bytes:,} bytes "
                         f"(liveness lower bound {mem['lower_bound_bytes']:,}), "
                         f"{_ORIGIN[self.origin.get(shapes, 'built')]} in {secs * 1e3:.1f} ms")
            lines += [f"  {run.describe()}" for run in plan.layout_runs]
            if plan.thread_choice is not None:
                lines.append(f"  {plan.thread_choice.describe()}")
            for k, step in enumerate(plan.steps):
                layer, tactic = step.layer, step.tactic
                tactic = "in place" if k in plan.elided else tactic   # (its pieces written in its slices)
                what = layer.kind
                if layer.kind == "fused_pointwise":
                    what += f" ({len(layer.attrs['ops'])} ops: {_op_list(layer.attrs['ops'])})"
                elif layer.attrs.get("activation", "none") != "none":
                    what += f" + {layer.attrs['activation']}"
                shape = "x".join(map(str, plan.net.shape(layer.outputs[0])))
                prec = "" if step.precision == "float32" else f", {step.precision}"
                lines.append(f"  {what} -> {shape} [{tactic}{prec}]")
        for shapes, why in self.unplanned.items():
            sig = ", ".join(f"({', '.join(map(str, s))})" for s in shapes)
            lines.append(f"no plan for inputs {sig}: runs node by node on {self._fallback_backends()} ({why})")
        if not self.plans and not self.unplanned:
            lines.append("dynamic shapes: plans are built on first use of each input signature")
        return "\n".join(lines)


_ORIGIN = {"built": "built", "serialized": "loaded from the serialized engine", "cache": "loaded from the engine cache"}


def _sig(shapes) -> str:
    return ", ".join(f"({', '.join(map(str, s))})" for s in shapes)


def _best_time(fn, inputs, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(*inputs)
        best = min(best, time.perf_counter() - t0)
    return best


def _op_list(ops, limit: int = 6) -> str:
    names = [o.op for o in ops]
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def _warm(plan: Plan, shapes, name: str) -> None:
    """Run a new plan once on zeros, where it is made (at load for a static segment or a profile):
    the first call of a numba kernel binds its compiled code (type matching, loading numba's
    on-disk cache, or compiling a variant the tactic timing did not run, ~10-100 ms each), the
    plan allocates its arena, and no model call pays for either. A failure here is left to the
    first real call to report."""
    import numpy as np

    xs = [np.zeros(s, plan.net.tensors[t].storage if plan.net.tensors[t].dtype in PLAIN_DTYPES else np.float32)
          for s, t in zip(shapes, plan.net.inputs)]
    try:
        with np.errstate(all="ignore"):
            plan.run(*xs)
    except Exception as exc:  # noqa: BLE001 - the same error reaches the caller with real inputs
        log.debug("%s: warm-up run failed: %s", name, exc)


def _shape_only(v) -> bool:
    """Whether the segment reads input ``v`` for its shape only (``aten::size``: a copied chain)."""
    return bool(v.uses) and all(u.user.kind.split(".", 1)[0] in ("aten::size", "aten::dim", "aten::numel")
                                for u in v.uses)


#: the fewest layers of a compiled run beside NCHW16c runs (:func:`make_plan`)
LONG_RUN = 4


def make_plan(segment, shapes, options: dict[str, Any], name: str) -> Plan:
    """The plan of ``segment`` for concrete input ``shapes``."""
    net = drop_unread(build_network(segment.specialize(shapes)))
    if options.get("fusion", True):
        channels_last_to_nchw(net)   # (first: its linears become convs for the conv fusions)
        fuse_conv_avg_pool(net)   # (before the activation fusion: an activation after the pool then joins the merged conv)
        fuse_swish(net)
        fuse_conv_activation(net)
        fuse_norm_activation(net)
        fuse_conv_add(net)
        fuse_conv_activation(net)   # an activation after a residual add (a TCN block's relu)
        fuse_resize_add(net)
        fuse_pad_conv1d(net)
        fuse_resize_pad(net)
        fuse_squeeze_excite(net)
        fuse_rms_norm(net)
        fuse_channel_norm(net)
        fuse_global_norm(net)
    fuse_pointwise(net, MAX_OPS if options.get("fusion", True) else 1)
    if options.get("fusion", True):
        fuse_conv_pool(net)
        collapse_reshapes(net)
        fuse_channel_shuffle(net)
        fuse_attention(net)
        fuse_cat_permute(net)
    (steps, tried), runs = compile_untimed(net, options, name), []
    if steps is None:
        steps, runs = choose_layout(net, options, name)
        # beside NCHW16c runs (convnets, whose other layers are mostly a head of 2-3) only the longer
        # runs: a detection head's decoding saves ~1 us a layer, a cold compile costs 1-4 s (the
        # compilable layers never read a blocked tensor)
        steps = compile_small(net, steps, options, name, CONTEXTS, min_run=LONG_RUN if runs else 2,
                              whole=not tried)
        steps = fuse_blocks(net, steps, options, name, CONTEXTS)   # (at more than one thread, timed)
    steps, threads = choose_threads(net, steps, options, name)
    plan = Plan(net, steps, CONTEXTS)
    plan.layout_runs = runs
    plan.thread_choice = threads
    return plan


def build(segment):
    """``EngineBuilder.build``: a callable engine for ``segment`` (see :class:`srcore.plugin.Segment`)."""
    return Engine(segment).entry


def load(segment):
    """``EngineBuilder.load``: the engine of ``segment`` from the serialized engine it carries
    (``segment.stored``); plans built for another machine or with other options are rebuilt."""
    return Engine(segment).entry


def _cast_in(v, t) -> bool:
    """A half input read only by casts (``srcore.passes.widen_half``): the engine computes in float32."""
    return t.dtype in HALF and _cast_input(v)
