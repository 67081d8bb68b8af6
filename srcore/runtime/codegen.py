"""The codegen executor: one generated straight-line Python function per block.

At load, each block becomes the source of a function whose body is one line
per node: the kernel (bound as a global), its arguments (locals for values,
literals or globals for constants) and, for out variants, the planned buffer
(a keyword-only parameter whose default each runtime sets to its view into
the arena). Nothing is looked up by name, dispatched or unboxed at run time.
``prim::If`` and ``prim::Loop`` call the functions of their sub-blocks; values
a sub-block reads from outside are passed as arguments.
"""
from __future__ import annotations

import linecache
import math
import types
from typing import Any

import attrs

from .process import free_slots
from .processed import BlockInfo, ProcessedNode

_LITERAL_TYPES = (bool, int, str, type(None))


@attrs.frozen(eq=False)
class GeneratedBlock:
    index: int
    name: str
    source: str
    code: Any                     # the code object of the block function
    params: tuple[int, ...]       # value slots, in parameter order
    buffer_slots: tuple[int, ...] # slots with a ``_b<slot>`` buffer parameter
    line_nodes: dict[int, ProcessedNode]


@attrs.frozen(eq=False)
class Generated:
    blocks: tuple[GeneratedBlock, ...]
    globals: dict[str, Any]
    output_slots: tuple[int, ...]  # managed output tensors (``_ob`` parameter of the top block)

    @property
    def source(self) -> str:
        return "\n\n".join(b.source for b in self.blocks)

    def instantiate(self, launch=None) -> list[types.FunctionType]:
        """Fresh function objects (own globals and buffer defaults) for one runtime."""
        g = dict(self.globals)
        g["_launch"] = launch
        fns = []
        for b in self.blocks:
            fn = types.FunctionType(b.code.co_consts[_fn_const_index(b.code)], g, b.name)
            fn.__kwdefaults__ = {f"_b{s}": None for s in b.buffer_slots} or None
            g[b.name] = fn
            fns.append(fn)
        return fns


def _fn_const_index(module_code) -> int:
    for i, c in enumerate(module_code.co_consts):
        if isinstance(c, types.CodeType):
            return i
    raise RuntimeError("no function in generated module code")


class _Emitter:
    def __init__(self, module):
        self.module = module
        self.globals: dict[str, Any] = {}
        self._ids: dict[int, str] = {}
        self.slot_of = {}

    def bind(self, obj: Any, prefix: str) -> str:
        """A global name for ``obj`` (one per object)."""
        key = id(obj)
        name = self._ids.get(key)
        if name is None:
            name = f"{prefix}{len(self._ids)}"
            self._ids[key] = name
            self.globals[name] = obj
        return name

    def const(self, value: Any) -> str:
        # exact types: subclasses (np.float64 is a float) repr as names the generated code lacks
        if type(value) in _LITERAL_TYPES:
            return repr(value)
        if type(value) is float and math.isfinite(value):
            return repr(value)
        if type(value) is list and all(type(x) in _LITERAL_TYPES for x in value) and len(value) < 16:
            return repr(value)   # a fresh list per call: kernels may not keep or mutate it
        return self.bind(value, "_c")

    def arg(self, a) -> str:
        return self.const(a.const) if a.slot is None else f"v{a.slot}"


def generate(module) -> Generated:
    em = _Emitter(module)
    out_slots: tuple[int, ...] = ()
    if module.options.manage_output_tensors:
        top = module.top
        out_slots = tuple(s for pn in top.nodes if pn.fn is not None and pn.fn.kind == "out"
                          for s in pn.outputs if s in top.outputs)
    blocks = []
    for info in module.blocks:
        blocks.append(_block(em, module, info, out_slots if info is module.top else ()))
    return Generated(tuple(blocks), em.globals, out_slots)


def block_params(module, info: BlockInfo) -> tuple[int, ...]:
    if info is module.top:
        return info.inputs
    # constants are globals of the generated code: only values computed at run time are passed
    return info.inputs + tuple(s for s in free_slots(info.block, _slot_map(module)) if s not in module.constants)


def _slot_map(module) -> dict[int, int]:
    cache = getattr(module, "_slot_map_cache", None)
    if cache is None:
        cache = {id(v): i for i, v in enumerate(module.values)}
        module._slot_map_cache = cache
    return cache


