"""The eighth held-out zoo: the import paths users bring that the older zoos touch least, each on cpu
and on trt_like + cpu (engines built with timing off, no segment may fall back).

- ONNX files built with ``onnx.helper`` (heldout8_onnx.py), not by torch's exporter: the same ops in
  their opset 11 / 13 / 18 forms, shape arithmetic on ``dim_param`` dims run at two batch sizes,
  QOperator files, recurrent ops with initial states, int64 / bool / float16 / double; onnxruntime
  is the reference. Initializers stored as external data; com.microsoft fused ops as onnxruntime's
  optimizer saves them.
- ``torch.export`` programs (heldout8_models.EXPORT): derived ``Dim``s, symbolic size arithmetic
  (also as floats), nested and 0-d outputs, keyword inputs, list and dict arguments; converted from
  the ExportedProgram (and a ``.pt2``).
- frozen TorchScript of scripted modules with control flow (heldout8_models.FROZEN), frozen four
  ways: ``torch.jit.freeze``, with ``optimize_numerics=False``, ``optimize_for_inference`` and a
  saved frozen file; eager- and dynamic-quantized modules scripted and frozen, bit for bit.

By default every ONNX case runs on cpu and the cheap ones on trt_like, each torch model through one
variant per backend; ``SRCORE_TESTS_FULL=1`` runs every cell. The refusals assert the error names
the node (or buffer) and the source. What the zoo found is fixed and tested here: negative ONNX Pad
pads with reflect/edge/wrap (cropped first, as onnxruntime), a derived ``Dim`` (``2 * k``) fixed to
the example's size by ``from_torch``, ``torch.sym_float`` refused, list/dict arguments of an
exported program not taken as torch takes them, com.microsoft FusedConv / FusedGemm /
FusedMatMul / Gelu variants (onnxruntime-optimized files) refused, a FutureWarning from ``from_torch`` on every
conversion.
"""
from __future__ import annotations

import copy
import os
import warnings

import numpy as np
import pytest
import torch

from _harness import assert_close, flatten, flatten_np, run, to_numpy, torch_outputs
from _zoo import assert_no_fallback, check_onnx_vs_ort, engine_options
from heldout8_models import EXPORT, FROZEN, QUANTIZED

import srcore

ort = pytest.importorskip("onnxruntime")

#: independent of the executor and the memory planner (the default ones run): test.sh's second pass skips it
pytestmark = pytest.mark.one_pass

BACKENDS = ("cpu", "trt_like")


_options = engine_options
_no_fallback = assert_no_fallback


def _param(cell_id: str, *values, default: bool):
    return pytest.param(*values, id=cell_id, marks=[] if default else [pytest.mark.full])


# -- hand-built ONNX vs onnxruntime ------------------------------------------------------------------

#: trt_like cells in the default run (engine builds of well under a second each)
ONNX_TRT_LIKE_DEFAULT = ("split_clip_reduce_opset13", "gather_scatter_where", "lstm_bidirectional_states",
                         "dtypes_int_bool_half_double", "einsum_chain_batch_sum")
#: onnxruntime computes float16 Mul/Sigmoid in float32 (it has no float16 kernels for them: it casts
#: around them and drops the Cast pairs), srcore in float16 as the file says: float16 rounding apart
ONNX_TOL = {"dtypes_int_bool_half_double": 2e-3}


def _onnx_cells():
    from heldout8_onnx import CASES

    return [_param(f"{n}-{b}", n, b, default=b == "cpu" or n in ONNX_TRT_LIKE_DEFAULT) for n in CASES for b in BACKENDS]


@pytest.mark.parametrize("name,backend", _onnx_cells())
def test_hand_built_onnx_matches_onnxruntime(name, backend):
    from heldout8_onnx import CASES

    proto, feeds, other = CASES[name]
    check_onnx_vs_ort(name, proto, (feeds, other, feeds), backend, ONNX_TOL.get(name, 1e-4))


def test_trt_like_defaults_are_onnx_cases():
    from heldout8_onnx import CASES

    assert set(ONNX_TRT_LIKE_DEFAULT) | set(ONNX_TOL) <= set(CASES)


