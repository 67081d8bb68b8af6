"""Recurrent kernels vs torch: lstm/gru/rnn_tanh/rnn_relu (.input and packed .data), the four cells,
their matchers (weights prepared once) and the errors."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore.ir.types import ListType, TensorType  # noqa: E402
from srcore.plugin import ArgInfo, NodeInfo, Specialized  # noqa: E402
from srcore_cpu.kernels import recurrent as R  # noqa: E402
from srcore_cpu.kernels import recurrent_cell as RC  # noqa: E402

MODULES = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn_tanh": torch.nn.RNN, "rnn_relu": torch.nn.RNN}
CELLS = {"lstm": torch.nn.LSTMCell, "gru": torch.nn.GRUCell, "rnn_tanh": torch.nn.RNNCell,
         "rnn_relu": torch.nn.RNNCell}
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}
TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-12)}


def make_module(mode, input_size=4, hidden=5, **kw):
    torch.manual_seed(0)
    if mode.startswith("rnn_"):
        kw["nonlinearity"] = mode[4:]
    return MODULES[mode](input_size, hidden, **kw).eval()


def flat_params(m):
    return [p.detach().numpy().copy() for p in m._flat_weights]  # owning arrays, as parameters are


def close(got, want, dtype):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, **TOL[dtype])


def run_input(mode, m, x, states):
    """The srcore kernel with torch's own argument layout; zero states when ``states`` is None."""
    d = 2 if m.bidirectional else 1
    b = x.shape[0] if m.batch_first else x.shape[1]
    hout = getattr(m, "proj_size", 0) or m.hidden_size
    dt = x.dtype
    if states is None:
        h0 = np.zeros((m.num_layers * d, b, hout), dt)
        states = (h0, np.zeros((m.num_layers * d, b, m.hidden_size), dt)) if mode == "lstm" else h0
    hx = list(states) if mode == "lstm" else states
    fn = getattr(R, f"{mode}_input")
    return fn(x, hx, flat_params(m), m.bias, m.num_layers, float(m.dropout), False, m.bidirectional,
              m.batch_first)


def reference(mode, m, x, states):
    with torch.no_grad():
        if states is None:
            y, hn = m(torch.from_numpy(x))
        elif mode == "lstm":
            y, hn = m(torch.from_numpy(x), tuple(torch.from_numpy(s) for s in states))
        else:
            y, hn = m(torch.from_numpy(x), torch.from_numpy(states))
    return (y, *hn) if mode == "lstm" else (y, hn)


