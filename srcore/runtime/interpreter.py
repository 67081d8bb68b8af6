"""The interpreter executor: the reference loop over processed nodes.

One :class:`BlockRunner` per block, sharing the runtime's value array;
``prim::If`` and ``prim::Loop`` nodes run the runners of their sub-blocks
(per-node metadata: ``ProcessedNode.blocks``). Each node's call is unboxed
from precomputed slot/constant tables; out variants get the planned buffer
of their output (or ``None``: the kernel allocates).
"""
from __future__ import annotations

from typing import Any

from .processed import BlockInfo, ProcessedNode

_IF, _LOOP, _FORK, _WAIT, _CALL = range(5)


class BlockRunner:
    """Runs every block of a module on one runtime's value array."""

    def __init__(self, module, runtime):
        self.module = module
        self.runtime = runtime
        template: list[Any] = [None] * module.n_slots
        for slot, value in module.constants.items():
            template[slot] = value
        self._template = template
        self.failed_node: ProcessedNode | None = None
        self.output_slots: tuple[int, ...] = ()
        if module.options.manage_output_tensors:
            top = module.top
            self.output_slots = tuple(s for pn in top.nodes if pn.fn is not None and pn.fn.kind == "out"
                                      for s in pn.outputs if s in top.outputs)
        self._steps = [self._compile(b) for b in module.blocks]

    def _compile(self, info: BlockInfo) -> list[tuple]:
        steps = []
        for pn in info.nodes:
            kind = pn.node.kind
            if kind == "prim::If":
                steps.append((_IF, pn, None, None, None, None))
            elif kind == "prim::Loop":
                steps.append((_LOOP, pn, None, None, None, None))
            elif kind == "prim::fork":
                steps.append((_FORK, pn, None, None, None, None))
            elif kind == "aten::wait":
                steps.append((_WAIT, pn, None, None, None, None))
            else:
                fn = pn.fn
                args = tuple((a.slot, a.const) for a in fn.args)
                kwargs = tuple((k, a.slot, a.const) for k, a in fn.kwargs)
                steps.append((_CALL, pn, fn.fn, args, kwargs, fn.kind == "out"))
        return steps

    def run_top(self, *inputs):
        top = self.module.top
        values = self._template.copy()   # a fresh value array per run: intermediates die with it
        extra = {}
        if self.output_slots:
            *inputs, outbufs = inputs
            extra = {s: b for s, b in zip(self.output_slots, outbufs) if b is not None}
        for s, v in zip(top.inputs, inputs):
            values[s] = v
        self.run_block(top, values, extra)
        return tuple(values[s] for s in top.outputs)

    def run_block(self, info: BlockInfo, values: list, extra: dict | None = None) -> None:
        bufs = self.runtime._buffers[info.index]
        if extra:
            bufs = {**bufs, **extra}
        for op, pn, fn, args, kwargs, is_out in self._steps[info.index]:
            self.failed_node = pn
            if op == _CALL:
                a = [values[s] if s is not None else c for s, c in args]
                kw = {k: (values[s] if s is not None else c) for k, s, c in kwargs}
                outs = pn.outputs
                if is_out:
                    if len(outs) == 1:
                        kw["out"] = bufs.get(outs[0])
                    else:
                        ob = tuple(bufs.get(s) for s in outs)
                        kw["out"] = ob if all(b is not None for b in ob) else None
                res = fn(*a, **kw)
                if len(outs) == 1:
                    values[outs[0]] = res
                elif outs:
                    for s, r in zip(outs, res):
                        values[s] = r
            elif op == _IF:
                sub = pn.blocks[0] if values[pn.inputs[0]] else pn.blocks[1]
                self.run_block(sub, values)
                for s, o in zip(pn.outputs, sub.outputs):
                    values[s] = values[o]
            elif op == _LOOP:
                self._loop(pn, values)
            elif op == _FORK:
                self._fork(pn, values)
            else:  # aten::wait
                res = values[pn.inputs[0]].result()
                for s, r in zip(pn.outputs, res):
                    values[s] = r
        self.failed_node = None

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
            self._run_detached(body, snapshot)
            return tuple(snapshot[s] for s in body.outputs)

        values[pn.outputs[0]] = self.runtime._launch(lambda: task(), ())

    def _run_detached(self, body: BlockInfo, values: list) -> None:
        # a forked block may run while its parent runs: it never uses planned buffers
        runner = BlockRunner.__new__(BlockRunner)
        runner.module, runner.runtime, runner._steps = self.module, _NoBuffers(self.runtime._launch), self._steps
        runner.failed_node = None
        runner.run_block(body, values)


class _NoBuffers:
    """The view of a runtime a forked block sees: no planned buffers."""

    def __init__(self, launch):
        self._buffers = _EmptyBuffers()
        self._launch = launch


class _EmptyBuffers:
    def __getitem__(self, index):
        return {}
