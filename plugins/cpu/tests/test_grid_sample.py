"""grid_sampler (F.grid_sample) and affine_grid_generator (F.affine_grid) vs torch: every padding
mode, bilinear, nearest and bicubic, 4-D and 5-D, both align_corners, grids reaching well outside [-1, 1]."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import grid_sample as G  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(15)
MODES = {"bilinear": 0, "nearest": 1}
PADDING = {"zeros": 0, "border": 1, "reflection": 2}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding", list(PADDING))
@pytest.mark.parametrize("mode", list(MODES))
def test_grid_sampler_matches_torch(mode, padding, align_corners, dtype):
    x = RNG.standard_normal((2, 3, 5, 7)).astype(dtype)
    grid = (RNG.uniform(-2.5, 2.5, (2, 4, 6, 2))).astype(dtype)   # far outside too
    grid[0, 0, 0] = [1.0, -1.0]                                    # exact corners
    grid[1, 0, :2] = [[0.0, 0.0], [-1.0, 1.0]]
    check_kernel(G.grid_sampler, lambda t, g, *_: F.grid_sample(t, g, mode, padding, align_corners), x, grid,
                 MODES[mode], PADDING[padding], align_corners, rtol=1e-5 if dtype == "float32" else 1e-10,
                 # float32: a source coordinate up to ~7 px carries ~7 * 2^-24 of rounding, times a slope of
                 # up to ~4 between neighbouring standard-normal values: a few 1e-6 absolute
                 atol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding", list(PADDING))
def test_grid_sampler_bicubic_matches_torch(padding, align_corners):
    """Bicubic (was refused: an ONNX GridSample with mode=bicubic, the fifth held-out zoo): the 16
    taps each read through the padding mode, ATen's A = -0.75."""
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float64)
    grid = RNG.uniform(-1.6, 1.6, (2, 4, 6, 2))
    grid[0, 0, 0] = [1.0, -1.0]
    check_kernel(G.grid_sampler, lambda t, g, *_: F.grid_sample(t, g, "bicubic", padding, align_corners), x, grid,
                 2, PADDING[padding], align_corners, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding", list(PADDING))
@pytest.mark.parametrize("mode", list(MODES))
def test_grid_sampler_5d_matches_torch(mode, padding, align_corners):
    """5-D inputs (trilinear as "bilinear", nearest; was refused: ONNX GridSample at opset 20)."""
    x = RNG.standard_normal((2, 3, 4, 5, 6))
    grid = RNG.uniform(-1.8, 1.8, (2, 3, 2, 4, 3))
    check_kernel(G.grid_sampler, lambda t, g, *_: F.grid_sample(t, g, mode, padding, align_corners), x, grid,
                 MODES[mode], PADDING[padding], align_corners, rtol=1e-10, atol=1e-12)


def test_grid_sampler_refuses_bicubic_5d_and_a_mismatched_grid():
    with pytest.raises(KernelError, match="bicubic"):
        G.grid_sampler(np.zeros((1, 1, 2, 2, 2)), np.zeros((1, 1, 1, 1, 3)), 2, 0, False)
    with pytest.raises(KernelError, match="grid of shape"):
        G.grid_sampler(np.zeros((1, 1, 2, 2, 2)), np.zeros((1, 1, 1, 2)), 0, 0, False)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [[2, 3, 4, 5], [1, 1, 1, 6], [3, 2, 7, 1]])
def test_affine_grid_matches_torch(size, align_corners):
    theta = RNG.standard_normal((size[0], 2, 3)).astype(np.float32)
    check_kernel(G.affine_grid_generator, lambda t, *_: F.affine_grid(t, size, align_corners), theta, size,
                 align_corners)


def test_spatial_transformer_round_trip():
    """affine_grid + grid_sample with the identity transform give the input back."""
    x = RNG.standard_normal((2, 3, 6, 5)).astype(np.float32)
    theta = np.tile(np.array([[1, 0, 0], [0, 1, 0]], np.float32), (2, 1, 1))
    g = G.affine_grid_generator(theta, [2, 3, 6, 5], False)
    np.testing.assert_allclose(G.grid_sampler(x, g, 0, 0, False), x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding", list(PADDING))
@pytest.mark.parametrize("mode", list(MODES))
def test_compiled_grid_sampler_matches_torch(mode, padding, align_corners):
    """The numba kernel (jit_grid_sample, one compiled signature for every mode) vs torch, float32."""
    from srcore_cpu.kernels.jit_grid_sample import GridSampler

    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    grid = RNG.uniform(-2.5, 2.5, (2, 4, 6, 2)).astype(np.float32)
    grid[0, 0, 0] = [1.0, -1.0]
    grid[1, 0, :3] = [[0.0, 0.0], [-1.0, 1.0], [1e20, -1e20]]                 # huge: outside, no int overflow
    grid[1, 1, :2] = [[-1 + 1 / 7, 1 - 3 / 5], [2 / 7 - 1, 3 / 5 - 1]]        # half-pixel points (nearest ties)
    out = np.full((2, 3, 4, 6), np.nan, np.float32)
    got = GridSampler()(x, grid, MODES[mode], PADDING[padding], align_corners, out)
    want = F.grid_sample(torch.from_numpy(x), torch.from_numpy(grid), mode, padding, align_corners).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