def random_states(mode, m, batch, dtype, rng):
    d = 2 if m.bidirectional else 1
    hout = getattr(m, "proj_size", 0) or m.hidden_size
    h0 = rng.standard_normal((m.num_layers * d, batch, hout)).astype(dtype)
    if mode == "lstm":
        return h0, rng.standard_normal((m.num_layers * d, batch, m.hidden_size)).astype(dtype)
    return h0


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("mode", sorted(MODULES))
def test_input_matches_torch(mode, layers, bidirectional, batch_first, bias, dtype):
    m = make_module(mode, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias,
                    dropout=0.3 if layers > 1 else 0.0).to(TORCH_DTYPE[dtype])
    rng = np.random.default_rng(1)
    for seq in (1, 4):
        for given in (False, True):
            shape = (3, seq, 4) if batch_first else (seq, 3, 4)
            x = rng.standard_normal(shape).astype(dtype)
            states = random_states(mode, m, 3, dtype, rng) if given else None
            got = run_input(mode, m, x, states)
            want = reference(mode, m, x, states)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                close(g, w, dtype)


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_lstm_proj_size(bias, layers, bidirectional, batch_first, dtype):
    m = make_module("lstm", input_size=6, hidden=7, num_layers=layers, bidirectional=bidirectional,
                    batch_first=batch_first, bias=bias, proj_size=3).to(TORCH_DTYPE[dtype])
    rng = np.random.default_rng(2)
    for given in (False, True):
        x = rng.standard_normal((2, 5, 6)).astype(dtype)
        states = random_states("lstm", m, 2 if batch_first else 5, dtype, rng) if given else None
        got = run_input("lstm", m, x, states)
        want = reference("lstm", m, x, states)
        assert got[0].shape[-1] == 3 * (2 if bidirectional else 1)
        assert got[1].shape[-1] == 3 and got[2].shape[-1] == 7
        for g, w in zip(got, want):
            close(g, w, dtype)


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("mode", sorted(MODULES))
def test_out_variant_writes_the_given_buffers(mode):
    m = make_module(mode, num_layers=2, bidirectional=True)
    x = np.random.default_rng(3).standard_normal((4, 2, 4)).astype(np.float32)
    want = reference(mode, m, x, None)
    outs = tuple(np.full(w.shape, np.nan, np.float32) for w in want)
    d, hout = 2, 5
    h0 = np.zeros((2 * d, 2, hout), np.float32)
    hx = [h0, h0.copy()] if mode == "lstm" else h0
    r = getattr(R, f"{mode}_input")(x, hx, flat_params(m), True, 2, 0.0, False, True, False, out=outs)
    assert r is outs
    for g, w in zip(outs, want):
        close(g, w, np.float32)


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("mode", sorted(MODULES))
def test_packed_data_matches_torch(mode, layers, bidirectional):
    """aten::<mode>.data: a packed batch of sequences of lengths 5, 3, 3, 1 (torch runs the same op)."""
    m = make_module(mode, num_layers=layers, bidirectional=bidirectional).double()
    rng = np.random.default_rng(4)
    lengths = [5, 3, 3, 1]
    x = torch.from_numpy(rng.standard_normal((5, 4, 4)))
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths)
    for given in (False, True):
        states = random_states(mode, m, 4, np.float64, rng) if given else None
        with torch.no_grad():
            if states is None:
                y, hn = m(packed)
            else:
                st = tuple(torch.from_numpy(s) for s in states) if mode == "lstm" else torch.from_numpy(states)
                y, hn = m(packed, st)
        want = (y.data, *hn) if mode == "lstm" else (y.data, hn)
        d = 2 if bidirectional else 1
        if states is None:
            h0 = np.zeros((layers * d, 4, 5))
            states = (h0, h0.copy()) if mode == "lstm" else h0
        hx = list(states) if mode == "lstm" else states
        got = getattr(R, f"{mode}_data")(packed.data.numpy(), packed.batch_sizes.numpy(), hx, flat_params(m),
                                         True, layers, 0.0, False, bidirectional)
        for g, w in zip(got, want):
            close(g, w, np.float64)


@pytest.mark.one_pass   # kernel calls only
def test_lstm_data_with_projection():
    m = make_module("lstm", num_layers=2, bidirectional=True, proj_size=2).double()
    x = torch.from_numpy(np.random.default_rng(5).standard_normal((4, 3, 4)))
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, [4, 2, 1])
    with torch.no_grad():
        y, (h, c) = m(packed)
    hx = [np.zeros((4, 3, 2)), np.zeros((4, 3, 5))]
    got = R.lstm_data(packed.data.numpy(), packed.batch_sizes.numpy(), hx, flat_params(m), True, 2, 0.0, False,
                      True)
    for g, w in zip(got, (y.data, h, c)):
        close(g, w, np.float64)


# ---------------------------------------------------------------------------------------------
# matchers


def rnn_node(op, params_const=None, dtype="float32"):
    t = TensorType(dtype)
    args = [ArgInfo("input", t, False, None), ArgInfo("hx", ListType(t) if "lstm" in op else t, False, None),
            ArgInfo("params", ListType(t), params_const is not None, params_const),
            ArgInfo("has_biases", None, True, True), ArgInfo("num_layers", None, True, 1),
            ArgInfo("dropout", None, True, 0.0), ArgInfo("train", None, True, False),
            ArgInfo("bidirectional", None, True, False), ArgInfo("batch_first", None, True, False)]
    return NodeInfo(op, None, tuple(args), ())


