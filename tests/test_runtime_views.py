"""GEMMs and convolutions reading views of earlier managed tensors, under both planners.

Each graph makes a managed tensor ``a``, takes a view of it, then makes other managed
tensors of the same size (which a planner may place in ``a``'s bytes once ``a`` is dead)
before a GEMM or a convolution reads the view. If liveness let the view outlive its base,
the kernel would read the newer tensor's values: the results are checked against torch.
The executor is the suite's (test.sh runs both); the planner is chosen here.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import srcore
from srcore.ir.parser import parse_graph
from srcore.model import Model

PLANNERS = ["standard_resizing", "precomputed_offsets"]


def module(text, planner):
    return srcore.StaticModule(Model.from_graph(parse_graph(text)),
                               options=srcore.Options(memory_planner_algorithm=planner))


def managed_names(sm):
    return {sm.values[m.slot].name for b in sm.blocks for m in b.managed}


def t(a):
    return torch.from_numpy(a)


MM_OF_TRANSPOSE = """graph(%x : Float(8, 8)):
  %a : Float(8, 8) = aten::sigmoid(%x)
  %v : Float(8, 8) = aten::t(%a)
  %c : Float(8, 8) = aten::tanh(%x)
  %d : Float(8, 8) = aten::neg(%c)
  %m : Float(8, 8) = aten::mm(%v, %d)
  return (%m)
"""


@pytest.mark.parametrize("planner", PLANNERS)
def test_mm_reads_a_transposed_view_of_an_earlier_managed_tensor(planner):
    sm = module(MM_OF_TRANSPOSE, planner)
    assert {"a", "c", "d"} <= managed_names(sm)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.standard_normal((8, 8)).astype(np.float32)
        ref = torch.mm(torch.sigmoid(t(x)).t(), -torch.tanh(t(x))).numpy()
        np.testing.assert_allclose(sm(x), ref, rtol=1e-5, atol=1e-6)


ADDMM_OF_SLICE = """graph(%x : Float(6, 8), %w : Float(4, 5), %b : Float(5)):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %six : int = prim::Constant[value=6]()
  %a : Float(6, 8) = aten::sigmoid(%x)
  %v : Float(6, 4) = aten::slice(%a, %one, %two, %six, %one)
  %c : Float(6, 8) = aten::tanh(%x)
  %d : Float(6, 8) = aten::exp(%c)
  %e : Float(6, 8) = aten::neg(%d)
  %m : Float(6, 5) = aten::addmm(%b, %v, %w, %one, %one)
  %s : Float(6, 8) = aten::mul(%e, %e)
  return (%m, %s)
"""


@pytest.mark.parametrize("planner", PLANNERS)
def test_addmm_reads_a_column_slice_of_an_earlier_managed_tensor(planner):
    sm = module(ADDMM_OF_SLICE, planner)
    assert {"a", "c", "d", "e"} <= managed_names(sm)
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    for _ in range(3):
        x = rng.standard_normal((6, 8)).astype(np.float32)
        m, s = sm(x, w, b)
        ref_m = torch.addmm(t(b), torch.sigmoid(t(x))[:, 2:6], t(w)).numpy()
        ref_s = torch.exp(torch.tanh(t(x))) ** 2
        np.testing.assert_allclose(m, ref_m, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s, ref_s.numpy(), rtol=1e-5, atol=1e-6)


CONV_OF_CHANNEL_SLICE = """graph(%x : Float(1, 4, 6, 6), %w : Float(3, 2, 3, 3), %b : Float(3)):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %four : int = prim::Constant[value=4]()
  %zero : int = prim::Constant[value=0]()
  %a : Float(1, 4, 6, 6) = aten::sigmoid(%x)
  %v : Float(1, 2, 6, 6) = aten::slice(%a, %one, %two, %four, %one)
  %c : Float(1, 4, 6, 6) = aten::tanh(%x)
  %d : Float(1, 4, 6, 6) = aten::neg(%c)
  %st : int[] = prim::ListConstruct(%one, %one)
  %pd : int[] = prim::ListConstruct(%one, %one)
  %dl : int[] = prim::ListConstruct(%one, %one)
  %y : Float(1, 3, 6, 6) = aten::conv2d(%v, %w, %b, %st, %pd, %dl, %one)
  %r : Float(1, 4, 6, 6) = aten::exp(%d)
  return (%y, %r)
"""


@pytest.mark.parametrize("planner", PLANNERS)
def test_conv_reads_a_channel_slice_of_an_earlier_managed_tensor(planner):
    sm = module(CONV_OF_CHANNEL_SLICE, planner)
    assert {"a", "c", "d"} <= managed_names(sm)
    rng = np.random.default_rng(2)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    for _ in range(3):
        x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
        y, r = sm(x, w, b)
        ref_y = torch.nn.functional.conv2d(torch.sigmoid(t(x))[:, 2:4], t(w), t(b), padding=1).numpy()
        np.testing.assert_allclose(y, ref_y, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(r, torch.exp(-torch.tanh(t(x))).numpy(), rtol=1e-5, atol=1e-6)


RETURNED_VIEW = """graph(%x : Float(4, 4)):
  %a : Float(4, 4) = aten::sigmoid(%x)
  %v : Float(4, 4) = aten::t(%a)
  %c : Float(4, 4) = aten::tanh(%x)
  %m : Float(4, 4) = aten::mm(%c, %c)
  return (%v, %m)
"""


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_returned_view_keeps_its_values_across_later_runs(planner):
    sm = module(RETURNED_VIEW, planner)
    assert "a" not in managed_names(sm)       # it escapes through the view
    rng = np.random.default_rng(3)
    x1, x2 = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
    v1, m1 = sm(x1)
    v1_ref = torch.sigmoid(t(x1)).t().numpy()
    sm(x2)
    np.testing.assert_allclose(v1, v1_ref, rtol=1e-6)
    c = torch.tanh(t(x1))
    np.testing.assert_allclose(m1, (c @ c).numpy(), rtol=1e-5, atol=1e-6)
