"""A bound conv call's kernel calls packed into one int64 array each (``srcore.plugin.packed_call``):
the packed call writes torch's result (and the plain calls' bits) while the input changes in place,
holds the arrays it points at, and leaves alone what it cannot pack (a read-only array, a call of
few arguments, a function that is no kernel's entry point)."""
import gc

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from srcore.plugin import nchwc, packed_call, simd_dense_nchwc

pytestmark = pytest.mark.one_pass


def _bound_calls(conv, x, out):
    run = conv.bind(x, out)
    for _ in range(2):   # (the entry point is found at a bound call's second run)
        run.run_serial()
    return run.serial_calls()


def test_a_packed_conv_call_gives_torchs_result_and_the_plain_calls_bits():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((15, 16, 3, 3), np.float32)
    b = rng.standard_normal(15, np.float32)
    conv = simd_dense_nchwc.NchwcDenseConv(w, b, 1, 1, blocked_in=True, blocked_out=False)
    x = np.zeros((2, 1, 2, 2, 16), np.float32)
    out = np.empty((2, 15, 2, 2), np.float32)
    plain = _bound_calls(conv, x, out)
    calls = packed_call.packed(plain)
    assert isinstance(calls, packed_call.PackedCalls) and calls.keep is plain
    (fn, args), = calls
    assert len(args) == 1 and args[0].dtype == np.int64   # (one array for the call's 39 arguments)
    for _ in range(3):
        xs = rng.standard_normal((2, 16, 2, 2), np.float32)
        x[...] = nchwc.to_blocked(xs, 16)
        out[...] = np.nan
        fn(*args)
        want = F.conv2d(torch.from_numpy(xs), torch.from_numpy(w), torch.from_numpy(b), padding=1).numpy()
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
        got = out.copy()
        for f, a in plain:
            f(*a)
        np.testing.assert_array_equal(out, got)


def test_the_packed_calls_hold_their_arrays():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((16, 16, 3, 3), np.float32)
    conv = simd_dense_nchwc.NchwcDenseConv(w, None, 1, 1, blocked_in=True, blocked_out=True)
    x = nchwc.to_blocked(rng.standard_normal((1, 16, 4, 4), np.float32), 16)
    out = np.empty((1, 1, 4, 4, 16), np.float32)
    calls = packed_call.packed(_bound_calls(conv, x, out))
    want = out.copy()
    del conv, x, out
    gc.collect()
    np.empty((1, 1, 4, 4, 16), np.float32)[...] = 7.0   # (memory freed here would be reused)
    (fn, args), = calls
    fn(*args)
    np.testing.assert_array_equal(calls.keep[0][1][18].reshape(want.shape), want)


def test_what_cannot_be_packed_stays_as_it_is():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((16, 16, 3, 3), np.float32)
    conv = simd_dense_nchwc.NchwcDenseConv(w, None, 1, 1, blocked_in=True, blocked_out=True)
    x = nchwc.to_blocked(rng.standard_normal((1, 16, 4, 4), np.float32), 16)
    out = np.empty((1, 1, 4, 4, 16), np.float32)
    (fn, args), = _bound_calls(conv, x, out)
    frozen = list(args)
    frozen[0] = args[0].copy()
    frozen[0].flags.writeable = False   # (numba types a read-only array apart: no packed form)
    assert packed_call.packed([(fn, tuple(frozen))]) == [(fn, tuple(frozen))]
    few = (fn, args[:3])
    assert packed_call.packed([few]) == [few]
    other = (print, args)
    assert packed_call.packed([other]) == [other]
    assert packed_call.packed(None) is None