@pytest.mark.parametrize("mode", ("reflect", "edge", "wrap"))
def test_negative_pads_crop_before_padding_as_onnxruntime(mode):
    """Pad with negative pads and a non-constant mode: onnxruntime crops those first and pads what is
    left (srcore refused them: 'negative pads with mode=...'). A dynamic batch, a crop and a pad on
    the same dim, a crop of the batch dim (the cat path)."""
    from heldout4_onnx import c, model, vi
    from onnx import TensorProto, helper

    x = np.random.default_rng(3).standard_normal((2, 3, 5, 6)).astype(np.float32)
    for pads in ([0, 0, -1, 1, 0, 0, 2, -2], [0, -1, 0, 2, 0, 0, -2, -1], [0, 0, 2, -1, 0, 0, -1, 3],
                 [-1, 0, 0, 0, 0, 1, 0, 0]):
        m = model([helper.make_node("Pad", ["x", "p"], ["y"], mode=mode)],
                  [vi("x", TensorProto.FLOAT, ["N", 3, 5, 6])], [vi("y", TensorProto.FLOAT, None)],
                  [c("p", np.array(pads, np.int64))])
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        got = srcore.StaticModule(srcore.from_onnx(m), backends=("cpu",))(x=x)
        assert got.shape == want.shape, pads
        np.testing.assert_array_equal(got, want, err_msg=str(pads))


def test_resize_to_a_size_computed_at_run_time_is_refused_naming_the_node():
    """tf2onnx's ``Resize(x, sizes=Shape(skip))`` / scales divided at run time: srcore builds each
    resized axis as a constant map at conversion (ops/resize.py), so it refuses, naming the node."""
    from heldout4_onnx import c, model, vi
    from onnx import TensorProto, helper

    F = TensorProto.FLOAT
    to_other = model([helper.make_node("Shape", ["r"], ["rs"]), helper.make_node("Resize", ["x", "", "", "rs"], ["y"])],
                     [vi("x", F, ["N", 3, 4, 5]), vi("r", F, ["N", 3, "H", "W"])], [vi("y", F, None)], opset=13)
    with pytest.raises(srcore.ConversionError, match=r"<ModelProto>[\s\S]*Resize node #1: sizes must be known"):
        srcore.from_onnx(to_other)
    divided = model([helper.make_node("Shape", ["x"], ["xs"]), helper.make_node("Cast", ["xs"], ["xf"], to=F),
                     helper.make_node("Div", ["t", "xf"], ["sc"]),
                     helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear", name="up")],
                    [vi("x", F, ["N", 3, 4, 5])], [vi("y", F, None)], [c("t", np.array([2, 3, 8, 10], np.float32))],
                    opset=13)
    with pytest.raises(srcore.ConversionError, match=r"Resize node 'up'.*scales must be known"):
        srcore.from_onnx(divided)


class _OrtNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 8)
        self.ln = torch.nn.LayerNorm(8)

    def forward(self, x):
        h = torch.relu(self.bn(self.c(x))).mean((2, 3))
        return self.ln(self.fc2(torch.nn.functional.gelu(self.fc(h))) + h).softmax(-1)


