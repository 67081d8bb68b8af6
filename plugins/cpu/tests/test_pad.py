"""Padding kernels (and selu/celu) vs torch, and conv padding modes end to end."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import srcore  # noqa: E402
from srcore_cpu.kernels import pad as K  # noqa: E402

F = torch.nn.functional
RNG = np.random.default_rng(0)


@pytest.fixture(params=["gather", "np.pad"])
def pad_path(request, monkeypatch):
    """Both paths of reflect/replicate/circular: one gather (small outputs) and np.pad (large ones)."""
    if request.param == "np.pad":
        monkeypatch.setattr(K, "_GATHER_MAX", -1)
    return request.param


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads,shape", [((1, 2), (2, 3, 5)), ((1, 1, 2, 0), (1, 2, 4, 5)), ((0, 1, 1, 2), (2, 3, 4))])
def test_pad_modes_match_torch(mode, pads, shape, pad_path):
    x = RNG.standard_normal(shape).astype(np.float32)
    ref = F.pad(torch.from_numpy(x), pads, mode=mode).numpy()
    np.testing.assert_array_equal(K.pad(x, list(pads), mode), ref)
    out = np.full(ref.shape, np.nan, np.float32)
    assert K.pad(x, list(pads), mode, out=out) is out
    np.testing.assert_array_equal(out, ref)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_constant_pad_value_and_negative_crop():
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    for pads, value in (((1, -1), 7), ((-1, 2, 0, 1), -3)):
        ref = F.pad(torch.from_numpy(x), pads, value=value).numpy()
        np.testing.assert_array_equal(K.pad(x, list(pads), "constant", value), ref)
        np.testing.assert_array_equal(K.constant_pad_nd(x, list(pads), value), ref)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("pads", [(-2, -2), (-3, 2), (2, -3), (0, 3, -1, 0), (3, -1, 1, 1), (-1, 0, 0, -3)])
def test_constant_pad_crops_and_pads_like_torch(pads):
    """The fill-and-copy path (not np.pad): crops that meet, pads beyond a crop, an empty result."""
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    ref = F.pad(torch.from_numpy(x), pads, value=1.5).numpy()
    np.testing.assert_array_equal(K.pad(x, list(pads), "constant", 1.5), ref)
    out = np.full(ref.shape, np.nan, np.float32)
    np.testing.assert_array_equal(K.constant_pad_nd(x, list(pads), 1.5, out=out), ref)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("mode", ["circular", "replicate"])
@pytest.mark.parametrize("pads", [(-2, 1), (1, -2), (-1, -1), (2, -1), (-1, 1, -2, 1), (1, -1, 0, -2)])
def test_negative_pads_crop_first(mode, pads, pad_path):
    """torch crops the negative pads first and pads what is left (for circular it matters:
    (1, -2) on [0, 1, 2, 3] is [1, 0, 1])."""
    x = RNG.standard_normal((1, 3, 4, 5)[4 - len(pads) // 2 - 2:]).astype(np.float32)  # torch's ranks
    ref = F.pad(torch.from_numpy(x), pads, mode=mode).numpy()
    np.testing.assert_array_equal(K.pad(x, list(pads), mode), ref)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_per_mode_ops_and_errors():
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    t = torch.from_numpy(x)
    np.testing.assert_array_equal(K.reflection_pad(x, [1, 1, 2, 2]), torch.ops.aten.reflection_pad2d(t, [1, 1, 2, 2]).numpy())
    np.testing.assert_array_equal(K.replication_pad(x, [1, 0, 2, 1]), torch.ops.aten.replication_pad2d(t, [1, 0, 2, 1]).numpy())
    np.testing.assert_array_equal(K.pad_circular(x, [1, 1, 1, 1]), torch.ops.aten._pad_circular(t, [1, 1, 1, 1]).numpy())
    with pytest.raises(srcore.KernelError, match="reflect padding"):
        K.pad(x, [4, 0], "reflect")
    with pytest.raises(srcore.KernelError, match="does not fit"):
        K.pad(x, [1, 1, 1], "constant")


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("fn,torch_fn", [(K.selu, F.selu), (lambda x, out=None: K.celu(x, 0.7, out=out),
                                                          lambda t: F.celu(t, 0.7))])
def test_selu_celu(fn, torch_fn):
    x = RNG.standard_normal((3, 7)).astype(np.float32) * 3
    ref = torch_fn(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(fn(x), ref, rtol=1e-5, atol=1e-6)
    out = np.empty_like(x)
    np.testing.assert_allclose(fn(x, out=out), ref, rtol=1e-5, atol=1e-6)
    x0 = np.array(-0.5, np.float32)   # a 0-d input gives a 0-d array, not a numpy scalar
    r0 = fn(x0)
    assert isinstance(r0, np.ndarray) and r0.shape == ()
    np.testing.assert_allclose(r0, torch_fn(torch.from_numpy(x0)).numpy(), rtol=1e-6)


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv_padding_modes_end_to_end(mode):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1, padding_mode=mode), torch.nn.SELU()).eval()
    x = torch.randn(1, 2, 6, 5)
    with torch.no_grad():
        ref = m(x).numpy()
    for frontend in (srcore.from_torchscript, srcore.from_torch):
        sm = srcore.StaticModule(frontend(m, (x,)))
        np.testing.assert_allclose(sm(x.numpy()), ref, rtol=1e-4, atol=1e-5)
