"""The shared transposed conv (``srcore.plugin.conv_transpose``) against torch: every form, every
rank, stride / padding / output padding / groups / dilation, a bias or none, batch 1 and 2, an
empty batch; :meth:`ConvTranspose.pick` keeps a form that gives the same result."""
from __future__ import annotations

import numpy as np
import pytest

from srcore import KernelError
from srcore.plugin import conv_transpose as CT

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = pytest.mark.one_pass

_OPS = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}

# (input spatial size, C, O/g, kernel, stride, padding, output padding, groups, dilation, bias)
CASES = {
    "1d": ((7,), 4, 3, (4,), (3,), (1,), (2,), 1, (1,), False),
    "1d_groups_dilated": ((6,), 4, 2, (3,), (2,), (1,), (1,), 2, (2,), True),
    "2d_overlap": ((3, 4), 3, 2, (3, 3), (2, 2), (1, 1), (1, 1), 1, (1, 1), True),
    "2d_apart": ((3, 2), 2, 3, (2, 2), (2, 2), (0, 0), (0, 0), 1, (1, 1), True),
    "2d_groups_dilated": ((4, 3), 4, 3, (3, 2), (2, 1), (2, 0), (1, 0), 2, (2, 1), True),
    "2d_stride3_dilated": ((5, 6), 4, 3, (4, 3), (3, 2), (2, 1), (2, 1), 1, (2, 3), True),
    "3d": ((2, 3, 3), 2, 2, (1, 3, 3), (1, 2, 2), (0, 1, 1), (0, 1, 0), 1, (1, 1, 1), True),
    "3d_apart_groups": ((2, 2, 3), 4, 1, (2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0), 2, (1, 1, 1), False),
}


@pytest.mark.parametrize("form", CT.FORMS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("batch", [pytest.param(1, marks=pytest.mark.full), 2])   # batch 1 in the engine tests too
def test_forms_match_torch(form, case, batch):
    sp, C, Og, k, s, p, op, g, d, has_bias = CASES[case]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((batch, C) + sp, np.float32)
    w = rng.standard_normal((C, Og) + k, np.float32)
    b = rng.standard_normal(Og * g, np.float32) if has_bias else None
    want = _OPS[len(sp)](torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b),
                         s, p, op, g, d).numpy()
    ct = CT.ConvTranspose(w, b, s, p, op, g, d, form)
    assert ct.out_shape(x.shape) == want.shape
    out = np.full(want.shape, np.nan, np.float32)   # every element written
    ct.runner(x.shape)(x, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_an_empty_batch_and_an_empty_input_plane():
    w = np.ones((2, 3, 2, 2), np.float32)
    ct = CT.ConvTranspose(w, np.arange(3, dtype=np.float32), (2, 2), (0, 0), (0, 0), 1, (1, 1))
    ct.runner((0, 2, 3, 3))(np.empty((0, 2, 3, 3), np.float32), np.empty((0, 3, 6, 6), np.float32))
    # a 0-high input with output padding: a (1, 3, 1, 4) output of the bias alone (torch refuses it)
    x = np.empty((1, 2, 0, 2), np.float32)
    ct = CT.ConvTranspose(w, np.arange(3, dtype=np.float32), (2, 2), (0, 0), (1, 0), 1, (1, 1))
    out = np.full(ct.out_shape(x.shape), np.nan, np.float32)
    assert out.shape == (1, 3, 1, 4)
    ct.runner(x.shape)(x, out)
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(3, dtype=np.float32)[None, :, None, None], out.shape))


def test_a_caller_scratch_of_the_wrong_shape_and_an_unknown_form_are_refused():
    w = np.ones((2, 3, 2, 2), np.float32)
    with pytest.raises(KernelError, match="form 'fast'"):
        CT.ConvTranspose(w, None, (2, 2), (0, 0), (0, 0), 1, (1, 1), "fast")
    ct = CT.ConvTranspose(w, None, (2, 2), (1, 1), (0, 0), 1, (1, 1), "fused")
    run = ct.runner((1, 2, 3, 3), own_cols=False)
    with pytest.raises(KernelError, match="cols of shape"):
        run(np.ones((1, 2, 3, 3), np.float32), np.empty(ct.out_shape((1, 2, 3, 3)), np.float32), np.empty((1,), np.float32))


def test_pick_keeps_a_form_with_the_same_result():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4, 5), np.float32)
    w = rng.standard_normal((3, 2, 3, 3), np.float32)
    ct = CT.ConvTranspose(w, None, (2, 2), (1, 1), (1, 0), 1, (1, 1))
    out = np.empty(ct.out_shape(x.shape), np.float32)
    assert ct.pick(x, out) in CT.FORMS and ct.form in CT.FORMS
    ct.runner(x.shape)(x, out)
    want = F.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w), None, 2, 1, (1, 0)).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
