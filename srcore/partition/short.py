"""Short tails: a run below ``Options.engine_min_block_size`` that ends the graph may still become
an engine, when the build's timing says it pays.

The size rule keeps one- and two-node runs node by node because an engine call costs a little
more than a kernel call. A graph's *tail* fed by nodes no engine took (crnn's ``linear`` +
``log_softmax`` after an ``aten::lstm``) merges with nothing, and in an engine its two nodes may
cost less than two kernel calls (one fused call against numpy's six ufunc calls of a small
``log_softmax``). So such a run is built, then the engine and the run node by node on the next
backends (``Segment.fallback``) are called alternately on random float inputs of the segment's
static shapes; the engine is kept if its best call is the faster (best calls: on a busy machine
a call only gets slower), as TRTorch decides by measurement, not by a count.
"""
from __future__ import annotations

import time

import numpy as np

from ..ir.graph import Node, Value
from .extract import ENGINE_KIND

#: calls of each side at most, and the time the whole trial may take (seconds)
CALLS = 30
BUDGET = 0.03


def short_tail(nodes: tuple[Node, ...], inputs: list[Value], outputs: list[Value]) -> bool:
    """Whether a run below the size rule is worth timing: it has two nodes or more (a one-node
    engine saves no call: its kernel, not the engine, would be what is faster), every result it
    leaves goes only to its block's return (nothing after it could join it), every tensor it reads
    comes from a graph input or a node that is not an engine (no engine boundary to save), and
    every input is a float32 tensor of static shape (trial inputs can be made)."""
    if len(nodes) < 2 or not outputs:
        return False
    ret = nodes[0].owning_block.return_node
    for v in outputs:
        if not v.uses or any(u.user is not ret for u in v.uses):
            return False
    for v in inputs:
        t = v.type
        if not (t.is_tensor() and getattr(t, "is_static", False) and t.dtype == "float32"):
            return False
        if v.node.kind == ENGINE_KIND:
            return False
    return True


def slower_than_fallback(engine, segment) -> str:
    """Why ``engine`` does not pay for ``segment`` (empty: it does): it, or the segment node by node
    on the next backends, is timed on random inputs, alternating single calls in CPU time."""
    fallback = segment.fallback
    if fallback is None:
        return "no next backend to time it against"
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(v.type.shape).astype(np.float32) for v in segment.graph.inputs]
    clock = time.process_time
    mine, theirs = [], []
    try:
        with np.errstate(all="ignore"):
            engine(*xs)
            fallback(*xs)
            start = time.perf_counter()
            while len(mine) < CALLS and (len(mine) < 3 or time.perf_counter() - start < BUDGET):
                for fn, times in ((engine, mine), (fallback, theirs)):
                    t0 = clock()
                    fn(*xs)
                    times.append(clock() - t0)
    except Exception as exc:   # trial inputs the segment rejects: keep the size rule
        return f"its timing failed ({type(exc).__name__})"
    t_engine, t_next = min(mine), min(theirs)
    if t_engine < t_next:
        return ""
    return (f"a short tail, no faster in an engine ({t_engine * 1e6:.1f} µs per call) than node by node "
            f"({t_next * 1e6:.1f} µs), timed at build")
