"""torch's ``quantized::add(_relu)`` depends on the layout it holds its inputs in (docs/quantization.md):
both channels-last (two convs' outputs) puts the scalar tail (the last ``numel % 64``) in memory (NHWC)
order; one channels-last and one NCHW takes the scalar path on every element. The importer routes each
add to the matching kernel; every result is torch's bit for bit, with exact ties (output scale twice the
inputs', an odd zero point) where the vector and scalar paths round differently."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore_quantized.kernels import binary
from _torch_quant import srq  # noqa: E402  (conftest.py puts this folder on sys.path)

torch = pytest.importorskip("torch")
nn, tq = torch.nn, torch.ao.quantization
pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.usefixtures("fbgemm")]
CL = torch.channels_last


def _q(rng, shape, scale, zp, dtype):
    lo, hi, tdt = (0, 256, torch.quint8) if dtype == "quint8" else (-128, 128, torch.qint8)
    ints = torch.from_numpy(rng.integers(lo, hi, shape).astype(np.uint8 if lo == 0 else np.int8))
    return torch._make_per_tensor_quantized_tensor(ints, scale, zp)


def _srq_channels_last(t):
    """srq of ``t`` whose bytes are channels-last (as srcore's convs return them)."""
    q = srq(t)
    mem = np.ascontiguousarray(q.view(np.ndarray).transpose(0, 2, 3, 1))
    return type(q).wrap(mem.transpose(0, 3, 1, 2), q.qdtype, q.qparams)


@pytest.mark.one_pass
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2 ** 31),
       shape=st.tuples(st.integers(1, 2), st.integers(2, 9), st.integers(2, 7), st.integers(2, 7))
       .filter(lambda s: np.prod(s) % 64 != 0),
       dtype=st.sampled_from(["quint8", "qint8"]), scale=st.sampled_from([0.05, 0.13, 0.5, 1.0]),
       zps=st.tuples(st.integers(-20, 20), st.integers(-20, 20), st.integers(-60, 60)),
       relu=st.booleans(), memory=st.booleans(), planned=st.booleans())
def test_layout_adds_are_torchs(seed, shape, dtype, scale, zps, relu, memory, planned):
    rng = np.random.default_rng(seed)
    base = 128 if dtype == "quint8" else 0
    za, zb, zo = base + zps[0], base + zps[1], base + (zps[2] | 1)   # odd: ties round differently on the paths
    ta, tb = _q(rng, shape, scale, za, dtype), _q(rng, shape, scale, zb, dtype)
    op = torch.ops.quantized.add_relu if relu else torch.ops.quantized.add
    sfx = "relu_" if relu else ""
    cl = getattr(binary, f"add_{sfx}channels_last_out")
    mixed = getattr(binary, f"add_{sfx}mixed_layout_out")
    a, b = (_srq_channels_last(ta), _srq_channels_last(tb)) if memory else (srq(ta), srq(tb))
    out = (lambda: np.empty(shape, srq(ta).view(np.ndarray).dtype)) if planned else (lambda: None)
    want = op(ta.contiguous(memory_format=CL), tb.contiguous(memory_format=CL), 2 * scale, zo)
    np.testing.assert_array_equal(cl(a, b, 2 * scale, zo, out=out()).int_repr(), want.int_repr().numpy())
    for xa, xb in ((ta.contiguous(memory_format=CL), tb), (ta, tb.contiguous(memory_format=CL))):
        want = op(xa, xb, 2 * scale, zo)
        np.testing.assert_array_equal(mixed(a, b, 2 * scale, zo, out=out()).int_repr(), want.int_repr().numpy())


@pytest.mark.one_pass
def test_the_layouts_do_change_torchs_result():
    """The reason for the kernels: on ties, NCHW, channels-last and mixed inputs give three results."""
    rng = np.random.default_rng(0)
    ta, tb = _q(rng, (2, 8, 5, 7), 0.5, 3, "quint8"), _q(rng, (2, 8, 5, 7), 0.5, 7, "quint8")
    nchw = torch.ops.quantized.add(ta, tb, 1.0, 3).int_repr()
    both = torch.ops.quantized.add(ta.contiguous(memory_format=CL), tb.contiguous(memory_format=CL), 1.0, 3)
    mixed = torch.ops.quantized.add(ta.contiguous(memory_format=CL), tb, 1.0, 3)
    assert (both.int_repr() != nchw).any() and (mixed.int_repr() != nchw).any()
    assert (binary.add_out(srq(ta), srq(tb), 1.0, 3).int_repr() == nchw.numpy()).all()


