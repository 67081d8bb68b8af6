"""``fold_cell_decompositions``: traced, exported and hand-written LSTM / GRU cells become cell ops, against torch."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import pytest
import torch
from torch import nn

import srcore

#: run through the default executor and planner only: what is checked is the pass
pytestmark = pytest.mark.one_pass


class Cells(nn.Module):
    """Two steps of an LSTMCell feeding a GRUCell, the LSTM's first state given, the GRU's zeros."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTMCell(5, 6)
        self.gru = nn.GRUCell(6, 4)

    def forward(self, x, h, c):
        g = torch.zeros(x.shape[0], 4, dtype=x.dtype)
        outs: List[torch.Tensor] = []
        for t in range(2):
            h, c = self.lstm(x[:, t], (h, c))
            g = self.gru(h, g)
            outs.append(g)
        return torch.stack(outs, 1), h, c


class HandLSTM(nn.Module):
    """An LSTM cell written out (two ``nn.Linear``, ``chunk``, functional gates); ``order`` names
    the chunks as torch does (``ifgo``) or otherwise (``ifog``: not an ``lstm_cell``)."""

    def __init__(self, order: str = "ifgo", hidden: int = 6):
        super().__init__()
        self.ih = nn.Linear(hidden, 4 * hidden)
        self.hh = nn.Linear(hidden, 4 * hidden)
        self.swap = order != "ifgo"

    def forward(self, x, h, c):
        for t in range(3):
            gates = self.hh(h) + self.ih(x[:, t])
            i, f, a, b = gates.chunk(4, 1)
            g, o = (b, a) if self.swap else (a, b)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class HandGRU(nn.Module):
    """A GRU cell written out; ``inplace``: the state updated by ``sub_`` (not a cell: the write)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.ih = nn.Linear(5, 12)
        self.hh = nn.Linear(4, 12)
        self.inplace = inplace

    def forward(self, x, h) -> Tuple[torch.Tensor, torch.Tensor]:
        h = h.clone()
        for t in range(2):
            i_r, i_z, i_n = self.ih(x[:, t]).chunk(3, 1)
            h_r, h_z, h_n = self.hh(h).chunk(3, 1)
            r = torch.sigmoid(i_r + h_r)
            z = torch.sigmoid(h_z + i_z)
            n = torch.tanh(i_n + r * h_n)
            if self.inplace:
                h = h.sub_(n) * z + n
            else:
                h = (h - n) * z + n
        return h, h * 2


def _run(module, inputs, path, tmp_path=None):
    """``module`` through ``path`` against torch; the prepared graph's op kinds. In float64: the
    float32 cells would load the compiled recurrent loop (numba), which is not what is tested here."""
    module, inputs = module.double(), tuple(t.double() for t in inputs)
    if path == "onnx":
        f = str(tmp_path / "m.onnx")
        with torch.no_grad():
            torch.onnx.export(module, inputs, f, dynamo=False, opset_version=17)
        model = srcore.from_onnx(f)
    elif path == "trace":
        with torch.no_grad():
            model = srcore.from_torchscript(torch.jit.trace(module, inputs, check_trace=False), inputs)
    else:
        model = srcore.from_torchscript(torch.jit.script(module), inputs)
    sm = srcore.StaticModule(model)
    got = sm(*[t.numpy() for t in inputs])
    with torch.no_grad():
        want = module(*inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)
    return {n.kind for n in sm.graph.all_nodes()}


@pytest.mark.parametrize("path", ["trace", "script", "onnx"])
def test_cells_fold_to_cell_ops(path, tmp_path):
    """Traced cells are recorded as their decomposition (ONNX's export too: Gemm, Split, Sigmoid);
    scripted ones are cell ops already."""
    torch.manual_seed(0)
    m = Cells().eval()
    ops = _run(m, (torch.randn(3, 2, 5), torch.randn(3, 6), torch.randn(3, 6)), path, tmp_path)
    assert {"aten::lstm_cell", "aten::gru_cell"} <= ops
    if path != "onnx":   # (the exporter folds the GRU's first step on its zero state: not a cell)
        assert not ops & {"aten::sigmoid", "aten::sigmoid_", "aten::unsafe_chunk", "aten::tanh", "aten::tanh_"}


@pytest.mark.parametrize("path", ["trace", "script"])
def test_hand_written_lstm_folds_in_torch_gate_order_only(path):
    torch.manual_seed(1)
    inputs = (torch.randn(2, 3, 6), torch.randn(2, 6), torch.randn(2, 6))
    ops = _run(HandLSTM().eval(), inputs, path)
    assert "aten::lstm_cell" in ops and "aten::sigmoid" not in ops
    ops = _run(HandLSTM("ifog").eval(), inputs, path)
    assert "aten::lstm_cell" not in ops and "aten::sigmoid" in ops


class BroadcastLSTM(nn.Module):
    """An LSTM cell's formulas on a (B, 1) cell state (broadcast): not an ``lstm_cell``."""

    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(5, 16)
        self.hh = nn.Linear(4, 16)

    def forward(self, x, h, c):
        i, f, g, o = (self.ih(x) + self.hh(h)).chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


def test_broadcast_state_does_not_fold():
    torch.manual_seed(3)
    ops = _run(BroadcastLSTM().eval(), (torch.randn(3, 5), torch.randn(3, 4), torch.randn(3, 1)), "script")
    assert "aten::lstm_cell" not in ops


def test_hand_written_gru_folds_unless_it_writes_the_state():
    torch.manual_seed(2)
    inputs = (torch.randn(3, 2, 5), torch.randn(3, 4))
    ops = _run(HandGRU().eval(), inputs, "script")
    assert "aten::gru_cell" in ops and "aten::sigmoid" not in ops
    ops = _run(HandGRU(inplace=True).eval(), inputs, "script")
    assert "aten::gru_cell" not in ops