@pytest.mark.one_pass   # kernel calls only
def test_matcher_prepares_weights_once_per_node():
    m = make_module("gru")
    params = flat_params(m)
    x = np.random.default_rng(6).standard_normal((3, 2, 4)).astype(np.float32)
    k1, k2 = R.recurrent_matcher(rnn_node("aten::gru.input")), R.recurrent_matcher(rnn_node("aten::gru.input"))
    assert k1 is not k2  # one kernel (and one weight cache) per node
    h0 = np.zeros((1, 2, 5), np.float32)
    y1 = k1(x, h0, params, True, 1, 0.0, False, False, False)
    cache = k1.__closure__  # the prepared weights are reused while the same arrays come back
    prepared = [c.cell_contents for c in cache if isinstance(c.cell_contents, R.WeightCache)][0].prepared
    assert prepared is not None
    y2 = k1(x, h0, params, True, 1, 0.0, False, False, False)
    assert [c.cell_contents for c in cache if isinstance(c.cell_contents, R.WeightCache)][0].prepared is prepared
    np.testing.assert_array_equal(y1[0], y2[0])
    close(y1[0], reference("gru", m, x, None)[0], np.float32)
    # other weights (new arrays): prepared again, the result follows them
    m2 = make_module("gru", 4, 5)
    with torch.no_grad():
        for p in m2.parameters():
            p.mul_(-1.5)
    y3 = k1(x, h0, flat_params(m2), True, 1, 0.0, False, False, False)
    close(y3[0], reference("gru", m2, x, None)[0], np.float32)


@pytest.mark.one_pass   # kernel calls only
def test_weights_in_reused_buffers_are_not_cached():
    """A view (an arena buffer, say) may hold other values next run: prepare it every call."""
    m = make_module("rnn_tanh")
    slab = np.concatenate([p.ravel() for p in flat_params(m)])
    views, off = [], 0
    for p in flat_params(m):
        views.append(slab[off:off + p.size].reshape(p.shape))
        off += p.size
    x = np.random.default_rng(7).standard_normal((2, 1, 4)).astype(np.float32)
    h0 = np.zeros((1, 1, 5), np.float32)
    k = R.recurrent_matcher(rnn_node("aten::rnn_tanh.input"))
    y1 = k(x, h0, views, True, 1, 0.0, False, False, False)[0]
    slab *= 0.5
    y2 = k(x, h0, views, True, 1, 0.0, False, False, False)[0]
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(0.5)
    close(y2, reference("rnn_tanh", m, x, None)[0], np.float32)
    assert not np.allclose(y1, y2)


@pytest.mark.one_pass   # kernel calls only
def test_matcher_with_constant_params_prepares_at_load():
    m = make_module("lstm")
    k = R.recurrent_matcher(rnn_node("aten::lstm.input", params_const=flat_params(m)))
    wc = [c.cell_contents for c in k.__closure__ if isinstance(c.cell_contents, R.WeightCache)][0]
    assert wc.prepared is not None and wc.prepared.layers[0].wihT.shape == (4, 20)


# ---------------------------------------------------------------------------------------------
# cells