class _Res(nn.Module):
    """Residual blocks: add of two conv outputs, of a conv output and the (NCHW) quantized input in
    either order, and of the add's output (channels-last) and a conv output."""

    def __init__(self, c):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv1, self.relu = nn.Conv2d(c, c, 3, padding=1), nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 1)
        self.add1, self.add2, self.add3, self.add4 = (nn.quantized.FloatFunctional() for _ in range(4))

    def forward(self, x):
        x = self.quant(x)
        y1 = self.relu(self.conv1(x))
        y2 = self.conv2(y1)
        s = self.add1.add_relu(y2, y1)
        u = self.add2.add(x, y2)
        v = self.add3.add(y1, x)
        w = self.add4.add(s, y2)
        return [self.dequant(t) for t in (s, u, v, w)]


def _tie_scales(net, s, zo):
    """Every tensor on one scale s and the adds on 2s with an odd zero point: many exact ties."""
    net.conv1.scale, net.conv1.zero_point = s, 64
    net.conv2.scale, net.conv2.zero_point = s, 64
    if hasattr(net, "quant"):     # eager mode
        net.quant.scale, net.quant.zero_point = torch.tensor([s]), torch.tensor([64])
        for m in (net.add1, net.add2, net.add3, net.add4):
            m.scale, m.zero_point = 2 * s, zo
        return
    net.conv1_input_scale_0, net.conv1_input_zero_point_0 = torch.tensor(s), torch.tensor(64)   # FX
    for i in range(4):
        setattr(net, f"_scale_{i}", torch.tensor(2 * s))
        setattr(net, f"_zero_point_{i}", torch.tensor(zo))


def _eager(c, shape):
    net = _Res(c).eval()
    net.qconfig = tq.get_default_qconfig("x86")
    tq.fuse_modules(net, [["conv1", "relu"]], inplace=True)
    tq.prepare(net, inplace=True)
    net(torch.randn(*shape))
    return tq.convert(net, inplace=True)


def _fx(c, shape):
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    net = _Res(c).eval()
    prepared = prepare_fx(net, tq.get_default_qconfig_mapping("x86"), (torch.randn(*shape),))
    prepared(torch.randn(*shape))
    return convert_fx(prepared)


@pytest.mark.parametrize("form", ["module", "frozen"])
def test_imported_resnet_adds_are_torchs(form):
    shape = (2, 6, 5, 7)                      # 420 elements: 420 % 64 = 36 on the scalar tail
    torch.manual_seed(0)
    net = _eager(6, shape)
    _tie_scales(net, 0.05, 67)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        ref = [r.numpy() for r in net(x)]
        mod = net if form == "module" else torch.jit.script(net)
        if form == "frozen":
            mod = torch.jit.freeze(mod)
        model = srcore.from_torchscript(mod, (x,))
    kinds = [n.kind for n in model.graph.all_nodes() if n.kind.startswith("quantized::add")]
    assert sorted(kinds) == ["quantized::add_channels_last", "quantized::add_mixed_layout",
                             "quantized::add_mixed_layout", "quantized::add_relu_channels_last"]
    for got, want in zip(srcore.StaticModule(model)(x.numpy()), ref):
        np.testing.assert_array_equal(got, want)


@pytest.mark.one_pass   # the kernels are those of the eager model's test (both passes); FX is slow to import
def test_imported_fx_resnet_adds_are_torchs():
    shape = (1, 5, 4, 9)                      # 180 elements
    torch.manual_seed(1)
    net = _fx(5, shape)
    _tie_scales(net, 0.04, 131)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        ref = [r.numpy() for r in net(x)]
        model = srcore.from_torchscript(torch.jit.freeze(torch.jit.script(net)), (x,))
    kinds = sorted(n.kind for n in model.graph.all_nodes() if n.kind.startswith("quantized::add"))
    assert kinds == ["quantized::add_channels_last", "quantized::add_mixed_layout",
                     "quantized::add_mixed_layout", "quantized::add_relu_channels_last"]
    for got, want in zip(srcore.StaticModule(model)(x.numpy()), ref):
        np.testing.assert_array_equal(got, want)
