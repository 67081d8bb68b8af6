"""Dropout variants: the identity at inference; training mode is refused."""
from __future__ import annotations

from srcore.plugin import KernelError
from srcore.plugin import NodeInfo, Specialized


def _identity(input):
    return input


def dropout(input, p, train):
    """``aten::dropout`` / ``feature_dropout`` / ``alpha_dropout`` / ``feature_alpha_dropout``."""
    if train:
        raise KernelError("training-mode dropout is not supported")
    return input


def dropout_matcher(node: NodeInfo):
    """``train`` is a constant False: the node is the identity on its input; else the generic
    kernel, which refuses training mode at run time (a None would make dispatch skip the kernel)."""
    if node.is_const("train") and node.const("train") is False:
        return Specialized(_identity, args=(0,))
    return dropout
