"""from_onnx of LSTM / GRU / RNN onto torch's recurrent ops, against onnx's reference implementation:
weights as initializers (reordered at conversion) and as run-time inputs, every direction and
layout, with and without biases and initial states; what torch's cells cannot compute is refused
naming the node."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import srcore

pytestmark = pytest.mark.one_pass   # conversion checks: one small run each

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _model(op, direction, layout, *, bias=True, state=True, attrs=None, const=True, seq=5, batch=2, inp=3, hidden=4):
    rng = np.random.default_rng(hash((op, direction, layout, bias, state)) % 2 ** 32)
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    arrays = {"W": rng.standard_normal((nd, g * hidden, inp)).astype(np.float32) * 0.5,
              "R": rng.standard_normal((nd, g * hidden, hidden)).astype(np.float32) * 0.5}
    if bias:
        arrays["B"] = rng.standard_normal((nd, 2 * g * hidden)).astype(np.float32) * 0.5
    sshape = (batch, nd, hidden) if layout else (nd, batch, hidden)
    if state:
        arrays["initial_h"] = rng.standard_normal(sshape).astype(np.float32)
        if op == "LSTM":
            arrays["initial_c"] = rng.standard_normal(sshape).astype(np.float32)
    names = ["X", "W", "R", "B" if bias else "", "", "initial_h" if state else ""]
    if op == "LSTM":
        names.append("initial_c" if state else "")
    while names[-1] == "":
        names.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, name="rec", hidden_size=hidden, direction=direction, layout=layout,
                            **(attrs or {}))
    xshape = (batch, seq, inp) if layout else (seq, batch, inp)
    x = rng.standard_normal(xshape).astype(np.float32)
    feeds = {"X": x} if const else {"X": x, **arrays}
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in feeds.items()]
    yshape = (batch, seq, nd, hidden) if layout else (seq, nd, batch, hidden)
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, yshape)] + \
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, sshape) for o in outs[1:]]
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items()] if const else []
    m = helper.make_model(helper.make_graph([node], "rec", ins, outputs, inits),
                          opset_imports=[helper.make_opsetid("", 22)])
    return m, feeds


CASES = [c for c in itertools.product(["LSTM", "GRU", "RNN"], ["forward", "reverse", "bidirectional"], [0, 1])]


@pytest.mark.parametrize("op,direction,layout", CASES, ids=[f"{o}-{d}-layout{l}" for o, d, l in CASES])
def test_matches_onnx_reference(op, direction, layout):
    attrs = {"linear_before_reset": 1} if op == "GRU" else None
    for const, bias, state in ((True, True, True), (False, layout == 0, direction != "reverse")):
        m, feeds = _model(op, direction, layout, bias=bias, state=state, attrs=attrs, const=const)
        want = ReferenceEvaluator(m).run(None, feeds)
        got = srcore.StaticModule(srcore.from_onnx(m))(*feeds.values())
        for g, w in zip(got, want):
            assert np.asarray(g).shape == w.shape
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("direction,layout", list(itertools.product(["forward", "reverse", "bidirectional"], [0, 1])))
def test_gru_reset_gate_before_the_recurrent_product_matches_onnx_reference(direction, layout):
    """linear_before_reset=0 (ONNX's default, not torch's cell): a loop over time of srcore ops."""
    for const, bias, state in ((True, True, True), (False, layout == 0, direction != "reverse")):
        m, feeds = _model("GRU", direction, layout, bias=bias, state=state, const=const)
        want = ReferenceEvaluator(m).run(None, feeds)
        model = srcore.from_onnx(m)
        assert any(n.kind == "prim::Loop" for n in model.graph.all_nodes())
        got = srcore.StaticModule(model)(*feeds.values())
        for g, w in zip(got, want):
            assert np.asarray(g).shape == w.shape
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("direction,layout", [("forward", 0), ("reverse", 1), ("bidirectional", 0)])
def test_lstm_peepholes_match_onnx_reference(direction, layout):
    """Peepholes (input P): torch's cell has none, so a loop over time of srcore ops."""
    m, feeds = _model("LSTM", direction, layout)
    nd = 2 if direction == "bidirectional" else 1
    p = np.random.default_rng(5).standard_normal((nd, 3 * 4)).astype(np.float32)
    node = m.graph.node[0]
    while len(node.input) < 7:
        node.input.append("")
    node.input.append("P")
    m.graph.initializer.append(numpy_helper.from_array(p, "P"))
    want = ReferenceEvaluator(m).run(None, feeds)
    got = srcore.StaticModule(srcore.from_onnx(m))(*feeds.values())
    assert len(got) == 3
    for g, w in zip(got, want):
        assert np.asarray(g).shape == w.shape
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


def test_rnn_relu_and_full_sequence_lens():
    m, feeds = _model("RNN", "bidirectional", 0, attrs={"activations": ["Relu", "Relu"]})
    node = m.graph.node[0]
    node.input.extend([""] * (5 - len(node.input)))
    node.input[4] = "lens"
    m.graph.initializer.append(numpy_helper.from_array(np.full(2, 5, np.int32), "lens"))
    arr = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    x = feeds["X"]
    ys, hs = [], []
    for d in range(2):   # by hand (onnx.reference has no Relu activation): h = relu(W x + R h + Wb + Rb)
        h, out = arr["initial_h"][d], [None] * len(x)
        for t in (range(len(x)) if d == 0 else reversed(range(len(x)))):
            h = np.maximum(x[t] @ arr["W"][d].T + h @ arr["R"][d].T + arr["B"][d][:4] + arr["B"][d][4:], 0)
            out[t] = h
        ys.append(np.stack(out))
        hs.append(h)
    got_y, got_h = srcore.StaticModule(srcore.from_onnx(m))(x)
    np.testing.assert_allclose(np.asarray(got_y), np.stack(ys, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got_h), np.stack(hs), rtol=1e-5, atol=1e-5)
    m.graph.initializer[-1].CopyFrom(numpy_helper.from_array(np.array([5, 3], np.int32), "lens"))
    with pytest.raises(srcore.ConversionError, match=r"'rec'.*sequence_lens"):
        srcore.from_onnx(m)


@pytest.mark.parametrize("op,attrs,match", [
    ("GRU", {"clip": 2.0}, "clip"),
    ("LSTM", {"clip": 2.0}, "clip"),
    ("RNN", {"activations": ["Sigmoid"]}, "activations"),
    ("LSTM", {"activations": ["Sigmoid", "Relu", "Tanh"]}, "activations"),
])
def test_what_torch_cannot_compute_is_refused_naming_the_node(op, attrs, match):
    m, _ = _model(op, "forward", 0, attrs=attrs)
    with pytest.raises(srcore.ConversionError, match=rf"'rec'.*{match}"):
        srcore.from_onnx(m)
