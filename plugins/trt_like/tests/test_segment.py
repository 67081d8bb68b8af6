"""Small static networks compiled whole (tactics/segment.py) against torch: every op kind of the
compiled segment in ONE graph (one compile for the module) on values hypothesis draws (ties, NaNs,
infinities, signed zeros), an index out of range, and the held-out index_graph and the benchmark's
index_ops through ("trt_like", "cpu")."""
from __future__ import annotations

import sys
from pathlib import Path

import attrs
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import srcore

pytestmark = pytest.mark.one_pass   # engines do not depend on the executor or the memory planner

TRT = ("trt_like", "cpu")
ROOT = Path(__file__).resolve().parents[3]


class AllOps(torch.nn.Module):
    """Every layer kind the segment compiles: sort (both directions, both dims), slices of an index,
    gather, index_select, scatter / scatter_add (on zeros_like), means (keepdim or not), compares
    (tensor and scalar, broadcasting), where, masked_fill, cumsum, fused pointwise ops and softmax;
    a max over the last dim (its argmax unread), a small linear + relu and products of two tensors
    (2-D, and batched with a broadcast 2-D right operand) on sigmoids with positive weights (sums
    without cancellation: BLAS's order and the loop nest's agree to a few ulps); advanced indexing
    (``aten::index.Tensor``: one index, two broadcast ones, negative ones, a constant one, two
    around a slice, whose index dims go first); a float sum of fewer than 8 terms (numpy's order); a
    global ``adaptive_max_pool1d`` with its indices; max pools (SPPF's 5x5 stride-1 "same" one, one
    with stride, padding, dilation and ceil_mode)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(7, 3)
        with torch.no_grad():
            g = torch.Generator().manual_seed(5)
            self.fc.weight.copy_(torch.rand(3, 7, generator=g) + 0.1)
            self.fc.bias.copy_(torch.rand(3, generator=g))
        self.register_buffer("pick", torch.tensor([3, 0, 6, 6]))

    def forward(self, x, idx, y):
        # x: (4, 7) float; idx: (4, 3) int64 into 7; y: (7,) float
        v, o = torch.sort(x, dim=-1, descending=True)
        va, oa = torch.sort(x, dim=0)
        g = torch.gather(x, 1, idx)
        s = torch.index_select(x, 1, idx[0])
        sa = torch.zeros_like(x).scatter_add(1, idx, g)
        sc = x.scatter(-1, idx[:, 1:2], 2.0)
        m = x.mean(dim=-1, keepdim=True)
        c = x > y
        w = torch.where(c, x, y)
        f = x.masked_fill(x <= 0.5, -1.0)
        cs = torch.cumsum(f, dim=1)
        pw = torch.sigmoid(w) * 2.0 + m
        p = torch.softmax(pw.masked_fill(c, float("-inf")), -1)
        sx, sy = torch.sigmoid(x), torch.sigmoid(y)
        prods = (torch.relu(self.fc(sx)), sx @ sx.t(), torch.matmul(sx.view(2, 2, 7), sy.view(7, 1)))
        adv = (x[:, idx], x[idx[:, :1] % 4, idx - 7], x[:, self.pick], x.view(2, 2, 7)[idx[:2, :1] % 2, :, idx[:2]])
        return (v, o, va, oa, g, s, sa, sc, x.mean(0), c, cs, pw, p, torch.max(x, 1)[0], *prods, *adv, x.sum(0),
                *F.adaptive_max_pool1d(x.view(2, 2, 7), 1, return_indices=True),
                F.max_pool2d(x.view(1, 2, 2, 7), 5, 1, 2),
                F.max_pool2d(x.view(1, 1, 4, 7), (2, 3), (1, 2), (1, 1), (1, 2), ceil_mode=True))


def _reference(x, idx, y):
    """AllOps in torch, its sorts with ``stable=True`` (the segment's order of ties; torch's default
    sort leaves it unspecified)."""
    with torch.no_grad():
        out = list(AllOps()(x, idx, y))
    out[0], out[1] = torch.sort(x, dim=-1, descending=True, stable=True)
    out[2], out[3] = torch.sort(x, dim=0, stable=True)
    return out


EXAMPLE = (torch.randn(4, 7), torch.randint(0, 7, (4, 3)), torch.randn(7))


def _all_ops(**engine_options):
    model = srcore.from_torchscript(torch.jit.script(AllOps().eval()), EXAMPLE)
    return srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"timing": False,
                                                                                           **engine_options}))


@pytest.fixture(scope="module")
def all_ops():
    return _all_ops()


def _check(got, want):
    for k, (g, w) in enumerate(zip(got, want)):
        w = w.numpy()
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, w.dtype, g.shape, w.shape)
        if w.dtype == np.float32:
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6, equal_nan=True, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")


def test_all_ops_are_one_compiled_segment(all_ops):
    assert len(all_ops.partition.engines) == 1 and not all_ops.partition.refused, all_ops.partition.format()
    text = all_ops.partition.format()
    assert "segment -> " in text and "[numba]" in text, text


# values with many ties and every special: the sort's order of equal elements and NaNs is checked
SPECIAL = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, float("nan"), float("inf"), -float("inf")])
FLOATS = st.one_of(SPECIAL, st.floats(-8, 8, width=32))


@settings(max_examples=40, deadline=None)
@given(x=hnp.arrays(np.float32, (4, 7), elements=FLOATS), y=hnp.arrays(np.float32, (7,), elements=FLOATS),
       idx=hnp.arrays(np.int64, (4, 3), elements=st.integers(0, 6)))
def test_every_op_kind_against_torch(all_ops, x, idx, y):
    with np.errstate(all="ignore"):
        got = all_ops(x, idx, y)
    _check(got, _reference(*(torch.from_numpy(a) for a in (x, idx, y))))


def test_every_op_kind_layer_by_layer():
    """The same layers on their own tactics (numpy, BLAS, row kernels), the segment excluded."""
    sm = _all_ops(exclude_tactics=["segment"])
    assert "segment -> " not in sm.partition.format()
    x = EXAMPLE[0].clone()
    x[1, 3] = float("nan")
    _check(sm(x.numpy(), *(t.numpy() for t in EXAMPLE[1:])), _reference(x, *EXAMPLE[1:]))


@pytest.mark.parametrize("bad", [7, -1])
def test_an_index_out_of_range_names_the_node(all_ops, bad):
    x, y = np.random.default_rng(0).standard_normal((4, 7), np.float32), np.zeros(7, np.float32)
    idx = np.zeros((4, 3), np.int64)
    idx[2, 2] = bad
    with pytest.raises((IndexError, RuntimeError)):   # torch refuses it too
        AllOps()(torch.from_numpy(x), torch.from_numpy(idx), torch.from_numpy(y))
    with pytest.raises(srcore.SrcoreError) as err:
        all_ops(x, idx, y)
    assert "gather at " in str(err.value) and "test_segment.py" in str(err.value), str(err.value)


def test_a_compiled_segment_is_restored_from_the_engine_cache(all_ops, tmp_path):
    """The segment layer serializes (its sub-layers are attributes) and loads with its kernel."""
    _all_ops(engine_cache=str(tmp_path))
    again = _all_ops(engine_cache=str(tmp_path))
    text = again.partition.format()
    assert "loaded from the engine cache" in text and "segment -> " in text, text
    xs = [t.numpy() for t in EXAMPLE]
    _check(again(*xs), _reference(*EXAMPLE))


def _zoo(path: str, name: str):
    sys.path[:0] = [str(ROOT / path), str(ROOT)]
    try:
        import importlib

        return importlib.import_module(name)
    finally:
        del sys.path[:2]


def test_index_graph_is_one_compiled_segment():
    models = _zoo("tests/parity", "heldout_models")
    module, inputs = models.build_index_graph()
    model = srcore.from_torchscript(torch.jit.script(module), inputs)
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT))
    assert len(sm.partition.engines) == 1 and not sm.partition.refused, sm.partition.format()
    with torch.no_grad():
        want = module(*inputs)
    _check(sm(*[t.numpy() for t in inputs]), want)


@pytest.mark.full   # a 19-layer segment (~3 s of CPU to compile); its layer kinds: test_segment_index.py
def test_index_ops_through_trt_like():
    from benchmarks.families import build_index_ops

    module, inputs = build_index_ops()
    model = srcore.from_torchscript(torch.jit.script(module.eval()), inputs)
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT))
    with torch.no_grad():
        want = module(*inputs)
    got = sm(*[t.numpy() for t in inputs])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


class Shaped(torch.nn.Module):
    def __init__(self, dim: int, descending: bool):
        super().__init__()
        self.dim, self.descending = dim, descending

    def forward(self, x, idx):
        v, o = torch.sort(x, dim=self.dim, descending=self.descending)
        g = torch.gather(x, self.dim, idx)
        acc = torch.zeros_like(x).scatter_add(self.dim, idx, g)
        return v, o, acc, torch.cumsum(x.masked_fill(x < x.mean(self.dim, keepdim=True), 0.0), self.dim)


@pytest.mark.full   # a compile per shape
@settings(max_examples=6, deadline=None)
@given(data=st.data(), rank=st.integers(1, 3), descending=st.booleans())
def test_random_shapes_and_dims(data, rank, descending):
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    dim = data.draw(st.integers(-rank, rank - 1))
    x = data.draw(hnp.arrays(np.float32, shape, elements=FLOATS))
    ishape = tuple(data.draw(st.integers(1, s)) for s in shape)
    idx = data.draw(hnp.arrays(np.int64, ishape, elements=st.integers(0, shape[dim] - 1)))
    module = Shaped(dim, descending)
    ins = (torch.from_numpy(x), torch.from_numpy(idx))
    model = srcore.from_torchscript(torch.jit.script(module), ins)
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"timing": False}))
    assert "segment -> " in sm.partition.format(), sm.partition.format()
    want = list(module(*ins))
    want[0], want[1] = torch.sort(ins[0], dim=dim, descending=descending, stable=True)
    with np.errstate(all="ignore"):
        _check(sm(x, idx), want)


def test_which_layers_join_a_segment():
    """A product joins only up to MAX_PRODUCT multiply-adds, and a run only beside a layer of another
    kind (runs of products and pointwise layers alone keep BLAS and the fused kernels; whole networks of
    them compile from WHOLE_MIN_LAYERS layers); unread layers go."""
    from srcore_trt_like.builder.fusion import drop_unread
    from srcore_trt_like.builder.network import Network
    from srcore_trt_like.tactics import segment

    net = Network()
    x = net.new_tensor((4, 64))
    net.inputs.append(x)
    net.add("gemm", [x], (4, segment.MAX_PRODUCT // 256 + 1), weight=np.zeros((65, 64), np.float32))
    small = net.add("gemm", [x], (4, 8), weight=np.zeros((8, 64), np.float32))
    top = net.add("reduce", [small], (4,), op="max", dims=(1,))
    net.add("argmax", [small], (4,), dim=1, largest=True)
    net.outputs.append(top)
    big, gemm, reduce, _ = net.layers
    assert "multiply-adds" in segment._layer_refusal(big, net)
    for n, refused in ((segment.PAIRWISE_MIN - 1, False), (segment.PAIRWISE_MIN, True)):
        y = net.new_tensor((3, n))
        total = net.add("reduce", [y], (3,), op="sum", dims=(1,))
        assert bool(segment._layer_refusal(net.layers.pop(), net)) is refused, n
        del net.tensors[total], net.tensors[y]
    assert segment._layer_refusal(gemm, net) is None
    assert not segment._anchored([gemm]) and segment._anchored([gemm, reduce])
    # a whole network of products (and pointwise layers) alone compiles from WHOLE_MIN_LAYERS layers
    assert segment._whole([gemm] * segment.WHOLE_MIN_LAYERS) and not segment._whole([gemm] * (segment.WHOLE_MIN_LAYERS - 1))
    assert [layer.kind for layer in drop_unread(net).layers] == ["gemm", "reduce"]


class SmallMLP(torch.nn.Module):
    """Products and pointwise layers alone: linears of widths around the 16-lane blocks (tails of 1,
    15, a block and a tail, five blocks: two register-tile groups), residual subtractions and a
    batched matmul by a constant basis (N-BEATS's shape of network)."""

    def __init__(self, k: int, n: int):
        super().__init__()
        self.a, self.b = torch.nn.Linear(k, n), torch.nn.Linear(n, k)
        self.register_buffer("basis", torch.randn(2, k, 5))

    def forward(self, x):
        h = torch.relu(self.a(x))
        r = x - self.b(h)
        return r, torch.matmul(r.view(2, -1, r.shape[-1]), self.basis) + 1.0


@settings(max_examples=6, deadline=None)
@given(rows=st.sampled_from([1, 2, 5, 13]), k=st.sampled_from([1, 7, 16]), n=st.sampled_from([1, 15, 17, 80]))
@example(rows=2, k=7, n=200)   # three full groups of column blocks (one loop over them), then a masked block
def test_small_products_compile_whole_against_torch(rows, k, n):
    """A network of products and pointwise layers alone (WHOLE_MIN_LAYERS or more) is one segment; its
    products (register tiles of 16-lane FMAs, masked tails; two or more full groups of blocks as a loop)
    agree with torch. (Products over MAX_PRODUCT keep their BLAS tactics: 26 x 16 x 80 is not drawn.)"""
    from srcore_trt_like.tactics import segment

    assume(2 * rows * k * n <= segment.MAX_PRODUCT)
    torch.manual_seed(rows * 100 + k * 10 + n)
    module = SmallMLP(k, n).eval()
    x = torch.randn(2 * rows, k)
    model = srcore.from_torchscript(torch.jit.script(module), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"timing": False}))
    assert "segment -> " in sm.partition.format(), sm.partition.format()
    with torch.no_grad():
        want = module(x)
    for g, w in zip(sm(x.numpy()), want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


def test_full_column_groups_of_a_product_are_one_loop():
    """Two or more full groups of column blocks are written once, as a loop over their first column
    (numba's compile time grows with the statements: a 256-column product was four nests); the rest
    of the columns (a partial group, a masked block) after it."""
    from srcore_trt_like.tactics import segment

    def source(m, k, n):
        c = segment._Code()
        segment._product(c, "a", "b", "o", m, k, n, "0")
        return "\n".join(c.lines)

    wide = source(3, 16, 256)   # four groups of four blocks, three rows a tile
    assert wide.count("for gj0 in range(0, 256, 64):") == 1 and wide.count("vfma(") == 3 * 4
    tail = source(3, 16, 200)   # three groups looped, then one masked block of 8 lanes
    assert tail.count("for gj0 in range(0, 192, 64):") == 1 and tail.count("vfma(") == 3 * 4 + 3
    assert "vstore_lanes(o, 0 + (gi0 + 0) * 200 + 192, ga0_0_192, 8)" in tail
    one = source(3, 16, 80)     # one full group: nothing to loop over
    assert "gj0" not in one


def test_a_segment_takes_its_constants_packed():
    """The segment reads its weights, biases and basis as one packed argument (numba's dispatcher
    costs ~0.1 us an array argument) and the network no longer holds the constants it superseded."""
    from srcore_trt_like.tactics import segment

    module = SmallMLP(7, 15).eval()
    x = torch.randn(4, 7)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(module), (x,)),
                             options=srcore.Options(backends=TRT, engine_options={"timing": False}))
    (engine,) = [pn.fn.fn.engine for b in sm.blocks for pn in b.nodes if hasattr(getattr(pn.fn, "fn", None), "engine")]
    plan = next(iter(engine.plans.values()))
    (step,) = plan.steps
    assert step.layer.kind == "segment" and len(step.layer.inputs) == 2, step.layer.inputs   # x, the packed one
    (flat, pieces), = step.layer.attrs["packed"]
    assert len(pieces) >= 4 and all(at % segment.ALIGN == 0 for _, at in pieces)
    assert set(plan.net.constants) == {flat}
    with torch.no_grad():
        want = module(x)
    for g, w in zip(sm(x.numpy()), want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


def _mlp_engine(module, x, monkeypatch):
    """(StaticModule, its engine's one plan, how many times the layers' tactics were chosen) of
    ``module`` built with timing off (no engine cache: the build runs)."""
    from srcore_trt_like import engine as engine_module

    built = []
    choose_layout = engine_module.choose_layout

    def counted(*args, **kwargs):
        built.append(1)
        return choose_layout(*args, **kwargs)
    monkeypatch.setattr(engine_module, "choose_layout", counted)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(module), (x,)),
                             options=srcore.Options(backends=TRT, engine_options={"timing": False,
                                                                                  "engine_cache": False}))
    (engine,) = [pn.fn.fn.engine for b in sm.blocks for pn in b.nodes if hasattr(getattr(pn.fn, "fn", None), "engine")]
    return sm, next(iter(engine.plans.values())), len(built)


