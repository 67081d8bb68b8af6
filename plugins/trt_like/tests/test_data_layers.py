"""The data-movement layers of trt_like engines against torch: cat (its list copied into the
segment), nearest / bilinear resizing (align_corners both, scales and sizes), constant padding,
embedding, gather, index_select, where, masked_fill, cumsum, instance norm and softmax over any dim;
each inside one engine with its neighbours, on the compiled and the numpy tactics."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import srcore
from srcore.partition import ENGINE_KIND
from srcore_trt_like.builder.support import SUPPORT

# the partition and the engines do not depend on the executor or the memory planner
pytestmark = pytest.mark.one_pass

TRT = ("trt_like", "cpu")


def _engine_ops(sm):
    return [op for s in sm.partition.engines for op in s.ops]


def _run(module, inputs, *, exclude=(), dynamic=None):
    model = srcore.from_torchscript(torch.jit.script(module.eval()), inputs, dynamic_dims=dynamic)
    sm = srcore.StaticModule(model, options=srcore.Options(
        backends=TRT, engine_options={"timing": False, "exclude_tactics": list(exclude)}))
    with torch.no_grad():
        want = module(*inputs)
    got = sm(*[t.numpy() for t in inputs])
    return sm, got, want


class UpCat(torch.nn.Module):
    """A U-Net decoder step: upsample, cat with the skip, conv; pad and instance norm around it."""

    def __init__(self, mode: str, align):
        super().__init__()
        self.mode, self.align = mode, align
        self.conv = torch.nn.Conv2d(6, 4, 3, padding=1)
        self.norm = torch.nn.InstanceNorm2d(4, affine=True)

    def forward(self, x, skip):
        y = torch.relu(x)
        if self.mode == "nearest":
            y = F.interpolate(y, size=(skip.shape[-2], skip.shape[-1])) if self.align else F.interpolate(y, scale_factor=2.0)
        else:
            y = F.interpolate(y, size=(skip.shape[-2], skip.shape[-1]), mode="bilinear", align_corners=self.align)
        z = torch.cat([y, torch.sigmoid(skip)], 1)
        z = F.pad(z, (1, 2, 0, 1), value=0.5)
        return torch.tanh(self.norm(self.conv(z)))


@pytest.mark.parametrize("exclude", [(), ("numba",)], ids=["compiled", "numpy"])
@pytest.mark.parametrize("mode,align", [("nearest", False), ("nearest", True), ("bilinear", False),
                                        ("bilinear", True)])
def test_upsample_cat_pad_instance_norm_in_one_engine(mode, align, exclude):
    torch.manual_seed(0)
    m = UpCat(mode, align)
    with torch.no_grad():
        m.norm.weight.uniform_(0.5, 1.5)
        m.norm.bias.uniform_(-0.2, 0.2)
    x, skip = torch.randn(2, 3, 5, 7), torch.randn(2, 3, 10, 14)
    sm, got, want = _run(m, (x, skip), exclude=exclude)
    assert [n.kind for n in sm.graph.nodes if n.kind != "prim::Constant"] == [ENGINE_KIND], sm.partition.format()
    ops = _engine_ops(sm)
    assert "aten::cat" in ops and "aten::constant_pad_nd" in ops or "aten::pad" in ops, ops
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=2e-5)


class ZeroPad(torch.nn.Module):
    """F.pad by zeros (a U-Net's match of sizes that already match), inside and at the outputs."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = F.pad(self.conv(x), [0, 0, 0, 0])
        return torch.cat([y, x], 1), F.pad(x, [0, 0]), F.pad(y, [0, 0])


def test_a_pad_by_zeros_is_a_view():
    torch.manual_seed(4)
    x = torch.randn(2, 3, 6, 5)
    sm, got, want = _run(ZeroPad(), (x,))
    (seg,) = sm.partition.engines
    assert "pad" not in seg.description and "cat" in seg.description, seg.description
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.shares_memory(got[1], x.numpy())   # the engine's output is its own


class Lookup(torch.nn.Module):
    """Embeddings of int64 ids (engine inputs), index_select, gather and where / masked_fill on a
    mask computed outside, cumsum and softmax over a middle dim."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 8)

    def forward(self, ids, keep, drop, gidx, logits):
        e = torch.tanh(self.emb(ids))                          # (B, T, 8)
        e = torch.where(keep, e, e * 0.5 - 1.0)                 # keep: (B, T, 1), broadcast
        s = torch.softmax(e * 2.0, dim=1)                      # over T: not the last dim
        c = torch.cumsum(s, dim=1)
        r = torch.index_select(c, 2, torch.tensor([7, 0, 3]))
        g = torch.gather(logits.exp(), 1, gidx)                 # (B, T) from (B, 10)
        m = torch.log_softmax(g.masked_fill(drop, float("-inf")), dim=0)
        return r.sum(-1) + m.sigmoid()


def _lookup_inputs(b=3, t=6):
    ids = torch.randint(0, 50, (b, t))
    keep = torch.rand(b, t, 1) > 0.3
    drop = torch.rand(b, t) > 0.7
    drop[0] = False                                             # a column of -inf: NaN in torch and here
    return ids, keep, drop, torch.randint(0, 10, (b, t)), torch.randn(b, 10)


def test_lookups_where_cumsum_softmax_match_torch():
    torch.manual_seed(1)
    m = Lookup()
    inputs = _lookup_inputs()
    for exclude in ((), ("numba",)):
        sm, got, want = _run(m, inputs, exclude=exclude)
        ops = _engine_ops(sm)
        for op in ("aten::embedding", "aten::where", "aten::softmax", "aten::cumsum", "aten::index_select",
                   "aten::gather", "aten::masked_fill", "aten::log_softmax"):
            assert op in ops, (op, sm.partition.format())
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_an_index_out_of_range_is_an_error_naming_the_layer():
    torch.manual_seed(2)
    inputs = _lookup_inputs(2, 4)
    sm, _, _ = _run(Lookup(), inputs)
    args = [t.numpy().copy() for t in inputs]
    args[0][1, 2] = -1          # numpy's take would wrap it silently
    with pytest.raises(srcore.SrcoreError, match="out of range"):
        sm(*args)


def test_a_cat_of_a_symbolic_batch_plans_per_signature():
    class Net(torch.nn.Module):
        def forward(self, a, b):
            return torch.relu(torch.cat([torch.tanh(a), b * 2.0, a], dim=-1))
    a, b = torch.randn(2, 3), torch.randn(2, 5)
    sm, got, want = _run(Net(), (a, b), dynamic={"a": {0: "n"}, "b": {0: "n"}})
    assert [n.kind for n in sm.graph.nodes if n.kind != "prim::Constant"] == [ENGINE_KIND], sm.partition.format()
    for n in (1, 4):
        a, b = torch.randn(n, 3), torch.randn(n, 5)
        np.testing.assert_allclose(sm(a.numpy(), b.numpy()), Net()(a, b).numpy(), rtol=1e-6)


def test_a_list_read_outside_the_engine_stays_for_its_other_reader():
    """The segment copies the cat's list; a refused op reading the same list keeps the original."""
    g = srcore.parse_graph("""graph(%x : Float(2, 3), %y : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %a : Tensor = aten::relu(%x)
  %b : Tensor = aten::tanh(%y)
  %l : Tensor[] = prim::ListConstruct(%a, %b)
  %c : Tensor = aten::cat(%l, %one)
  %d : Tensor = aten::sigmoid(%c)
  %s : Tensor = aten::vstack(%l)
  return (%d, %s)
""")
    sm = srcore.StaticModule(g, backends=TRT)
    assert [s.ops for s in sm.partition.engines] == [("aten::relu", "aten::tanh", "aten::cat", "aten::sigmoid")]
    kinds = [n.kind for n in sm.graph.nodes if n.kind != "prim::Constant"]
    assert kinds == [ENGINE_KIND, "prim::ListConstruct", "aten::vstack"], kinds
    x, y = np.random.default_rng(0).standard_normal((2, 2, 3)).astype(np.float32)
    d, s = sm(x, y)
    a, b = np.maximum(x, 0), np.tanh(y)
    np.testing.assert_allclose(d, 1 / (1 + np.exp(-np.concatenate([a, b], 1))), rtol=1e-6)
    np.testing.assert_allclose(s, np.vstack([a, b]), rtol=1e-6)


def test_refusals_name_the_argument():
    g = srcore.parse_graph("""graph(%x : Float(2, 3, 4, 4), %i : Float(2, 3), %j : Float(3)):
  %m : str = prim::Constant[value="circular"]()
  %p : int[] = prim::Constant[value=[1, 1]]()
  %z : float = prim::Constant[value=0.0]()
  %one : int = prim::Constant[value=1]()
  %a : Tensor = aten::relu(%x)
  %b : Tensor = aten::pad(%a, %p, %m, %z)
  %c : Tensor = aten::index_select(%i, %one, %j)
  return (%b, %c)
""")
    sm = srcore.StaticModule(g, options=srcore.Options(backends=TRT, engine_min_block_size=1))
    reasons = {r.node.split(" = ")[1]: r.reason for r in sm.partition.refused}
    assert "mode='circular'" in reasons["aten::pad"]
    assert "argument 'index' is float32; aten::index_select takes int64, int32" in reasons["aten::index_select"]


def test_the_op_table_lists_the_new_layers():
    for op in ("aten::cat", "aten::upsample_bilinear2d.vec", "aten::upsample_nearest2d", "aten::constant_pad_nd",
               "aten::embedding", "aten::gather", "aten::index_select", "aten::where.self", "aten::masked_fill.Scalar",
               "aten::cumsum", "aten::instance_norm", "aten::__interpolate"):
        assert op in SUPPORT, op


def test_an_engine_with_index_and_mask_inputs_round_trips_through_a_serialized_plan(tmp_path):
    """int64 / bool engine inputs and a constant index baked into a layer survive ``save`` and a
    load that restores the plan instead of building it."""
    torch.manual_seed(3)
    inputs = _lookup_inputs()
    sm, got, _ = _run(Lookup(), inputs)
    path = tmp_path / "lookup.engine.srm"
    sm.save(str(path))
    loaded = srcore.StaticModule(srcore.load(str(path)), backends=TRT)
    assert loaded.partition.engines and all(s.loaded for s in loaded.partition.engines), loaded.partition.format()
    np.testing.assert_array_equal(loaded(*[t.numpy() for t in inputs]), got)


CONVT_TACTICS = ["numba", "numba_fused", "numba_direct", "numba_phase", "numpy"]


class UpTransposed(torch.nn.Module):
    """A transposed conv between two convs (one engine), of the given geometry."""

    def __init__(self, k, s, p, op, d, g):
        super().__init__()
        self.pre = torch.nn.Conv2d(4, 6, 3, padding=1)
        self.up = torch.nn.ConvTranspose2d(6, 4, k, stride=s, padding=p, output_padding=op, dilation=d, groups=g)
        self.post = torch.nn.Conv2d(4, 3, 1)

    def forward(self, x):
        return self.post(torch.relu(self.up(torch.relu(self.pre(x)))))


@pytest.mark.parametrize("k,s,p,op,d,g", [(2, 2, 0, 0, 1, 1), (3, 2, 1, 1, 1, 1), (4, 2, 1, 0, 1, 2),
                                          (3, 1, 0, 0, 2, 1), (3, 3, 2, 0, 1, 1), (3, 3, 0, 0, 1, 2),
                                          (2, 2, 0, 1, 1, 1)],
                         ids=["apart", "overlap", "groups", "dilated", "cropped", "apart3", "apart_padded"])
@pytest.mark.parametrize("tactic", ["numba", "numpy"])
def test_conv_transpose_in_one_engine(k, s, p, op, d, g, tactic):
    torch.manual_seed(1)
    m = UpTransposed(k, s, p, op, d, g)
    x = torch.randn(2, 4, 5, 7)
    sm, got, want = _run(m, (x,), exclude=[t for t in CONVT_TACTICS if t != tactic])
    assert [n.kind for n in sm.graph.nodes if n.kind != "prim::Constant"] == [ENGINE_KIND], sm.partition.format()
    assert "aten::conv_transpose2d" in _engine_ops(sm)
    # the relu after it is the layer's epilogue
    assert f"+ relu -> 2x4x{m.up(torch.zeros(1, 6, 5, 7)).shape[2]}" in sm.partition.engines[0].description
    assert f"[{tactic}]" in sm.partition.engines[0].description.split("conv_transpose + relu -> ")[1].splitlines()[0]
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)