def test_a_file_onnxruntime_optimized_and_saved(tmp_path):
    """A model saved by onnxruntime after its extended graph optimizations (``optimized_model_filepath``)
    holds com.microsoft FusedConv and Gelu: srcore refused them ('op FusedConv of domain com.microsoft is
    not supported'); now it runs them as onnxruntime does. The hardware-specific level's
    com.microsoft.nchwc layout ops stay refused, naming the domain."""
    import onnx

    torch.manual_seed(8)
    src, x = str(tmp_path / "m.onnx"), torch.randn(2, 3, 6, 6)
    with torch.no_grad():
        torch.onnx.export(_OrtNet().eval(), (x,), src, dynamo=False, opset_version=17, input_names=["x"],
                          dynamic_axes={"x": {0: "b"}})
    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    saved = {}
    for level in ("extended", "all"):
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_ENABLE_{level.upper()}")
        so.optimized_model_filepath = saved[level] = str(tmp_path / f"{level}.onnx")
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    ops = {(n.domain, n.op_type) for n in onnx.load(saved["extended"]).graph.node}
    assert {("com.microsoft", "FusedConv"), ("com.microsoft", "Gelu")} <= ops
    got = srcore.StaticModule(srcore.from_onnx(saved["extended"]), backends=("cpu",))(x=x.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    nchwc = r"all\.onnx[\s\S]*domain 'com\.microsoft\.nchwc' is not supported"
    with pytest.raises(srcore.ConversionError, match=nchwc):
        srcore.from_onnx(saved["all"])


def test_initializers_as_external_data(tmp_path):
    """Initializers in side files (one per tensor): from a path, from bytes with ``base_dir``; without
    ``base_dir`` or with a file missing, refused naming the initializer."""
    import onnx
    from heldout4_onnx import c, model, vi
    from onnx import TensorProto, helper

    rng = np.random.default_rng(4)
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "b"], ["z"])],
              [vi("x", TensorProto.FLOAT, ["N", 5])], [vi("z", TensorProto.FLOAT, None)],
              [c("w", rng.standard_normal((5, 300)).astype(np.float32)),
               c("b", rng.standard_normal(300).astype(np.float32))])
    path = str(tmp_path / "m.onnx")
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=100)
    assert sorted(os.listdir(tmp_path)) == ["b", "m.onnx", "w"]
    x = rng.standard_normal((3, 5)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(srcore.StaticModule(srcore.from_onnx(path), backends=("cpu",))(x=x), want, rtol=1e-5)
    raw = onnx.load(path, load_external_data=False).SerializeToString()
    np.testing.assert_allclose(srcore.StaticModule(srcore.from_onnx(raw, base_dir=tmp_path), backends=("cpu",))(x=x),
                               want, rtol=1e-5)
    with pytest.raises(srcore.ConversionError, match="initializer 'w'.*no base_dir"):
        srcore.from_onnx(raw)
    os.remove(tmp_path / "b")
    with pytest.raises(srcore.ConversionError, match="initializer 'b'.*missing"):
        srcore.from_onnx(path)


# -- torch.export -------------------------------------------------------------------------------------

#: (model, backend) cells in the default run
EXPORT_DEFAULT = {(n, "cpu") for n in EXPORT} | {("sym_arith", "trt_like"), ("pytree_inputs", "trt_like")}


@pytest.fixture(scope="module")
def exported():
    """name -> (eager copy, ExportedProgram, args, kwargs, dynamic_shapes, other inputs): exported once."""
    cache = {}

    def get(name):
        if name not in cache:
            m, args, kwargs, shapes, others = EXPORT[name]()
            ref = copy.deepcopy(m)
            cache[name] = (ref, torch.export.export(m, args, kwargs, dynamic_shapes=shapes), args, kwargs, shapes, others)
        return cache[name]
    return get


@pytest.mark.parametrize("name,backend", [_param(f"{n}-{b}", n, b, default=(n, b) in EXPORT_DEFAULT)
                                          for n in EXPORT if n != "buffer_mutation" for b in BACKENDS])
def test_exported_program_matches_torch(name, backend, exported):
    """from_torch of the ExportedProgram (dims named by the same ``dynamic_shapes``), positional and
    keyword inputs as torch takes them, at the example and at other sizes (then the example again)."""
    ref, ep, args, kwargs, shapes, others = exported(name)
    sm = srcore.StaticModule(srcore.from_torch(ep, dynamic_shapes=shapes), options=_options(backend))
    np_kwargs = {k: v.numpy() for k, v in kwargs.items()}
    for i, xs in enumerate([args, *others, args]):
        with torch.no_grad():
            want = flatten(ref(*xs, **kwargs))
        got = [np.array(g) for g in flatten_np(sm(*to_numpy(xs), **np_kwargs))]
        assert_close(got, want, f"{name} input set {i}")
    _no_fallback(sm, backend)


def test_derived_dim_stays_dynamic(exported, tmp_path):
    """``Dim("k")`` used as ``2 * k``: the input's dim is an expression of export's symbol. from_torch
    took int() of it, which is the example's size (6), and refused every other length; now the dim is
    left to shape propagation. An odd length fails torch's reshape: an input error naming the node
    and the source line. The same from a ``.pt2`` file."""
    ref, ep, args, _kw, shapes, _others = exported("sym_arith")
    model = srcore.from_torch(ep, dynamic_shapes=shapes)
    assert model.input_specs[0].shape == ("batch", None, 8)
    sm = srcore.StaticModule(model, backends=("cpu",))
    x = torch.randn(3, 14, 8)
    assert_close(run(sm, (x,)), torch_outputs(ref, (x,)), "length 14")
    with pytest.raises(srcore.SrcoreInputError, match=r"aten::reshape[\s\S]*heldout8_models\.py:\d+"):
        sm(np.zeros((2, 7, 8), np.float32))
    path = str(tmp_path / "m.pt2")
    torch.export.save(ep, path)
    sm2 = srcore.StaticModule(srcore.from_torch(path, dynamic_shapes=shapes), backends=("cpu",))
    assert_close(run(sm2, (x,)), torch_outputs(ref, (x,)), "length 14 from .pt2")


def test_from_torch_warns_nothing_on_a_dict_output():
    """from_torch read the output TreeSpec's ``children_specs``, which torch 2.10+ deprecates with a
    FutureWarning on every conversion; the dict's keys still name the outputs."""
    class Dict(torch.nn.Module):
        def forward(self, x):
            return {"double": x * 2, "plus": x + 1}

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        model = srcore.from_torch(Dict(), (torch.randn(2, 3),))
    assert model.output_names == ("double", "plus")


def test_pytree_inputs_are_flattened_as_export_did(exported, tmp_path):
    """A list, a dict and a keyword argument as torch takes them (the model's inputs are export's
    flattened ``feats_0``, ``feats_1``, ``norm_scale``, ...): srcore bound the list to ``feats_0`` and
    reported the rest missing. The flattened call still binds, also after a .srm round trip; a call of
    another structure is an input error naming the argument."""
    ref, ep, args, kwargs, _shapes, _others = exported("pytree_inputs")
    model = srcore.from_torch(ep)
    assert tuple(s.name for s in model.input_specs) == ("feats_0", "feats_1", "norm_scale", "norm_shift", "bias")
    path = str(tmp_path / "m.srm")
    srcore.save(model, path)
    with torch.no_grad():
        want = ref(*args, **kwargs).numpy()
    (f0, f1), norm = to_numpy(args)
    bias = kwargs["bias"].numpy()
    for m in (model, srcore.load(path)):
        sm = srcore.StaticModule(m, backends=("cpu",))
        for got in (sm([f0, f1], norm, bias=bias), sm((f0, f1), dict(reversed(norm.items())), bias=bias),
                    sm(f0, f1, norm["scale"], norm["shift"], bias), sm(f0, f1, norm["scale"], norm["shift"], bias=bias)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(srcore.SrcoreInputError, match=r"argument 0: a list or tuple of 2 expected.*a list of 3"):
        sm([f0, f1, f1], norm, bias=bias)
    with pytest.raises(srcore.SrcoreInputError, match=r"argument 1: a dict with keys \['scale', 'shift'\]"):
        sm([f0, f1], {"scale": norm["scale"]}, bias=bias)
    with pytest.raises(srcore.SrcoreInputError, match="missing keyword argument 'bias'"):
        sm([f0, f1], norm)
    with pytest.raises(srcore.SrcoreInputError, match="unknown keyword argument.*bais"):
        sm([f0, f1], norm, bais=bias)


def test_buffers_mutated_in_forward_are_refused_naming_them(exported):
    """A call counter and a moving average updated in forward: the program's outputs include the new
    buffers; a static model has no state to keep them in, so from_torch refuses, naming each buffer
    and the program (BatchNorm's running stats in eval are read only and convert)."""
    _ref, ep, *_ = exported("buffer_mutation")
    with pytest.raises(srcore.ConversionError) as e:
        srcore.from_torch(ep)
    msg = str(e.value)
    assert "ExportedProgram" in msg and "mutates 'calls'" in msg and "mutates 'ema'" in msg


# -- frozen TorchScript of scripted modules ------------------------------------------------------------

FREEZES = ("freeze", "freeze_nonum", "optimize_for_inference", "saved")


def _frozen(script, how: str, tmp_path):
    if how == "freeze":
        return torch.jit.freeze(script)
    if how == "freeze_nonum":
        return torch.jit.freeze(script, optimize_numerics=False)
    if how == "optimize_for_inference":
        return torch.jit.optimize_for_inference(script)
    path = str(tmp_path / "frozen.pt")
    torch.jit.save(torch.jit.freeze(script), path)
    return path


def _frozen_cells():
    out = []
    for i, name in enumerate(FROZEN):
        for j, how in enumerate(FREEZES):
            for backend in BACKENDS:
                default = j == (i if backend == "cpu" else i + 1) % len(FREEZES)
                out.append(_param(f"{name}-{how}-{backend}", name, how, backend, default=default))
    return out


@pytest.fixture(scope="module")
def scripted():
    cache = {}

    def get(name):
        if name not in cache:
            m, inputs, dims, others = FROZEN[name]()
            cache[name] = (m, torch.jit.script(m), inputs, dims, others)
        return cache[name]
    return get


@pytest.mark.parametrize("name,how,backend", _frozen_cells())
def test_frozen_scripted_matches_torch(name, how, backend, scripted, tmp_path):
    """Scripted (``if`` on shapes, ModuleList loops, while loops, an Optional argument kept), frozen,
    converted with dynamic dims: at the example, at other shapes (another branch), the example again."""
    m, script, inputs, dims, others = scripted(name)
    sm = srcore.StaticModule(srcore.from_torchscript(_frozen(script, how, tmp_path), inputs, dynamic_dims=dims),
                             options=_options(backend))
    for i, xs in enumerate([inputs, *others, inputs]):
        assert_close(run(sm, xs), torch_outputs(m, xs), f"{name} {how} input set {i}")
    _no_fallback(sm, backend)


@pytest.mark.parametrize("name,backend", [_param(f"{n}-{b}", n, b, default=b == "cpu" or n == "dynamic_quant")
                                          for n in QUANTIZED for b in BACKENDS])
def test_quantized_frozen_matches_torch_bit_for_bit(name, backend, fbgemm):
    """Eager static quantization (fused conv+relu, quantized linear) and ``quantize_dynamic`` Linear
    layers, scripted and frozen: torch's numbers exactly (quantized_cpu's integers are torch's)."""
    m, inputs = QUANTIZED[name]()
    want = torch_outputs(m, inputs)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.freeze(torch.jit.script(m)), inputs),
                             options=_options(backend))
    got = run(sm, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    _no_fallback(sm, backend)