def _check_mlp(sm, module, x):
    with torch.no_grad():
        want = module(x)
    for g, w in zip(sm(x.numpy()), want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


def test_untimed_whole_network_builds_no_layer_tactic(monkeypatch):
    """With timing off a network that compiles whole is the segment whatever its layers' tactics: it
    is compiled before any of them is built (their kernels, a numba compile each, were thrown away)."""
    module = SmallMLP(6, 9).eval()
    x = torch.randn(4, 6)
    sm, plan, built = _mlp_engine(module, x, monkeypatch)
    assert built == 0
    (step,) = plan.steps
    assert step.layer.kind == "segment" and step.tactic == "numba"
    (flat, _), = step.layer.attrs["packed"]
    assert set(plan.net.constants) == {flat}
    _check_mlp(sm, module, x)


def test_untimed_segment_that_does_not_compile_leaves_the_layers(monkeypatch):
    """A segment numba refuses: the layers get their tactics as with timing on (numba is not asked
    for the segment a second time) and the constants the segment packed are dropped again."""
    import numba

    from srcore_trt_like.tactics import segment

    asked = []

    def refused(layer, net):
        asked.append(segment.generate_source(layer, net))
        raise numba.core.errors.TypingError("refused by the test")
    monkeypatch.setattr(segment, "compiled", refused)
    module = SmallMLP(6, 10).eval()
    x = torch.randn(4, 6)
    sm, plan, built = _mlp_engine(module, x, monkeypatch)
    assert built == 1 and len(asked) == 1
    assert all(step.layer.kind != "segment" for step in plan.steps)
    read = {t for step in plan.steps for t in step.layer.inputs}
    assert set(plan.net.constants) <= read | set(plan.net.outputs), "a constant of the refused segment was kept"
    _check_mlp(sm, module, x)


def test_nbeats_is_one_compiled_segment():
    """The sixth held-out zoo's N-BEATS (eleven linears on 3 rows, residual backcasts, a trend basis):
    one segment (it was 22 layers at ~0.7 us a call), against torch."""
    models = _zoo("tests/parity", "heldout6_models")
    module, inputs = models.build_nbeats()
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(module), inputs),
                             options=srcore.Options(backends=TRT, engine_options={"timing": False}))
    assert len(sm.partition.engines) == 1 and "segment -> " in sm.partition.format(), sm.partition.format()
    with torch.no_grad():
        want = module(*inputs)
    for g, w in zip(sm(*[t.numpy() for t in inputs]), want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


def _gather_net(source: str):
    from srcore_trt_like.builder.network import Network

    net = Network()
    x, idx = net.new_tensor((3, 5)), net.new_tensor((3, 2), dtype="int64")
    net.inputs = [x, idx]
    g = net.add("gather", [x, idx], (3, 2), source=source, dim=1)
    net.outputs = [net.add("compare", [g], (3, 2), source=source, op="gt", args=(("in", 0), ("const", 0.5)))]
    net.tensors[net.outputs[0]] = attrs.evolve(net.tensors[net.outputs[0]], dtype="bool")
    return net


def test_the_generated_source_does_not_depend_on_node_sources():
    """One network imported through two paths (their nodes' sources differ: torchscript's
    ``file:line``, export's ``file:line:col``) is one generated source, so one compile and one cache
    entry; an error still names the node, through ``explain``."""
    from srcore_trt_like.tactics import segment

    a, b = _gather_net("model.py:12"), _gather_net("model.py:12:7")
    la, lb = segment.segment_layer(a), segment.segment_layer(b)
    src = segment.generate_source(la, a)
    assert src == segment.generate_source(lb, b)
    assert "model.py" not in src and "gather (segment layer 0): an index is out of range" in src, src
    assert segment.explain(lb, "gather (segment layer 0): an index is out of range for a dim of size 5") == \
        "gather at model.py:12:7: an index is out of range for a dim of size 5"
