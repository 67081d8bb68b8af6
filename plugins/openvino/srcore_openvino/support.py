"""Which nodes an openvino engine can hold: the converter table's ops, with tensors of the
dtypes the rule takes and known rank, and the constants its converter bakes in.

Answers from :data:`srcore_openvino.convert.TABLE` alone (no openvino import: the
partitioner asks at every load, before any engine is built).
"""
from __future__ import annotations

from srcore.plugin import NodeInfo

from .convert import rule_for


def supports(node: NodeInfo) -> bool | str:
    """True if ``node`` may go into an openvino engine, else why not (the partition report shows it)."""
    rule = rule_for(node.op)
    if rule is None:
        return False
    for t in (*(a.type for a in node.args), *node.output_types):
        if _is_tensor(t):
            if t.dtype not in rule.tensor_dtypes:
                return f"a {t.dtype or 'untyped'} tensor (engines compute {', '.join(rule.tensor_dtypes)})"
            if t.shape is None:
                return False
    if not node.output_types or not all(_is_tensor(t) or _is_list(t) for t in node.output_types):
        return False
    for a in node.args:
        # engines take tensors: every other argument (a Scalar, an int, a list of ints) is baked
        # in, so it must be a constant; a Tensor[] is made inside the engine
        if a.name in rule.consts or not (_is_tensor(a.type) or _is_list(a.type)):
            if not a.is_constant:
                return f"argument {a.name!r} is computed at run time (the engine bakes it in)"
    if rule.check is None:
        return True
    try:
        return bool(rule.check(_Lenient(node)))
    except (KeyError, TypeError, ValueError, IndexError):   # an argument of an unexpected form
        return False


def _is_tensor(t) -> bool:
    return getattr(t, "is_tensor", lambda: False)()


def _is_list(t) -> bool:
    """A ``Tensor[]``."""
    return type(t).__name__ == "ListType" and _is_tensor(getattr(t, "elem", None))


class _Lenient:
    """The node as checks see it: ``const(name, default)`` is ``default`` also for an argument
    the overload does not have (``dtype`` of ``var.dim``), so one check serves several overloads."""

    def __init__(self, node: NodeInfo):
        self._node = node

    def __getattr__(self, name):
        return getattr(self._node, name)

    def const(self, name, default=KeyError):
        try:
            return self._node.const(name, default)
        except KeyError:
            if default is KeyError:
                raise
            return default
