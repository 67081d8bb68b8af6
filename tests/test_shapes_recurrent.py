"""Shape/dtype rules of aten::lstm/gru/rnn_tanh/rnn_relu (.input, .data) and the cells, against the
shapes torch returns; the states' shapes or (when unknown) the weights' decide the sizes."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore.ir import Graph  # noqa: E402
from srcore.ir.types import TENSOR, ListType, TensorType  # noqa: E402
from srcore.ops.registry import default_registry  # noqa: E402
from srcore.ops.shapes import propagate  # noqa: E402

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

REG = default_registry()
MODES = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn_tanh": torch.nn.RNN, "rnn_relu": torch.nn.RNN}


def _module(mode, **kw):
    if mode.startswith("rnn_"):
        kw["nonlinearity"] = mode[4:]
    return MODES[mode](4, 6, **kw).eval()


def _graph(qualified, m, x_type, state_types, batch_sizes=None, known_states=True):
    """One recurrent node; params are constants (ListConstruct), states graph inputs."""
    g = Graph()
    x = g.add_input(x_type, "x")
    bs = g.add_input(TensorType("int64", (batch_sizes,)), "bs") if batch_sizes is not None else None
    states = [g.add_input(t if known_states else TensorType("float32"), f"h{i}") for i, t in enumerate(state_types)]
    consts = [g.insert_constant(p.detach().numpy()) for p in m._flat_weights]
    params = g.insert("prim::ListConstruct", consts, [ListType(TENSOR)]).output
    if qualified.startswith("aten::lstm"):
        hx = g.insert("prim::ListConstruct", states, [ListType(TENSOR)]).output
    else:
        hx = states[0]
    flags = [m.bias, m.num_layers, 0.0, False, m.bidirectional] + ([] if batch_sizes is not None else [m.batch_first])
    args = [x] + ([bs] if bs is not None else []) + [hx, params] + [g.insert_constant(f) for f in flags]
    schema = REG.get(qualified)
    node = g.insert(schema.name, args, [TENSOR] * len(schema.returns))
    node.schema = schema
    for o in node.outputs:
        g.register_output(o)
    propagate(g)
    return [o.type for o in node.outputs]


def _expected(mode, m, x):
    with torch.no_grad():
        y, hn = m(x)
    ts = (y, *hn) if mode == "lstm" else (y, hn)
    return [TensorType("float32", tuple(t.shape)) for t in ts]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("known_states", [True, False])
@pytest.mark.parametrize("kw", [{}, {"num_layers": 2, "bidirectional": True}, {"batch_first": True},
                                {"proj_size": 3, "bidirectional": True}, {"bias": False, "num_layers": 3}])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_input_rule_matches_torch(mode, kw, known_states):
    if "proj_size" in kw and mode != "lstm":
        return
    m = _module(mode, **kw)
    x = torch.zeros((2, 5, 4) if m.batch_first else (5, 2, 4))
    want = _expected(mode, m, x)
    state_types = want[1:]
    got = _graph(f"aten::{mode}.input", m, TensorType("float32", tuple(x.shape)), state_types,
                 known_states=known_states)
    assert got == want


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("mode", sorted(MODES))
def test_data_rule_matches_torch(mode):
    m = _module(mode, bidirectional=True, **({"proj_size": 2} if mode == "lstm" else {}))
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.zeros(4, 3, 4), [4, 2, 1])
    with torch.no_grad():
        y, hn = m(packed)
    want = [TensorType("float32", tuple(t.shape)) for t in ((y.data, *hn) if mode == "lstm" else (y.data, hn))]
    got = _graph(f"aten::{mode}.data", m, TensorType("float32", (7, 4)), want[1:], batch_sizes=4)
    assert got == want


def test_symbolic_batch_and_sequence():
    m = _module("gru", num_layers=2, bidirectional=True)
    got = _graph("aten::gru.input", m, TensorType("float32", ("seq", "batch", 4)),
                 [TensorType("float32", (4, "batch", 6))])
    assert got == [TensorType("float32", ("seq", "batch", 12)), TensorType("float32", (4, "batch", 6))]


def test_mismatched_states_are_shape_errors():
    m = _module("lstm", num_layers=2)
    x = TensorType("float32", (5, 2, 4))
    with pytest.raises(srcore.ShapeError, match="num_layers \\* num_directions"):
        _graph("aten::lstm.input", m, x, [TensorType("float32", (1, 2, 6)), TensorType("float32", (1, 2, 6))])
    with pytest.raises(srcore.ShapeError, match="batch size of hx"):
        _graph("aten::lstm.input", m, x, [TensorType("float32", (2, 3, 6)), TensorType("float32", (2, 3, 6))])
    with pytest.raises(srcore.ShapeError, match="does not match w_hh"):
        _graph("aten::lstm.input", m, x, [TensorType("float32", (2, 2, 5)), TensorType("float32", (2, 2, 6))])
    with pytest.raises(srcore.ShapeError, match="input must be 3-D"):
        _graph("aten::lstm.input", m, TensorType("float32", (5, 4)),
               [TensorType("float32", (2, 2, 6)), TensorType("float32", (2, 2, 6))])


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_cell_rules_match_torch(mode, batched):
    kw = {"nonlinearity": mode[4:]} if mode.startswith("rnn_") else {}
    cell = {"lstm": torch.nn.LSTMCell, "gru": torch.nn.GRUCell}.get(mode, torch.nn.RNNCell)(4, 6, **kw)
    lead = (3,) if batched else ()
    x, h = torch.zeros(lead + (4,)), torch.zeros(lead + (6,))
    with torch.no_grad():
        r = cell(x, (h, h)) if mode == "lstm" else (cell(x, h),)
    want = [TensorType("float32", tuple(t.shape)) for t in r]
    g = Graph()
    xi = g.add_input(TensorType("float32", lead + (4,)), "x")
    hs = [g.add_input(TensorType("float32", lead + (6,)), f"h{i}") for i in range(2 if mode == "lstm" else 1)]
    hx = g.insert("prim::ListConstruct", hs, [ListType(TENSOR)]).output if mode == "lstm" else hs[0]
    ws = [g.insert_constant(p.detach().numpy()) for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]
    schema = REG.get(f"aten::{mode}_cell")
    node = g.insert(schema.name, [xi, hx, *ws], [TENSOR] * len(schema.returns))
    node.schema = schema
    propagate(g)
    assert [o.type for o in node.outputs] == want
