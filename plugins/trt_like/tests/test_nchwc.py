"""The NCHW16c layout between an engine's 1x1, depthwise and squeeze-excite layers
(``builder/layout.py``): which tensors a MobileNetV3-style net keeps blocked (from its 3-channel stem
conv), where the runs end (a pool after; a dense conv on more channels before), relu6 fused so that
a MobileNetV2 block stays blocked, the result against torch and against the same engine in NCHW
(``engine_options={"nchwc": False}``), and a saved engine with blocked tensors loading without a rebuild."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore_trt_like.builder.layout import assign_nchwc
from srcore_trt_like.builder.network import Network

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional
TRT = ("trt_like", "cpu")


class Mobile(nn.Module):
    """A dense stem, an inverted residual at stride 2, one at stride 1 with squeeze-excite and a
    residual, a last 1x1 conv into a pool and a classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.Hardswish())
        self.a = nn.Sequential(nn.Conv2d(16, 40, 1), nn.ReLU(), nn.Conv2d(40, 40, 3, 2, 1, groups=40), nn.ReLU(),
                               nn.Conv2d(40, 24, 1))
        self.b = nn.Sequential(nn.Conv2d(24, 72, 1), nn.Hardswish(), nn.Conv2d(72, 72, 5, 1, 2, groups=72),
                               nn.Hardswish())
        self.fc1, self.fc2, self.proj = nn.Conv2d(72, 24, 1), nn.Conv2d(24, 72, 1), nn.Conv2d(72, 24, 1)
        self.last = nn.Sequential(nn.Conv2d(24, 48, 1), nn.Hardswish())
        self.fc = nn.Linear(48, 10)

    def forward(self, x):
        x = self.a(self.stem(x))
        h = self.b(x)
        g = F.hardsigmoid(self.fc2(F.relu(self.fc1(F.adaptive_avg_pool2d(h, 1)))))
        x = self.last(self.proj(h * g) + x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


@pytest.fixture(scope="module")
def mobile():
    torch.manual_seed(0)
    m = Mobile().eval()
    x = torch.randn(2, 3, 32, 32)
    return m, srcore.from_torchscript(torch.jit.script(m), (x,)), x


def _layers(sm) -> list[str]:
    """The engine's conv layers as ``describe()`` lists them, a conv's numpy reference (timed beside the
    compiled tactic, it may win a tiny layer on a loaded machine) named as the NCHW16c one."""
    lines = [line.strip() for line in sm.partition.engines[0].description.splitlines()[1:]]
    return [line.replace("[numpy]", "[nchw16c reference]") if line.startswith("conv") else line for line in lines]


def _has(layers, text):
    """Whether a layer reads ``text`` up to its tactic. Which tactic wins is timed (a 1x1 conv that writes
    NCHW may be ``pointwise_sgemm``, which reads either layout), so the layout is checked by the run the
    builder reports (:func:`_blocked_runs`), not by tactic names."""
    return any(line.startswith(text + " [") for line in layers)


def _blocked_runs(layers) -> list[int]:
    """The lengths of the engine's NCHW16c runs (``NCHW16c run of N layers ...``), in order."""
    return [int(line.split()[3]) for line in layers if line.startswith("NCHW16c run of ")]


ON = {"nchwc": True}   # the layout forced on (unset: each run's layout is timed, see test_layout_choice.py)


def _matches_torch_and_the_nchw_engine(sm, m, model, x, atol_nchw):
    """``sm`` (blocked layers) gives torch's result, and the engine with the layout off (which has no
    blocked layer) gives ``sm``'s to ``atol_nchw``."""
    with torch.no_grad():
        want = m(x).numpy()
    got = sm(x.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    plain = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"nchwc": False}))
    assert not any("nchw16c" in line for line in _layers(plain))
    np.testing.assert_allclose(got, plain(x.numpy()), rtol=1e-5, atol=atol_nchw)


