"""An execution plan: the network's layers as kernel calls (:class:`Step`: the tactic chosen for each)
over planned buffers, as one generated Python function.

Tensors are of four kinds: the engine's inputs (arguments), constants (bound once),
results the engine returns (fresh arrays per call: the caller owns them; a small one written by
a kernel that binds its arrays is made in the arena and copied out, see ``Plan._staged``) and
intermediates, which live in one arena per execution context (``kernels/contexts.py``: lent
per call, at most one per core; per thread for a plan under 64 KiB), placed by srcore's greedy-by-size
planner over their lifetimes (a ``reshape`` is a view of its base and extends the
base's lifetime). The run function is straight-line code: for each layer,
``kernel(*inputs, *outputs)``.

Concat elision (TensorRT's): a ``cat`` whose output is contiguous in each piece (every dim before
the cat's is 1) has each piece that a kernel of the plan writes laid out in its slice of the
output, so the kernel writes it there and the cat copies nothing; a ``cat`` whose pieces already
lie in order in one buffer (DenseNet's growing feature list: each layer's cat is a prefix of the
next one's) becomes a view of it and no step. The cats are visited last first, so the largest
buffer takes the pieces.
"""
from __future__ import annotations

import math
import re
import threading
from typing import Any, Callable

import numpy as np

from srcore.plugin import Lifetime, TensorRequest, lower_bound, make_planner, no_reuse_bytes, openblas

import attrs

from .network import PLAIN_DTYPES, Layer, Network

F32 = np.dtype(np.float32)
#: plans with an arena at least this large run in an execution context (kernels/contexts.py)
CONTEXT_MIN_BYTES = 64 << 10
#: staged through the arena (:meth:`Plan._staged`) up to this size: copying 64 KiB costs ~1.5 us,
#: rebinding a conv to a new array 6-12 us (Sapphire Rapids, 1 thread)
STAGE_MAX_BYTES = 64 << 10


@attrs.frozen
class Step:
    """One layer of a plan: the tactic chosen for it and its kernel ``fn(*inputs, *outputs)``
    (None for a view: a ``reshape``, tactic ``"view"``), in ``precision``."""

    layer: Layer = attrs.field(eq=False)
    tactic: str
    fn: Callable[..., Any] | None = attrs.field(eq=False)
    precision: str = "float32"
    #: the weights the tactic laid out, by name (a serialized plan stores them)
    layout: dict = attrs.field(factory=dict, eq=False, repr=False)