def cell_ref(mode, cell, x, hx):
    with torch.no_grad():
        if mode == "lstm":
            r = cell(torch.from_numpy(x), tuple(torch.from_numpy(h) for h in hx))
            return tuple(t.numpy() for t in r)
        return cell(torch.from_numpy(x), torch.from_numpy(hx)).numpy()


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("mode", sorted(CELLS))
def test_cells_match_torch(mode, bias, dtype, batched):
    torch.manual_seed(0)
    kw = {"nonlinearity": mode[4:]} if mode.startswith("rnn_") else {}
    cell = CELLS[mode](4, 6, bias=bias, **kw).eval().to(TORCH_DTYPE[dtype])
    rng = np.random.default_rng(8)
    lead = (3,) if batched else ()
    x = rng.standard_normal(lead + (4,)).astype(dtype)
    h = rng.standard_normal(lead + (6,)).astype(dtype)
    hx = [h, rng.standard_normal(lead + (6,)).astype(dtype)] if mode == "lstm" else h
    want = cell_ref(mode, cell, x, hx)
    w = [p.detach().numpy() for p in (cell.weight_ih, cell.weight_hh)]
    b = [p.detach().numpy() for p in (cell.bias_ih, cell.bias_hh)] if bias else [None, None]
    generic = getattr(RC, f"{mode}_cell")
    got = generic(x, hx, *w, *b)
    args = (ArgInfo("input", TensorType(), False, None), ArgInfo("hx", TensorType(), False, None),
            *(ArgInfo(n, TensorType(), True, v) for n, v in zip(("w_ih", "w_hh", "b_ih", "b_hh"), w + b)))
    spec = RC.cell_matcher(NodeInfo(f"aten::{mode}_cell", None, args, ()))
    assert isinstance(spec, Specialized) and spec.args == (0, 1)
    fast = spec.fn(x, hx)
    for g in (got, fast):
        for gi, wi in zip(g if mode == "lstm" else (g,), want if mode == "lstm" else (want,)):
            close(gi, wi, dtype)
    outs = tuple(np.empty_like(h) for _ in range(2)) if mode == "lstm" else np.empty_like(h)
    assert spec.fn(x, hx, out=outs) is outs
    for gi, wi in zip(outs if mode == "lstm" else (outs,), want if mode == "lstm" else (want,)):
        close(gi, wi, dtype)
    # float32 LSTM / GRU / tanh and relu RNN steps run the layers' compiled loop (one step; the RNNs
    # as pinned GRUs); float64 the numpy step
    steps = [c.cell_contents for c in spec.fn.__closure__ if callable(c.cell_contents)
             and getattr(c.cell_contents, "__name__", "") == "step"]
    assert len(steps) == (dtype == np.float32)


@pytest.mark.one_pass   # kernel calls only
def test_cell_matcher_declines_runtime_weights():
    args = (ArgInfo("input", TensorType(), False, None), ArgInfo("hx", TensorType(), False, None),
            ArgInfo("w_ih", TensorType(), False, None), ArgInfo("w_hh", TensorType(), False, None),
            ArgInfo("b_ih", TensorType(), True, None), ArgInfo("b_hh", TensorType(), True, None))
    assert RC.cell_matcher(NodeInfo("aten::gru_cell", None, args, ())) is RC.gru_cell


# ---------------------------------------------------------------------------------------------
# errors


@pytest.mark.one_pass   # kernel calls only
def test_train_true_is_a_kernel_error():
    m = make_module("lstm")
    x = np.zeros((2, 1, 4), np.float32)
    h = np.zeros((1, 1, 5), np.float32)
    with pytest.raises(srcore.KernelError, match=r"aten::lstm.input: train=True"):
        R.lstm_input(x, [h, h], flat_params(m), True, 1, 0.5, True, False, False)


@pytest.mark.one_pass   # kernel calls only
def test_bad_arguments_are_kernel_errors():
    m = make_module("gru", num_layers=2)
    x = np.zeros((2, 1, 4), np.float32)
    h = np.zeros((2, 1, 5), np.float32)
    p = flat_params(m)
    with pytest.raises(srcore.KernelError, match=r"expected 8 weights .* got 7"):
        R.gru_input(x, h, p[:-1], True, 2, 0.0, False, False, False)
    with pytest.raises(srcore.KernelError, match=r"hx must have shape \(2, 1, 5\), got \(1, 1, 5\)"):
        R.gru_input(x, h[:1], p, True, 2, 0.0, False, False, False)
    with pytest.raises(srcore.KernelError, match=r"input must be 3-D"):
        R.gru_input(x[0], h, p, True, 2, 0.0, False, False, False)
    with pytest.raises(srcore.KernelError, match=r"input size must be 4"):
        R.gru_input(np.zeros((2, 1, 3), np.float32), h, p, True, 2, 0.0, False, False, False)
    with pytest.raises(srcore.KernelError, match=r"hx must be a list of two tensors"):
        R.lstm_input(x, h, flat_params(make_module("lstm")), True, 1, 0.0, False, False, False)
    with pytest.raises(srcore.KernelError, match=r"batch_sizes must be positive and non-increasing"):
        R.gru_data(np.zeros((3, 4), np.float32), np.array([1, 2]), h, p, True, 2, 0.0, False, False)
    with pytest.raises(srcore.KernelError, match=r"w_ih must be \(18, input_size\)"):
        RC.gru_cell(np.zeros((1, 4), np.float32), np.zeros((1, 6), np.float32), np.zeros((6, 4), np.float32),
                   np.zeros((18, 6), np.float32))


