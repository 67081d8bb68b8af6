"""The losses ONNX files of evaluation graphs carry (torch.onnx writes ``F.cross_entropy`` and
``F.nll_loss`` as them): NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, as their ONNX function
bodies define them (a target equal to ``ignore_index`` counts for nothing, in the loss and in the
``mean``'s weight sum; ``mean`` divides by the sum of the picked weights).
"""
from __future__ import annotations

from ..context import NodeContext, Unsupported
from ..dtypes import FLOATS
from ._util import table

_REDUCTIONS = ("none", "sum", "mean")


def _nll(cx: NodeContext, logp, target, weight):
    """ONNX's NLL of log-probabilities ``logp`` [N, C, d...] at ``target`` [N, d...]."""
    reduction = cx.attr("reduction", "mean")
    if isinstance(reduction, bytes):
        reduction = reduction.decode()
    if reduction not in _REDUCTIONS:
        raise Unsupported(f"reduction {reduction!r} (one of {', '.join(_REDUCTIONS)})")
    ignore = cx.attr("ignore_index", None)
    keep = None
    if ignore is not None:
        # an ignored target may lie outside [0, C) (-100, -1): gathered at class 0, then zeroed
        keep = cx.op("aten::ne", target, int(ignore))
        target = cx.op("aten::where", keep, target, 0)
    picked = cx.op("aten::squeeze", cx.op("aten::gather", logp, 1, cx.op("aten::unsqueeze", target, 1), False), 1)
    w = None
    if weight is not None:
        w = cx.op("aten::take", weight, target)
    if keep is not None:
        kw = cx.op("aten::type_as", keep, picked)
        w = kw if w is None else cx.op("aten::mul", w, kw)
    loss = cx.op("aten::neg", picked if w is None else cx.op("aten::mul", picked, w))
    if reduction == "none":
        return loss
    total = cx.op("aten::sum", loss, None)
    if reduction == "sum":
        return total
    if w is None:  # no weights, nothing ignored: the plain mean
        return cx.op("aten::mean", loss, None)
    return cx.op("aten::div", total, cx.op("aten::sum", w, None))


def _check(cx: NodeContext, what: str):
    cx.require_dtype(0, FLOATS - {"bfloat16"}, what)
    cx.require_dtype(1, {"int32", "int64"}, "target")
    if cx.rank(0) < 2:
        raise Unsupported(f"input 0 ({what}) must have a class axis (rank >= 2), has rank {cx.rank(0)}")


def nll_loss(cx: NodeContext):
    _check(cx, "input")
    return _nll(cx, cx.x(0), cx.x(1), cx.x(2) if cx.has(2) else None)


def softmax_cross_entropy_loss(cx: NodeContext):
    _check(cx, "scores")
    logp = cx.op("aten::log_softmax", cx.x(0), 1, None)
    loss = _nll(cx, logp, cx.x(1), cx.x(2) if cx.has(2) else None)
    if len(cx.node.output) > 1 and cx.node.output[1]:
        return loss, logp
    return loss


CONVERTERS = table(NegativeLogLikelihoodLoss=(nll_loss, 12, 13, 22),
                   SoftmaxCrossEntropyLoss=(softmax_cross_entropy_loss, 12, 13))
