"""``lower_out_overloads``: a call of an explicit ``.out`` overload becomes the functional op and a copy.

TorchScript lets a model call ``aten::sigmoid.out(x, out=buf)`` (written
``aten::sigmoid(%x, %buf)`` in IR text). srcore's kernels implement the functional
overloads, so such a node becomes ``%t = aten::sigmoid(%x)`` followed by
``%r = aten::copy_(%buf, %t)``: the result is written into (and aliases) ``buf``, as
torch's out= does. Only single-output out overloads are rewritten.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..ir.types import TensorType

__all__ = ["lower_out_overloads"]


def _functional_name(overload: str) -> str | None:
    if overload == "out":
        return ""
    if overload.endswith("_out"):
        return overload[: -len("_out")]
    return None


def lower_out_overloads(graph: Graph, schemas=None) -> bool:
    """Rewrite explicit out= calls in place; True if any changed. ``schemas``: the ``SchemaRegistry``
    to read overloads from (a load's registry); default: the core's declarations."""
    if schemas is None:
        from ..ops.registry import cached_default_registry

        schemas = cached_default_registry()
    reg = schemas
    changed = False
    for n in list(graph.all_nodes()):
        overloads = reg.overloads(n.kind)
        if not any(_functional_name(s.overload_name) is not None and len(s.arguments) == len(n.inputs)
                   for s in overloads) or len(n.outputs) != 1:
            continue
        try:
            schema = reg.resolve(n)
        except Exception:  # noqa: BLE001 - not an out call this pass understands: dispatch reports it
            continue
        fname = _functional_name(schema.overload_name)
        if fname is None or not schema.arguments or not schema.arguments[-1].type.is_mutable():
            continue
        func = reg.find(f"{n.kind}.{fname}" if fname else n.kind)
        if func is None or len(func.arguments) != len(schema.arguments) - 1:
            continue
        out_buf = n.inputs[-1]
        call = graph.create(n.kind, n.inputs[:-1], [TensorType()], source=n.source)
        call.insert_before(n)
        copy = graph.create("aten::copy_", [out_buf, call.output], [n.output.type], source=n.source)
        copy.insert_before(n)
        n.output.replace_all_uses_with(copy.output)
        n.destroy()
        changed = True
    return changed
