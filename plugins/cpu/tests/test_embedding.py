"""embedding vs torch, and the dropout family (identity in eval, refused in training)."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import ArgInfo, NodeInfo, Specialized  # noqa: E402
from srcore_cpu.kernels import dropout as D  # noqa: E402
from srcore_cpu.kernels import embedding as K  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(0)
T = torch.from_numpy


@pytest.mark.parametrize("idx_shape", [(5,), (2, 3), ()])
@pytest.mark.parametrize("wdtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("idtype", [np.int64, np.int32])
def test_embedding(idx_shape, wdtype, idtype):
    w = (RNG.standard_normal((10, 4)) * 10).astype(wdtype)
    idx = np.asarray(RNG.integers(0, 10, idx_shape), dtype=idtype)
    exp = torch.embedding(T(w), T(idx), 0).numpy()
    r = K.embedding(w, idx, 0)
    assert r.dtype == exp.dtype and r.shape == exp.shape
    np.testing.assert_array_equal(r, exp)
    buf = np.zeros(exp.shape, wdtype)
    assert K.embedding(w, idx, -1, False, False, out=buf) is buf
    np.testing.assert_array_equal(buf, exp)


def test_embedding_index_out_of_range_is_an_error_as_in_torch():
    w = RNG.standard_normal((10, 4)).astype(np.float32)
    for bad in (-1, 10):
        idx = np.array([[0, bad]], np.int64)
        with pytest.raises(IndexError):
            torch.embedding(T(w), T(idx))
        with pytest.raises(srcore.KernelError, match=f"embedding: index {bad} is out of range"):
            K.embedding(w, idx)
    assert K.embedding(w, np.zeros((0, 3), np.int64)).shape == (0, 3, 4)


@pytest.mark.parametrize("op", ["dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"])
def test_dropout_eval_is_identity(op):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(D.dropout(x, 0.5, False), getattr(torch, op)(T(x), 0.5, False).numpy())
    assert D.dropout(x, 0.5, False) is x
    with pytest.raises(srcore.KernelError, match="training-mode dropout is not supported"):
        D.dropout(x, 0.5, True)


def test_dropout_matcher():
    def node(train):
        return NodeInfo("aten::dropout", None, (ArgInfo("input", TensorType()), ArgInfo("p", None, True, 0.1),
                                                ArgInfo("train", None, train != "<var>", train)), ())
    spec = D.dropout_matcher(node(False))
    assert isinstance(spec, Specialized) and spec.args == (0,)
    x = np.ones(3)
    assert spec.fn(x) is x
    assert D.dropout_matcher(node(True)) is D.dropout
    assert D.dropout_matcher(node("<var>")) is D.dropout


def test_decl():
    from srcore_cpu.decl import dropout, embedding
    assert {k.op for k in dropout.KERNELS} == {"aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
                                               "aten::feature_alpha_dropout"}
    assert all(k.kind == "native" for k in dropout.KERNELS)
    for k in dropout.KERNELS + embedding.KERNELS:
        mod, _, attr = k.impl.partition(":")
        assert callable(getattr(__import__(mod, fromlist=[attr]), attr))
