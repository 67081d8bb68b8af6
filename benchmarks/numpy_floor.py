"""Hand-written numpy versions of mlp_tiny, elementwise_chain and mlp_wide: the floor for Python + numpy.

No graph and no dispatch: the numpy calls a perfect code generator would emit.
Each class has ``plain(x)`` (every op allocates its result) and ``out(x)``
(``out=`` into buffers allocated once; the returned array is reused by the
next call). Weights come from a torch ``state_dict`` as numpy arrays (e.g. an
``.npz``), so this module does not import torch.

numpy has no erf: the exact GELU of mlp_wide uses Abramowitz & Stegun 7.1.26
(|error| <= 1.5e-7) in ufuncs; a sigmoid is 1 / (1 + exp(-y)).
"""
from __future__ import annotations

import numpy as np

F32 = np.float32
ZERO, ONE, HALF = F32(0.0), F32(1.0), F32(0.5)
INV_SQRT2 = F32(0.7071067811865476)
# A&S 7.1.26: erf(a) ~= 1 - (a1 t + a2 t^2 + ... + a5 t^5) exp(-a^2), t = 1 / (1 + p a), a >= 0
P = F32(0.3275911)
A = (F32(0.254829592), F32(-0.284496736), F32(1.421413741), F32(-1.453152027), F32(1.061405429))


def _linear_weights(sd, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """(W^T contiguous, b) of an nn.Linear, float32."""
    w = np.ascontiguousarray(np.asarray(sd[f"{prefix}.weight"], dtype=F32).T)
    return w, np.ascontiguousarray(np.asarray(sd[f"{prefix}.bias"], dtype=F32))


class MLPTiny:
    def __init__(self, sd, in_shape=(1, 64)):
        (self.w1, self.b1), (self.w2, self.b2), (self.w3, self.b3) = (
            _linear_weights(sd, p) for p in ("fc1", "fc2", "fc3"))
        n = in_shape[0]
        self.h1 = np.empty((n, self.w1.shape[1]), F32)
        self.h2 = np.empty((n, self.w2.shape[1]), F32)
        self.y = np.empty((n, self.w3.shape[1]), F32)

    def plain(self, x):
        h = np.maximum(x @ self.w1 + self.b1, ZERO)
        h = np.maximum(h @ self.w2 + self.b2, ZERO)
        return h @ self.w3 + self.b3

    def out(self, x):
        h1, h2, y = self.h1, self.h2, self.y
        np.matmul(x, self.w1, out=h1)
        np.add(h1, self.b1, out=h1)
        np.maximum(h1, ZERO, out=h1)
        np.matmul(h1, self.w2, out=h2)
        np.add(h2, self.b2, out=h2)
        np.maximum(h2, ZERO, out=h2)
        np.matmul(h2, self.w3, out=y)
        np.add(y, self.b3, out=y)
        return y


C05, C01, C15 = F32(0.5), F32(0.1), F32(1.5)


class ElementwiseChain:
    """5 blocks of add(x) mul(.5) sigmoid mul(x) tanh add(.1) relu mul(1.5)."""

    def __init__(self, sd=None, in_shape=(1, 128)):
        self.y = np.empty(in_shape, F32)

    @staticmethod
    def _block(y, x):
        y = (y + x) * C05
        y = ONE / (ONE + np.exp(-y))
        y = np.tanh(y * x) + C01
        return np.maximum(y, ZERO) * C15

    def plain(self, x):
        y = x
        for _ in range(5):
            y = self._block(y, x)
        return y

    @staticmethod
    def _block_out(y, x):
        np.add(y, x, out=y)
        np.multiply(y, C05, out=y)
        np.negative(y, out=y)
        np.exp(y, out=y)
        np.add(y, ONE, out=y)
        np.reciprocal(y, out=y)
        np.multiply(y, x, out=y)
        np.tanh(y, out=y)
        np.add(y, C01, out=y)
        np.maximum(y, ZERO, out=y)
        np.multiply(y, C15, out=y)

    def out(self, x):
        y = self.y
        np.copyto(y, x)
        blk = self._block_out
        blk(y, x)
        blk(y, x)
        blk(y, x)
        blk(y, x)
        blk(y, x)
        return y


def erf(x):
    a = np.abs(x)
    t = ONE / (ONE + P * a)
    poly = ((((A[4] * t + A[3]) * t + A[2]) * t + A[1]) * t + A[0]) * t
    return np.sign(x) * (ONE - poly * np.exp(-a * a))


def gelu(x):
    return HALF * x * (ONE + erf(x * INV_SQRT2))


def gelu_out(x, t, u, e):
    """Exact GELU of ``x`` in place, with scratch buffers ``t``, ``u``, ``e`` of its shape."""
    np.multiply(x, INV_SQRT2, out=t)
    np.abs(t, out=t)                      # a
    np.multiply(t, t, out=e)
    np.negative(e, out=e)
    np.exp(e, out=e)                      # exp(-a^2)
    np.multiply(t, P, out=t)
    np.add(t, ONE, out=t)
    np.reciprocal(t, out=t)               # t
    np.multiply(t, A[4], out=u)
    for c in (A[3], A[2], A[1], A[0]):    # Horner
        np.add(u, c, out=u)
        np.multiply(u, t, out=u)
    np.multiply(u, e, out=u)
    np.subtract(ONE, u, out=u)            # erf(a)
    np.copysign(u, x, out=u)              # erf(x / sqrt2)
    np.add(u, ONE, out=u)
    np.multiply(x, u, out=x)
    np.multiply(x, HALF, out=x)
    return x


class MLPWide:
    def __init__(self, sd, in_shape=(64, 1024)):
        (self.w1, self.b1), (self.w2, self.b2), (self.w3, self.b3) = (
            _linear_weights(sd, p) for p in ("fc1", "fc2", "fc3"))
        n, hid = in_shape[0], self.w1.shape[1]
        self.h1 = np.empty((n, hid), F32)
        self.h2 = np.empty((n, self.w2.shape[1]), F32)
        self.y = np.empty((n, self.w3.shape[1]), F32)
        self.t, self.u, self.e = (np.empty((n, hid), F32) for _ in range(3))

    def plain(self, x):
        h = gelu(x @ self.w1 + self.b1)
        h = gelu(h @ self.w2 + self.b2)
        return h @ self.w3 + self.b3

    def out(self, x):
        h1, h2, y = self.h1, self.h2, self.y
        np.matmul(x, self.w1, out=h1)
        np.add(h1, self.b1, out=h1)
        gelu_out(h1, self.t, self.u, self.e)
        np.matmul(h1, self.w2, out=h2)
        np.add(h2, self.b2, out=h2)
        gelu_out(h2, self.t, self.u, self.e)
        np.matmul(h2, self.w3, out=y)
        np.add(y, self.b3, out=y)
        return y


FLOORS = {"mlp_tiny": MLPTiny, "elementwise_chain": ElementwiseChain, "mlp_wide": MLPWide}
