"""The codegen executor: one generated straight-line Python function per block.

At load, the top block becomes the source of a function whose body is one line
per node: the kernel (bound as a global), its arguments (locals for values,
literals or globals for constants) and, for out variants, the planned buffer
(a keyword-only parameter whose default each runtime sets to its view into
the arena). Nothing is looked up by name, dispatched or unboxed at run time.
The bodies of ``prim::If`` and ``prim::Loop`` are inlined (their values are
locals of the same function); a ``prim::fork`` body is a function of its own,
run by the launcher, and gets the values it reads from outside as arguments.
"""
from __future__ import annotations

import linecache
import math
import types
from typing import Any

import attrs
import numpy as np

from .._attrs_code_cache import compile_exec
from .._repr import shared_repr
from .process import free_slots
from .processed import BlockInfo, ProcessedNode

_LITERAL_TYPES = (bool, int, str, type(None))


@attrs.frozen(eq=False)
@shared_repr
class GeneratedBlock:
    index: int
    name: str
    source: str
    code: Any                     # the code object of the block function
    params: tuple[int, ...]       # value slots, in parameter order
    buffers: tuple[tuple[int, int], ...]  # (block index, slot) of each ``_b<slot>`` buffer parameter
    line_nodes: dict[int, ProcessedNode]

    @property
    def buffer_slots(self) -> tuple[int, ...]:
        return tuple(s for _, s in self.buffers)


@attrs.frozen(eq=False)
@shared_repr
class Generated:
    blocks: tuple[GeneratedBlock, ...]   # the blocks that are functions: the top one and fork bodies
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
        self.loops = 0   # loop counter names (``_i3``...) are unique per generated function

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
    blocks = [_block(em, module, module.top, out_slots)]
    for info in _fork_bodies(module.top):
        blocks.append(_block(em, module, info, ()))
    return Generated(tuple(blocks), em.globals, out_slots)


def _fork_bodies(info: BlockInfo):
    """The sub-blocks that stay functions of their own (``prim::fork`` bodies run on another thread);
    ``prim::If`` / ``prim::Loop`` bodies are inlined into the function of their block."""
    for pn in info.nodes:
        for b in pn.blocks:
            if pn.node.kind == "prim::fork":
                yield b
            yield from _fork_bodies(b)


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
    em.loops = 0
    body: list[tuple[str, ProcessedNode | None]] = []
    buffers: list[tuple[int, int]] = []
    _emit_nodes(em, module, info, "    ", body, buffers, set(out_slots))
    sig = ", ".join(f"v{s}" for s in params)
    if out_slots:
        sig = f"{sig}, _ob" if sig else "_ob"
    if buffers:
        sig += (", *, " if sig else "*, ") + ", ".join(f"_b{s}=None" for _, s in buffers)
    lines = [f"def {name}({sig}):"]
    if out_slots:
        unpack = ", ".join(f"_b{s}" for s in out_slots)
        lines.append(f"    {unpack}{',' if len(out_slots) == 1 else ''} = _ob")
    line_nodes: dict[int, ProcessedNode] = {}
    for text, pn in body:
        lines.append(text)
        if pn is not None:
            line_nodes[len(lines)] = pn
    lines.append(f"    return {_tuple(_returned(em, module, info, s) for s in info.outputs)}")
    source = "\n".join(lines) + "\n"
    filename = f"<srcore-codegen:{id(module):x}:{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile_exec(source, filename, f"<srcore-codegen:{name}>")   # cached by its text (srcore._attrs_code_cache)
    return GeneratedBlock(info.index, name, source, code, params, tuple(buffers), line_nodes)


def _tuple(items) -> str:
    items = list(items)
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


def _assign(targets: list[str], values: list[str]) -> str:
    """``a = x`` or ``a, b = x, y`` (no tuple is built for a few names)."""
    return f"{', '.join(targets)} = {', '.join(values)}"


def _returned(em: _Emitter, module, info: BlockInfo, slot: int) -> str:
    """What a block returns for ``slot``: the model's own results get a copy of a constant
    array (the caller owns its outputs; the constant is the model's, and read-only)."""
    if info is module.top and isinstance(module.constants.get(slot), np.ndarray):
        return f"{_val(em, module, slot)}.copy()"
    return _val(em, module, slot)


