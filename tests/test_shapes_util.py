"""Helpers for the shape-rule tests: one-node graphs, and running the same op in torch."""
from __future__ import annotations

import numpy as np
import torch

from srcore.ir import Graph
from srcore.ir.types import TENSOR, ListType, TensorType
from srcore.ops.shapes import propagate
import pytest

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
                "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
                "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool, "complex64": torch.complex64}
FROM_TORCH = {v: k for k, v in TORCH_DTYPES.items()}


class TL(list):
    """A Tensor[] argument: a prim::ListConstruct of graph inputs."""


def T(dtype, *shape):
    return TensorType(dtype, shape)


def one_node(kind, *args, n_out=1, out_type=TENSOR, **kw):
    """A graph with a single ``kind`` node on ``args`` (TensorType -> graph input, TL -> tensor list,
    anything else -> constant); returns (node, PropagationResult)."""
    g = Graph()
    inputs = []
    for a in args:
        if isinstance(a, TensorType):
            inputs.append(g.add_input(a, f"x{len(g.inputs)}"))
        elif isinstance(a, TL):
            vs = [g.add_input(t, f"x{len(g.inputs)}") for t in a]
            inputs.append(g.insert("prim::ListConstruct", vs, [ListType(TENSOR)]).output)
        else:
            inputs.append(g.insert_constant(a))
    node = g.insert(kind, inputs, [out_type] * n_out)
    for o in node.outputs:
        g.register_output(o)
    return node, propagate(g, **kw)


def make(t: TensorType, rng=np.random.default_rng(0)):
    dt = TORCH_DTYPES[t.dtype]
    if t.dtype == "bool":
        return torch.from_numpy(np.asarray(rng.random(t.shape) > 0.5))
    if dt.is_floating_point or dt.is_complex:
        return torch.randn(tuple(t.shape), dtype=dt)
    return torch.randint(1, 3, tuple(t.shape), dtype=dt)


def torch_args(args):
    out = []
    for a in args:
        if isinstance(a, TensorType):
            out.append(make(a))
        elif isinstance(a, TL):
            out.append([make(t) for t in a])
        else:
            out.append(a)
    return out


def as_type(x):
    return TensorType(FROM_TORCH[x.dtype], tuple(x.shape))


def check(kind, torch_fn, *args, n_out=1):
    """Propagate ``kind`` on ``args`` and compare every output's dtype and shape with torch's."""
    node, _ = one_node(kind, *args, n_out=n_out)
    ref = torch_fn(*torch_args(args))
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    got = [o.type for o in node.outputs]
    if n_out == 1 and len(refs) > 1:
        refs = [refs[0]]
    assert got == [as_type(r) for r in refs], (kind, args, got, [as_type(r) for r in refs])
    return node


def torch_rejects(torch_fn, *args) -> bool:
    """True if torch refuses ``torch_fn`` on (tensors made for) ``args``."""
    try:
        torch_fn(*torch_args(args))
    except (RuntimeError, TypeError):
        return True
    return False


def assert_rejected(kind, *args):
    """srcore refuses ``kind`` on ``args`` (which torch rejects) with a SrcoreError naming the op:
    at shape propagation, when loading the graph (no kernel for these dtypes or this overload), or
    at the first run; never with a result or a bare numpy error."""
    import srcore
    from srcore.model import Model

    try:
        node, _ = one_node(kind, *args)
        sm = srcore.StaticModule(Model.from_graph(node.graph))
        tensors = [t for t in torch_args(args) if isinstance(t, torch.Tensor)]
        out = sm(*(t.numpy() for t in tensors))
    except srcore.SrcoreError as e:
        from srcore.ops.aliases import canonical

        # an alias (aten::negative) is named as the op it was normalized to (aten::neg)
        assert kind in str(e) or canonical(kind) in str(e), f"{kind}: the error does not name the node: {e}"
        return
    raise AssertionError(f"srcore accepts {kind}{tuple(args)}, which torch rejects: gives {out!r}")
