"""A benchmark model's inputs and reference outputs on disk, and the comparison of a runner's outputs.

``inputs.npz`` holds the example inputs in call order, named as the module's ``forward`` names its
parameters (those names are the ONNX graph's input names too); ``refs.npz`` holds torch eager's
outputs flattened in order (``out0``, ``out1``, ...). Any count and dtype (int64 token ids, bool
masks, float32 images).
"""
from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np

INPUTS, REFS = "inputs.npz", "refs.npz"


def input_names(module, count: int) -> list[str]:
    """``forward``'s parameter names for ``count`` positional inputs (``x``, ``x1``... if it takes ``*args``)."""
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:count]]
    return names + [f"x{i}" for i in range(len(names), count)]


def flatten_outputs(y) -> list[np.ndarray]:
    """A runner's result (tensor, array, ORT list, nested tuples) as a flat list of numpy arrays."""
    if isinstance(y, (tuple, list)):
        return [a for item in y for a in flatten_outputs(item)]
    if isinstance(y, dict):
        return [a for k in y for a in flatten_outputs(y[k])]
    if hasattr(y, "detach"):
        y = y.detach()
    return [y.numpy() if hasattr(y, "numpy") and not isinstance(y, np.ndarray) else np.asarray(y)]


def save_inputs(art: Path, names: list[str], arrays: list[np.ndarray]) -> None:
    np.savez(art / INPUTS, **dict(zip(names, arrays)))


def load_inputs(art: Path) -> tuple[list[str], list[np.ndarray]]:
    """``(names, arrays)`` in call order."""
    with np.load(art / INPUTS) as z:
        return list(z.files), [z[k] for k in z.files]


def save_refs(art: Path, outputs: list[np.ndarray]) -> None:
    np.savez(art / REFS, **{f"out{i}": a for i, a in enumerate(outputs)})


def load_refs(art: Path) -> list[np.ndarray]:
    with np.load(art / REFS) as z:
        return [z[f"out{i}"] for i in range(len(z.files))]


def max_rel_err(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    """The worst output's max |got - want| / max |want| (infinities must match; integers exactly).

    ``inf`` when the output count, a shape or an integer output differs."""
    if len(got) != len(want):
        return float("inf")
    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return float("inf")
        if w.dtype.kind in "biu":
            if not np.array_equal(g, w):
                return float("inf")
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        finite = np.isfinite(w64)
        if not np.array_equal(g64[~finite], w64[~finite], equal_nan=True):
            return float("inf")
        if finite.any():
            scale = max(float(np.abs(w64[finite]).max()), 1e-30)
            worst = max(worst, float(np.abs(g64[finite] - w64[finite]).max()) / scale)
    return worst