class Plan:
    """``plan(*inputs)`` runs the network; ``steps`` are its :class:`Step` s in order."""

    def __init__(self, net: Network, steps: list[Step], contexts=None):
        self.net = net
        self.steps = steps
        #: where calls take their arena and scratch (``kernels.contexts.Contexts``); None: per thread
        self.contexts = contexts
        #: the NCHW16c runs and how each was decided (``tactics.layout_choice.RunChoice``; built plans only)
        self.layout_runs: list = []
        #: which split steps run on the calling thread and how it was decided (``tactics.thread_plan``; built plans)
        self.thread_choice = None
        #: tensor -> (the tensor whose memory it uses, byte offset in it): views and cat pieces
        self.root: dict[int, tuple[int, int]] = {}
        for layer in self.layers():
            if layer.kind == "reshape":
                src = layer.inputs[0]
                self.root[layer.outputs[0]] = self.root.get(src, (src, 0))
        #: indices of the steps of cats whose output is a view (no call)
        self.elided: set[int] = self._place_cat_pieces()
        #: small results and inputs of kernels that bind their arrays (see :data:`STAGE_MAX_BYTES`)
        self.staged_out, self.staged_in = self._staged()
        self.fresh = self._fresh_roots()
        self.copies = self._copies()
        self.arena_bytes, self.offsets = self._plan_arena()
        self._tls = threading.local()
        self.run = self._generate()

    def __call__(self, *inputs):
        return self.run(*inputs)

    def layers(self) -> list[Layer]:
        return [s.layer for s in self.steps]

    def profile(self, *inputs, rounds: int = 5) -> list[tuple[str, float]]:
        """Each layer's best time over ``rounds`` runs, on private buffers (not the arena)."""
        import time

        calls = self.step_calls(*inputs)
        best = [float("inf")] * len(calls)
        for _ in range(rounds):
            for i, (_, fn, args) in enumerate(calls):
                t0 = time.perf_counter()
                fn(*args)
                best[i] = min(best[i], time.perf_counter() - t0)
        elided = {id(self.steps[k]) for k in self.elided}   # (no call in a run: reported, not timed)
        return [(self.label(s), 0.0 if id(s) in elided else best[i]) for i, (s, _, _) in enumerate(calls)]

    def label(self, step: Step) -> str:
        """``kind -> shape [tactic]`` of one of the plan's steps."""
        tactic = "in place" if any(self.steps[k] is step for k in self.elided) else step.tactic
        return f"{step.layer.kind} -> {'x'.join(map(str, self.net.shape(step.layer.outputs[0])))} [{tactic}]"

    def step_calls(self, *inputs) -> list[tuple[Step, Callable[..., Any], tuple]]:
        """``(step, kernel, arguments)`` of each step with a kernel, in order, on private buffers (not
        the arena): calling them in order runs the network, each call can be timed on its own."""
        net = self.net
        vals: dict[int, np.ndarray] = dict(net.constants)
        vals.update((t, _plain(x, net.tensors[t])) for t, x in zip(net.inputs, inputs))
        calls = []
        for step in self.steps:
            layer = step.layer
            if step.fn is None:
                vals[layer.outputs[0]] = vals[layer.inputs[0]].reshape(net.shape(layer.outputs[0]))
                continue
            for t in layer.outputs:
                if t not in vals:
                    vals[t] = np.empty(net.shape(t), net.tensors[t].storage)
            calls.append((step, step.fn, tuple(vals[t] for t in (*layer.inputs, *layer.outputs))))
        return calls

    def _diagnose(self, exc: BaseException, inputs: tuple) -> None:
        """Re-run the layers one at a time on private buffers; raise a KernelError naming the first
        that fails (its kind, chosen tactic, shapes and the node it came from)."""
        from srcore.plugin import KernelError

        net = self.net
        vals: dict[int, np.ndarray] = dict(net.constants)
        vals.update((t, _plain(x, net.tensors[t])) for t, x in zip(net.inputs, inputs))
        for step in self.steps:
            layer, fn = step.layer, step.fn
            if fn is None:
                vals[layer.outputs[0]] = vals[layer.inputs[0]].reshape(net.shape(layer.outputs[0]))
                continue
            for t in layer.outputs:
                vals[t] = np.empty(net.shape(t), net.tensors[t].storage)
            try:
                fn(*(vals[t] for t in (*layer.inputs, *layer.outputs)))
            except Exception as err:
                ins = ", ".join(f"{vals[t].dtype}{list(vals[t].shape)}" for t in layer.inputs)
                where = f" (from {layer.source})" if layer.source else ""
                raise KernelError(f"engine layer {layer.kind} [{step.tactic}]{where} failed on "
                                  f"inputs {ins}: {type(err).__name__}: {_message(layer, err)}") from exc

    # -- memory -----------------------------------------------------------------------------
    def root_of(self, t: int) -> int:
        return self._where(t)[0]

    def _where(self, t: int) -> tuple[int, int]:
        """``(root tensor, byte offset in it)`` of ``t``'s memory."""
        off = 0
        while t in self.root:
            t, o = self.root[t]
            off += o
        return t, off

    def _place_cat_pieces(self) -> set[int]:
        """Concat elision (see the module doc): adds each piece placed in its cat's output to
        ``root`` and returns the steps of the cats left with nothing to copy."""
        net = self.net
        made = {t: layer for layer in self.layers() if layer.kind != "reshape" for t in layer.outputs}
        # not movable: the caller's and the constants' memory, and what the engine returns (a view too)
        fixed = set(net.inputs) | set(net.constants) | {self.root_of(t) for t in net.outputs}
        elided = set()
        for k in reversed(range(len(self.steps))):
            layer = self.steps[k].layer
            out, dim, pieces = layer.outputs[0], layer.attrs.get("dim"), layer.inputs
            if (layer.kind != "cat" or layer.attrs.get("permuted") is not None or out in fixed
                    or math.prod(net.shape(out)[:dim]) != 1 or len(set(pieces)) != len(pieces)
                    or any(net.tensors[t].storage != net.tensors[out].storage for t in pieces)):
                continue
            starts = np.cumsum([0] + [net.tensors[t].nbytes for t in pieces[:-1]]).tolist()
            base, off = self._where(pieces[0])
            if out not in self.root and base != out and base not in fixed and all(
                    self._where(t) == (base, off + s) for t, s in zip(pieces, starts)):
                self.root[out] = (base, off)
                elided.add(k)
                continue
            for t, s in zip(pieces, starts):
                if t not in fixed and t not in self.root and t in made:
                    self.root[t] = (out, s)
            base, off = self._where(out)
            if all(self._where(t) == (base, off + s) for t, s in zip(pieces, starts)):
                elided.add(k)
        return elided

    def _staged(self) -> tuple[set[int], set[int]]:
        """``(results, inputs)`` staged in the arena: the roots of returned tensors (copied out at
        the end) and the float32 inputs (copied in first) of at most :data:`STAGE_MAX_BYTES` that a
        kernel binding its arrays (``same_arrays``) writes or reads. Such a kernel checks and binds
        a new array at each call (6-12 us for an NCHW16c conv, half again its compute on a 16x16
        plane): a head's returned convs paid it every call, the caller's fresh input too. An input
        array passed again is read in place (no copy; the kernel is bound to it)."""
        net = self.net
        fixed = set(net.inputs) | set(net.constants)
        written = {self.root_of(t) for s in self.steps if getattr(s.fn, "same_arrays", False) for t in s.layer.outputs}
        read = {t for s in self.steps if getattr(s.fn, "same_arrays", False) for t in s.layer.inputs}
        small = [self.root_of(t) for t in net.outputs if self.root_of(t) not in fixed]
        out = {r for r in small if r in written and net.tensors[r].nbytes <= STAGE_MAX_BYTES}
        viewed = {base for base, _ in self.root.values()}   # (a view of a staged input would not follow it to the caller's array)
        ins = {t for t in net.inputs if t in read and t not in viewed and net.tensors[t].dtype == "float32"
               and net.tensors[t].nbytes <= STAGE_MAX_BYTES}
        return out, ins

    def _fresh_roots(self) -> set[int]:
        """Tensors allocated per call: the returned ones (or the bases they view), unless that base
        is an input or a constant (those returns are copied, see ``copies``) or staged."""
        fixed = set(self.net.inputs) | set(self.net.constants) | self.staged_out
        return {self.root_of(t) for t in self.net.outputs if self.root_of(t) not in fixed}

    def _copies(self) -> dict[int, int]:
        """Returned tensors whose memory is an input's, a constant's or the arena's (staged):
        copied into a fresh array."""
        fixed = set(self.net.inputs) | set(self.net.constants) | self.staged_out
        return {t: self.root_of(t) for t in self.net.outputs if self.root_of(t) in fixed}

    def _plan_arena(self) -> tuple[int, dict[int, int]]:
        fixed = (set(self.net.inputs) - self.staged_in) | set(self.net.constants) | self.fresh
        first: dict[int, int] = {t: 0 for t in self.staged_in}
        last: dict[int, int] = {t: 0 for t in self.staged_in}
        end = len(self.steps)
        for r in self.staged_out:   # (read by the copy after the last layer)
            last[r] = end
        for i, layer in enumerate(self.layers()):
            for t in layer.outputs:
                r = self.root_of(t)
                first.setdefault(r, i)
                last[r] = max(last.get(r, i), i)
            for t in layer.inputs:
                r = self.root_of(t)
                last[r] = max(last.get(r, i), i)
        reqs = [TensorRequest(r, Lifetime(first[r], last[r]), self.net.tensors[r].nbytes)
                for r in first if r not in fixed]
        #: the arena's request set, for reports (liveness lower bound, no-reuse sum)
        self.requests = reqs
        if not reqs:
            return 0, {}
        plan = make_planner("precomputed_offsets").plan(reqs)
        return plan.total_bytes, dict(plan.offsets)

    def memory(self) -> dict[str, int]:
        """The arena against the liveness lower bound and the no-reuse sum of its tensors."""
        return {"arena_bytes": self.arena_bytes, "lower_bound_bytes": lower_bound(self.requests),
                "no_reuse_bytes": no_reuse_bytes(self.requests), "tensors": len(self.requests)}

    def _buffers(self) -> list[np.ndarray]:
        """This thread's views of its arena, one per planned tensor (and per view of one)."""
        arena = np.empty(max(self.arena_bytes, 1), np.uint8)
        out = []
        for t in self._planned:
            r, off = self._where(t)
            start, tensor = self.offsets[r] + off, self.net.tensors[t]
            out.append(arena[start:start + tensor.nbytes].view(tensor.storage).reshape(self.net.shape(t)))
        return out

    def _context_buffers(self, ctx) -> list[np.ndarray]:
        """The buffers of this plan in execution context ``ctx`` (made at its first call there)."""
        bufs = self._buffers()
        ctx.arenas[self._key] = (max(self.arena_bytes, 1), bufs)
        return bufs

    # -- code ---------------------------------------------------------------------------------
    def _generate(self):
        net = self.net
        g: dict[str, Any] = {"_empty": np.empty, "_f32": F32, "_asc": np.ascontiguousarray, "_copyto": np.copyto}
        names: dict[int, str] = {}
        for i, t in enumerate(net.inputs):
            names[t] = f"x{i}"
        for t, arr in net.constants.items():
            names[t] = f"_c{t}"
            g[names[t]] = arr
        planned = [t for t in net.tensors if self.root_of(t) in self.offsets]
        self._planned = planned
        for t in planned:
            names[t] = f"b{t}"
        params = ", ".join(f"x{i}" for i in range(len(net.inputs)))
        lines = [f"def run({params}):", "  try:"]
        for i, t in enumerate(net.inputs):
            if net.tensors[t].dtype in PLAIN_DTYPES:   # indices, masks, half inputs of a cast: C arrays of their dtype
                g[f"_d{i}"] = net.tensors[t].storage
                lines.append(f"    if not x{i}.flags.c_contiguous or x{i}.dtype != _d{i}: x{i} = _asc(x{i}, _d{i})")
                continue
            if net.tensors[t].dtype != "float32":
                # a quantized input: its integers, once its parameters are the ones baked in
                g[f"_qin{i}"] = _quantized_input(net.tensors[t])
                lines.append(f"    x{i} = _qin{i}(x{i})")
                continue
            # the kernels take native float32 C arrays: a non-contiguous view or a byte-swapped
            # ('>f4') float32 array, which the runtime's dtype check accepts, is converted once
            lines.append(f"    if not x{i}.flags.c_contiguous or x{i}.dtype != _f32: x{i} = _asc(x{i}, _f32)")
        # a plan with an arena worth sharing runs in an execution context (kernels/contexts.py:
        # arena and scratch lent per call, at most one set per core); a tiny one keeps its
        # arena per thread and saves the context's ~1 µs
        in_context = self.contexts is not None and self.arena_bytes >= CONTEXT_MIN_BYTES
        if planned and in_context:
            lines.append("    try:")
            lines.append("        _b = _ctx.arenas[_key][1]")
            lines.append("    except KeyError:")
            lines.append("        _b = _arena(_ctx)")
            lines.append(f"    {', '.join(names[t] for t in planned)}, = _b")
        elif planned:
            lines.append("    try:")
            lines.append("        _b = _tls.b")
            lines.append("    except AttributeError:")
            lines.append("        _b = _tls.b = _bufs()")
            lines.append(f"    {', '.join(names[t] for t in planned)}, = _b")
        for i, t in enumerate(net.inputs):
            if t in self.staged_in:
                # the array of the last call is read where it is (the conv stays bound to it);
                # another one is copied into the arena buffer (the conv stays bound to that)
                g[f"_last{i}"] = [None]
                names[t] = f"s{t}"
                lines += [f"    if x{i} is _last{i}[0]:", f"        s{t} = x{i}", "    else:",
                          f"        _copyto(b{t}, x{i})", f"        s{t} = b{t}", f"        _last{i}[0] = x{i}"]
        g["_tls"] = self._tls
        g["_bufs"] = self._buffers
        g["_key"] = self._key = object()
        g["_arena"] = self._context_buffers
        if in_context:
            g["_enter"], g["_leave"] = self.contexts.enter, self.contexts.leave
        # the layers held to one OpenBLAS thread (``openblas.on_caller``: at more than one intra-op
        # thread every layer but the OpenMP / MKL / team ones) are held once for the whole call: the
        # hold's two OpenBLAS count calls cost ~2.2 us a layer, ~0.1 ms of mobilenet_v3's 2 ms at 2
        # threads; the unheld layers run no OpenBLAS, and a team tactic's own hold nests
        hold = False
        for k, step in enumerate(self.steps):
            layer, fn = step.layer, step.fn
            if k in self.elided:
                continue   # its pieces were written in place
            if layer.kind == "reshape":
                t = layer.outputs[0]
                if t not in names:
                    src = names[layer.inputs[0]]
                    names[t] = f"v{t}"
                    lines.append(f"    v{t} = {src}.reshape({net.shape(t)!r})")
                continue
            for t in layer.outputs:
                if t not in names:
                    names[t] = f"v{t}"
                    g[f"_d{t}"] = net.tensors[t].storage
                    lines.append(f"    v{t} = _empty({net.shape(t)!r}, _d{t})")
            inner = getattr(fn, "blas_held", None)
            if inner is not None:
                # held to one OpenBLAS thread: the call holds once around every layer instead
                fn, hold = inner, True
            g[f"_k{k}"] = fn
            args = ", ".join(names[t] for t in (*layer.inputs, *layer.outputs))
            lines.append(f"    _k{k}({args})")
        for t, src in self.copies.items():
            lines.append(f"    r{t} = {names[src]}.reshape({net.shape(t)!r}).copy()")
            names[t] = f"r{t}"   # (after: a returned constant or input is its own source)
        outs = []
        for t in net.outputs:
            tensor = net.tensors[t]
            if tensor.dtype == "float32" or tensor.dtype in PLAIN_DTYPES:
                outs.append(names[t])
                continue
            g[f"_qout{t}"] = _quantized_output(tensor)
            outs.append(f"_qout{t}({names[t]})")
        lines.append(f"    return {outs[0]}" if len(outs) == 1 else f"    return ({', '.join(outs)},)")
        # no cost on the happy path: a failing call is re-run layer by layer to name the culprit
        lines += ["  except Exception as _e:", f"    _diagnose(_e, ({params}{',' if params else ''}))", "    raise"]
        if in_context:
            lines[1:2] = ["  _ctx = _enter()", "  try:"]
            lines += ["  finally:", "    _leave(_ctx)"]
        g["_diagnose"] = self._diagnose
        self.source = "\n".join(lines) + "\n"
        exec(compile(self.source, "<trt_like engine>", "exec"), g)
        return _held(g["run"]) if hold else g["run"]


