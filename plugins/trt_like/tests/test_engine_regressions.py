"""Regression tests of trt_like engine bugs the conformance sweep (test_conformance.py) found:
each graph here once crashed, fell back for no reason, or gave a wrong answer."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import srcore
from srcore.ir.parser import parse_graph

TRT = ("trt_like", "cpu")


def module(text: str, params=None, **options) -> srcore.StaticModule:
    opts = srcore.Options(backends=TRT, engine_min_block_size=1, optimize=False, **options)
    return srcore.StaticModule(parse_graph(text, params=params), options=opts)


def engine_ops(sm) -> list[str]:
    return [op for s in sm.partition.engines for op in s.ops]


def test_add_without_alpha_falls_back_to_the_per_node_kernel():
    """``aten::add(%x, %y)`` leaves ``alpha`` out; trt_like's per-node add matcher asked for it and
    the node info raised KeyError (a matcher sees an omitted argument's schema default now)."""
    sm = module("""graph(%x : Float(2, 3), %y : Float(3)):
  %r : Tensor = aten::add(%x, %y)
  return (%r)
""", engine_fallback_ops=("aten::add",))
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(3, np.float32)
    np.testing.assert_array_equal(sm(x, y), x + y)
