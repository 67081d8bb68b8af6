"""The eleventh held-out zoo: families zoos 1-10 leave out, on cpu and on trt_like + cpu (engines built
with timing off, no segment may fall back), each against its own reference.

- torch models (heldout11_models.GRID) through every import path torch can take (script, trace, frozen,
  export, onnx) vs torch eager: a deformable-ish grid_sample conv, DeiT with position interpolation,
  PSPNet pooling, ASPP, CBAM / ECA / coordinate attention, Transformer-XL's rel_shift, a Glow step, CRF
  Viterbi decoding, xDeepFM + DIN, PixelCNN, Sinkhorn, ECAPA-TDNN, Autoformer's auto-correlation, a
  neural ODE, HorNet, involution, SchNet, a DiT block, RetNet retention, NMS-free decoding, loss heads;
  the same through torch.export with a dynamic batch, and through torch.onnx at opsets 13 / 18 / 20 with
  a dynamic batch (vs onnxruntime, at two batch sizes), one with external data.
- hand-built ONNX files (heldout11_onnx.py) vs onnxruntime: windows, DFT-20, the two losses, Det,
  AveragePool-19 dilations, Resize-19 half_pixel_symmetric, GridSample-20 5-D, Pad-19 wrap, Split-18
  num_outputs; what srcore does not run refused naming the node.
- torch.ao quantized models, FX and eager, x86 and qnnpack engines, bit for bit.

By default each torch model runs on cpu through one path (rotating) and a few on trt_like;
``SRCORE_TESTS_FULL=1`` runs every cell. What the zoo found is fixed and tested here: a scripted
``torch.tensor([-1.0, 0, 1])`` (TorchScript types the list ``List[Union[float, int]]``) was refused
('type Union[float, int] has no srcore equivalent'); ONNX SoftmaxCrossEntropyLoss and
NegativeLogLikelihoodLoss (what torch.onnx writes for ``F.cross_entropy`` / ``F.nll_loss``) were
refused; LSTM / GRU / RNN in a file of opset 13 (their version 7, e.g. torch.onnx at opset 13) were
refused ('version 7 of GRU is not supported').
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

import srcore
from _harness import assert_close, flatten_np, run, torch_outputs
from _zoo import (assert_no_fallback, check_cell, check_onnx_vs_ort, engine_options, grid_cells, onnx_backend_cells,
                  param, refused_params)
from heldout11_models import GRID

ort = pytest.importorskip("onnxruntime")

#: independent of the executor and the memory planner (the default ones run): test.sh's second pass skips it
pytestmark = pytest.mark.one_pass

BACKENDS = ("cpu", "trt_like")


# -- torch models through every import path -----------------------------------------------------------

#: torch models on trt_like in the default run (through their second path; engines built in ~2 s cold)
TRT_LIKE_DEFAULT = ("aspp", "pixelcnn", "nms_free")


@pytest.mark.parametrize("name,path,backend", grid_cells(GRID, BACKENDS, TRT_LIKE_DEFAULT))
def test_grid_model_matches_torch(name, path, backend, monkeypatch, tmp_path_factory):
    factory, _paths, rtol = GRID[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_cell(factory, name, path, backend, monkeypatch, tmp_path_factory, rtol)


#: exported with a dynamic batch in the default run
EXPORT_DEFAULT = ("transfo_xl", "schnet", "nms_free")


@pytest.mark.parametrize("name", [param(n, n, default=n in EXPORT_DEFAULT) for n in GRID])
def test_exported_with_a_dynamic_batch_matches_torch(name):
    """torch.export with every input's dim 0 a ``Dim``: the batch of the example, twice it and 1."""
    from torch.export import Dim

    factory, _paths, rtol = GRID[name]
    m, inputs = factory()
    shapes = tuple({0: Dim("batch", min=1, max=64)} for _ in inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(m, inputs, dynamic_shapes=shapes)
        sm = srcore.StaticModule(srcore.from_torch(ep, dynamic_shapes=shapes), options=engine_options("cpu"))
    for xs in (inputs, tuple(torch.cat([x, x.roll(1, 0)]) for x in inputs), tuple(x[:1] for x in inputs)):
        assert_close(run(sm, xs), torch_outputs(m, xs), f"{name} batch {xs[0].shape[0]}", rtol)


# -- torch.onnx at several opsets, a dynamic batch, vs onnxruntime ------------------------------------

#: (model, opset) cells in the default run: crf_viterbi at 13 holds a GRU of version 7
ONNX_OPSET_DEFAULT = (("crf_viterbi", 13), ("xdeepfm_din", 18), ("nms_free", 20))
#: torch.onnx writes a bool EyeLike onnxruntime has no kernel for (srcore runs it: the onnx path of GRID)
ORT_LACKS = ("schnet",)
#: torch.onnx at opset 13 lacks these ops (triu / tril / SDPA from 14, grid_sampler from 16)
NO_OPSET13 = ("deform_sample", "transfo_xl", "dit_block", "retention")


def _onnx_opset_cells():
    return [param(f"{n}-{o}", n, o, default=(n, o) in ONNX_OPSET_DEFAULT) for n, (_f, paths, _r) in GRID.items()
            if "onnx" in paths and n not in ORT_LACKS for o in (13, 18, 20) if not (o == 13 and n in NO_OPSET13)]


def _export_onnx(m, inputs, path, opset: int, dynamic: bool = True) -> list[str]:
    names = [f"in{i}" for i in range(len(inputs))]
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, inputs, path, dynamo=False, opset_version=opset, input_names=names,
                          dynamic_axes={k: {0: "batch"} for k in names} if dynamic else None)
    return names


