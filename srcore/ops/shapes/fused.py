"""Shape rules of the srcore:: fused ops made by ``srcore.passes.fuse_extra`` (srcore/ops/srcore.yaml)."""
from __future__ import annotations

from ...ir.types import BOOL
from .base import UNKNOWN, A, Ctx, rule
from .linalg import linear


@rule("srcore::linear_tanh", "srcore::linear_sigmoid")
def linear_act(ctx: Ctx):
    """Like ``aten::linear``: the activation keeps dtype and shape."""
    return linear(ctx)


@rule("srcore::sum_gt")
def sum_gt(ctx: Ctx):
    """A Python bool that depends on the data: never known."""
    return [A(BOOL)]


@rule("srcore::ew_chain")
def ew_chain(ctx: Ctx):
    """Every step keeps ``self``'s dtype and shape (the fusion pass checks it)."""
    return [ctx.tensor(0)]


@rule("srcore::engine")
def engine(ctx: Ctx):
    """A compiled segment (srcore.partition): propagate through its subgraph."""
    from .interp import propagate

    sub = ctx.node.attrs["subgraph"].copy()
    result = propagate(sub, [a.type for a in ctx.args])
    return [A(v.type, result.known.get(v, UNKNOWN)) for v in sub.outputs]
