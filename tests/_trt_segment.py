"""Test helper for trt_like's compiled segments: the generated function run as plain Python (the
same source numba would compile), so a test can check the generated code's values apart from numba."""
from __future__ import annotations

import importlib.util
import sys


def segment_as_python(layer, net):
    """Stand-in for ``srcore_trt_like.tactics.segment.compiled``: the segment's source, not compiled."""
    from srcore_trt_like.pointwise.cache import _write_source
    from srcore_trt_like.tactics import segment

    path = _write_source(segment.generate_source(layer, net), "seg_py_test")
    spec = importlib.util.spec_from_file_location("_srcore_segment_as_python", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules.pop("_srcore_segment_as_python", None)
    return module.segment
