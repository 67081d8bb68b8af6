"""aten::lstm and aten::gru in OpenVINO (LSTMSequence / GRUSequence) against torch: one and two
directions, stacked layers, batch-first or not, with and without biases, initial states as inputs
or left to torch's zeros, and symbolic batch and sequence sizes."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import srcore

pytestmark = pytest.mark.one_pass   # what runs in OpenVINO does not depend on the executor or the planner

#: the converter table's recurrent overloads, all exercised here (test_conformance counts them covered)
OPS = ("aten::lstm.input", "aten::gru.input")


class _Rnn(torch.nn.Module):
    def __init__(self, kind, **kw):
        super().__init__()
        self.rnn = getattr(torch.nn, kind)(**kw)

    @staticmethod
    def _flat(y, h):
        return (y, *h) if isinstance(h, tuple) else (y, h)

    def forward(self, x):
        return self._flat(*self.rnn(x))


class _WithH(_Rnn):
    def forward(self, x, h):
        return self._flat(*self.rnn(x, h))


class _WithHC(_Rnn):
    def forward(self, x, h, c):
        return self._flat(*self.rnn(x, (h, c)))


# (kind, input size, hidden, layers, bidirectional, batch_first, bias, initial states given, (T, B))
CONFIGS = [
    ("LSTM", 5, 7, 1, False, False, True, False, (6, 3)),
    ("LSTM", 4, 6, 2, True, True, True, True, (5, 2)),
    ("LSTM", 3, 8, 3, False, True, False, True, (4, 1)),
    ("GRU", 5, 7, 1, False, False, True, True, (6, 3)),
    ("GRU", 4, 6, 2, True, True, True, False, (5, 2)),
    ("GRU", 6, 5, 2, True, False, False, True, (3, 4)),
]


@pytest.mark.parametrize("kind,fin,hid,layers,bidir,bf,bias,states,tb", CONFIGS,
                         ids=[f"{c[0]}-L{c[3]}{'-bi' if c[4] else ''}{'-bf' if c[5] else ''}"
                              f"{'' if c[6] else '-nobias'}{'-h0' if c[7] else ''}" for c in CONFIGS])
def test_recurrent_layers_match_torch(kind, fin, hid, layers, bidir, bf, bias, states, tb):
    torch.manual_seed(hash((kind, fin, hid, layers)) % 2**31)
    cls = (_WithHC if kind == "LSTM" else _WithH) if states else _Rnn
    m = cls(kind, input_size=fin, hidden_size=hid, num_layers=layers, bidirectional=bidir,
             batch_first=bf, bias=bias).eval()
    t, b = tb
    dirs = 2 if bidir else 1
    x = torch.randn((b, t, fin) if bf else (t, b, fin))
    hx = [torch.randn(layers * dirs, b, hid) for _ in range((2 if kind == "LSTM" else 1) if states else 0)]
    batch, seq = (0, 1) if bf else (1, 0)
    dyn = {"x": {batch: "b", seq: "t"}, **{n: {1: "b"} for n in ("h", "c")[:len(hx)]}}
    model = srcore.from_torchscript(torch.jit.trace(m, (x, *hx)), (x, *hx), dynamic_dims=dyn)
    sm = srcore.StaticModule(model, options=srcore.Options(
        backends=("openvino", "cpu"), engine_min_block_size=1, engine_options={"timing": False}))
    ops = " ".join(str(s.ops) for s in sm.partition.segments if s.status == "engine")
    assert f"aten::{kind.lower()}" in ops, sm.partition.format()
    for scale in (1, 2):   # symbolic dims: the same engine at another batch and sequence length
        xs = torch.randn((b * scale, t + scale, fin) if bf else (t + scale, b * scale, fin))
        hs = [torch.randn(layers * dirs, b * scale, hid) for _ in hx]
        with torch.no_grad():
            want = m(xs, *hs)
        got = sm(xs.numpy(), *[h.numpy() for h in hs])
        got = got if isinstance(got, (list, tuple)) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-5, atol=2e-6)
    engines = [s.engine for s in sm.partition.segments if s.status == "engine"]
    assert not any(e.unplanned for e in engines), "a size ran node by node, not in OpenVINO"


def test_an_lstm_with_projections_runs_on_the_next_backend_with_torch_result():
    torch.manual_seed(3)
    m = _Rnn("LSTM", input_size=4, hidden_size=6, proj_size=3, num_layers=2).eval()
    x = torch.randn(5, 2, 4)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.trace(m, (x,)), (x,)), options=srcore.Options(
        backends=("openvino", "cpu"), engine_min_block_size=1, engine_options={"timing": False}))
    assert "aten::lstm" not in " ".join(str(s.ops) for s in sm.partition.segments if s.status == "engine")
    with torch.no_grad():
        want = m(x)
    for g, w in zip(sm(x.numpy()), want):
        np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_nan_inf_and_huge_values_give_torch_results(kind):
    """NaN, infinities and values near float32's limit in the input and the initial state: OpenVINO's
    sequence ops put NaN and saturate where torch does."""
    torch.manual_seed(0)
    m = (_WithHC if kind == "LSTM" else _WithH)(kind, input_size=3, hidden_size=4, num_layers=2,
                                                 bidirectional=True).eval()
    x = torch.randn(6, 5, 3)
    hx = [torch.randn(4, 5, 4) for _ in range(2 if kind == "LSTM" else 1)]
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.trace(m, (x, *hx)), (x, *hx)), options=srcore.Options(
        backends=("openvino", "cpu"), engine_min_block_size=1, require_full_compilation=True,
        engine_options={"timing": False}))
    x[1, 0, 0], x[2, 1, 1], x[3, 2, 2], x[4, 3, 0], x[0, 4, 1] = np.nan, np.inf, -np.inf, 3e38, -3e38
    hx[0][0, 4, 0] = np.nan
    with torch.no_grad():
        want = m(x, *hx)
    got = sm(x.numpy(), *[h.numpy() for h in hx])
    assert any(np.isnan(w.numpy()).any() for w in want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-5, atol=2e-6)
