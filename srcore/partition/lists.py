"""Lists built by ``append`` made plain lists before partitioning.

TorchScript builds some argument lists by appending to an empty one: ``F.interpolate`` makes
its ``scale_factors`` with ``prim::ListConstruct()`` and one ``aten::append`` per dim, a
``for`` loop over heads collects ``outs.append(...)`` for a ``cat``, and a DenseNet's unrolled
loop appends each layer's output to the feature list that the next layer's ``cat`` reads. Appends
write in place, so the list and the op reading it ``share memory with a value written in place``
and no engine may take the op. The pipeline's ``remove_list_mutation`` pass
(``srcore.passes.list_mutation``) gives each reader the list as it stands there; the partitioner
runs it again, for graphs loaded without the passes (``optimize=False``).
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..passes.list_mutation import rewrite_lists


def freeze_appended_lists(graph: Graph) -> int:
    """``remove_list_mutation`` on ``graph``; returns how many lists were rewritten."""
    return rewrite_lists(graph)
