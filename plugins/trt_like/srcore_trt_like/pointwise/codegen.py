"""A :class:`~.expr.Program` as Python source for numba: loops over the output with the dimensions
every operand treats alike merged (one flat loop, or a per-channel nest), each value computed at
the outermost loop where its operands are known, the innermost loop over interleaved element
streams; optionally vectorized with 512-bit registers (``wide``: LLVM's tuning for AVX-512 Intel
cores keeps a plain loop on 256-bit ones)."""
from __future__ import annotations

import functools
import hashlib
import math
from pathlib import Path

import attrs
import numba
import numpy as np

from ..kernels import fastmath, simd
from . import ops as pointwise_ops
from .expr import Const, Input, Node, Program
from .ops import OPS

#: bump when the generated code changes meaning (it is part of every kernel's source hash)
CODEGEN_VERSION = 1


# -- iteration space ------------------------------------------------------------------------------
@attrs.frozen
class _Loops:
    """The loop nest of a program: ``sizes`` of the merged dimensions (outermost first) and,
    per input, which of them it varies along (else it is broadcast there)."""

    sizes: tuple[int, ...]
    varies: tuple[tuple[bool, ...], ...]

    def view(self, k: int) -> tuple[int, ...]:
        """The shape input ``k`` is reshaped to: the loop sizes, 1 where it is broadcast."""
        return tuple(s if v else 1 for s, v in zip(self.sizes, self.varies[k]))


def _plan_loops(program: Program) -> _Loops:
    shape = program.shape
    padded = [(1,) * (len(shape) - len(i.shape)) + i.shape for i in program.inputs]
    # dims of extent 1 need no loop; merge neighbours that every input treats alike (both
    # broadcast or both read): C-contiguous operands then index the merged dim linearly
    dims = [(size, tuple(p[d] != 1 for p in padded)) for d, size in enumerate(shape) if size != 1]
    merged: list[tuple[int, tuple[bool, ...]]] = []
    for size, varies in dims:
        if merged and merged[-1][1] == varies:
            merged[-1] = (merged[-1][0] * size, varies)
        else:
            merged.append((size, varies))
    if not merged:  # one element
        merged = [(1, tuple(True for _ in padded))]
    sizes = tuple(s for s, _ in merged)
    varies = tuple(tuple(v[k] for _, v in merged) for k in range(len(padded)))
    return _Loops(sizes, varies)


# -- code generation ------------------------------------------------------------------------------
#: the innermost loop runs this many independent element streams side by side (when its extent
#: allows chunks of at least _MIN_CHUNK elements): a long chain of dependent ops is latency-bound,
#: and interleaving the streams' instructions lets the CPU overlap them (elementwise_chain, 40 ops
#: on 1x128: 3.2 us with one stream, 2.1 with two, 1.3 with four)
_MAX_STREAMS = 4
_MIN_CHUNK = 16
#: ... and no more than this many op copies in the loop body (compile time grows with it)
_MAX_UNROLLED_OPS = 512


def _const_literal(value: float) -> str:
    if math.isnan(value):
        return 'np.float32("nan")'
    if math.isinf(value):
        return f'np.float32("{"-" if value < 0 else ""}inf")'
    return f"np.float32({value!r})"   # repr of the float32's exact value: round-trips


class _Consts:
    """The generated module's float32 constants, one per bit pattern."""

    def __init__(self):
        self.names: dict[bytes, str] = {}
        self.lines: list[str] = []

    def __call__(self, value: float) -> str:
        key = np.float32(value).tobytes()   # by bits: -0.0 and 0.0 differ, NaN equals NaN
        if key not in self.names:
            name = f"K{len(self.names)}"
            self.names[key] = name
            self.lines.append(f"{name} = {_const_literal(value)}")
        return self.names[key]


@functools.cache
def _runtime_tag() -> str:
    """What a cached kernel's machine code depends on besides its own source: the code of the
    functions it calls (intrinsics, emitted inline), numba's version, the jit options and the
    codegen version."""
    digest = hashlib.sha256()
    for mod in (fastmath, pointwise_ops, simd):
        digest.update(Path(mod.__file__).read_bytes())
    digest.update(repr((numba.__version__, sorted(fastmath.jit_options().items(), key=str),
                        CODEGEN_VERSION)).encode())
    return digest.hexdigest()[:16]