def test_a_mobile_net_runs_blocked_between_its_stem_and_its_pool(mobile):
    m, model, x = mobile
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options=ON))
    layers = _layers(sm)
    # the dense stem (3 input channels) writes NCHW16c; the 1x1 / depthwise / squeeze-excite run stays
    # blocked (2 x 40 channels -> 3 blocks of 16); the last 1x1 conv writes the NCHW its pool reads
    assert _has(layers, "conv + hardswish -> 2x1x16x16x16"), layers
    assert _has(layers, "conv -> 2x3x16x16x16") and _has(layers, "conv -> 2x3x8x8x16"), layers
    assert "squeeze_excite -> 2x5x8x8x16 [numba]" in layers
    assert _has(layers, "conv + hardswish -> 2x48x8x8"), layers
    assert _blocked_runs(layers) == [9], layers    # stem .. last 1x1: its 8 convs and the squeeze-excite
    _matches_torch_and_the_nchw_engine(sm, m, model, x, atol_nchw=1e-6)


def test_a_saved_engine_with_blocked_tensors_loads_without_a_rebuild(mobile, tmp_path):
    m, model, x = mobile
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options=ON))
    path = tmp_path / "mobile.engine.srm"
    sm.save(path)
    loaded = srcore.StaticModule(srcore.load(path), backends=TRT)
    assert "loaded from the serialized engine" in loaded.partition.engines[0].description
    assert _blocked_runs(_layers(sm)) == [9]
    # the same layers, blocked shapes and tactics (a loaded engine's description lists no runs)
    def layer_lines(layers):
        return [line for line in layers if " -> " in line and not line.startswith("NCHW16c run of ")]

    assert layer_lines(_layers(loaded)) == layer_lines(_layers(sm))
    np.testing.assert_array_equal(loaded(x.numpy()), sm(x.numpy()))


class V2(nn.Module):
    """MobileNetV2's inverted residual: ReLU6 (``hardtanh(0, 6)``) after the expand and depthwise convs."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 24, 3, 1, 1)
        self.block = nn.Sequential(nn.Conv2d(24, 144, 1), nn.ReLU6(), nn.Conv2d(144, 144, 3, 1, 1, groups=144),
                                   nn.ReLU6(), nn.Conv2d(144, 24, 1))
        self.head = nn.Conv2d(24, 8, 3)

    def forward(self, x):
        x = self.stem(x)
        return self.head(self.block(x) + x)


def test_relu6_is_carried_by_the_convs_so_a_mobilenet_v2_block_stays_blocked():
    torch.manual_seed(1)
    m = V2().eval()
    x = 4 * torch.randn(1, 3, 14, 14)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x,)),
                             options=srcore.Options(backends=TRT, engine_options=ON))
    layers = _layers(sm)
    relu6 = [line for line in layers if line.startswith("conv + relu6 -> 1x9x14x14x16 [") and "nchw16c" in line]
    assert len(relu6) == 2, layers                                      # the expand and depthwise convs
    assert _has(layers, "conv -> 1x2x14x14x16"), layers                 # + the stem's output as residual
    assert _has(layers, "conv -> 1x8x12x12"), layers                    # the dense head reads it blocked:
    assert _blocked_runs(layers) == [5], layers                         # stem, 3 block convs, head
    assert not any("fused_pointwise" in line for line in layers), layers
    with torch.no_grad():
        np.testing.assert_allclose(sm(x.numpy()), m(x).numpy(), rtol=1e-4, atol=1e-4)


def _conv(net: Network, x: int, out_c: int, k: int = 1, groups: int = 1, residual: int | None = None) -> int:
    N, C, H, W = net.shape(x)
    w = np.zeros((out_c, C // groups, k, k), np.float32)
    inputs = [x] if residual is None else [x, residual]
    return net.add("conv", inputs, (N, out_c, H, W), weight=w, bias=None, stride=(1, 1), padding=(k // 2,) * 2,
                   dilation=(1, 1), groups=groups, relu=False, residual=residual is not None)


def test_the_layout_rules():
    """Engine inputs and outputs stay NCHW; a tensor another kind of layer reads stays NCHW; a residual
    takes its conv's output layout, so a blocked one makes the output blocked and the other way round."""
    net = Network()
    x = net.new_tensor((1, 24, 8, 8), "x")
    net.inputs = [x]
    e = _conv(net, x, 48)                  # reads the engine input (NCHW), writes blocked
    d = _conv(net, e, 48, 3, groups=48)    # blocked -> blocked
    p = _conv(net, d, 24)                  # blocked -> NCHW: the pool below reads it
    q = _conv(net, p, 24, 3, groups=2)     # a grouped 3x3: not a member
    r = _conv(net, q, 24, residual=p)      # its residual p is NCHW, so its output is NCHW too
    y = net.add("adaptive_avg_pool2d", [r], (1, 24, 1, 1), output_size=(1, 1))
    z = net.add("adaptive_avg_pool2d", [p], (1, 24, 1, 1), output_size=(1, 1))
    net.outputs = [y, z]
    blocked = assign_nchwc(net)
    assert blocked == {e, d}
    assert net.shape(e) == (1, 3, 8, 8, 16) and net.shape(p) == (1, 24, 8, 8)
    by_out = {layer.outputs[0]: layer for layer in net.layers}
    assert by_out[e].attrs["nchwc"] == (False, True) and by_out[d].attrs["nchwc"] == (True, True)
    assert by_out[p].attrs["nchwc"] == (True, False) and by_out[p].attrs["x_shape"] == (1, 48, 8, 8)
    assert "nchwc" not in by_out[q].attrs and "nchwc" not in by_out[r].attrs


