"""Selection, padding, 1-D pools and nearest upsampling of quantized tensors, bit for bit with torch's
QuantizedCPU (the stored integers and the parameters), through scripted modules: diagonal,
tensor_split, repeat_interleave, indexing, masked_fill (the fill quantized with the tensor's own
parameters), pad / constant_pad_nd / reflect pad, max/avg/adaptive-avg 1-D pools, mean over every
dim, nearest(-exact) 2-D/3-D and bilinear 2-D upsampling (NCHW and channels-last: torch rounds them
differently). What torch refuses (per-channel tensors, replicate padding)
is refused by name.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcore
from srcore.plugin import ANY_QUANTIZED

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.usefixtures("fbgemm")

DTYPES = {"quint8": (torch.quint8, 0.05, 7), "qint8": (torch.qint8, 0.04, -3)}
IDX = torch.tensor([3, 0, 3, 1])
MASK = torch.tensor([True, False, True, True, False, False])   # broadcast over the last dim (6)


class _Op(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, i, m):
        return self.fn(x, i, m)


# name -> (input shape, fn(x, i, m)); scripted (torch.jit.script needs annotations: lambdas are traced)
CASES = {
    "diagonal": ((2, 4, 6), lambda x, i, m: x.diagonal(1, 1, 2)),
    "diagonal_neg": ((4, 6), lambda x, i, m: x.diagonal(-1)),
    "tensor_split_sections": ((2, 7, 6), lambda x, i, m: x.tensor_split(3, 1)),
    "tensor_split_indices": ((2, 7, 6), lambda x, i, m: x.tensor_split([1, 5], 2)),
    "tensor_split_tensor": ((2, 7, 6), lambda x, i, m: x.tensor_split(i[:2].sort()[0], 1)),
    "repeat_interleave_int": ((2, 3, 6), lambda x, i, m: x.repeat_interleave(2, 1)),
    "repeat_interleave_flat": ((2, 3, 6), lambda x, i, m: x.repeat_interleave(3)),
    "repeat_interleave_tensor": ((4, 3, 6), lambda x, i, m: x.repeat_interleave(i, 0)),
    "index_first": ((4, 3, 6), lambda x, i, m: x[i]),
    "index_middle": ((2, 4, 6), lambda x, i, m: x[:, i]),
    "index_two": ((4, 5, 6), lambda x, i, m: x[i, i]),
    "index_mask": ((2, 3, 6), lambda x, i, m: x[:, :, m]),
    "masked_fill": ((2, 3, 6), lambda x, i, m: x.masked_fill(m, 0.3)),
    "masked_fill_tensor": ((2, 3, 6), lambda x, i, m: x.masked_fill(m, torch.tensor(-0.7))),
    "masked_fill_clamped": ((2, 3, 6), lambda x, i, m: x.masked_fill(m, 1e6)),
    "masked_fill_broadcast_up": ((3, 1), lambda x, i, m: x.masked_fill(m, -0.2)),
    "pad_constant": ((2, 3, 5, 6), lambda x, i, m: F.pad(x, [1, 2, 0, 1])),
    "pad_value_crop": ((2, 3, 5, 6), lambda x, i, m: F.pad(x, [-1, 2, 1, -2], value=0.55)),
    "zero_pad2d": ((2, 3, 5, 6), lambda x, i, m: torch.nn.functional.pad(x, [1, 1, 1, 1], "constant", 0.0)),
    "constant_pad_nd": ((2, 3, 6), lambda x, i, m: torch.constant_pad_nd(x, [2, 1], -0.25)),
    "reflect_1d": ((2, 3, 6), lambda x, i, m: F.pad(x, [2, 3], mode="reflect")),
    "reflect_2d": ((2, 3, 5, 6), lambda x, i, m: F.pad(x, [1, 2, 3, 0], mode="reflect")),
    "reflect_2d_unbatched": ((3, 5, 6), lambda x, i, m: F.pad(x, [1, 1, 2, 2], mode="reflect")),
    "max_pool1d": ((2, 3, 11), lambda x, i, m: F.max_pool1d(x, 3, 2, 1)),
    "max_pool1d_ceil": ((2, 3, 10), lambda x, i, m: F.max_pool1d(x, 3, 2, 0, 2, ceil_mode=True)),
    "avg_pool1d": ((2, 3, 11), lambda x, i, m: F.avg_pool1d(x, 3, 2, 1)),
    "avg_pool1d_no_pad_count": ((3, 11), lambda x, i, m: F.avg_pool1d(x, 4, 3, 2, True, False)),
    "adaptive_avg_pool1d": ((2, 3, 11), lambda x, i, m: F.adaptive_avg_pool1d(x, 4)),
    "unfold": ((2, 7, 6), lambda x, i, m: x.unfold(1, 3, 2)),
    "max_all": ((2, 3, 6), lambda x, i, m: x.max()),
    "min_all": ((2, 3, 6), lambda x, i, m: x.min()),
    "max_dim_values": ((2, 3, 6), lambda x, i, m: torch.max(x, 1)[0]),   # srcore makes it amax
    "min_dim_values_keep": ((2, 3, 6), lambda x, i, m: x.min(-1, keepdim=True)[0]),
    "max_pool3d": ((2, 3, 5, 6, 7), lambda x, i, m: F.max_pool3d(x, 3, 2, 1)),
    "max_pool3d_ceil_dilated": ((1, 2, 5, 6, 7), lambda x, i, m: F.max_pool3d(x, [2, 3, 2], [1, 2, 2], [1, 1, 0],
                                                                                [1, 1, 2], True)),
    "avg_pool3d": ((2, 3, 5, 6, 7), lambda x, i, m: F.avg_pool3d(x, 3, 2, 1)),
    "avg_pool3d_ceil_no_pad_count": ((1, 20, 4, 5, 6), lambda x, i, m: F.avg_pool3d(x, [2, 3, 2], [1, 2, 2], [1, 1, 0],
                                                                                      True, False)),
    "avg_pool3d_divisor": ((1, 17, 4, 4, 5), lambda x, i, m: F.avg_pool3d(x, 2, 2, 0, False, True, 3)),
    "adaptive_avg_pool3d": ((1, 4, 11, 10, 9), lambda x, i, m: F.adaptive_avg_pool3d(x, (3, 4, 5))),
    "adaptive_avg_pool3d_global": ((2, 3, 5, 6, 7), lambda x, i, m: F.adaptive_avg_pool3d(x, 1)),
    # one channel: torch's channels-last (NDHWC) kernel, another rounding
    "adaptive_avg_pool3d_one_channel": ((2, 1, 7, 11, 10), lambda x, i, m: F.adaptive_avg_pool3d(x, (2, 3, 4))),
    "adaptive_avg_pool3d_unbatched": ((3, 5, 6, 7), lambda x, i, m: F.adaptive_avg_pool3d(x, (4, 2, 3))),
    "mean_all": ((2, 3, 5, 6), lambda x, i, m: x.mean()),
    "bilinear_scale": ((2, 3, 5, 6), lambda x, i, m: F.interpolate(x, scale_factor=2.0, mode="bilinear")),
    "bilinear_size_align": ((2, 3, 5, 6), lambda x, i, m: F.interpolate(x, size=[7, 9], mode="bilinear",
                                                                        align_corners=True)),
    "bilinear_down": ((2, 3, 5, 6), lambda x, i, m: F.interpolate(x, scale_factor=0.6, mode="bilinear")),
    "nearest3d_scale": ((1, 2, 3, 4, 5), lambda x, i, m: F.interpolate(x, scale_factor=2.0)),
    "nearest3d_size": ((1, 2, 3, 4, 5), lambda x, i, m: F.interpolate(x, size=[5, 7, 4])),
    "nearest_exact2d": ((2, 3, 5, 6), lambda x, i, m: F.interpolate(x, scale_factor=1.7, mode="nearest-exact")),
    "nearest_exact2d_size": ((2, 3, 5, 6), lambda x, i, m: F.interpolate(x, size=[8, 4], mode="nearest-exact")),
    "nearest_exact3d": ((1, 2, 3, 4, 5), lambda x, i, m: F.interpolate(x, size=[4, 7, 3], mode="nearest-exact")),
}


def _q(shape, qdtype, seed=0):
    dt, scale, zp = DTYPES[qdtype]
    g = torch.Generator().manual_seed(seed)
    return torch.quantize_per_tensor(torch.randn(*shape, generator=g) * 2, scale, zp, dt)


def _inputs(shape, qdtype):
    m = MASK if shape[-1] == 6 else MASK[:1]
    return _q(shape, qdtype), IDX, m


def _flat(r):
    return list(r) if isinstance(r, (list, tuple)) else [r]


def _assert_same(got, want):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, srcore.QuantizedArray), type(g)
        assert g.shape == tuple(w.shape)
        assert g.qparams.axis is None and g.qparams.scale == w.q_scale() and g.qparams.zero_point == w.q_zero_point()
        assert g.qdtype == {torch.quint8: "quint8", torch.qint8: "qint8"}[w.dtype]
        np.testing.assert_array_equal(g.view(np.ndarray), w.int_repr().numpy())


def _load(fn, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(_Op(fn), args, check_trace=False)
        sm = srcore.StaticModule(srcore.from_torchscript(traced, args))
    return sm


@pytest.mark.parametrize("qdtype", sorted(DTYPES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch_bit_for_bit(case, qdtype):
    shape, fn = CASES[case]
    args = _inputs(shape, qdtype)
    sm = _load(fn, args)
    # every node with a quantized output runs on quantized_cpu, or on a structural kernel (ListUnpack)
    for pn in sm.top.nodes:
        if pn.fn is not None and any(getattr(o.type, "dtype", None) in DTYPES for o in pn.node.outputs):
            k = sm.resolved_kernels[pn.node].kernel
            assert k.backend == "quantized_cpu" or ANY_QUANTIZED in k.dtypes, (pn.node.kind, k)
    with torch.no_grad():
        want = fn(*args)
    got = sm(*(a if a.is_quantized else a.numpy() for a in args))
    _assert_same(got, want)


class _Scripted(torch.nn.Module):
    """The same ops as TorchScript writes them (``x[:, i]``, ``masked_fill``, ``F.pad``)."""

    def forward(self, x, i, m):
        a = x[:, i].masked_fill(m, 0.25)
        b = torch.nn.functional.pad(a, [1, 1], mode="reflect").repeat_interleave(2, 0)
        c, d = b.tensor_split(2, 2)
        return c.diagonal(0, 1, 2), d, torch.nn.functional.max_pool1d(b, 2)


@pytest.mark.parametrize("qdtype", sorted(DTYPES))
def test_a_scripted_module_matches_torch(qdtype):
    x, i, m = _q((2, 5, 6), qdtype), IDX, MASK
    net = torch.jit.script(_Scripted())
    sm = srcore.StaticModule(srcore.from_torchscript(net, (x, i, m)))
    _assert_same(sm(x, i.numpy(), m.numpy()), net(x, i, m))


def test_masked_fill_quantizes_the_value_as_torch_at_ties():
    """``quantize_val`` rounds ``zp + v / scale`` half to even after the add: 7 + 0.5 -> 8, 7 + 1.5 -> 8,
    7 - 0.5 -> 6 (rounding before the add would give 7, 9, 7)."""
    x = torch.quantize_per_tensor(torch.zeros(1, 6), 0.5, 7, torch.quint8)
    for v in (0.25, 0.75, -0.25, 1.25):
        sm = _load(lambda x, i, m, v=v: x.masked_fill(m, v), (x, IDX, MASK))
        want = x.masked_fill(MASK, v)
        _assert_same(sm(x, IDX.numpy(), MASK.numpy()), want)


def _per_channel(shape):
    return torch.quantize_per_channel(torch.randn(*shape), torch.linspace(0.02, 0.1, shape[1]),
                                      torch.arange(shape[1]), 1, torch.quint8)


@pytest.mark.parametrize("case", ["diagonal", "repeat_interleave_int", "index_middle", "masked_fill", "pad_constant",
                                  "reflect_1d", "max_pool1d", "nearest_exact2d"])
def test_per_channel_tensors_are_refused_as_torch_refuses_them(case):
    from srcore_quantized.kernels import pad, pool, shape as K, upsample as U

    shape, fn = CASES[case]
    x = _per_channel(shape)
    with pytest.raises(RuntimeError):
        fn(x, IDX, MASK)            # torch refuses it too
    from _torch_quant import srq

    xs = srq(x)
    call = {"diagonal": lambda: K.diagonal(xs, 1, 1, 2), "repeat_interleave_int": lambda: K.repeat_interleave(xs, 2, 1),
            "index_middle": lambda: K.index(xs, [None, IDX.numpy()]),
            "masked_fill": lambda: K.masked_fill_out(xs, MASK.numpy(), 0.3),
            "pad_constant": lambda: pad.pad_out(xs, [1, 2, 0, 1]), "reflect_1d": lambda: pad.pad_out(xs, [2, 3], "reflect"),
            "max_pool1d": lambda: pool.max_pool1d_out(xs, [3], [2], [1]),
            "nearest_exact2d": lambda: U.upsample_nearest_exact2d_vec(xs, None, [1.7, 1.7])}[case]
    with pytest.raises(srcore.KernelError, match="quantized per channel"):
        call()


def test_what_torch_refuses_is_refused_by_name():
    from srcore_quantized.kernels import pad, shape as K

    x = _q((2, 3, 6), "quint8")
    from _torch_quant import srq

    xs = srq(x)
    with pytest.raises(NotImplementedError):
        F.pad(x, [1, 1], mode="replicate")
    with pytest.raises(srcore.KernelError, match="no 'replicate' padding of quantized tensors"):
        pad.pad_out(xs, [1, 1], "replicate")
    with pytest.raises(RuntimeError, match="boolean masks"):
        x.masked_fill(MASK.to(torch.uint8), 0.3)
    with pytest.raises(srcore.KernelError, match="masked_fill: only supports boolean masks"):
        K.masked_fill_out(xs, MASK.numpy().astype(np.uint8), 0.3)
    with pytest.raises(RuntimeError):
        F.pad(x, [6, 0], mode="reflect")
    with pytest.raises(srcore.KernelError, match="must be smaller than dimension 2 of size 6"):
        pad.pad_out(xs, [6, 0], "reflect")
    with pytest.raises(IndexError):
        x[:, torch.tensor([3])]
    with pytest.raises(srcore.KernelError, match="aten::index: index 3 is out of bounds"):
        K.index(xs, [None, np.array([3])])
    with pytest.raises(RuntimeError):
        x.repeat_interleave(torch.tensor([1, 2]), 1)
    with pytest.raises(srcore.KernelError, match="repeats must have the same size as input along dim: 2 vs 3"):
        K.repeat_interleave(xs, np.array([1, 2]), 1)


@pytest.mark.parametrize("body, args", [
    ("aten::index_select(%x, %d, %i)", "%d : int = prim::Constant[value=1]()"),
    ("aten::repeat_interleave(%x, %i, %d, %n)", "%d : int = prim::Constant[value=1]()\n  %n : NoneType = prim::Constant()"),
])
def test_plain_integer_tensors_stay_on_cpu(body, args):
    """quantized_cpu's kernels listing int64 (the index) do not take a node whose ``self`` is int64 too:
    before, ``index_select`` of an int64 tensor dispatched to quantized_cpu and failed at run time."""
    g = srcore.parse_graph(f"graph(%x : Long(2, 5), %i : Long(5)):\n  {args}\n  %r : Tensor = {body}\n  return (%r)\n")
    sm = srcore.StaticModule(g)
    (pn,) = [pn for pn in sm.top.nodes if pn.fn is not None]
    assert pn.fn.backend == "cpu"
    x, i = np.arange(10).reshape(2, 5), np.array([4, 0, 1, 1, 2])
    want = torch.from_numpy(x).index_select(1, torch.from_numpy(i)) if "select" in body else \
        torch.from_numpy(x).repeat_interleave(torch.from_numpy(i), 1)
    np.testing.assert_array_equal(sm(x, i), want.numpy())


def test_a_bool_masked_fill_stays_on_cpu():
    g = srcore.parse_graph("graph(%x : Bool(2, 3), %m : Bool(2, 3)):\n  %v : bool = prim::Constant[value=1]()\n"
                           "  %r : Tensor = aten::masked_fill(%x, %m, %v)\n  return (%r)\n")
    sm = srcore.StaticModule(g)
    (pn,) = [pn for pn in sm.top.nodes if pn.fn is not None]
    assert pn.fn.backend == "cpu"
    x, m = np.array([[True, False, False], [False, True, False]]), np.array([[False, True, False]] * 2)
    np.testing.assert_array_equal(sm(x, m), torch.from_numpy(x).masked_fill(torch.from_numpy(m), True).numpy())


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("qdtype", sorted(DTYPES))
@pytest.mark.parametrize("zp_odd", [True, False])
@pytest.mark.parametrize("channels", [1, 3, 12, 17, 40])
def test_bilinear_of_a_channels_last_tensor_rounds_as_torch(channels, zp_odd, qdtype):
    """torch's channels-last bilinear kernel (fma-contracted, an 8-channel vector loop) against srcore's
    on the same memory layout; ties are frequent (weights in quarters) and an odd zero point shows
    where the two roundings differ."""
    from _torch_quant import srq
    from srcore_quantized.kernels import upsample as U

    dt = DTYPES[qdtype][0]
    zp = (7 if zp_odd else 8) if qdtype == "quint8" else (-3 if zp_odd else 4)
    g = torch.Generator().manual_seed(channels)
    x = torch.quantize_per_tensor(torch.randn(2, channels, 5, 6, generator=g) * 3, 0.05, zp, dt)
    x = x.contiguous(memory_format=torch.channels_last)
    for kw, ac in ((dict(scale_factor=2.0), False), (dict(scale_factor=1.5), False), (dict(size=[7, 5]), False),
                   (dict(scale_factor=0.6), False), (dict(size=[9, 11]), True)):
        want = F.interpolate(x, mode="bilinear", align_corners=ac, **kw)
        sc = kw.get("scale_factor")
        got = U.upsample_bilinear2d_vec(srq(x), kw.get("size"), ac, None if sc is None else [sc, sc])
        _assert_same(got, want)


class _ConvUp(torch.nn.Module):
    """A segmentation head's pattern: a quantized conv's (channels-last) output upsampled bilinearly."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 12, 3, padding=1)
        self.b = torch.nn.Conv2d(12, 4, 1)

    def forward(self, x):
        y = F.interpolate(self.a(x), scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.b(F.pad(y, [1, 1, 1, 1]))


def _eager(inner):
    import torch.ao.quantization as tq

    class Eager(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant, self.m = tq.QuantStub(), tq.DeQuantStub(), inner

        def forward(self, x):
            return self.dequant(self.m(self.quant(x)))

    net = Eager().eval()
    net.qconfig = tq.get_default_qconfig("fbgemm")
    tq.prepare(net, inplace=True)
    for s in range(3):
        net(torch.randn(2, 3, 6, 7, generator=torch.Generator().manual_seed(s)))
    return tq.convert(net, inplace=True)


def _fx(inner):
    import torch.ao.quantization as tq
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    prepared = prepare_fx(inner.eval(), tq.get_default_qconfig_mapping("fbgemm"), (torch.randn(2, 3, 6, 7),))
    for s in range(3):
        prepared(torch.randn(2, 3, 6, 7, generator=torch.Generator().manual_seed(s)))
    return convert_fx(prepared)


@pytest.mark.parametrize("workflow", ["eager", "fx"])
def test_a_quantized_model_upsampling_bilinearly_matches_torch(workflow):
    """Eager and FX quantization of a conv, a bilinear upsampling of its (channels-last) output and a
    zero pad (FX pads the float tensor): the quantized ops run on quantized_cpu, bit for bit with torch."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = (_eager if workflow == "eager" else _fx)(_ConvUp())
        x = torch.randn(2, 3, 6, 7, generator=torch.Generator().manual_seed(9))
        sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(net), (x,)))
        with torch.no_grad():
            want = net(x)
    ran = {pn.node.kind for pn in sm.top.nodes if pn.fn is not None and pn.fn.backend == "quantized_cpu"}
    assert any(k.startswith("aten::upsample_bilinear2d") for k in ran), ran
    assert workflow == "fx" or "aten::pad" in ran, ran   # (FX pads in float, after a dequantize)
    want = want.dequantize() if want.is_quantized else want
    np.testing.assert_array_equal(sm(x.numpy()), want.numpy())


_DEFAULT_CAPABILITY_CHECK = """
import numpy as np, torch
from _torch_quant import srq
from srcore_quantized.kernels import upsample as U
bad = 0
for c in (3, 12, 17):
    x = torch.quantize_per_tensor(torch.randn(2, c, 5, 6, generator=torch.Generator().manual_seed(c)) * 3, 0.05, 7,
                                  torch.quint8).contiguous(memory_format=torch.channels_last)
    for s in (2.0, 1.5, 0.6):
        want = torch.nn.functional.interpolate(x, scale_factor=s, mode="bilinear").int_repr().numpy()
        bad += int(not np.array_equal(U.upsample_bilinear2d_vec(srq(x), None, False, [s, s]).view(np.ndarray), want))
print("mismatches", bad)
"""


def test_bilinear_follows_torchs_default_capability_build():
    """Under ``ATEN_CPU_CAPABILITY=default`` torch's channels-last kernel is built without fma and has no
    vector loop: plain float32 like the NCHW one (the fused arithmetic would differ at ties)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default",
           "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), *sys.path])}
    out = subprocess.run([sys.executable, "-c", _DEFAULT_CAPABILITY_CHECK], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("mismatches 0"), out.stdout + out.stderr[-2000:]
