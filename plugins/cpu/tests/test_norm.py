"""norm kernels vs torch: batch_norm (+ eval matcher), native variants, layer/group/instance norm."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore.plugin import Specialized  # noqa: E402
from cpu_kernel_util import node, make_rand  # noqa: E402
from srcore_cpu.kernels import norm as K  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(0)
rand = make_rand(RNG)
aten = torch.ops.aten


def T(a):
    return None if a is None else torch.from_numpy(a)


def close(a, b):
    tol = 1e-4 if b.dtype == np.float32 else 1e-10
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def both(fn, exp, *args):
    close(fn(*args), exp)
    buf = np.full(exp.shape, np.nan, exp.dtype)
    assert fn(*args, out=buf) is buf
    close(buf, exp)


def bn_params(C, dtype, affine=True):
    w, b = (rand(C, dtype=dtype), rand(C, dtype=dtype)) if affine else (None, None)
    return w, b, rand(C, dtype=dtype), RNG.uniform(0.5, 2, C).astype(dtype)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5), (1, 3, 2, 2, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_eval_and_matcher(shape, dtype, affine):
    x = rand(*shape, dtype=dtype)
    w, b, m, v = bn_params(3, dtype, affine)
    exp = aten.batch_norm(T(x), T(w), T(b), T(m), T(v), False, 0.1, 1e-3, False).numpy()
    both(K.batch_norm, exp, x, w, b, m, v, False, 0.1, 1e-3, False)
    spec = K.batch_norm_matcher(node("aten::batch_norm", input="<var>", weight=w, bias=b, running_mean=m,
                                     running_var=v, training=False, momentum=0.1, eps=1e-3, cudnn_enabled=False))
    assert isinstance(spec, Specialized) and spec.args == (0,)
    both(spec.fn, exp, x)


def test_batch_norm_matcher_falls_back_to_generic():
    w, b, m, v = bn_params(3, np.float32)
    base = dict(input="<var>", weight=w, bias=b, running_mean=m, running_var=v, training=False, momentum=0.1,
                eps=1e-5, cudnn_enabled=False)
    assert K.batch_norm_matcher(node("aten::batch_norm", **{**base, "training": True})) is K.batch_norm
    assert K.batch_norm_matcher(node("aten::batch_norm", **{**base, "running_var": "<var>"})) is K.batch_norm
    assert K.batch_norm_matcher(node("aten::batch_norm", **{**base, "running_mean": None,
                                                            "running_var": None})) is K.batch_norm


def test_batch_norm_eval_needs_running_stats():
    x = rand(4, 3, 5)
    with pytest.raises(RuntimeError):
        aten.batch_norm(T(x), None, None, None, None, False, 0.1, 1e-5, False)
    with pytest.raises(srcore.KernelError, match="running_mean"):
        K.batch_norm(x, None, None, None, None, False, 0.1, 1e-5, False)


@pytest.mark.parametrize("training,stats", [(True, True), (True, False)])
def test_batch_norm_batch_statistics(training, stats):
    x = rand(4, 3, 5)
    w, b, m, v = bn_params(3, np.float32)
    m, v = (m, v) if stats else (None, None)
    exp = aten.batch_norm(T(x), T(w), T(b), T(m.copy()) if stats else None, T(v.copy()) if stats else None,
                          training, 0.1, 1e-5, False).numpy()
    both(K.batch_norm, exp, x, w, b, m, v, training, 0.1, 1e-5, False)


def test_native_batch_norm_variants():
    x = rand(2, 3, 4, 4)
    w, b, m, v = bn_params(3, np.float32)
    exp = aten._native_batch_norm_legit_no_training(T(x), T(w), T(b), T(m), T(v), 0.1, 1e-5)
    r = K._native_batch_norm_legit_no_training(x, w, b, m, v, 0.1, 1e-5)
    close(r[0], exp[0].numpy())
    assert r[1].shape == (0,) and r[2].shape == (0,)
    bufs = tuple(np.empty(e.shape, np.float32) for e in exp)
    assert K._native_batch_norm_legit_no_training(x, w, b, m, v, 0.1, 1e-5, out=bufs) is bufs
    close(bufs[0], exp[0].numpy())
    for training in (False, True):
        exp = aten.native_batch_norm(T(x), T(w), T(b), T(m.copy()), T(v.copy()), training, 0.1, 1e-5)
        r = K.native_batch_norm(x, w, b, m, v, training, 0.1, 1e-5)
        for a, e in zip(r, exp):
            close(a, e.numpy())


@pytest.mark.parametrize("shape,ns", [((2, 5, 8), [8]), ((2, 5, 8), [5, 8]), ((8,), [8]), ((3, 2, 4, 6), [6])])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(shape, ns, dtype, affine):
    x = rand(*shape, dtype=dtype) * 3 + 1
    w, b = (rand(*ns, dtype=dtype), rand(*ns, dtype=dtype)) if affine else (None, None)
    both(K.layer_norm, aten.layer_norm(T(x), ns, T(w), T(b), 1e-5).numpy(), x, ns, w, b, 1e-5)
    exp = aten.native_layer_norm(T(x), ns, T(w), T(b), 1e-5)
    r = K.native_layer_norm(x, ns, w, b, 1e-5)
    for a, e in zip(r, exp):
        close(a, e.numpy())
    bufs = tuple(np.empty(e.shape, dtype) for e in exp)
    assert K.native_layer_norm(x, ns, w, b, 1e-5, out=bufs) is bufs
    for a, e in zip(bufs, exp):
        close(a, e.numpy())


@pytest.mark.parametrize("shape,G", [((2, 6, 4, 4), 3), ((2, 6, 5), 6), ((1, 4, 3, 3), 1), ((3, 4), 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(shape, G, affine):
    x = rand(*shape)
    C = shape[1]
    w, b = (rand(C), rand(C)) if affine else (None, None)
    both(K.group_norm, aten.group_norm(T(x), G, T(w), T(b), 1e-5).numpy(), x, G, w, b, 1e-5)
    # a non-contiguous out
    exp = aten.group_norm(T(x), G, T(w), T(b), 1e-5).numpy()
    big = np.zeros(shape + (2,), np.float32)
    view = big[..., 0]
    assert K.group_norm(x, G, w, b, 1e-5, out=view) is view
    close(view, exp)


@pytest.mark.parametrize("use_input_stats", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_instance_norm(use_input_stats, affine):
    x = rand(2, 3, 4, 5)
    w, b, m, v = bn_params(3, np.float32, affine)
    exp = aten.instance_norm(T(x), T(w), T(b), T(m.copy()), T(v.copy()), use_input_stats, 0.1, 1e-5,
                             False).numpy()
    both(K.instance_norm, exp, x, w, b, m, v, use_input_stats, 0.1, 1e-5, False)


def test_decl():
    from srcore_cpu.decl import norm as D
    ops = {k.op for k in D.KERNELS}
    assert {"aten::batch_norm", "aten::layer_norm", "aten::native_layer_norm", "aten::group_norm",
            "aten::instance_norm"} <= ops
    for k in D.KERNELS:
        for ref in (k.impl, k.matcher):
            if ref:
                mod, _, attr = ref.partition(":")
                assert callable(getattr(__import__(mod, fromlist=[attr]), attr))