class Head(nn.Module):
    """detection_head's shape: dense 3x3 convs with leaky relu at strides 2 and 1 (channels not a
    multiple of 16 among them), two scales, a 1x1 head on each, reshaped, permuted and joined."""

    def __init__(self):
        super().__init__()
        act = nn.LeakyReLU(0.1)
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), act, nn.Conv2d(16, 40, 3, 2, 1), act)
        self.down = nn.Sequential(nn.Conv2d(40, 64, 3, 2, 1), act, nn.Conv2d(64, 64, 3, 1, 1), act)
        self.heads = nn.ModuleList([nn.Conv2d(c, 18, 1) for c in (40, 64)])

    def forward(self, x):
        f = self.stem(x)
        g = self.down(f)
        outs = [h(t).view(t.shape[0], 3, 6, t.shape[2], t.shape[3]).permute(0, 1, 3, 4, 2).sigmoid().flatten(1, 3)
                for h, t in zip(self.heads, (f, g))]
        return torch.cat(outs, 1)


def test_a_detection_head_runs_blocked_through_its_dense_convs():
    torch.manual_seed(2)
    m = Head().eval()
    x = torch.randn(2, 3, 40, 40)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options=ON))
    layers = _layers(sm)
    # the stem writes NCHW16c, the dense convs read and write it, the 1x1 heads write the NCHW the
    # view / permute read
    assert _has(layers, "conv + leaky_relu -> 2x1x20x20x16"), layers
    assert _has(layers, "conv + leaky_relu -> 2x3x10x10x16"), layers
    assert _has(layers, "conv + leaky_relu -> 2x4x5x5x16"), layers
    assert _has(layers, "conv + sigmoid -> 2x18x10x10") and _has(layers, "conv + sigmoid -> 2x18x5x5"), layers
    assert _blocked_runs(layers) == [6], layers
    _matches_torch_and_the_nchw_engine(sm, m, model, x, atol_nchw=1e-5)


