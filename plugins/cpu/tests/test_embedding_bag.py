"""nn.EmbeddingBag's aten::embedding_bag vs torch: sum/mean/max, offsets with empty bags,
include_last_offset, padding_idx, per_sample_weights, and the auxiliary outputs' shapes."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore_cpu.kernels import embedding_bag as EB  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(18)
W = RNG.standard_normal((10, 4)).astype(np.float32)
IDX = np.array([1, 2, 0, 4, 5, 5, 9, 0], np.int64)


def _torch(*args):
    return [t.numpy() for t in torch.ops.aten.embedding_bag.padding_idx(
        torch.from_numpy(W), *[torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args])]


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("offsets,last", [([0, 2, 2, 5], False), ([0, 3, 8], True), ([0], False)])
@pytest.mark.parametrize("padding_idx", [None, 0])
def test_embedding_bag_matches_torch(mode, offsets, last, padding_idx):
    off = np.array(offsets, np.int64)
    got = EB.embedding_bag(W, IDX, off, False, mode, False, None, last, padding_idx)
    want = _torch(IDX, off, False, mode, False, None, last, padding_idx)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    assert [g.shape for g in got] == [w.shape for w in want]
    if mode == 2:
        np.testing.assert_array_equal(got[3], want[3])


def test_embedding_bag_per_sample_weights_and_errors():
    off, psw = np.array([0, 3, 5], np.int64), RNG.random(IDX.shape[0]).astype(np.float32)
    got = EB.embedding_bag(W, IDX, off, False, 0, False, psw, False, None)
    want = _torch(IDX, off, False, 0, False, torch.from_numpy(psw), False, None)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    with pytest.raises(KernelError, match="only supported for mode='sum'"):
        EB.embedding_bag(W, IDX, off, False, 1, False, psw, False, None)
    with pytest.raises(KernelError, match="out of range"):
        EB.embedding_bag(W, np.array([10]), np.array([0]), False, 0, False, None, False, None)


def _jit(mode, last, padding_idx, psw=False, ids="int64"):
    """The compiled kernel the matcher gives a node of these constants (one numba compile per ids dtype)."""
    from srcore.plugin import ArgInfo, NodeInfo, TensorType

    def c(name, value):
        return ArgInfo(name, None, True, value)
    args = (ArgInfo("weight", TensorType("float32", W.shape)), ArgInfo("indices", TensorType(ids, (8,))),
            ArgInfo("offsets", TensorType(ids, (None,))), c("scale_grad_by_freq", False), c("mode", mode),
            c("sparse", False),
            ArgInfo("per_sample_weights", TensorType("float32", (8,))) if psw else c("per_sample_weights", None),
            c("include_last_offset", last), c("padding_idx", padding_idx))
    spec = EB.embedding_bag_matcher(NodeInfo("aten::embedding_bag.padding_idx", None, args, ()))
    assert spec is not None and spec.args == (0, 1, 2)
    return spec.fn


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("offsets,last", [([0, 2, 2, 5], False), ([0, 3, 8], True), ([0], False), ([0, 4, 4, 8], True)])
@pytest.mark.parametrize("padding_idx", [None, 5])
def test_compiled_embedding_bag_matches_torch(mode, offsets, last, padding_idx):
    """The compiled gather-reduce against torch: every output, allocated by the kernel and into out=."""
    off = np.array(offsets, np.int64)
    want = _torch(IDX, off, False, mode, False, None, last, padding_idx)
    fn = _jit(mode, last, padding_idx)
    got = fn(W, IDX, off)
    outs = tuple(np.full(w.shape, -7, w.dtype) for w in want)
    into = fn(W, IDX, off, out=outs)
    assert into is outs
    for g in (got, into):
        assert [x.shape for x in g] == [w.shape for w in want]
        np.testing.assert_allclose(g[0], want[0], rtol=1e-6, atol=1e-6)
        if mode != 0:   # offset2bag, bag_size (and the max's argmax ids) as torch's
            np.testing.assert_array_equal(g[2], want[2])
        if mode == 2:
            np.testing.assert_array_equal(g[3], want[3])


def test_compiled_embedding_bag_weights_int32_nan_and_errors():
    """per_sample_weights, int32 ids, a NaN in a max bag (torch keeps it only as the bag's first row), out-of-range ids and a
    wrong weight count (KernelError), unsorted offsets (the numpy kernel's answer)."""
    off, psw = np.array([0, 3, 5], np.int64), RNG.random(IDX.shape[0]).astype(np.float32)
    got = _jit(0, False, None, psw=True)(W, IDX, off, per_sample_weights=psw)
    want = _torch(IDX, off, False, 0, False, torch.from_numpy(psw), False, None)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    i32, o32 = IDX.astype(np.int32), np.array([0, 2, 6], np.int32)
    got = _jit(1, False, None, ids="int32")(W, i32, o32)
    np.testing.assert_allclose(got[0], _torch(i32, o32, False, 1, False, None, False, None)[0], rtol=1e-6)
    wn = W.copy()
    wn[2, 1] = np.nan
    fn = _jit(2, False, None)
    got = fn(wn, IDX, off)
    want = [t.numpy() for t in torch.ops.aten.embedding_bag.padding_idx(
        torch.from_numpy(wn), torch.from_numpy(IDX), torch.from_numpy(off), False, 2, False, None, False, None)]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[3], want[3])
    np.testing.assert_array_equal(EB.embedding_bag(wn, IDX, off, False, 2, False, None, False, None)[0], want[0])
    wn[1, 1] = np.nan   # a NaN in a bag's first row stays
    want = torch.ops.aten.embedding_bag.padding_idx(
        torch.from_numpy(wn), torch.from_numpy(IDX), torch.from_numpy(off), False, 2, False, None, False, None)[0]
    np.testing.assert_array_equal(fn(wn, IDX, off)[0], want.numpy())
    with pytest.raises(KernelError, match="out of range"):
        fn(W, np.array([10]), np.array([0]))
    with pytest.raises(KernelError, match="per_sample_weights for 8 indices"):
        _jit(0, False, None, psw=True)(W, IDX, off, per_sample_weights=psw[:3])
    rev = np.array([0, 5, 3], np.int64)   # torch fails these (sum and mean; max reads past its bags)
    for call in (lambda o: fn(W, IDX, o), lambda o: EB.embedding_bag(W, IDX, o, False, 2, False, None, False, None)):
        with pytest.raises(KernelError, match="must not decrease"):
            call(rev)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("offsets,message", [([1, 3], r"offsets\[0\] has to be 0"),
                                             ([0, 9], r"offsets\[-1\] can not be greater")])
def test_embedding_bag_refuses_offsets_torch_refuses(compiled, offsets, message):
    off = np.array(offsets, np.int64)
    with pytest.raises(RuntimeError, match=message):   # torch's own refusal, the reference
        _torch(IDX, off, False, 0, False, None, False, None)
    fn = _jit(0, False, None) if compiled else (lambda w, i, o: EB.embedding_bag(w, i, o, False, 0, False, None,
                                                                                 False, None))
    with pytest.raises(KernelError, match=message):
        fn(W, IDX, off)
