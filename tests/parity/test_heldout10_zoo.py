"""The tenth held-out zoo: what zoos 1-9 leave out, on cpu and on trt_like + cpu (engines built with
timing off, no segment may fall back), each against its own reference.

- ONNX files made by ``onnxruntime.quantization`` (heldout10_onnx.py) vs onnxruntime on the same
  file: ``quantize_static`` QDQ (per tensor / per channel, uint8 / int8 activations, int8 and uint8
  weights, symmetric activations) and QOperator (QLinearConv, QGemm, QLinearAdd / Mul / Concat /
  Sigmoid), ``quantize_dynamic`` (DynamicQuantizeLinear, MatMulInteger, ConvInteger).
- torch models (heldout10_models.py) through every import path that applies, against torch eager:
  DeBERTa disentangled attention, ALBERT's shared layer in a loop, a BART decoder layer with cross
  attention, a Whisper encoder, a HiFi-GAN generator, gMLP, ConvNeXt-V2 GRN, PVT spatial-reduction
  attention, CvT conv projections, DCN-v2, EmbeddingBag with offsets, PatchTST, DLinear, TFT GRNs.

By default each torch model runs on cpu through one path (rotating) and a few on trt_like; each
quantized file on cpu; ``SRCORE_TESTS_FULL=1`` runs every cell. What the zoo found is fixed and
tested here: a QDQ file with uint8 weights (``weight_type=QUInt8``) was folded into torch's quantized
conv / linear, which take int8 weights only, and refused ('the weight must be qint8'): it now runs
those ops in float on the dequantized weights; ONNX ReduceMax / ReduceMin over an axis empty at run
time (torch.onnx's EmbeddingBag max mode with an empty bag) failed in the kernel ('zero-size array to
reduction'): it is ONNX's identity (-inf / +inf / the dtype's extremes), as onnxruntime gives.
"""
from __future__ import annotations

import os
import tempfile
import warnings

import numpy as np
import pytest
import torch

import srcore
from _harness import flatten_np
from _zoo import assert_no_fallback, check_cell, engine_options, grid_cells, param
from heldout10_models import GRID

ort = pytest.importorskip("onnxruntime")

#: independent of the executor and the memory planner (the default ones run): test.sh's second pass skips it
pytestmark = pytest.mark.one_pass

BACKENDS = ("cpu", "trt_like")


# -- onnxruntime.quantization files vs onnxruntime --------------------------------------------------

#: quantized files in the default run (the rest under ``full``), and those on trt_like by default
QUANT_DEFAULT = ("qdq_u8s8_channel", "qdq_u8u8_tensor", "qop_u8s8_tensor", "qop_s8s8_channel", "dynamic_u8_channel")
QUANT_TRT_LIKE_DEFAULT = ("qdq_u8s8_channel",)


@pytest.fixture(scope="module")
def qdir():
    with tempfile.TemporaryDirectory() as d:
        yield d


def _quant_cells():
    from heldout10_onnx import QUANTIZED

    return [param(f"{n}-{b}", n, b, default=(n in QUANT_DEFAULT and b == "cpu") or n in QUANT_TRT_LIKE_DEFAULT
                   and b == "trt_like") for n in QUANTIZED for b in BACKENDS]


@pytest.mark.parametrize("name,backend", _quant_cells())
def test_onnxruntime_quantized_file_matches_onnxruntime(name, backend, qdir):
    """The file through srcore against onnxruntime on three feeds (batch 2, 3, 2). QOperator and dynamic
    files: the same integer arithmetic, equal to float rounding. QDQ: srcore folds the Q/DQ pairs into
    torch's quantized ops (fbgemm's rounding), documented to be within one output step of ONNX's
    arithmetic per requantization: two steps of the outputs' scales (< 0.0045 here) allowed."""
    from heldout10_onnx import QUANTIZED, feeds, quantized

    path = quantized(name, qdir)
    atol = 0.01 if QUANTIZED[name][0] == "QDQ" else 1e-5
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sm = srcore.StaticModule(srcore.from_onnx(path), options=engine_options(backend))
    for k, fd in enumerate((feeds(99), feeds(98, 3), feeds(99))):
        want = sess.run(None, fd)
        got = flatten_np(sm(**fd))
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert (g.shape, g.dtype) == (w.shape, w.dtype), f"{name} feeds {k} output {i}"
            np.testing.assert_allclose(g, w, rtol=0, atol=atol, err_msg=f"{name} feeds {k} output {i}")
    assert_no_fallback(sm, backend)