class _Body:
    """The kernel's statements: every node computed at the outermost loop depth where all its
    operands are known (per-channel terms once per channel, constants before the loops)."""

    def __init__(self, program: Program, loops: _Loops, consts: _Consts):
        self.program, self.loops, self.n = program, loops, len(loops.sizes)
        self.nodes = [node for node in program.nodes() if not isinstance(node, Const)]
        self.base: dict[Node, str] = {}
        self.depth: dict[Node, int] = {}   # 0: before the loops; d: inside loop d - 1
        self.params: dict[Node, dict[str, str]] = {}
        self.in_pos = {inp: k for k, inp in enumerate(program.inputs)}
        for node in program.nodes():
            if isinstance(node, Const):
                self.base[node], self.depth[node] = consts(node.value), 0
            elif isinstance(node, Input):
                k = self.in_pos[node]
                self.base[node] = f"x{k}"
                self.depth[node] = max((j + 1 for j, v in enumerate(loops.varies[k]) if v), default=0)
            else:
                d = OPS[node.name]
                self.base[node] = f"v{len(self.base)}"
                self.depth[node] = max((self.depth[a] for a in node.args), default=0)
                self.params[node] = {p: consts(v) for p, v in zip(d.param_names, node.params)}

    def count(self, depth: int) -> int:
        return sum(1 for node in self.nodes if self.depth[node] == depth)

    def lines(self, depth: int, inner: str, suffix: str = "") -> list[str]:
        """The statements of ``depth``; ``inner`` indexes the innermost loop, ``suffix`` renames
        the innermost values (one copy per interleaved stream)."""
        def name(node):
            return self.base[node] + (suffix if self.depth[node] == self.n else "")

        index = [f"i{d}" for d in range(self.n - 1)] + [inner]
        out = []
        for node in self.nodes:
            if self.depth[node] != depth:
                continue
            if isinstance(node, Input):
                k = self.in_pos[node]
                idx = ", ".join(ix if v else "0" for ix, v in zip(index, self.loops.varies[k]))
                out.append(f"{name(node)} = a{k}[{idx}]")
            else:
                operands = [name(a) for a in node.args]
                out.append(f"{name(node)} = {OPS[node.name].template.format(*operands, **self.params[node])}")
        if depth == self.n:
            out += [f"o{m}[{', '.join(index)}] = {name(o)}" for m, o in enumerate(self.program.outputs)]
        return out


def _streams(extent: int, body_ops: int) -> int:
    streams = max(1, min(_MAX_STREAMS, extent // _MIN_CHUNK, _MAX_UNROLLED_OPS // max(body_ops, 1)))
    return 1 << (streams.bit_length() - 1)   # a power of two


def generate_source(program: Program, streams: int | None = None, wide: bool = False) -> str:
    """The Python source of the module defining ``kernel(*inputs, *outputs)`` for ``program``;
    ``streams``: interleaved element streams of the innermost loop (None: up to 4, by size);
    ``wide``: vectorized with 512-bit registers (:func:`~..kernels.simd.prefer_512`; the same
    bits: every element's ops are the same, only more lanes run at once)."""
    loops = _plan_loops(program)
    n = len(loops.sizes)
    consts = _Consts()
    body = _Body(program, loops, consts)
    n_out = len(program.outputs)
    args = [f"in{k}" for k in range(len(program.inputs))] + [f"out{m}" for m in range(n_out)]
    # input names stay out of the source: programs that differ only in names share a kernel
    code = [f"# inputs of shapes {', '.join(str(i.shape) for i in program.inputs) or 'none'}; "
            f"{n_out} output(s) of shape {program.shape}",
            f"def kernel({', '.join(args)}):"]
    if wide:
        code.append("    prefer_512()")
    code += [f"    a{k} = in{k}.reshape({loops.view(k)!r})" for k in range(len(program.inputs))]
    code += [f"    o{m} = out{m}.reshape({loops.sizes!r})" for m in range(n_out)]
    code += ["    " + s for s in body.lines(0, "0")]
    for d in range(n - 1):
        pad = "    " * (d + 1)
        code.append(f"{pad}for i{d} in range({loops.sizes[d]}):")
        code += [pad + "    " + s for s in body.lines(d + 1, "0")]
    pad = "    " * n
    inner, extent = f"i{n - 1}", loops.sizes[-1]
    if streams is None:
        streams = _streams(extent, body.count(n) + n_out)
    streams = max(1, min(int(streams), extent))
    chunk = extent // streams
    if streams > 1:
        code.append(f"{pad}for {inner} in range({chunk}):")
        code += [f"{pad}    j{u} = {inner} + {u * chunk}" for u in range(streams)]
        copies = [body.lines(n, f"j{u}", f"_{u}") for u in range(streams)]
        code += [pad + "    " + line for group in zip(*copies) for line in group]
    done = streams * chunk if streams > 1 else 0
    if done < extent:
        code.append(f"{pad}for {inner} in range({done}, {extent}):" if done else
                    f"{pad}for {inner} in range({extent}):")
        code += [pad + "    " + s for s in body.lines(n, inner)]
    header = ["# srcore_trt_like pointwise kernel: generated, do not edit",
              f"# runtime {_runtime_tag()}",
              "import numpy as np",
              "from srcore_trt_like.kernels import fastmath as fm",
              "from srcore_trt_like.pointwise import ops",
              *(["from srcore_trt_like.kernels.simd import prefer_512"] if wide else []),
              "", *consts.lines, "", ""]
    return "\n".join(header + code) + "\n"
