"""srcore-quantized as a plugin: its records, static dispatch of mixed graphs by dtype (default backends,
no option), planned quantized intermediates, and a quantized graph run against torch."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import srcore
import srcore_quantized as q
from srcore.ir import QParams
from srcore.plugin import DType, Kernel
from srcore.qarray import QuantizedArray
from srcore_quantized.decl import KERNELS

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

GRAPH = """graph(%x : Float(2, 8, 6, 6)):
  %s : float = prim::Constant[value=0.05]()
  %z : int = prim::Constant[value=64]()
  %dt : int = prim::Constant[value=13]()
  %q : Tensor = aten::quantize_per_tensor(%x, %s, %z, %dt)
  %r : Tensor = aten::relu(%q)
  %k : int[] = prim::Constant[value=[2, 2]]()
  %pz : int[] = prim::Constant[value=[0, 0]]()
  %d1 : int[] = prim::Constant[value=[1, 1]]()
  %f : bool = prim::Constant[value=0]()
  %p : Tensor = aten::max_pool2d(%r, %k, %k, %pz, %d1, %f)
  %a : Tensor = quantized::add(%p, %p, %s, %z)
  %c : float = prim::Constant[value=0.3]()
  %as : Tensor = quantized::add_scalar(%a, %c)
  %sg : Tensor = aten::sigmoid(%as)
  %one : int = prim::Constant[value=1]()
  %fl : Tensor = aten::flatten(%sg, %one, %one)
  %d : Tensor = aten::dequantize(%fl)
  %e : Tensor = aten::exp(%d)
  return (%e, %fl)
"""


@pytest.mark.one_pass
def test_records_declare_backend_dtypes_and_kernels_of_declared_ops():
    assert [d.name for d in q.srcore_dtypes()] == ["quint8", "qint8", "qint32"]
    assert all(isinstance(d, DType) and d.kind == "quantized" for d in q.srcore_dtypes())
    assert [b.name for b in q.srcore_backends()] == ["quantized_cpu"]
    kernels = list(q.srcore_kernels())
    assert kernels == KERNELS and all(isinstance(k, Kernel) and k.backend == "quantized_cpu" for k in kernels)
    declared = srcore.get_plugin_manager().registry.declared
    for k in kernels:
        assert k.op in declared or k.op + "." in declared or any(d.startswith(k.op + ".") for d in declared), k.op
        for ref in (k.impl, k.matcher):   # a matcher that does not import breaks every model with the op
            if ref is not None:
                mod, _, attr = ref.partition(":")
                assert callable(getattr(importlib.import_module(mod), attr, None)), ref
        # a kernel that takes quantized values never accepts a node made only of float tensors; the row-wise
        # embeddings take none (fused uint8 rows): quantized:: ops no other backend has, nothing to take from
        if k.op.startswith(("quantized::embedding_bag_", "quantized::qembedding_")):
            continue
        assert any(d in k.dtypes for d in ("quint8", "qint8", "qint32")), k.op


def _reference(x):
    t = torch.quantize_per_tensor(torch.from_numpy(x), 0.05, 64, torch.quint8)
    t = torch.nn.functional.max_pool2d(torch.relu(t), 2)
    t = torch.ops.quantized.add_scalar(torch.ops.quantized.add(t, t, 0.05, 64), 0.3)
    t = torch.sigmoid(t).flatten(1, 1)
    return np.exp(t.dequantize().numpy()), t   # the float tail on numpy, as cpu computes it


def test_mixed_graph_dispatches_by_dtype_with_default_backends_and_plans_quantized_values():
    torch.backends.quantized.engine = "fbgemm"
    g = srcore.parse_graph(GRAPH)
    sm = srcore.StaticModule(g)          # no backend option
    assert sm.options.backends == ("quantized_cpu", "cpu")
    backend = {pn.node.kind: pn.fn.backend for pn in sm.top.nodes}
    assert backend.pop("aten::exp") == "cpu"
    assert set(backend.values()) == {"quantized_cpu"}
    types = {v.name: v.type for n in sm.graph.all_nodes() for v in n.outputs}
    assert types["as"].qparams == QParams(0.05, 58) and types["sg"].qparams == QParams(1 / 256, 0)
    x = np.random.default_rng(0).standard_normal((2, 8, 6, 6)).astype(np.float32)
    e, fl = sm(x)
    ref_e, ref_fl = _reference(x)
    np.testing.assert_array_equal(e, ref_e)
    assert isinstance(fl, QuantizedArray) and fl.qparams == QParams(1 / 256, 0)
    np.testing.assert_array_equal(fl.int_repr(), ref_fl.int_repr().numpy())
    report = sm.memory_report(x)[0]
    assert report["managed_tensors"] >= 4            # quantized intermediates live in the arena
    e2, fl2 = sm(x)                                  # the second run reuses the planned buffers
    np.testing.assert_array_equal(fl2.int_repr(), fl.int_repr())


def test_a_cpu_only_backend_list_names_the_quantized_nodes():
    with pytest.raises(srcore.UnsupportedOpError) as err:
        srcore.StaticModule(srcore.parse_graph(GRAPH), backends=("cpu",))
    text = str(err.value)
    assert "quantized::add" in text and "quint8" in text and "quantized_cpu" in text


def test_quantized_inputs_are_checked_against_the_spec():
    g = srcore.parse_graph("""graph(%x : QUInt8(2, 3)):
  %r : Tensor = aten::relu(%x)
  %d : Tensor = aten::dequantize(%r)
  return (%d)
""")
    sm = srcore.StaticModule(g)
    qa = QuantizedArray(np.arange(6, dtype=np.uint8).reshape(2, 3), "quint8", QParams(0.5, 2))
    np.testing.assert_array_equal(sm(qa), np.maximum(np.arange(6).reshape(2, 3) - 2, 0) * 0.5)
    with pytest.raises(srcore.SrcoreInputError, match="expected a quantized tensor \\(quint8\\), got a plain uint8"):
        sm(np.zeros((2, 3), np.uint8))   # the same shape and storage dtype: still refused
    with pytest.raises(srcore.SrcoreInputError, match="expected dtype quint8, got a quantized tensor of qint8"):
        sm(QuantizedArray(np.zeros((2, 3), np.int8), "qint8", QParams(0.5, 0)))
    t = torch.quantize_per_tensor(torch.arange(6.0).reshape(2, 3), 0.5, 2, torch.quint8)
    np.testing.assert_array_equal(sm(t), torch.relu(t).dequantize().numpy())   # a torch quantized tensor
    f = srcore.StaticModule(srcore.parse_graph("graph(%x : Float(2)):\n  %r : Tensor = aten::relu(%x)\n  return (%r)\n"))
    with pytest.raises(srcore.SrcoreInputError, match="got a quantized tensor \\(quint8\\)"):
        f(QuantizedArray(np.zeros(2, np.uint8), "quint8", QParams(0.5, 2)))


def test_a_node_of_unknown_dtype_keeps_the_most_general_kernel_over_all_backends():
    """quantized_cpu comes first by default; a float node whose dtype propagation cannot tell must
    still get cpu's (more general) kernel, and a quantized value reaching it is refused per call."""
    g = srcore.parse_graph("graph(%x : Tensor):\n  %r : Tensor = aten::relu(%x)\n  return (%r)\n")
    sm = srcore.StaticModule(g)
    (pn,) = sm.top.nodes
    assert pn.fn.backend == "cpu"
    np.testing.assert_array_equal(sm(np.array([-1.0, 2.0], np.float32)), [0.0, 2.0])