def test_qdq_uint8_weights_run_in_float_not_refused(qdir):
    """``weight_type=QUInt8``: torch's quantized conv / linear take int8 weights only; srcore folded the
    DQ(uint8 W) -> Conv -> Q pattern anyway and the load failed ('the weight must be qint8, got quint8').
    Now no qconv / qlinear is made of a uint8 weight, and the output matches onnxruntime's."""
    from heldout10_onnx import feeds, quantized

    path = quantized("qdq_u8u8_channel", qdir)
    model = srcore.from_onnx(path)
    kinds = {n.kind for n in model.graph.all_nodes()}
    assert not {k for k in kinds if k.startswith(("quantized::qconv", "quantized::qlinear"))}, kinds
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds(5))
    got = flatten_np(srcore.StaticModule(model, options=engine_options("cpu"))(**feeds(5)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=0.01)


# -- ReduceMax / ReduceMin of nothing -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_onnx_reduce_max_min_over_an_axis_empty_at_run_time_is_the_identity(dtype):
    """Axes of size known only at run time, empty in some feeds: onnxruntime gives -inf / +inf (the
    dtype's extremes for integers), as ONNX defines; srcore's amax kernel failed ('zero-size array to
    reduction operation maximum'). Non-empty feeds are unchanged."""
    from heldout10_onnx import reduce_dynamic_axes
    from onnx import helper as h

    m = reduce_dynamic_axes(h.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    sm = srcore.StaticModule(srcore.from_onnx(m), backends=("cpu",))
    for shape in ((3, 0, 2), (3, 4, 2), (3, 2, 0), (3, 0, 0)):
        x = (np.random.default_rng(len(shape)).standard_normal(shape) * 10).astype(dtype)
        for i, (g, w) in enumerate(zip(sm(x=x), sess.run(None, {"x": x}))):
            assert (g.shape, g.dtype) == (w.shape, w.dtype), (shape, i)
            np.testing.assert_array_equal(g, w, err_msg=f"{shape} output {i}")


@pytest.mark.parametrize("backend", [param(b, b, default=b == "cpu") for b in BACKENDS])
def test_embedding_bag_onnx_export_with_an_empty_bag_matches_onnxruntime(backend):
    """torch.onnx writes EmbeddingBag as a Loop gathering each bag's rows and reducing them: an empty max
    bag reduces nothing (-inf in onnxruntime, as ONNX defines; torch eager gives 0). srcore failed in the
    kernel; now all five bags match onnxruntime on the exported file."""
    from heldout10_models import embedding_bags

    m, inputs = embedding_bags()
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "m.onnx")
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(m, inputs, f, dynamo=False, opset_version=17, input_names=["ids", "offs", "w", "ids2"])
        sess = ort.InferenceSession(f, providers=["CPUExecutionProvider"])
        sm = srcore.StaticModule(srcore.from_onnx(f), options=engine_options(backend))
    fd = dict(zip(("ids", "offs", "w", "ids2"), (x.numpy() for x in inputs)))
    want = sess.run(None, fd)
    assert np.isneginf(want[2][1]).all()
    got = flatten_np(sm(**fd))
    # the empty mean bag: ONNX leaves a ReduceMean of nothing undefined; onnxruntime gives 0, srcore NaN
    # (0 / 0, as torch's mean of nothing): not compared
    got[1][1], want[1][1] = 0, 0
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"bag output {i}")


# -- torch models through every import path -----------------------------------------------------------

#: torch models on trt_like in the default run (through their second path)
TRT_LIKE_DEFAULT = ("deberta", "hifigan", "dcn_v2")


@pytest.mark.parametrize("name,path,backend", grid_cells(GRID, BACKENDS, TRT_LIKE_DEFAULT))
def test_grid_model_matches_torch(name, path, backend, monkeypatch, tmp_path_factory):
    factory, _paths, rtol = GRID[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_cell(factory, name, path, backend, monkeypatch, tmp_path_factory, rtol)


# -- float16 ONNX files, external data, inputs named as the file names them ----------------------------


@pytest.mark.parametrize("name,backend", [param(f"{n}-{b}", n, b, default=b == "cpu" and n != "hifigan")
                                          for n in ("dcn_v2", "whisper_encoder", "hifigan") for b in BACKENDS])
def test_float16_onnx_file_with_external_data_matches_onnxruntime(name, backend, tmp_path):
    """The model in float16, written by torch.onnx with its weights in an external data file, fed as
    onnxruntime is fed: by the file's input names (torch.onnx's ``onnx::Add_0``, which srcore names
    ``onnx__Add_0``: the call was refused, 'unknown input'). Within float16's resolution."""
    import onnx

    m, inputs = GRID[name][0]()
    m = m.half()
    inputs = tuple(x.half() if x.is_floating_point() else x for x in inputs)
    f = tmp_path / "m.onnx"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, inputs, str(f), dynamo=False, opset_version=17)
    proto = onnx.load(str(f))
    ext = tmp_path / "ext.onnx"
    onnx.save_model(proto, str(ext), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
                    size_threshold=0)
    assert (tmp_path / "w.bin").stat().st_size > 0
    fd = {i.name: x.numpy() for i, x in zip(proto.graph.input, inputs)}
    want = ort.InferenceSession(str(ext), providers=["CPUExecutionProvider"]).run(None, fd)
    sm = srcore.StaticModule(srcore.from_onnx(str(ext)), options=engine_options(backend))
    for i, (g, w) in enumerate(zip(flatten_np(sm(**fd)), want)):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), f"output {i}"
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=2e-2, atol=4e-3,
                                   err_msg=f"{name} output {i}")
    assert_no_fallback(sm, backend)


