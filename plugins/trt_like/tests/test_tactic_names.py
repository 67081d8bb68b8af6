"""Every tactic name a builder can offer is a known name (``options.tactic_names``), so
``exclude_tactics=[name]`` accepts it, and every known conv name is offered somewhere: the list
and the candidates agree.

The names are the candidates' own (``Candidate.name``, ``conv_tactic_builders``), collected from
the builders over layers that reach every branch, at one and at two intra-op threads (the OpenBLAS
team variants exist only at more than one) and at either vector width (the other width's twins are
offered by the CPU's features: on an AVX2 machine the 16-lane CPU's names are still known)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from srcore.plugin import EngineOptionError, QParams
from srcore_trt_like.builder.network import Layer, Network
from srcore_trt_like.conv import tactics as conv_tactics
from srcore_trt_like.conv import nchwc_split
from srcore_trt_like.conv.tile_split import tile_omp_builders
from srcore_trt_like.conv.nchwc import nchwc_tactic_builders
from srcore_trt_like.conv.spec import ConvSpec
from srcore_trt_like.options import CONV_TACTICS, check_options, tactic_names
from srcore_trt_like.tactics import int8 as t8
from srcore_trt_like.tactics.names import int8_reuses

pytestmark = pytest.mark.one_pass

#: (x_shape, out_channels, kernel, stride, padding, groups): 1x1 (stride 1 and 2), 3x3 dense
#: (Winograd), 5x5 dense, grouped, depthwise 3x3 and 5x5 at stride 1 and 2, one input channel, a long
#: row, 1x1 and depthwise over two channel blocks (the NCHW16c splits), a 3x3/3 patchify conv, a stem
#: over three output blocks (the dense NCHW16c splits), an NCHW 3x3 over five output blocks (two block
#: groups: conv_nchwc_planes' split by groups)
_CONVS = [((1, 4, 1, 1100), 4, 3, 2, 1, 1), ((1, 3, 9, 9), 48, 3, 2, 1, 1), ((1, 8, 9, 9), 80, 3, 1, 1, 1),
          ((1, 8, 9, 9), 16, 1, 1, 0, 1), ((1, 8, 9, 9), 16, 1, 2, 0, 1), ((1, 8, 9, 9), 16, 3, 1, 1, 1),
          ((1, 8, 9, 9), 4, 5, 2, 2, 1), ((1, 8, 9, 9), 8, 3, 1, 1, 2), ((1, 8, 9, 9), 8, 3, 1, 1, 8),
          ((1, 8, 9, 9), 8, 5, 2, 2, 8), ((1, 1, 9, 9), 4, 3, 1, 1, 1),
          ((1, 8, 9, 9), 32, 1, 1, 0, 1), ((1, 32, 9, 9), 32, 3, 1, 1, 32), ((1, 3, 9, 9), 8, 3, 3, 0, 1)]


def _conv_names(monkeypatch, threads: int, lanes: int) -> set[str]:
    monkeypatch.setattr(conv_tactics._threads, "for_work", lambda work: threads)
    # the other vector width's twins are offered by the CPU's features (only the names are built here)
    monkeypatch.setattr(conv_tactics, "_simd_lanes", lambda: lanes)
    monkeypatch.setattr(conv_tactics.simd_conv, "lanes", lambda features=None: lanes)
    # the team variants need OpenBLAS's per-thread count; only the names are built here
    monkeypatch.setattr(conv_tactics._threads, "_set_local", lambda: (lambda n: 1) if threads > 1 else None)
    monkeypatch.setattr(nchwc_split._threads, "count", lambda: threads)
    names = set()
    for x_shape, cout, k, s, p, g in _CONVS:
        spec = ConvSpec(x_shape, cout, k, s, p, 1, g)
        weight = np.zeros((cout, x_shape[1] // g, k, k), np.float32)
        names |= {name for name, _ in conv_tactics.conv_tactic_builders(spec, weight, None)}
        if (k, s, p, g) == (1, 1, 0, 1) or g == x_shape[1] == cout:   # layers the builder may keep in NCHW16c
            names |= {name for name, _ in nchwc_tactic_builders(spec, weight, None, (True, True))}
            names |= {name for name, _ in nchwc_split.nchwc_omp_builders(spec, weight, None, (True, True))}
            # (and writing NCHW: a head, the last layer before a pool)
            names |= {name for name, _ in nchwc_tactic_builders(spec, weight, None, (True, False))}
            names |= {name for name, _ in tile_omp_builders(spec, weight, None, (True, False))}
        elif g == 1:                                                    # a dense conv, NCHW in (a stem) or not
            names |= {name for name, _ in nchwc_tactic_builders(spec, weight, None, (False, True))}
            names |= {name for name, _ in nchwc_split.nchwc_omp_builders(spec, weight, None, (False, True))}
            names |= {name for name, _ in tile_omp_builders(spec, weight, None, (False, True))}
    return names


def test_every_conv_tactic_offered_is_a_known_name_and_every_known_one_is_offered(monkeypatch):
    offered = set().union(*(_conv_names(monkeypatch, t, n) for t in (1, 2) for n in (8, 16)))
    assert offered - set(CONV_TACTICS) == set(), "offered but unknown to exclude_tactics"
    assert set(CONV_TACTICS) - offered == set(), "known but never offered"
    known = set(tactic_names())
    # conv + max pool layers offer each conv tactic as "<name>+max_pool" (tactics/conv_pool.py)
    assert {f"{n}+max_pool" for n in offered} <= known


def _qconv(c: int, cout: int, k: int, groups: int) -> tuple[Layer, Network]:
    rng = np.random.default_rng(0)
    w = rng.integers(-3, 4, (cout, c // groups, k, k)).astype(np.int8)
    attrs = dict(weight=w, w_scales=np.full(cout, 0.01, np.float32), w_zero_points=np.zeros(cout, np.int64),
                 bias=None, x_q=(0.05, 128), y_q=(0.1, 128), range=(0, 255), relu=False, x_range=128,
                 stride=(1, 1), padding=(k // 2,) * 2, dilation=(1, 1), groups=groups)
    net = Network()
    net.new_tensor((1, c, 8, 8), "x", "quint8", QParams(0.05, 128))
    net.new_tensor((1, cout, 8, 8), "y", "quint8", QParams(0.1, 128))
    return Layer("qconv", [0], [1], attrs), net


@pytest.mark.parametrize("c, cout, k, groups", [(8, 8, 3, 8), (8, 16, 1, 1), (8, 16, 3, 1), (8, 8, 3, 2)])
def test_every_int8_conv_tactic_offered_is_a_known_name(c, cout, k, groups):
    layer, net = _qconv(c, cout, k, groups)
    offered = {cand.name for cand in t8.qconv_candidates(layer, net)}
    assert offered - set(tactic_names()) == set()
    if groups == c:        # depthwise: the float wing's three depthwise tactics, int8_depthwise_simd among them
        assert {"int8_depthwise_direct", "int8_depthwise_channels_last", "int8_depthwise_simd"} <= offered
    if k == 1:
        assert {"int8_gemm_1x1", "int8_pointwise_simd"} <= offered


def test_the_int8_names_are_the_reused_float_conv_tactics():
    int8_conv = {n for n in tactic_names() if n.startswith("int8_")} - {"int8_sgemm", "int8_dgemm", "int8_simd"}
    assert int8_conv == {f"int8_{n}" for n in CONV_TACTICS if int8_reuses(n)}
    assert "int8_depthwise_simd" in int8_conv and "int8_winograd_f4x4" not in int8_conv


def test_exclude_tactics_accepts_every_offered_name_and_names_an_unknown_one(monkeypatch):
    offered = _conv_names(monkeypatch, 2, 8) | _conv_names(monkeypatch, 2, 16)
    for (c, cout, k, groups) in [(8, 8, 3, 8), (8, 16, 1, 1)]:
        offered |= {cand.name for cand in t8.qconv_candidates(*_qconv(c, cout, k, groups))}
    check_options({"exclude_tactics": sorted(offered)})
    check_options({"trt_like": {"exclude_tactics": ["int8_depthwise_simd", "im2col_gemm_team+max_pool"]}})
    with pytest.raises(EngineOptionError, match=r"unknown trt_like tactic 'int8_depthwise_smid' \(did you mean "
                                                r"'int8_depthwise_simd'\?\)"):
        check_options({"exclude_tactics": ["int8_depthwise_smid"]})


class _Mixed(torch.nn.Module):
    """One engine with most layer kinds: conv + max pool, depthwise, squeeze-excite, pools, GEMMs,
    layer norm, group norm, softmax."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc1, self.fc2 = torch.nn.Conv2d(8, 4, 1), torch.nn.Conv2d(4, 8, 1)
        self.gn = torch.nn.GroupNorm(2, 8)
        self.ln = torch.nn.LayerNorm(8)
        self.q, self.k, self.v = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.stem(x)), 2)
        y = torch.relu(self.dw(x))
        y = y * F.hardsigmoid(self.fc2(torch.relu(self.fc1(F.adaptive_avg_pool2d(y, 1)))))
        y = self.gn(F.avg_pool2d(y, 2))
        t = self.ln(y.flatten(2).transpose(1, 2))                     # (1, 4, 8) tokens
        a = F.scaled_dot_product_attention(self.q(t), self.k(t), self.v(t))
        return torch.softmax(self.head(a + t), -1), F.adaptive_avg_pool2d(y, 1).flatten(1)


