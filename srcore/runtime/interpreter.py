"""The interpreter executor: the reference loop over processed nodes.

One step list per block, all sharing the runtime's value array (one per run);
``prim::If`` and ``prim::Loop`` nodes run the steps of their sub-blocks
(per-node metadata: ``ProcessedNode.blocks``). Unboxing is precomputed: every
argument lives in a slot of the value array (constants and planned buffers
included, filled into the array's template once per signature), so a step
is an ``itemgetter`` over slots and one call.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any

import numpy as np

from .processed import BlockInfo, ProcessedNode

_CALL, _CALL_OUT, _CALL_OUTS, _IF, _LOOP, _FORK, _WAIT = range(7)


def _getter(slots: tuple[int, ...]):
    """A C-level function: values -> the arguments in ``slots`` (always a sequence)."""
    if len(slots) == 1:
        return itemgetter(slice(slots[0], slots[0] + 1))
    if not slots:
        return itemgetter(slice(0, 0))
    return itemgetter(*slots)


class BlockRunner:
    """Runs every block of a module on one runtime's value arrays."""

    def __init__(self, module, runtime):
        self.module = module
        self.runtime = runtime
        template: list[Any] = [None] * module.n_slots
        for slot, value in module.constants.items():
            template[slot] = value
        self._template = template
        #: top-level outputs that are constant arrays: returned as copies
        self._const_outputs = frozenset(s for s in module.top.outputs
                                        if isinstance(module.constants.get(s), np.ndarray))
        self._const_slot: dict[int, int] = {}     # id(constant object) -> its extra slot
        self._buf_slot: dict[int, int] = {}       # managed value slot -> slot holding its buffer
        self._none_slot = self._extra(None)
        self.failed_node: ProcessedNode | None = None
        self.output_slots: tuple[int, ...] = ()
        if module.options.manage_output_tensors:
            top = module.top
            self.output_slots = tuple(s for pn in top.nodes if pn.fn is not None and pn.fn.kind == "out"
                                      for s in pn.outputs if s in top.outputs)
        for b in module.blocks:
            for m in b.managed:
                self._buf_slot[m.slot] = self._extra(None)
        for s in self.output_slots:
            self._buf_slot[s] = self._extra(None)
        self._steps = [self._compile(b) for b in module.blocks]

    def _extra(self, value: Any) -> int:
        self._template.append(value)
        return len(self._template) - 1

    def _arg_slot(self, a) -> int:
        if a.slot is not None:
            return a.slot
        key = id(a.const)
        slot = self._const_slot.get(key)
        if slot is None:
            slot = self._const_slot[key] = self._extra(a.const)
        return slot

    def _compile(self, info: BlockInfo) -> list[tuple]:
        steps = []
        for pn in info.nodes:
            kind = pn.node.kind
            if kind == "prim::If":
                steps.append((_IF, pn))
            elif kind == "prim::Loop":
                steps.append((_LOOP, pn))
            elif kind == "prim::fork":
                steps.append((_FORK, pn))
            elif kind == "aten::wait":
                steps.append((_WAIT, pn))
            else:
                fn = pn.fn
                get = _getter(tuple(self._arg_slot(a) for a in fn.args))
                kw = None
                if fn.kwargs:
                    kw = (tuple(k for k, _ in fn.kwargs), _getter(tuple(self._arg_slot(a) for _, a in fn.kwargs)))
                bufs = tuple(self._buf_slot.get(s, self._none_slot) for s in pn.outputs)
                if fn.kind != "out":
                    steps.append((_CALL, pn, fn.fn, get, kw, pn.outputs))
                elif len(pn.outputs) == 1:
                    steps.append((_CALL_OUT, pn, fn.fn, get, kw, pn.outputs[0], bufs[0]))
                else:
                    steps.append((_CALL_OUTS, pn, fn.fn, get, kw, pn.outputs, bufs))
        return steps

    def bind_buffers(self, buffers: list[dict]) -> None:
        """Put this signature's planned buffers into the value array template."""
        t = self._template
        for bufs in buffers:
            for slot, view in bufs.items():
                bs = self._buf_slot.get(slot)
                if bs is not None:
                    t[bs] = view
        for b in self.module.blocks:        # tensors not planned for this signature: kernels allocate
            for m in b.managed:
                if m.slot not in buffers[b.index]:
                    t[self._buf_slot[m.slot]] = None

    def run_top(self, *inputs):
        top = self.module.top
        values = self._template.copy()   # a fresh value array per run: intermediates die with it
        if self.output_slots:
            *inputs, outbufs = inputs
            for s, b in zip(self.output_slots, outbufs):
                values[self._buf_slot[s]] = b
        for s, v in zip(top.inputs, inputs):
            values[s] = v
        self.failed_node = None
        self.run_block(top, values)
        if self._const_outputs:   # the caller owns its outputs; a constant is the model's
            return tuple(values[s].copy() if s in self._const_outputs else values[s] for s in top.outputs)
        return tuple(values[s] for s in top.outputs)

    def run_block(self, info: BlockInfo, values: list) -> None:
        self._run_steps(self._steps[info.index], values)

    def _run_steps(self, steps: list, values: list) -> None:
        step = None
        try:
            for step in steps:
                op = step[0]
                if op == _CALL_OUT:
                    _, _, fn, get, kw, o, b = step
                    if kw is None:
                        values[o] = fn(*get(values), out=values[b])
                    else:
                        values[o] = fn(*get(values), **dict(zip(kw[0], kw[1](values))), out=values[b])
                elif op == _CALL:
                    _, _, fn, get, kw, outs = step
                    res = fn(*get(values)) if kw is None else fn(*get(values), **dict(zip(kw[0], kw[1](values))))
                    if len(outs) == 1:
                        values[outs[0]] = res
                    elif outs:
                        for s, r in zip(outs, res):
                            values[s] = r
                elif op == _CALL_OUTS:
                    _, _, fn, get, kw, outs, bufs = step
                    ob = tuple(values[b] for b in bufs)
                    kwargs = {} if kw is None else dict(zip(kw[0], kw[1](values)))
                    res = fn(*get(values), **kwargs, out=ob if all(b is not None for b in ob) else None)
                    for s, r in zip(outs, res):
                        values[s] = r
                elif op == _IF:
                    pn = step[1]
                    sub = pn.blocks[0] if values[pn.inputs[0]] else pn.blocks[1]
                    self.run_block(sub, values)
                    for s, o in zip(pn.outputs, sub.outputs):
                        values[s] = values[o]
                elif op == _LOOP:
                    self._loop(step[1], values)
                elif op == _FORK:
                    self._fork(step[1], values)
                else:  # aten::wait
                    pn = step[1]
                    res = values[pn.inputs[0]].result()
                    for s, r in zip(pn.outputs, res):
                        values[s] = r
        except BaseException:
            if step is not None and self.failed_node is None:
                self.failed_node = step[1]
            raise

    def _loop(self, pn: ProcessedNode, values: list) -> None:
        body = pn.blocks[0]
        trips = values[pn.inputs[0]]
        cond = values[pn.inputs[1]]
        carried = [values[s] for s in pn.inputs[2:]]
        i = 0
        while cond and i < trips:
            values[body.inputs[0]] = i
            for s, c in zip(body.inputs[1:], carried):
                values[s] = c
            self.run_block(body, values)
            cond = values[body.outputs[0]]
            carried = [values[s] for s in body.outputs[1:]]
            i += 1
        for s, c in zip(pn.outputs, carried):
            values[s] = c

    def _fork(self, pn: ProcessedNode, values: list) -> None:
        body = pn.blocks[0]
        snapshot = list(values)            # the forked task gets its own value array
        for s, v in zip(body.inputs, (values[i] for i in pn.inputs)):
            snapshot[s] = v

        def task():
            self.run_block(body, snapshot)   # forked blocks have no managed tensors: no shared buffers
            return tuple(snapshot[s] for s in body.outputs)

        values[pn.outputs[0]] = self.runtime._launch(task, ())