def test_inputs_bound_by_the_names_the_onnx_file_gives():
    """An ONNX input named ``onnx::A_0`` / ``b:1`` is ``onnx__A_0`` / ``b_1`` in srcore: either name binds
    it (in any order); a name neither way is refused naming the inputs."""
    from onnx import TensorProto as T, helper as h

    g = h.make_graph([h.make_node("Sub", ["onnx::A_0", "b:1"], ["y"])], "g",
                     [h.make_tensor_value_info(n, T.FLOAT, [2]) for n in ("onnx::A_0", "b:1")],
                     [h.make_tensor_value_info("y", T.FLOAT, [2])])
    sm = srcore.StaticModule(srcore.from_onnx(h.make_model(g, opset_imports=[h.make_opsetid("", 17)])),
                             backends=("cpu",))
    a, b = np.array([5, 7], np.float32), np.array([1, 2], np.float32)
    for fd in ({"onnx::A_0": a, "b:1": b}, {"b_1": b, "onnx__A_0": a}, {"b:1": b, "onnx::A_0": a}):
        np.testing.assert_array_equal(sm(**fd), a - b)
    with pytest.raises(srcore.SrcoreInputError, match=r"unknown input 'onnx:A_0'; the model's inputs are: onnx__A_0, b_1"):
        sm(**{"onnx:A_0": a, "b:1": b})


# -- opset 23 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,backend", [param(f"{n}-{b}", n, b, default=b == "cpu")
                                          for n in ("rmsnorm23", "rotary23", "attention23") for b in BACKENDS])
def test_opset23_ops_match_onnxruntime(name, backend):
    from _zoo import check_onnx_vs_ort
    from heldout10_onnx import opset23_cases

    proto, feeds = opset23_cases()[name]
    check_onnx_vs_ort(name, proto, (feeds,), backend)


# -- torch.ao quantized modules -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,how", [pytest.param(torch.qint8, h, id=f"qint8-{h}") for h in ("script", "trace", "frozen")]
                         + [pytest.param(torch.float16, "script", id="float16-script")])
def test_dynamic_quantized_recurrent_matches_torch(dtype, how):
    """``quantize_dynamic`` LSTM (2 layers, bidirectional) + GRU + Linear against torch (fbgemm's
    dynamic int8 / fp16 arithmetic: equal to float rounding)."""
    from _harness import assert_close, run, torch_outputs
    from heldout10_models import dynamic_quantized

    before = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = "x86"
        m, inputs = dynamic_quantized(dtype)()
        ts = torch.jit.trace(m, inputs, check_trace=False) if how == "trace" else torch.jit.script(m)
        if how == "frozen":
            ts = torch.jit.freeze(ts)
        want = torch_outputs(m, inputs)
        sm = srcore.StaticModule(srcore.from_torchscript(ts, inputs), options=engine_options("cpu"))
    finally:
        torch.backends.quantized.engine = before
    assert_close(run(sm, inputs), want, f"dynamic {dtype} {how}", 1e-4)


@pytest.mark.parametrize("how", ["frozen", "trace"])
def test_eager_quantized_convnet_bit_for_bit(how):
    from _harness import run, torch_outputs
    from heldout10_models import eager_quantized

    before = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = "x86"
        m, inputs = eager_quantized()
        ts = torch.jit.freeze(torch.jit.script(m)) if how == "frozen" else torch.jit.trace(m, inputs)
        want = torch_outputs(m, inputs)
        sm = srcore.StaticModule(srcore.from_torchscript(ts, inputs), options=engine_options("cpu"))
    finally:
        torch.backends.quantized.engine = before
    for g, w in zip(run(sm, inputs), want):
        np.testing.assert_array_equal(g, w)


def test_qdq_with_an_infinite_scale_is_refused_naming_the_node():
    """onnxruntime's calibrator writes a scale of inf for a tensor that held -inf (a BART decoder's
    causal mask added to the scores): ONNX's arithmetic then makes 0 * inf, which onnxruntime turns
    into 0 and srcore turned into other values (the decoder's output off by 1.2, its attention weights
    0.5 where onnxruntime gives 0: a silent difference). Refused now, as the QLinear ops refuse it."""
    from heldout4_onnx import c, model, vi
    from onnx import TensorProto as T, helper as h

    m = model([h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="mask_q"),
               h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="mask_dq")],
              [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, None)],
              [c("s", np.float32(np.inf)), c("z", np.uint8(128))], opset=13)
    with pytest.raises(srcore.ConversionError, match=r"QuantizeLinear node 'mask_q': input 1 \(scale\) holds inf"):
        srcore.from_onnx(m)
