"""Which nodes a trt_like engine can hold: a table of ops, and float32/float16 tensors only."""
from __future__ import annotations

from srcore.ir.types import TensorType
from srcore.plugin import NodeInfo

from . import PRECISIONS

#: op overloads an engine segment can contain
SUPPORTED_OPS = frozenset({
    "aten::relu", "aten::add.Tensor", "aten::mul.Tensor", "aten::linear", "aten::matmul",
    "aten::conv2d", "aten::sigmoid", "aten::tanh", "aten::softmax.int",
})


def supports(node: NodeInfo) -> bool:
    """True if ``node`` may go into an engine: a supported op whose tensors are float32/float16."""
    if node.op not in SUPPORTED_OPS:
        return False
    types = [a.type for a in node.args] + list(node.output_types)
    return all(t.dtype in PRECISIONS for t in types if isinstance(t, TensorType))
