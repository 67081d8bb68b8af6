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
