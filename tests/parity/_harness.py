"""Shared helpers of the parity tests: convert, round-trip through .srm, run, compare with torch."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import torch

import srcore

EXECUTORS = ("codegen", "interpreter")
PLANNERS = ("standard_resizing", "precomputed_offsets")
COMBOS = [(e, p) for e in EXECUTORS for p in PLANNERS]
RTOL = 1e-4


def round_trip(model: srcore.Model) -> srcore.Model:
    """Save ``model`` to a .srm file and load it back (the tests run the loaded copy)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.srm")
        srcore.save(model, path)
        return srcore.load(path)


def frozen_file(script, directory: str) -> str:
    """``script`` frozen as Static Runtime users hold it, saved with ``torch.jit.save``: the path."""
    path = os.path.join(directory, "frozen.pt")
    torch.jit.save(torch.jit.freeze(script.eval()), path)
    return path


def torch_outputs(module, inputs) -> list[np.ndarray]:
    with torch.no_grad():
        out = module(*inputs)
    return flatten(out)


def flatten(out) -> list:
    if isinstance(out, (tuple, list)):
        return [y for o in out for y in flatten(o)]
    if isinstance(out, dict):
        return [y for k in out for y in flatten(out[k])]
    if isinstance(out, torch.Tensor):
        return [tensor_numpy(out.detach())]
    return [np.asarray(out)]


def tensor_numpy(t: torch.Tensor) -> np.ndarray:
    """``t`` as a numpy array; bfloat16 (numpy has none) as ml_dtypes' bfloat16, bit for bit."""
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def to_numpy(inputs) -> list:
    return [_np_value(t) for t in inputs]


def _np_value(t):
    """A torch input as srcore takes it: tensors (also inside lists, tuples and dicts) as arrays."""
    if isinstance(t, torch.Tensor):
        return tensor_numpy(t.detach()).copy()
    if isinstance(t, (list, tuple)):
        return type(t)(_np_value(x) for x in t)
    if isinstance(t, dict):
        return {k: _np_value(v) for k, v in t.items()}
    return t


def build(model: srcore.Model, executor: str, planner: str) -> srcore.StaticModule:
    return srcore.StaticModule(model, options=srcore.Options(executor=executor, memory_planner_algorithm=planner))


def run(sm: srcore.StaticModule, inputs) -> list[np.ndarray]:
    out = sm(*to_numpy(inputs))
    # copy: outputs may alias planned memory that the next run reuses
    return [np.array(o, copy=True) for o in flatten_np(out)]


def flatten_np(out) -> list:
    if isinstance(out, (tuple, list)):
        return [y for o in out for y in flatten_np(o)]
    if isinstance(out, dict):
        return [y for k in out for y in flatten_np(out[k])]
    return [np.asarray(out)]


def max_rel_err(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want|: relative to the output's scale (not elementwise, where
    values near zero would make any rounding "large"); an all-zero output compares absolutely."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    finite = np.isfinite(want)
    if not finite.any():
        return 0.0
    # infinities (masked scores) and NaNs must match exactly (NaN == NaN here, or a NaN torch
    # gives could never match); the scale comes from the finite values
    if not np.array_equal(got[~finite], want[~finite], equal_nan=True):
        return float("inf")
    got, want = got[finite], want[finite]
    scale = float(np.max(np.abs(want)))
    if scale == 0.0:
        scale = 1.0
    return float(np.max(np.abs(got - want))) / scale


#: per element: |got - want| <= ELEM_RTOL * |want| + ELEM_FLOOR * max|want| (the floor covers values
#: that cancel to near zero, where a relative bound means nothing)
ELEM_RTOL = 1e-4
ELEM_FLOOR = 1e-5


def elementwise_misses(got: np.ndarray, want: np.ndarray, rtol: float = ELEM_RTOL,
                       floor: float = ELEM_FLOOR) -> str | None:
    """None, or which finite elements are off by more than their own tolerance (a wrong small
    element hides under a bound relative to the largest one)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    finite = np.isfinite(want)
    if not finite.any():
        return None
    g, w = got[finite], want[finite]
    scale = float(np.max(np.abs(w))) or 1.0
    excess = np.abs(g - w) - (rtol * np.abs(w) + floor * scale)
    if not (excess > 0).any():
        return None
    k = int(np.argmax(excess))
    return (f"{int((excess > 0).sum())} element(s) off by more than {rtol:g} x itself + "
            f"{floor:g} x max|torch|, e.g. {g[k]:.6g} vs torch {w[k]:.6g}")


def assert_close(got: list, want: list, what: str = "", rtol: float = RTOL) -> None:
    """Outputs equal torch's: ints exactly, floats within ``rtol`` of the output's scale and each
    element within its own bound (both looser by ``rtol / RTOL`` when ``rtol`` is given: half
    precision models)."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, torch has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"{what} output {i}: shape {g.shape}, torch {w.shape}"
        if w.dtype.kind in "biu":
            assert g.dtype == w.dtype, f"{what} output {i}: dtype {g.dtype}, torch {w.dtype}"
            np.testing.assert_array_equal(g, w, err_msg=f"{what} output {i}")
        else:
            assert g.dtype == w.dtype, f"{what} output {i}: dtype {g.dtype}, torch {w.dtype}"
            assert np.array_equal(np.isfinite(g), np.isfinite(w)), f"{what} output {i}: non-finite elements differ"
            err = max_rel_err(g, w)
            assert err <= rtol, f"{what} output {i}: max relative error {err:.3g} > {rtol}"
            loose = rtol / RTOL
            bad = elementwise_misses(g, w, ELEM_RTOL * loose, ELEM_FLOOR * loose)
            assert bad is None, f"{what} output {i}: {bad}"


_BENCH_CASES: dict = {}


def bench_case(name: str):
    """``(module, torch inputs, srcore model)`` for the bench model ``name`` through TorchScript
    (traced with grad off or scripted, as its metadata says) and a ``.srm`` round trip; made once
    per process."""
    if name not in _BENCH_CASES:
        from benchmarks.models import MODELS

        builder, meta = MODELS[name]
        m, inputs = builder()
        src = m
        if meta["torchscript"] == "trace":
            with torch.no_grad():
                src = torch.jit.trace(m, inputs, check_trace=False)
        _BENCH_CASES[name] = (m, inputs, round_trip(srcore.from_torchscript(src, inputs)))
    return _BENCH_CASES[name]


def zoo_case(name: str):
    """``(module, torch inputs, other input sets, srcore model)`` for the zoo model ``name`` through
    TorchScript (scripted or traced, as the case says, with its dynamic dims) and a ``.srm`` round trip."""
    from parity_models import ZOO

    case = ZOO[name]
    m, inputs, others = case.build()
    src = torch.jit.script(m) if case.torchscript == "script" else torch.jit.trace(m, inputs)
    return m, inputs, others, round_trip(srcore.from_torchscript(src, inputs, dynamic_dims=case.dynamic))


def assert_matches_torch(sm: srcore.StaticModule, module, inputs, others, what: str) -> None:
    """``sm`` answers as torch eager does on ``inputs`` (twice: the second run reuses the arena)
    and on every other input set."""
    want = torch_outputs(module, inputs)
    assert_close(run(sm, inputs), want, what)
    assert_close(run(sm, inputs), want, what + ", run 2")
    for i, other in enumerate(others):
        assert_close(run(sm, other), torch_outputs(module, other), f"{what}, input set {i + 2}")