class TransposedRanks(torch.nn.Module):
    """Transposed convs of rank 1 (stride 3, output padding 2, no bias), 2 (groups, dilation, batch
    items of their own) and 3 (output padding on one axis, groups, a leaky relu after it)."""

    def __init__(self):
        super().__init__()
        self.t1 = torch.nn.ConvTranspose1d(4, 3, 4, stride=3, padding=1, output_padding=2, bias=False)
        self.t2 = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=2, output_padding=1, groups=2, dilation=2)
        self.t3 = torch.nn.ConvTranspose3d(2, 4, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1),
                                           output_padding=(0, 1, 0), groups=2, dilation=(2, 1, 1))

    def forward(self, x):
        return (self.t1(x.flatten(2)), self.t2(x),
                F.leaky_relu(self.t3(x[:, :2].reshape(x.shape[0], 2, 2, 3, -1)), 0.2))


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("tactic", CONVT_TACTICS)
def test_conv_transposes_of_every_rank_in_one_engine(tactic, batch):
    torch.manual_seed(4)
    x = torch.randn(batch, 4, 3, 4)
    sm, got, want = _run(TransposedRanks(), (x,), exclude=[t for t in CONVT_TACTICS if t != tactic])
    assert [e.backend for e in sm.partition.engines] == ["trt_like"], sm.partition.format()
    desc = sm.partition.engines[0].description
    layers = [line.split()[-1] for line in desc.splitlines() if line.strip().startswith("conv_transpose")]
    assert layers == [f"[{tactic}]"] * 3 and "conv_transpose + leaky_relu ->" in desc, desc
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


