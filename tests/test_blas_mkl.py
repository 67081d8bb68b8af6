"""srcore's shared MKL loader (srcore.blas.mkl, ``srcore.plugin.mkl``): the runtime found and loaded
once, its packed SGEMM against numpy in float64, bad operands refused, the per-thread counts."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from srcore import KernelError
from srcore.plugin import mkl

lib = mkl.library()
pytestmark = [pytest.mark.one_pass,
              pytest.mark.skipif(lib is None, reason="no libmkl_rt (the optional mkl package) here")]
RNG = np.random.default_rng(11)


def rand(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


def test_loaded_once_on_the_layer_asked_for():
    assert mkl.library() is lib
    assert lib.requested_layer in (mkl.THREADING_GNU, mkl.THREADING_SEQUENTIAL)
    assert lib.layer == lib.requested_layer   # nothing else ran MKL in the test process first
    assert any("mkl_rt" in p for p in mkl.library_paths())


@pytest.mark.parametrize("layout", ["c", "f"])
@pytest.mark.parametrize("m", [1, 7, 33])
def test_packed_weight_product_matches_numpy(layout, m):
    """``pack_b`` of a (k, n) weight, C-contiguous or a transposed row-major (n, k) one, then
    ``cblas_sgemm_compute`` (and ``cblas_sgemm`` on the same flags): ``x @ wT``."""
    k, n = 45, 19
    wT = rand(k, n) if layout == "c" else rand(n, k).T
    packed, trans, ld = mkl.pack_b(lib, wT, m)
    assert (trans, ld) == ((mkl.NO_TRANS, n) if layout == "c" else (mkl.TRANS, k))
    x = rand(m, k)
    want = x.astype(np.float64) @ wT.astype(np.float64)
    out = np.full((m, n), np.nan, np.float32)
    prev = mkl.swap_threads(lib, 1)
    try:
        lib.cblas_sgemm_compute(mkl.ROW_MAJOR, mkl.NO_TRANS, mkl.PACKED, m, n, k, x.ctypes.data, k,
                                packed.ctypes.data, ld, 0.0, out.ctypes.data, n)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
        out2 = np.full((m, n), np.nan, np.float32)
        lib.cblas_sgemm(mkl.ROW_MAJOR, mkl.NO_TRANS, trans, m, n, k, 1.0, x.ctypes.data, k, wT.ctypes.data, ld,
                        0.0, out2.ctypes.data, n)
        np.testing.assert_allclose(out2, want, rtol=1e-5, atol=1e-5)
    finally:
        mkl.swap_threads(lib, prev)


@pytest.mark.parametrize("wT", [np.ones((4, 3)), np.ones((4, 6), np.float32)[:, ::2], np.ones(4, np.float32)],
                         ids=["float64", "strided", "1-D"])
def test_pack_refuses_what_cblas_cannot_read(wT):
    with pytest.raises(KernelError, match="MKL packs"):
        mkl.pack_b(lib, wT, 2)


def test_intra_op_threads_from_the_environment(monkeypatch):
    for var in ("MKL_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    assert mkl.intra_op_threads() == 1
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    monkeypatch.setenv("MKL_NUM_THREADS", "many")   # not a count: the next variable decides
    assert mkl.intra_op_threads() == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert mkl.intra_op_threads() == 3


def test_thread_counts_are_per_calling_thread():
    """``set_threads`` and ``swap_threads`` set the calling thread's count only (MKL's own report of
    the previous count is the check); ``swap_threads`` hands the previous one back."""
    seen = {}

    def worker():
        mkl.set_threads(lib, 2)
        seen["after_set"] = mkl.swap_threads(lib, 3)
        seen["after_swap"] = mkl.swap_threads(lib, 2)   # back: set_threads' record holds again

    main_prev = mkl.swap_threads(lib, 1)
    try:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert seen == {"after_set": 2, "after_swap": 3}
        assert mkl.swap_threads(lib, 1) == 1   # this thread's count untouched by the worker's
    finally:
        mkl.swap_threads(lib, main_prev)
