"""srcore-plugin-example: what a third-party srcore plugin looks like.

Imported during discovery, so it stays cheap: no numpy here, kernels are
``"module:attr"`` strings imported only if a model uses the op.
"""
from __future__ import annotations

from srcore.plugin import Kernel, OpLibrary, ShapeRule, hookimpl


@hookimpl
def srcore_op_libraries():
    yield OpLibrary("example", schemas=("example::scaled_tanh(Tensor self, *, float scale=1.0) -> Tensor",))


@hookimpl
def srcore_shape_rules():
    # without a rule, nothing after the op would have a known shape: no arena, no engines
    yield ShapeRule(ops=("example::scaled_tanh",), rule="srcore_example.shapes:scaled_tanh")


@hookimpl
def srcore_kernels():
    yield Kernel(op="example::scaled_tanh", backend="cpu", kind="out", dtypes=("float32", "float64"),
                 impl="srcore_example.kernels:scaled_tanh_out")
    # a kernel for a standard op: wins over srcore-cpu's float64 relu thanks to its priority
    yield Kernel(op="aten::relu", backend="cpu", kind="out", dtypes=("float64",),
                 impl="srcore_example.kernels:relu_out", priority=10)