def test_every_candidate_an_engine_build_considers_is_a_known_name(monkeypatch):
    import srcore
    from srcore_trt_like.tactics import table

    seen: dict[str, set[str]] = {}
    offer = table.candidates

    def record(layer, net):
        out = offer(layer, net)
        seen.setdefault(layer.kind, set()).update(c.name for c in out)
        return out
    monkeypatch.setattr(table, "candidates", record)
    module = _Mixed().eval()
    x = torch.randn(1, 3, 8, 8)
    model = srcore.from_torchscript(torch.jit.script(module), (x,))
    srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                      engine_options={"timing": False, "timing_cache": False}))
    assert {"conv", "conv_max_pool", "squeeze_excite", "gemm", "layer_norm"} <= seen.keys(), seen.keys()
    unknown = {kind: names - set(tactic_names()) for kind, names in seen.items()}
    assert not any(unknown.values()), unknown


def test_transposed_conv_candidates_are_known_names(monkeypatch):
    """The phase candidates of a transposed conv (``phase_<conv tactic>``) can be named in exclude_tactics."""
    import srcore
    from srcore_trt_like.tactics import table

    seen: set[str] = set()
    offer = table.candidates

    def record(layer, net):
        out = offer(layer, net)
        if layer.kind == "conv_transpose":
            seen.update(c.name for c in out)
        return out
    monkeypatch.setattr(table, "candidates", record)
    module = torch.nn.Sequential(torch.nn.ConvTranspose2d(8, 4, 4, 2, 1), torch.nn.ReLU()).eval()
    x = torch.randn(2, 8, 3, 3)
    model = srcore.from_torchscript(torch.jit.script(module), (x,))
    srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                      engine_options={"timing": False, "timing_cache": False}))
    assert any(n.startswith("phase_") for n in seen) and "numba" in seen, seen
    assert seen <= set(tactic_names()), seen - set(tactic_names())
    check_options({"exclude_tactics": sorted(n for n in seen if n.startswith("phase_"))})