# ---------------------------------------------------------------------------------------------
# end to end: nn.LSTM / GRU / RNN and the cells through both frontends, both executors, both planners


class _Seq(torch.nn.Module):
    """``rnn(x)`` or, with ``states``, ``rnn(x, hx)`` (the initial states are model inputs)."""

    def __init__(self, rnn, states: bool):
        super().__init__()
        self.rnn, self.states = rnn, states

    def forward(self, x, h0, c0):
        if isinstance(self.rnn, torch.nn.LSTM):
            if self.states:
                y, (h, c) = self.rnn(x, (h0, c0))
            else:
                y, (h, c) = self.rnn(x)
            return y, h, c
        if self.states:
            y, h = self.rnn(x, h0)
        else:
            y, h = self.rnn(x)
        return y, h, h0


class _Cells(torch.nn.Module):
    """Two steps of an LSTMCell feeding a GRUCell and two RNN cells (weights constant: the matcher)."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTMCell(4, 6)
        self.gru = torch.nn.GRUCell(6, 5)
        self.tanh = torch.nn.RNNCell(5, 3)
        self.relu = torch.nn.RNNCell(3, 3, nonlinearity="relu", bias=False)

    def forward(self, x, h0, c0):
        h, c = self.lstm(x, (h0, c0))
        h, c = self.lstm(x, (h, c))
        g = self.gru(h)
        return self.relu(self.tanh(g)), c, g


E2E = {
    "lstm_2layer_bidir": lambda: torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True),
    "lstm_proj_batch_first": lambda: torch.nn.LSTM(4, 6, batch_first=True, proj_size=3),
    "gru_bidir_batch_first": lambda: torch.nn.GRU(4, 6, bidirectional=True, batch_first=True),
    "gru_2layer_nobias": lambda: torch.nn.GRU(4, 6, num_layers=2, bias=False),
    "rnn_tanh_2layer_bidir": lambda: torch.nn.RNN(4, 6, num_layers=2, bidirectional=True),
    "rnn_relu": lambda: torch.nn.RNN(4, 6, nonlinearity="relu"),
}


def _e2e_case(name, states):
    torch.manual_seed(0)
    rnn = E2E[name]()
    m = _Seq(rnn, states).eval()
    d = 2 if rnn.bidirectional else 1
    hout = getattr(rnn, "proj_size", 0) or rnn.hidden_size
    batch, seq = 2, 5
    x = torch.randn((batch, seq, 4) if rnn.batch_first else (seq, batch, 4))
    h0 = torch.randn(rnn.num_layers * d, batch, hout)
    c0 = torch.randn(rnn.num_layers * d, batch, rnn.hidden_size)
    return m, (x, h0, c0)


def _convert(frontend, m, inputs):
    if frontend == "script":
        return srcore.from_torchscript(m, inputs)
    if frontend == "trace":
        return srcore.from_torchscript(torch.jit.trace(m, inputs), inputs)
    return srcore.from_torch(m, inputs)


def _check_all_runtimes(model, m, inputs):
    with torch.no_grad():
        want = [t.numpy() for t in m(*inputs)]
    args = [t.numpy() for t in inputs]
    for executor in ("codegen", "interpreter"):
        for planner in ("standard_resizing", "precomputed_offsets"):
            sm = srcore.StaticModule(model, options=srcore.Options(executor=executor,
                                                                   memory_planner_algorithm=planner))
            for _ in range(2):  # the second run reuses the arena and the prepared weights
                got = sm(*args)
                assert len(got) == len(want)
                for g, w in zip(got, want):
                    assert g.shape == w.shape and g.dtype == w.dtype
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.one_pass   # runs every executor and planner itself
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("states", [False, True])
@pytest.mark.parametrize("frontend", ["script", "trace", "export"])
@pytest.mark.parametrize("name", sorted(E2E))
def test_end_to_end_matches_torch(name, frontend, states):
    m, inputs = _e2e_case(name, states)
    model = _convert(frontend, m, inputs)
    ops = {n.kind for n in model.graph.all_nodes()}
    assert {"aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu"} & ops
    _check_all_runtimes(model, m, inputs)


@pytest.mark.one_pass   # runs every executor and planner itself
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("frontend", ["script", "trace", "export"])
def test_cells_end_to_end(frontend):
    torch.manual_seed(0)
    m = _Cells().eval()
    inputs = (torch.randn(3, 4), torch.randn(3, 6), torch.randn(3, 6))
    model = _convert(frontend, m, inputs)
    ops = {n.kind for n in model.graph.all_nodes()}
    if frontend != "trace":  # the tracer records the cells' decomposition (linear, sigmoid, ...)
        assert {"aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell"} <= ops
    _check_all_runtimes(model, m, inputs)


@pytest.mark.one_pass   # runs every executor and planner itself
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_end_to_end_through_srm(tmp_path):
    """The weights of a Tensor[] argument are parameters: they survive save/load."""
    m, inputs = _e2e_case("lstm_2layer_bidir", True)
    srcore.save(srcore.from_torchscript(m, inputs), tmp_path / "lstm.srm")
    _check_all_runtimes(srcore.load(tmp_path / "lstm.srm"), m, inputs)


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("sizes", [3, 4, [1, 5, 2]])
def test_unsafe_splits_copy(sizes):
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    if isinstance(sizes, list):
        got = R.unsafe_split(x, sizes, 0)
        want = torch.unsafe_split_with_sizes(torch.from_numpy(x), sizes, 0)
    else:
        got = R.unsafe_chunk(x, sizes, 0)
        want = torch.unsafe_chunk(torch.from_numpy(x), sizes, 0)
        got2 = R.unsafe_split(x, sizes, 0)
        for g, w in zip(got2, torch.unsafe_split(torch.from_numpy(x), sizes, 0)):
            np.testing.assert_array_equal(g, w.numpy())
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w.numpy())
        assert not np.shares_memory(g, x)  # see R.unsafe_chunk: in-place gates must not reach the input


def test_scripted_lstm_weights_are_prepared_at_load():
    """The frozen weight list reaches dispatch as a ``prim::ListConstruct`` of constants, which the
    matcher sees as a constant list: the weights are laid out at load, before any run."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.LSTM(6, 5, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0]

    torch.manual_seed(0)
    net = Net().eval()
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(net)))
    # the scripted module has no example inputs, so its dtypes are unknown at load: the kernel comes
    # wrapped in a per-call dtype check (srcore.dispatch.guard); the weights are in the kernel's closure
    kernels = [inspect.unwrap(pn.fn.fn) for b in sm.blocks for pn in b.nodes
               if pn.fn is not None and pn.fn.op.startswith("aten::lstm")]
    caches = [c.cell_contents for k in kernels for c in (k.__closure__ or ())
              if isinstance(c.cell_contents, R.WeightCache)]
    assert len(caches) == 1 and caches[0].prepared is not None
    x = np.random.default_rng(0).standard_normal((2, 7, 6)).astype(np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(sm(x), net(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_compiled_recurrence_matches_torch(mode, bias, batch_first, bidirectional, monkeypatch):
    """The matcher of a float32 LSTM / GRU gives the compiled loop (jit_recurrent.py), which every
    layer takes (a bidirectional one a direction at a time, the reverse one walking time backwards
    in place): against torch for 1 and 2 layers, hidden sizes on and off its 4-row GEMV blocks, one
    and several steps and batch rows, zero and given states, a non-contiguous input, into fresh
    arrays and into ``out`` buffers (NaN-filled: every element must be written); float64 keeps the
    numpy loop."""
    rng = np.random.default_rng(11)
    compiled = []
    real = R.run_compiled
    monkeypatch.setattr(R, "run_compiled", lambda *a, **kw: compiled.append(1) or real(*a, **kw))
    d = 2 if bidirectional else 1
    # (hidden 6: one 4-row GEMV block and two single rows; torch's LSTM takes ~0.1 s a call here)
    for layers, hidden in ((2, 6), (1, 1)):
        torch.manual_seed(layers + hidden)
        m = MODULES[mode](4, hidden, num_layers=layers, bias=bias, batch_first=batch_first,
                          bidirectional=bidirectional).eval()
        node = rnn_node(f"aten::{mode}.input")
        k = R.recurrent_matcher(node)
        jit = [c.cell_contents for c in k.__closure__ if isinstance(c.cell_contents, dict)]
        assert jit and mode in jit[0]
        for seq, batch in ((1, 1), (9, 3)):
            shape = (batch, seq, 4) if batch_first else (seq, batch, 4)
            x = rng.standard_normal(shape[::-1]).astype(np.float32).T   # a transposed view
            assert not x.flags.c_contiguous or seq * batch == 1
            for given in ((False, True) if seq > 1 else (False,)):
                states = random_states(mode, m, batch, np.float32, rng) if given else None
                d0 = (layers * d, batch, hidden)
                hx = states if states is not None else (
                    (np.zeros(d0, np.float32), np.zeros(d0, np.float32)) if mode == "lstm" else np.zeros(d0, np.float32))
                compiled.clear()
                args = (x, list(hx) if mode == "lstm" else hx, flat_params(m), bias, layers, 0.0, False,
                        bidirectional, batch_first)
                got = k(*args)
                assert compiled == [1]
                # the bound call runs every layer, each direction on the compiled loop
                plan = jit[0]["bound"][0]
                assert [len(layer[3]) for layer in plan.layers] == [d] * layers
                assert all(run[0] is jit[0][mode].entry for layer in plan.layers for run in layer[3])
                want = reference(mode, m, np.ascontiguousarray(x), states)
                for g, w in zip(got, want):
                    close(g, w, np.float32)
                out = tuple(np.full(g.shape, np.nan, np.float32) for g in got)
                assert all(a is b for a, b in zip(k(*args, out=out), out))
                for g, w in zip(out, want):
                    close(g, w, np.float32)
    k64 = R.recurrent_matcher(rnn_node(f"aten::{mode}.input", dtype="float64"))
    assert [c.cell_contents for c in k64.__closure__ if c.cell_contents is None or isinstance(c.cell_contents, dict)] \
        == [None]


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_both_layer_loops_match_torch(mode):
    """Every compiled layer loop of jit_recurrent.py (the GEMV by rows, the GEMV in registers; one is
    chosen by timing at load) against torch: hidden 37 (gates past the register blocks, the single vectors and the 16 lanes; rows past the 4-row GEMV
    blocks), hidden 40 (LSTM's 160 gates: one whole register block at 16 lanes), hidden 24 (LSTM's
    96 gates: the 4- and 2-vector blocks, crnn's size), 2 batch rows, given states."""
    from srcore_cpu.kernels import jit_recurrent as JR

    rng = np.random.default_rng(5)
    fns = JR.candidates(mode)
    assert len(fns) == 2
    for hidden in (37, 40, 24):
        torch.manual_seed(hidden)
        m = MODULES[mode](5, hidden).eval()
        prep = R.prepare(mode, flat_params(m), True, 1, False, np.float32)
        x = rng.standard_normal((9, 2, 5)).astype(np.float32)
        states = random_states(mode, m, 2, np.float32, rng)
        want = reference(mode, m, x, states)
        h0, c0 = states if mode == "lstm" else (states, None)
        for fn in fns:
            got = R.run_compiled(prep, x, False, h0, c0, jit={mode: fn})
            for g, w in zip(got if mode == "lstm" else got[:2], want):
                close(g, w, np.float32)
    assert JR.kernel(mode, 37) in fns


@pytest.mark.one_pass   # runs every executor and planner itself
def test_compiled_recurrence_through_static_modules():
    """A float32 one-direction LSTM feeding a GRU (lstm_gru's shape, small), given states, through
    every executor and planner: the compiled loops (the matcher knows the dtype) against torch."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(4, 7, num_layers=2, batch_first=True)
            self.gru = torch.nn.GRU(7, 5, batch_first=True)

        def forward(self, x, h0, c0):
            y, (h, c) = self.lstm(x, (h0, c0))
            z, g = self.gru(y)
            return z, h, c, g

    torch.manual_seed(3)
    net = Net().eval()
    inputs = (torch.randn(2, 6, 4), torch.randn(2, 2, 7), torch.randn(2, 2, 7))
    _check_all_runtimes(srcore.from_torchscript(torch.jit.script(net), inputs), net, inputs)


@pytest.mark.one_pass   # kernel calls only
@pytest.mark.parametrize("bias", [True, False])
def test_tanh_rnn_runs_as_pinned_gru(bias, monkeypatch):
    """A float32 tanh / relu RNN with constant weights (hidden <= PINNED_GRU_MAX_HIDDEN) runs the
    compiled GRU loop (a relu one its relu candidate) with its reset gate pinned open and its update
    gate shut: against torch, 2 layers, bidirectional, given states, into ``out``; a float64 one
    keeps the numpy loop."""
    rng = np.random.default_rng(12)
    compiled = []
    real = R.run_compiled
    monkeypatch.setattr(R, "run_compiled", lambda *a, **kw: compiled.append(a[0].mode) or real(*a, **kw))
    for mode in ("rnn_tanh", "rnn_relu"):
        m = make_module(mode, hidden=6, num_layers=2, bias=bias, bidirectional=True)
        params = flat_params(m)
        node = rnn_node(f"aten::{mode}.input", params_const=params)
        node = NodeInfo(node.op, None, tuple(ArgInfo(a.name, a.type, True, {"has_biases": bias, "num_layers": 2,
                                                                            "bidirectional": True}[a.name])
                                              if a.name in ("has_biases", "num_layers", "bidirectional") else a
                                              for a in node.args), ())
        k = R.recurrent_matcher(node)
        x = rng.standard_normal((7, 3, 4)).astype(np.float32)
        states = random_states(mode, m, 3, np.float32, rng)
        compiled.clear()
        got = k(x, states, params, bias, 2, 0.0, False, True, False)
        assert compiled == ["gru"]
        want = reference(mode, m, x, states)
        for g, w in zip(got, want):
            close(g, w, np.float32)
        out = tuple(np.full(g.shape, np.nan, np.float32) for g in got)
        assert all(a is b for a, b in zip(k(x, states, params, bias, 2, 0.0, False, True, False, out=out), out))
        for g, w in zip(out, want):
            close(g, w, np.float32)
        x64, s64 = x.astype(np.float64), states.astype(np.float64)
        compiled.clear()
        got = k(x64, s64, [p.astype(np.float64) for p in params], bias, 2, 0.0, False, True, False)
        assert compiled == []
        for g, w in zip(got, reference(mode, m.double(), x64, s64)):
            close(g, w, np.float64)
        m.float()
        if mode == "rnn_relu" and bias:
            # every relu candidate (chosen by timing at load), with negative pre-activations
            from srcore_cpu.kernels import jit_recurrent as JR

            prep = R.rnn_as_gru(params, bias, 2, True, np.float32, "aten::rnn_relu.input")
            for fn in JR.candidates("gru_relu"):
                for g, w in zip(R.run_compiled(prep, x, False, states, jit={"gru": fn})[:2], want):
                    close(g, w, np.float32)