def _val(em: _Emitter, module, slot: int) -> str:
    constants = module.constants
    return em.const(constants[slot]) if slot in constants else f"v{slot}"


def _emit_nodes(em: _Emitter, module, info: BlockInfo, indent: str, body: list, buffers: list,
                buffered_outputs: set[int]) -> None:
    """Append the lines of ``info``'s nodes to ``body`` (``(text, node)`` pairs), inlining the bodies
    of ``prim::If`` and ``prim::Loop``: their values become locals of the same function, so a
    branch or a trip costs no call."""
    managed = sorted(m.slot for m in info.managed)
    buffers.extend((info.index, s) for s in managed)
    buffered = set(managed) | buffered_outputs
    for pn in info.nodes:
        kind = pn.node.kind
        if kind == "prim::If":
            _emit_if(em, module, pn, indent, body, buffers)
        elif kind == "prim::Loop":
            _emit_loop(em, module, pn, indent, body, buffers)
        else:
            for text in _node_lines(em, module, pn, buffered, module.constants):
                body.append((indent + text, pn))


def _emit_if(em: _Emitter, module, pn: ProcessedNode, indent: str, body: list, buffers: list) -> None:
    outs = [f"v{s}" for s in pn.outputs]
    body.append((f"{indent}if {_val(em, module, pn.inputs[0])}:", pn))
    for i, b in enumerate(pn.blocks):
        if i:
            body.append((f"{indent}else:", pn))
        n = len(body)
        _emit_nodes(em, module, b, indent + "    ", body, buffers, set())
        if outs:
            body.append((f"{indent}    {_assign(outs, [_val(em, module, s) for s in b.outputs])}", pn))
        if len(body) == n:
            body.append((f"{indent}    pass", pn))


def _emit_loop(em: _Emitter, module, pn: ProcessedNode, indent: str, body: list, buffers: list) -> None:
    """``prim::Loop(max_trips, cond, *carried)``: the body block takes ``(i, *carried)`` and returns
    ``(cond, *carried)``."""
    b = pn.blocks[0]
    k = em.loops
    em.loops += 1
    n, c, i = f"_n{k}", f"_c{k}", f"_i{k}"
    outs = [f"v{s}" for s in pn.outputs]
    ind = indent + "    "
    body.append((f"{indent}{n} = {_val(em, module, pn.inputs[0])}", pn))
    body.append((f"{indent}{c} = {_val(em, module, pn.inputs[1])}", pn))
    if outs:
        body.append((f"{indent}{_assign(outs, [_val(em, module, s) for s in pn.inputs[2:]])}", pn))
    body.append((f"{indent}{i} = 0", pn))
    body.append((f"{indent}while {c} and {i} < {n}:", pn))
    body.append((f"{ind}v{b.inputs[0]} = {i}", pn))
    if outs:
        body.append((f"{ind}{_assign([f'v{s}' for s in b.inputs[1:]], outs)}", pn))
    _emit_nodes(em, module, b, ind, body, buffers, set())
    results = [_val(em, module, s) for s in b.outputs]
    body.append((f"{ind}{_assign([c, *outs], results)}", pn))
    body.append((f"{ind}{i} += 1", pn))


def _node_lines(em: _Emitter, module, pn: ProcessedNode, buffered: set[int], constants) -> list[str]:
    kind = pn.node.kind
    outs = [f"v{s}" for s in pn.outputs]

    def val(slot: int) -> str:
        return em.const(constants[slot]) if slot in constants else f"v{slot}"

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
            # a run whose inputs outgrew the standard_resizing plan passes no buffer (None) for the
            # outputs that do not fit: then the kernel allocates all of them, as the interpreter does
            ready = " and ".join(f"{b} is not None" for b in bufs)
            parts.append(f"out=(({', '.join(bufs)}) if {ready} else None)")
        else:
            parts.append("out=None")
    call = f"{k}({', '.join(parts)})"
    if not outs:
        return [call]
    if len(outs) == 1:
        return [f"{outs[0]} = {call}"]
    return [f"{', '.join(outs)} = {call}"]