def _check_vs_ort(path: str, names, input_sets, backend: str = "cpu", rtol: float = 1e-4) -> srcore.StaticModule:
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sm = srcore.StaticModule(srcore.from_onnx(path), options=engine_options(backend))
    file_inputs = {i.name for i in sess.get_inputs()}    # torch.onnx drops inputs the graph does not read
    for k, xs in enumerate(input_sets):
        fd = {n: x.numpy() for n, x in zip(names, xs) if n in file_inputs}
        want = sess.run(None, fd)
        got = flatten_np(sm(**fd))
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert (g.shape, g.dtype) == (w.shape, w.dtype), f"feeds {k} output {i}"
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol / 10 * max(1.0, float(np.abs(w).max())),
                                       err_msg=f"feeds {k} output {i}")
    return sm


@pytest.mark.parametrize("name,opset", _onnx_opset_cells())
def test_torch_onnx_at_opset_with_a_dynamic_batch_matches_onnxruntime(name, opset, tmp_path):
    m, inputs = GRID[name][0]()
    path = str(tmp_path / "m.onnx")
    names = _export_onnx(m, inputs, path, opset)
    _check_vs_ort(path, names, (inputs, tuple(torch.cat([x, x.roll(1, 0)]) for x in inputs)))


@pytest.mark.parametrize("backend", [param(b, b, default=b == "cpu") for b in BACKENDS])
def test_onnx_with_external_data_matches_onnxruntime(backend, tmp_path):
    """ECAPA-TDNN at opset 18, its weights in one external file."""
    import onnx

    m, inputs = GRID["ecapa"][0]()
    names = _export_onnx(m, inputs, str(tmp_path / "m.onnx"), 18)
    ext = tmp_path / "ext.onnx"
    onnx.save_model(onnx.load(str(tmp_path / "m.onnx")), str(ext), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
    os.remove(tmp_path / "m.onnx")
    assert (tmp_path / "w.bin").stat().st_size > 4000
    sm = _check_vs_ort(str(ext), names, (inputs, tuple(x[:1] for x in inputs)), backend)
    assert_no_fallback(sm, backend)


@pytest.mark.parametrize("opset", [13, pytest.param(11, marks=pytest.mark.full)])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_recurrent_ops_of_opset_13_and_older_match_onnxruntime(kind, opset, tmp_path):
    """torch.onnx at opset 13 (and 11, which srcore upgrades to 13) writes LSTM / GRU / RNN of version 7:
    srcore mapped versions 14 and 22 only and refused the file ('version 7 of GRU is not supported').
    Version 7 is version 14 without ``layout``; two layers, bidirectional, batch first, initial states."""
    torch.manual_seed(3)
    cls = getattr(torch.nn, kind)
    m = cls(4, 5, num_layers=2, bidirectional=True, batch_first=True).eval()
    h0 = torch.randn(4, 2, 5)
    inputs = (torch.randn(2, 6, 4), (h0, torch.randn(4, 2, 5)) if kind == "LSTM" else h0)
    flat = (inputs[0], *inputs[1]) if kind == "LSTM" else inputs

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x, *state):
            return self.m(x, state if kind == "LSTM" else state[0])

    path = str(tmp_path / "m.onnx")
    names = [f"in{i}" for i in range(len(flat))]
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(Wrap().eval(), flat, path, dynamo=False, opset_version=opset, input_names=names,
                          dynamic_axes={"in0": {0: "batch", 1: "time"}, **{k: {1: "batch"} for k in names[1:]}})
    import onnx

    proto = onnx.load(path)
    assert kind in {n.op_type for n in proto.graph.node}
    assert onnx.defs.get_schema(kind, proto.opset_import[0].version).since_version == 7
    other = (torch.randn(3, 2, 4), *(torch.randn(4, 3, 5) for _ in flat[1:]))
    _check_vs_ort(path, names, (flat, other))


