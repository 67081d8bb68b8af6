"""srcore-quantized: records, and the conversion kernels against torch."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import srcore_quantized as q
from srcore.errors import KernelError
from srcore.plugin import DType, Kernel
from srcore_quantized.kernels.convert import dequantize_out, quantize_per_tensor
from srcore_quantized.qarray import QuantizedArray

torch = pytest.importorskip("torch")
TORCH_QDTYPES = {"quint8": torch.quint8, "qint8": torch.qint8, "qint32": torch.qint32}
CODES = {"quint8": 13, "qint8": 12, "qint32": 14}


def test_records_declare_backend_dtypes_and_kernels():
    assert [d.name for d in q.srcore_dtypes()] == ["quint8", "qint8", "qint32"]
    assert all(isinstance(d, DType) and d.kind == "quantized" for d in q.srcore_dtypes())
    assert [b.name for b in q.srcore_backends()] == ["quantized_cpu"]
    kernels = list(q.srcore_kernels())
    assert all(isinstance(k, Kernel) and k.backend == "quantized_cpu" for k in kernels)
    assert {k.op for k in kernels} == {"aten::quantize_per_tensor", "aten::dequantize.self"}


@pytest.mark.filterwarnings("ignore:.*quantized tensor creation:UserWarning")
@settings(max_examples=60, deadline=None)
@given(x=arrays(np.float32, st.integers(1, 20), elements=st.floats(-100, 100, width=32)),
       scale=st.floats(0.01, 4.0), zero_point=st.integers(-10, 10),
       qdtype=st.sampled_from(["quint8", "qint8", "qint32"]))
def test_quantize_and_dequantize_match_torch(x, scale, zero_point, qdtype):
    if qdtype == "quint8":
        zero_point = abs(zero_point)
    expected = torch.quantize_per_tensor(torch.from_numpy(x), scale, zero_point, TORCH_QDTYPES[qdtype])
    got = quantize_per_tensor(x, scale, zero_point, CODES[qdtype])
    assert isinstance(got, QuantizedArray) and got.qdtype == qdtype
    np.testing.assert_array_equal(got.int_repr(), expected.int_repr().numpy())
    out = np.empty(x.shape, np.float32)
    assert dequantize_out(got, out=out) is out
    np.testing.assert_allclose(out, expected.dequantize().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dequantize_out(got), out)


def test_quantize_rejects_a_float_dtype_and_dequantize_a_plain_array():
    with pytest.raises(KernelError, match="not a quantized dtype"):
        quantize_per_tensor(np.ones(3, np.float32), 0.1, 0, 6)
    with pytest.raises(KernelError, match="not a quantized tensor"):
        dequantize_out(np.ones(3, np.uint8))


def test_views_keep_quantization_parameters():
    qa = quantize_per_tensor(np.arange(6, dtype=np.float32).reshape(2, 3), 0.5, 3, "quint8")
    row = qa[1]
    assert (row.scale, row.zero_point, row.qdtype) == (0.5, 3, "quint8")
    np.testing.assert_allclose(dequantize_out(row), [3, 4, 5])


@pytest.mark.filterwarnings("ignore:.*quantized tensor creation:UserWarning")
def test_dispatch_sends_quantized_nodes_to_quantized_cpu_and_runs_like_torch():
    from srcore.dispatch import resolve_graph
    from srcore.ir import Graph, TensorType
    from srcore.plugin.manager import PluginManager

    pm = PluginManager().load(entry_points=False)
    pm.register(q, "quantized", dist="srcore-quantized", version="test")
    assert pm.report("quantized").status == "loaded" and not pm.report("quantized").errors
    g = Graph()
    x = g.add_input(TensorType("float32", (4,)), "x")
    args = [g.insert_constant(v) for v in (0.25, 3, 13)]
    qn = g.insert("aten::quantize_per_tensor", [x, *args], [TensorType("quint8", (4,))])
    dq = g.insert("aten::dequantize", [qn.output], [TensorType("float32", (4,))])
    dq.schema = pm.schemas.get("aten::dequantize.self")
    qn.schema = pm.schemas.get("aten::quantize_per_tensor")
    g.register_output(dq.output)
    resolved = resolve_graph(g, pm.kernel_table, ["cpu", "quantized_cpu"])
    assert {rk.backend for rk in resolved.values()} == {"quantized_cpu"}
    data = np.array([-1.0, 0.1, 0.3, 70.0], np.float32)
    qa = resolved[qn].fn(data, 0.25, 3, 13)
    got = resolved[dq].fn(qa, out=np.empty(4, np.float32))
    ref = torch.quantize_per_tensor(torch.from_numpy(data), 0.25, 3, torch.quint8).dequantize().numpy()
    np.testing.assert_array_equal(got, ref)