class PoolStem(nn.Module):
    """ShuffleNet's stem (a dense 3x3/2 conv, relu, a 3x3/2 max pool: one ``conv_max_pool`` layer) into
    a 1x1 conv, then a dense conv and a ceil-mode max pool whose output a flatten reads; 20 and 8
    channels fill part of a block."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 20, 3, 2, 1), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.pw = nn.Conv2d(20, 24, 1)
        self.down = nn.Sequential(nn.Conv2d(24, 8, 3, 1, 1), nn.MaxPool2d(2, 2, ceil_mode=True))

    def forward(self, x):
        return self.down(F.relu(self.pw(self.stem(x)))).flatten(1)


def test_a_conv_with_its_max_pool_writes_and_reads_the_blocked_layout(tmp_path):
    torch.manual_seed(3)
    m = PoolStem().eval()
    x = torch.randn(2, 3, 26, 26)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options=ON))
    layers = _layers(sm)
    # the stem's conv writes a blocked buffer its pool reads; the second pool writes NCHW for the view
    # (which blocked kernel each conv + pool gets is timed: the layout is what is asserted)
    assert _has(layers, "conv_max_pool -> 2x2x7x7x16"), layers
    assert _has(layers, "conv -> 2x2x7x7x16"), layers
    assert any(line.startswith("conv_max_pool -> 2x8x4x4 [") and "nchw16c" in line for line in layers), layers
    _matches_torch_and_the_nchw_engine(sm, m, model, x, atol_nchw=1e-5)
    sm.save(tmp_path / "stem.engine.srm")
    loaded = srcore.StaticModule(srcore.load(tmp_path / "stem.engine.srm"), backends=TRT)
    assert "loaded from the serialized engine" in loaded.partition.engines[0].description
    np.testing.assert_array_equal(loaded(x.numpy()), sm(x.numpy()))


def test_a_conv_outside_any_run_is_offered_the_nchw16c_kernels_on_nchw():
    """A conv whose input is the engine's and whose output a permute reads (a detection head's) is in
    no blocked run; the NCHW16c kernels, which read and write NCHW too, are timed beside the others."""
    from srcore_trt_like.builder.network import Layer
    from srcore_trt_like.tactics.conv import conv_candidates

    names = {}
    for k, o in ((3, 12), (1, 24)):
        net = Network()
        w = np.ones((o, 16, k, k), np.float32)
        layer = Layer("conv", [net.new_tensor((2, 16, 8, 8))], [net.new_tensor((2, o, 8, 8))],
                      dict(weight=w, bias=None, stride=(1, 1), padding=(k // 2, k // 2), dilation=(1, 1), groups=1,
                           relu=False, residual=False))
        names[k] = [c.name for c in conv_candidates(layer, net)]
    assert "conv_nchw16c" in names[3] and "simd_direct" in names[3], names
    assert "pointwise_nchw16c" in names[1] and "pointwise_simd" in names[1], names


class TopDown(nn.Module):
    """An FPN's top-down path: lateral 1x1 convs, a nearest 2x upsample (and one to a size) added
    to the finer level, 3x3 output convs; 20 channels fill part of a block."""

    def __init__(self):
        super().__init__()
        self.c3 = nn.Conv2d(3, 8, 3, 2, 1)
        self.c4 = nn.Conv2d(8, 16, 3, 2, 1)
        self.lat3, self.lat4 = nn.Conv2d(8, 20, 1), nn.Conv2d(16, 20, 1)
        self.out3, self.out4 = nn.Conv2d(20, 20, 3, padding=1), nn.Conv2d(20, 20, 3, padding=1)

    def forward(self, x):
        c3 = F.relu(self.c3(x))
        p4 = self.lat4(F.relu(self.c4(c3)))
        p3 = self.lat3(c3) + F.interpolate(p4, size=c3.shape[-2:], mode="nearest")
        return torch.cat([self.out3(p3).flatten(1), self.out4(p4).flatten(1)], 1)


def test_a_nearest_upsample_keeps_an_fpn_top_down_path_blocked():
    torch.manual_seed(4)
    m = TopDown().eval()
    x = torch.randn(2, 3, 20, 28)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options=ON))
    layers = _layers(sm)
    # the upsample reads and writes the layout, so the lateral conv's residual and its output are blocked
    assert "resize -> 2x2x10x14x16 [numba]" in layers, layers
    assert _has(layers, "conv -> 2x2x10x14x16"), layers
    _matches_torch_and_the_nchw_engine(sm, m, model, x, atol_nchw=1e-5)