def test_torch_onnx_cross_entropy_and_nll_match_onnxruntime_and_torch(tmp_path):
    """Cross entropy (``ignore_index=-100``, class weights) and NLL through torch.onnx:
    SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss in the file, which srcore refused ('op not
    supported by srcore'). Against onnxruntime (two batch sizes, some labels ignored) and torch."""
    import onnx

    from heldout11_models import ce_nll_head

    m, inputs = ce_nll_head()
    path = str(tmp_path / "m.onnx")
    names = _export_onnx(m, inputs, path, 18)
    ops = {n.op_type for n in onnx.load(path).graph.node}
    assert {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"} <= ops, ops
    labels = torch.cat([inputs[1], inputs[1].flip(1)])
    labels[2, :3] = -100
    other = (torch.cat([inputs[0], inputs[0] * 2]), labels)
    sm = _check_vs_ort(path, names, (inputs, other))
    for xs in (inputs, other):
        assert_close([np.asarray(g) for g in flatten_np(sm(*(x.numpy() for x in xs)))], torch_outputs(m, xs),
                     "loss head via onnx")


def test_a_broken_torch_onnx_loss_is_refused_naming_the_node(tmp_path):
    """torch.onnx 2.13 writes ``F.nll_loss(F.log_softmax(x, -1).transpose(1, 2), ...)`` as a
    SoftmaxCrossEntropyLoss whose scores are a bias vector (onnxruntime fails to load the file): srcore
    refuses the node, it does not run a wrong loss."""
    from heldout11_models import loss_head

    m, inputs = loss_head(smoothing=0.0)
    path = str(tmp_path / "m.onnx")
    _export_onnx(m, inputs, path, 18, dynamic=False)
    with pytest.raises(srcore.ConversionError, match=r"SoftmaxCrossEntropyLoss node '[^']+': input 0 \(scores\) "
                                                      r"must have a class axis \(rank >= 2\), has rank 1"):
        srcore.from_onnx(path)


# -- hand-built ONNX -----------------------------------------------------------------------------------

#: hand-built cases on trt_like in the default run
ONNX_TRT_LIKE_DEFAULT = ("softmax_ce13_mean", "avgpool19_dilations", "logspec_dft20")


@pytest.mark.parametrize("name,backend", onnx_backend_cells("heldout11_onnx", BACKENDS, ONNX_TRT_LIKE_DEFAULT))
def test_hand_built_onnx_matches_onnxruntime(name, backend):
    from heldout11_onnx import CASES

    proto, feeds, other = CASES[name]
    check_onnx_vs_ort(name, proto, (feeds, other), backend)


def test_trt_like_defaults_are_onnx_cases():
    from heldout11_onnx import CASES

    assert set(ONNX_TRT_LIKE_DEFAULT) <= set(CASES)


@pytest.mark.parametrize("proto,pattern", refused_params("heldout11_onnx"))
def test_onnx_files_srcore_cannot_run_are_refused_naming_the_node(proto, pattern):
    with pytest.raises(srcore.SrcoreError, match=pattern):
        srcore.from_onnx(proto)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_loss_of_an_all_ignored_batch_matches_onnxruntime(reduction):
    """Every target ignored: ``none`` and ``sum`` give zeros, ``mean`` 0 / 0 (NaN in both)."""
    from heldout4_onnx import c, model, vi
    from onnx import TensorProto as T, helper as h

    m = model([h.make_node("NegativeLogLikelihoodLoss", ["x", "y", "w"], ["loss"], reduction=reduction,
                           ignore_index=-1)],
              [vi("x", T.FLOAT, [2, 3]), vi("y", T.INT64, [2])], [vi("loss", T.FLOAT, None)],
              [c("w", np.array([1.0, 2.0, 3.0], np.float32))], opset=13)
    feeds = {"x": np.ones((2, 3), np.float32), "y": np.array([-1, -1], np.int64)}
    check_onnx_vs_ort("nll all ignored", m, (feeds,), "cpu")


# -- TorchScript: a list literal of ints and floats -----------------------------------------------------


def test_scripted_tensor_of_a_mixed_int_float_list_matches_torch():
    """``torch.tensor([-1.0, 0, 1])`` and ``torch.tensor([n, 0.5])`` (n an int read from a shape) in a
    scripted module: TorchScript types the lists ``List[Union[float, int]]``, which srcore refused
    ('type Union[float, int] (UnionType) has no srcore equivalent'). A float32 tensor in torch. Saved
    and loaded (.srm): the folded constant list's IR text parses back, its ints still ints."""
    from _harness import round_trip

    class Mixed(torch.nn.Module):
        def forward(self, x):
            k = torch.tensor([-1.0, 0, 1, 2])
            s = torch.tensor([x.shape[0], 0.5])
            return x * k + s.sum(), s

    m = Mixed().eval()
    x = torch.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = torch.jit.script(m)
    model = round_trip(srcore.from_torchscript(ts, (x,)))
    consts = [n.attrs["value"] for n in model.graph.all_nodes()
              if n.kind == "prim::Constant" and str(n.outputs[0].type) == "Union(float, int)[]"]
    assert [-1.0, 0, 1, 2] in consts and [type(v) for v in consts[consts.index([-1.0, 0, 1, 2])]] == [float, int, int, int]
    sm = srcore.StaticModule(model, backends=("cpu",))
    for xs in ((x,), (x * 3,)):
        want = torch_outputs(m, xs)
        assert want[0].dtype == np.float32
        assert_close(run(sm, xs), want, "mixed list")


# -- torch.ao quantized --------------------------------------------------------------------------------


def _quantized(workflow: str, engine: str, how: str):
    """(torch's outputs, srcore's outputs, the output scales) of the quantized model ``workflow`` built,
    run and converted with torch's quantized engine ``engine``."""
    import torch.ao.quantization as tq
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    from heldout11_models import eager_tcn, qmbconv_se

    before = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = engine
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if workflow == "fx_mbconv":
                m, inputs = qmbconv_se()
                prepared = prepare_fx(m, tq.get_default_qconfig_mapping(engine), inputs)
                with torch.no_grad():
                    for s in range(4):
                        prepared(torch.randn(inputs[0].shape, generator=torch.Generator().manual_seed(s)))
                m = convert_fx(prepared)
            else:
                m, inputs = eager_tcn(engine)
            ts = torch.jit.trace(m, inputs) if how == "trace" else torch.jit.script(m)
            if how == "frozen":
                ts = torch.jit.freeze(ts)
            want = torch_outputs(ts, inputs)
            sm = srcore.StaticModule(srcore.from_torchscript(ts, inputs), options=engine_options("cpu"))
    finally:
        torch.backends.quantized.engine = before
    return want, run(sm, inputs)


#: the default run: one import path per (workflow, engine)
QUANT_DEFAULT = {("fx_mbconv", "x86"): "script", ("eager_tcn", "x86"): "trace", ("fx_mbconv", "qnnpack"): "frozen"}


@pytest.mark.parametrize("workflow,engine,how", [
    param(f"{w}-{e}-{h}", w, e, h, default=QUANT_DEFAULT.get((w, e)) == h)
    for w in ("fx_mbconv", "eager_tcn") for e in ("x86", "qnnpack") for h in ("script", "trace", "frozen")])
def test_quantized_model_matches_torch(workflow, engine, how):
    """Bit for bit with either engine (qnnpack: QNNPACK's arithmetic, kernels/qnnpack.py; srcore computed
    fbgemm's before and was allowed two output steps)."""
    want, got = _quantized(workflow, engine, how)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"output {i}")
