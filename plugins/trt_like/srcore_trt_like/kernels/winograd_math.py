"""Winograd F(m x m, 3 x 3) transform matrices from interpolation points (Toom-Cook), exact.

``Y = A^T [(G g G^T) . (B^T d B)] A`` for a (m+2) x (m+2) input tile ``d`` and a 3 x 3
kernel ``g`` gives the m x m output tile of the correlation (torch's conv2d). The
matrices come from the points ``p_0..p_{n-2}`` and infinity (n = m + 2):
``A^T[i, j] = p_j^i``; ``G[j, k] = p_j^k / prod_{l != j}(p_j - p_l)``; row j of ``B^T``
holds the coefficients of ``prod_{l != j}(x - p_l)``, its last row those of
``prod_l(x - p_l)``. Computed with Fractions, so the float64 matrices are exact up to
one rounding per entry.

Points: F(2x2) uses (0, 1, -1). F(4x4) uses (0, +-3/2, +-2/3) instead of the usual
(0, +-1, +-2): the same sparsity (so the same number of adds in the kernels) and a
3-4x smaller float32 error on resnet_small's layers, because the transformed tiles are
smaller (largest B^T entry 2.7 vs 5, A^T 3.4 vs 8). Measured with a float32 model of
the transforms against a float64 conv, max|dy| / max|y| over resnet_small's twelve
3x3 stride-1 layers: (0, +-1, +-2) 1.6e-6..4.8e-6, (0, +-3/2, +-2/3) 5.6e-7..1.9e-6,
F(2x2) 2.7e-7..5.1e-7, torch's float32 conv 2.1e-7..4.2e-7; a search over 3060 sets
of points from {+-1, +-2, +-3, +-4, +-1/2, +-1/3, +-1/4, +-3/2, +-2/3} on random data
ranked this set first.
"""
from __future__ import annotations

from fractions import Fraction

import attrs
import numpy as np


def _poly(roots):
    """Coefficients (lowest power first) of prod (x - r) as Fractions."""
    c = [Fraction(1)]
    for r in roots:
        c = [Fraction(0)] + c                       # times x
        for i in range(len(c) - 1):
            c[i] -= r * c[i + 1]
    return c


@attrs.frozen
class WinogradMatrices:
    """The transforms of F(m x m, r x r): ``AT`` (m, n), ``G`` (n, r), ``BT`` (n, n), float64."""
    m: int
    points: tuple
    AT: np.ndarray
    G: np.ndarray
    BT: np.ndarray

    @property
    def n(self) -> int:
        return self.m + 2


def toom_cook(points, m: int, r: int = 3) -> WinogradMatrices:
    """The exact F(m, r) matrices for the finite ``points`` (m + r - 2 of them) and infinity."""
    pts = [Fraction(p) for p in points]
    n = m + r - 1
    if len(pts) != n - 1 or len(set(pts)) != len(pts):
        raise ValueError(f"F({m},{r}) needs {n - 1} distinct finite points, got {points}")
    AT = [[p ** i for p in pts] + [Fraction(int(i == m - 1))] for i in range(m)]
    G, BT = [], []
    for j, p in enumerate(pts):
        others = pts[:j] + pts[j + 1:]
        f = Fraction(1)
        for q in others:
            f *= p - q
        G.append([p ** k / f for k in range(r)])
        BT.append(_poly(others) + [Fraction(0)])
    G.append([Fraction(int(k == r - 1)) for k in range(r)])
    BT.append(_poly(pts))

    def f64(rows):
        return np.array([[float(v) for v in row] for row in rows], np.float64)
    return WinogradMatrices(m, tuple(pts), f64(AT), f64(G), f64(BT))


F2 = toom_cook((0, 1, -1), 2)
F4 = toom_cook((0, Fraction(3, 2), Fraction(-3, 2), Fraction(2, 3), Fraction(-2, 3)), 4)


def transform_weight(w: np.ndarray, mats: WinogradMatrices) -> np.ndarray:
    """(O, C, 3, 3) -> (n*n, O, C) C-contiguous float32 ``G w G^T`` (position r*n + s), computed in
    float64 (one (n*n, 9) x (9, O*C) product: ``(G kron G)[n i + j, 3 k + l] = G[i, k] G[j, l]``)."""
    O, C = w.shape[:2]
    gg = np.kron(mats.G, mats.G)
    u = gg @ w.reshape(O * C, 9).astype(np.float64).T
    return np.ascontiguousarray(u.astype(np.float32).reshape(mats.n * mats.n, O, C))
