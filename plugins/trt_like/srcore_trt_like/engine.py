"""Building and loading engines: not implemented yet (lands with the partitioner)."""
from __future__ import annotations

from srcore.errors import PluginError


def build(segment, options=None):
    raise PluginError("srcore-trt-like: engine building is not implemented yet; "
                      "run trt_like nodes one at a time with backends=('trt_like', 'cpu')")


def load(data):
    raise PluginError("srcore-trt-like: engine loading is not implemented yet")