def _block(em: _Emitter, module, info: BlockInfo, out_slots: tuple[int, ...]) -> GeneratedBlock:
    name = f"_block{info.index}"
    params = block_params(module, info)
    managed = {m.slot for m in info.managed}
    buffer_slots = tuple(sorted(managed))
    lines: list[str] = []
    line_nodes: dict[int, ProcessedNode] = {}
    sig = ", ".join(f"v{s}" for s in params)
    if out_slots:
        sig = f"{sig}, _ob" if sig else "_ob"
    if buffer_slots:
        sig += (", *, " if sig else "*, ") + ", ".join(f"_b{s}=None" for s in buffer_slots)
    lines.append(f"def {name}({sig}):")
    if out_slots:
        unpack = ", ".join(f"_b{s}" for s in out_slots)
        lines.append(f"    {unpack}{',' if len(out_slots) == 1 else ''} = _ob")
    constants = module.constants
    for pn in info.nodes:
        first = len(lines) + 1
        for text in _node_lines(em, module, pn, managed | set(out_slots), constants):
            lines.append("    " + text)
        for ln in range(first, len(lines) + 1):
            line_nodes[ln] = pn
    outs = [em.const(constants[s]) if s in constants else f"v{s}" for s in info.outputs]
    lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    source = "\n".join(lines) + "\n"
    filename = f"<srcore-codegen:{id(module):x}:{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec")
    return GeneratedBlock(info.index, name, source, code, params, buffer_slots, line_nodes)


def _node_lines(em: _Emitter, module, pn: ProcessedNode, buffered: set[int], constants) -> list[str]:
    kind = pn.node.kind
    outs = [f"v{s}" for s in pn.outputs]

    def val(slot: int) -> str:
        return em.const(constants[slot]) if slot in constants else f"v{slot}"

    if kind == "prim::If":
        then_b, else_b = pn.blocks
        lines = [f"if {val(pn.inputs[0])}:"]
        for b in (then_b, else_b):
            call = f"_block{b.index}({', '.join(val(s) for s in block_params(module, b))})"
            target = (", ".join(outs) + ("," if len(outs) == 1 else "") + " = ") if outs else ""
            lines.append(f"    {target}{call}")
            if b is then_b:
                lines.append("else:")
        return lines
    if kind == "prim::Loop":
        body = pn.blocks[0]
        carried_in = [val(s) for s in pn.inputs[2:]]
        extra = [val(s) for s in block_params(module, body)[len(body.inputs):]]
        lines = [f"_n = {val(pn.inputs[0])}", f"_c = {val(pn.inputs[1])}"]
        if outs:
            lines.append(f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = ({', '.join(carried_in)}{',' if len(outs) == 1 else ''})")
        lines += ["_i = 0", "while _c and _i < _n:"]
        args = ", ".join(["_i", *outs, *extra])
        targets = ", ".join(["_c", *outs]) + ("," if not outs else "")
        lines.append(f"    {targets} = _block{body.index}({args})")
        lines.append("    _i += 1")
        return lines
    if kind == "prim::fork":
        b = pn.blocks[0]
        free = block_params(module, b)[len(b.inputs):]
        args = ", ".join([val(s) for s in pn.inputs] + [val(s) for s in free])
        return [f"{outs[0]} = _launch(_block{b.index}, ({args}{',' if args else ''}))"]
    if kind == "aten::wait":
        if len(outs) == 1:
            return [f"{outs[0]}, = {val(pn.inputs[0])}.result()"]
        return [f"{', '.join(outs)} = {val(pn.inputs[0])}.result()"] if outs else [f"{val(pn.inputs[0])}.result()"]
    fn = pn.fn
    k = em.bind(fn.fn, "_k")
    parts = [em.arg(a) for a in fn.args] + [f"{kw}={em.arg(a)}" for kw, a in fn.kwargs]
    if fn.kind == "out":
        bufs = [f"_b{s}" if s in buffered else "None" for s in pn.outputs]
        if len(bufs) == 1:
            parts.append(f"out={bufs[0]}")
        elif all(b != "None" for b in bufs):
            parts.append(f"out=({', '.join(bufs)})")
        else:
            parts.append("out=None")
    call = f"{k}({', '.join(parts)})"
    if not outs:
        return [call]
    if len(outs) == 1:
        return [f"{outs[0]} = {call}"]
    return [f"{', '.join(outs)} = {call}"]