def test_unbatched_conv_transpose_stays_on_cpu_with_the_reason():
    torch.manual_seed(2)
    m = torch.nn.Sequential(torch.nn.Conv2d(4, 6, 3, padding=1), torch.nn.ReLU(), torch.nn.ConvTranspose2d(6, 4, 2, 2))
    x = torch.randn(4, 5, 7)
    sm, got, want = _run(m, (x,))
    assert "aten::conv_transpose2d" not in _engine_ops(sm)
    assert any("conv_transpose2d" in line and "not 4-D" in line for line in sm.partition.format().splitlines())
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)


class ChannelSlices(torch.nn.Module):
    """Res2Net's split at batch 2: channel slices of the input (not contiguous) into a cat and an add."""

    def forward(self, x):
        a, b, c = x[:, 0:2], x[:, 2:4], x[:, 4:6]
        return torch.cat([torch.relu(a + b), c], 1)


def test_a_channel_slice_reads_each_call_s_input_whether_the_same_array_or_another():
    """The numpy ``strided`` copy keeps the view of the array it was last given: a new input array
    each call, the same one written in place, and two arrays in turn all give torch's result."""
    torch.manual_seed(3)
    x = torch.randn(2, 6, 3, 4)
    model = srcore.from_torchscript(torch.jit.script(ChannelSlices().eval()), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(
        backends=TRT, engine_options={"timing": False, "exclude_tactics": ["segment"]}))
    lines = sm.partition.engines[0].description.splitlines()
    assert sum("strided" in line and "[numpy]" in line for line in lines) == 3, lines
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    for call, arr in enumerate([a, a, None, b, a, b, b, None, a]):
        if arr is None:          # the last array written in place
            arr = last
            arr[...] = rng.standard_normal(arr.shape)
        want = ChannelSlices()(torch.from_numpy(arr.copy())).numpy()
        np.testing.assert_allclose(sm(arr), want, rtol=1e-6, atol=1e-6, err_msg=f"call {call}")
        last = arr
