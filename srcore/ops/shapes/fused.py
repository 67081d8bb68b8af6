"""Shape rules of the srcore:: fused ops made by ``srcore.passes.fuse_extra`` (srcore/ops/srcore.yaml)."""
from __future__ import annotations

from ...ir.types import BOOL
from .base import A, Ctx, rule
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
