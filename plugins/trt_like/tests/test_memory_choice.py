"""Tactics chosen for memory as well as time: within ``memory_tolerance`` of the fastest, the
candidate holding the fewest weight bytes wins (tactics/choose.lean)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from srcore.plugin import EngineOptionError
from srcore_trt_like.builder.network import Layer
from srcore_trt_like.options import check_options
from srcore_trt_like.tactics.choose import MEMORY_TOLERANCE, lean
from srcore_trt_like.tactics.records import Candidate, Kernel

pytestmark = pytest.mark.one_pass

RAW = np.zeros((64, 64, 3, 3), np.float32)          # 147,456 bytes read in place by a plain tactic
LAYER = Layer("conv", [0], [1], {"weight": RAW})


def cand(name, laid=0, weight_bytes=None):
    """A candidate whose kernel laid out ``laid`` bytes of weights (0: reads the raw ones)."""
    layout = {"w": np.zeros(laid // 4, np.float32)} if laid else {}
    return Candidate(name, lambda: Kernel(lambda *a: None, weight_bytes, layout=layout))


def test_the_leaner_of_near_equals_wins():
    wino, im2col = cand("winograd", laid=4 * RAW.nbytes), cand("im2col")
    assert lean([(wino, 1.00), (im2col, 1.04)], LAYER, 0.05) is im2col       # 4 % slower, 4x less
    assert lean([(wino, 1.00), (im2col, 1.06)], LAYER, 0.05) is wino         # outside the tolerance
    assert lean([(wino, 1.00), (im2col, 1.04)], LAYER, 0.0) is wino          # 0: the fastest always


def test_equal_memory_keeps_the_faster_and_failures_never_win():
    a, b = cand("a"), cand("b")
    assert lean([(a, 1.0), (b, 1.01)], LAYER, 0.05) is a
    small = cand("small", laid=16)
    assert lean([(a, 1.0), (small, math.inf)], LAYER, 0.05) is a
    assert lean([(a, math.inf), (small, math.inf)], LAYER, 0.05) is a


def test_a_reserved_but_unread_buffer_counts_what_a_call_reads():
    """MKL reserves a packed buffer far larger than what it writes; its weight_bytes say what a
    call reads, and that is what stays resident."""
    mkl = cand("mkl_packed", laid=30 * RAW.nbytes, weight_bytes=RAW.nbytes // 2)
    plain = cand("numpy")
    assert lean([(plain, 1.0), (mkl, 1.02)], LAYER, 0.05) is mkl


def test_memory_tolerance_is_checked():
    assert MEMORY_TOLERANCE == 0.05
    check_options({"memory_tolerance": 0})
    check_options({"memory_tolerance": 0.2})
    for bad in (-0.1, 1.5, "0.1", True):
        with pytest.raises(EngineOptionError, match="memory_tolerance"):
            check_options({"memory_tolerance": bad})


def test_equals_within_the_tolerance_go_by_the_tables_order_not_this_builds_timing():
    """Two candidates holding the same bytes, within the tolerance: whichever timed faster in
    this build, the table's first wins (a fixed choice; the timed order of near equals is noise)."""
    a, b = cand("a"), cand("b")
    order = [b, a]
    assert lean([(a, 1.0), (b, 1.03)], LAYER, 0.05, order) is b
    assert lean([(b, 1.0), (a, 1.03)], LAYER, 0.05, order) is b
    assert lean([(a, 1.0), (b, 1.06)], LAYER, 0.05, order) is a      # outside it: the faster
    small = cand("small", laid=16)                                     # fewer bytes still come first
    assert lean([(a, 1.0), (b, 1.01), (small, 1.04)], LAYER, 0.05, [a, b, small]) is small
