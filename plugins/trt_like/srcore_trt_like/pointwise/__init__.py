"""Pointwise fusion: an expression DAG of elementwise float32 ops becomes ONE numba kernel.

A :class:`Program` lists the kernel's tensor inputs (:class:`Input`, each broadcasting with
numpy's rules to the program's static ``shape``) and its outputs, expressions built from
:class:`Input`, :class:`Const` and :class:`Op` nodes (the op vocabulary is
:data:`srcore_trt_like.pointwise.ops.OPS`)::

    x, b = Input("x", (1, 3, 8, 8)), Input("bias", (3, 1, 1))
    y = op("sigmoid", op("add", x, b))
    kernel = compile_program(Program(inputs=(x, b), outputs=(y, op("mul", y, 0.5)),
                                     shape=(1, 3, 8, 8)))
    y_arr, half = kernel(x_arr, b_arr)          # checked call, allocates the outputs
    kernel.fn(x_arr, b_arr, out0, out1)         # the hot path: no checks, writes out0, out1

The kernel's Python source is generated (loops over the output with the dimensions that
every operand treats alike merged, so the usual cases are one flat loop or a per-channel
loop nest), written to ``cache_root()/trt_like/kernels/k_<hash of the source>.py``, imported,
and compiled by numba with an explicit signature and ``cache=True``: another process
building the same program loads the machine code instead of compiling it.

Modules: :mod:`.expr` (the expression model), :mod:`.ops` (the op table), :mod:`.codegen` (the
generated source), :mod:`.cache` (writing, importing and compiling kernels), :mod:`.reference`
(the same ops in numpy, the reference and the numpy tactic).
"""
from __future__ import annotations

from .cache import PointwiseKernel, compile_program, kernel_dir
from .codegen import generate_source
from .expr import Const, Input, Node, Op, PointwiseError, Program, op
from .ops import OPS

__all__ = ["PointwiseError", "Input", "Const", "Op", "Node", "op", "Program", "OPS", "PointwiseKernel",
           "compile_program", "generate_source", "kernel_dir"]