def _held(run):
    """``run`` inside one region of numpy's OpenBLAS on one thread (``openblas.enter`` / ``leave``)."""
    enter, leave = openblas.enter, openblas.leave

    def held(*xs):
        token = enter()
        try:
            return run(*xs)
        finally:
            leave(token)
    return held


#: how a compiled segment's error message names the sub-layer that raised it (its place, not its
#: source: the generated code stays the same whatever the import path named the nodes)
SEGMENT_AT = "(segment layer {})"
_SEGMENT_AT = re.compile(r"\(segment layer (\d+)\)")


def explain_segment(layer: Layer, message: str) -> str:
    """``message`` raised by ``layer``'s compiled segment with each ``(segment layer k)`` replaced by
    that sub-layer's source."""
    subs = layer.attrs.get("layers", ())

    def source(m: re.Match) -> str:
        k = int(m.group(1))
        return f"at {subs[k][4] or 'no source'}" if k < len(subs) else m.group(0)
    return _SEGMENT_AT.sub(source, message)


def _message(layer: Layer, err: BaseException) -> str:
    """``err``'s message, a compiled segment's naming the node of its sub-layer that raised it."""
    return explain_segment(layer, str(err)) if layer.kind == "segment" else str(err)


def _plain(x, tensor) -> np.ndarray:
    """An engine input as the kernels take it (C-contiguous; a quantized one: its integers)."""
    if tensor.dtype == "float32" or tensor.dtype in PLAIN_DTYPES:
        a = np.ascontiguousarray(x, tensor.storage)
    else:
        a = np.ascontiguousarray(np.asarray(x).view(np.ndarray), tensor.storage)
    return a.reshape(()) if np.ndim(x) == 0 else a     # (ascontiguousarray makes a 0-d array 1-d)


def _quantized_input(tensor):
    """The check of a quantized engine input: a ``QuantizedArray`` of the dtype and parameters the
    int8 layers were built for (they are baked into the requantization), as its integers."""
    from srcore.plugin import KernelError

    qdtype, qparams, storage = tensor.dtype, tensor.qparams, tensor.storage

    def take(x):
        if getattr(x, "qdtype", None) != qdtype or getattr(x, "qparams", None) != qparams:
            got = f"{getattr(x, 'qdtype', None) or getattr(x, 'dtype', type(x).__name__)}"
            raise KernelError(f"engine input {tensor.name or tensor.id}: expected {qdtype} with {qparams}, got "
                              f"{got} with {getattr(x, 'qparams', None)} (the int8 layers bake the parameters in)")
        x = x.view(np.ndarray)
        return x if x.flags.c_contiguous else np.ascontiguousarray(x, storage)
    return take


def _quantized_output(tensor):
    from srcore.plugin import QuantizedArray

    qdtype, qparams = tensor.dtype, tensor.qparams
    return lambda arr: QuantizedArray.wrap(arr, qdtype, qparams)
