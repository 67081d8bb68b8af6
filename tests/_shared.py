"""Where the files shared by the steering repository are: ``../shared`` from the project root.

A git worktree of the project (``/work/wt/NAME``) has no ``../shared`` of its own: the main
checkout's is used (found through git's common directory). A test that needs a shared file
calls :func:`require_shared`, which fails under CI (``CI=true``) and skips, with the path, elsewhere.
"""
from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """``../shared`` beside the project root (or beside the main checkout of a worktree)."""
    candidates = [ROOT.parent / "shared"]
    try:
        common = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-common-dir"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
        if common:
            candidates.append((ROOT / common).resolve().parent.parent / "shared")
    except (OSError, subprocess.SubprocessError):
        pass
    return next((c for c in candidates if c.is_dir()), candidates[0])


def require_shared(relative: str) -> Path:
    """The shared file ``relative`` (e.g. ``bench/models.py``); a failure under CI when it is missing."""
    path = shared_dir() / relative
    if not path.exists():
        msg = f"shared file {path} is missing (expected ../shared beside the project root)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def bench_model_via_torchscript(name: str):
    """``(model, inputs, reference)``: the bench model ``name`` of ``benchmarks/models.py`` through
    TorchScript (traced or scripted, as its metadata says), its example inputs as numpy arrays and
    torch eager's output on them."""
    import torch

    import srcore
    from benchmarks.models import MODELS

    build, meta = MODELS[name]
    m, inputs = build()
    with torch.no_grad():
        ts = torch.jit.trace(m, inputs, check_trace=False) if meta["torchscript"] == "trace" else torch.jit.script(m)
        ref = m(*inputs).numpy()
    return srcore.from_torchscript(ts, inputs), [i.numpy() for i in inputs], ref


def run_in_threads(work, n: int) -> None:
    """Call ``work(k)`` for ``k`` in ``range(n)``, each in a thread of its own, all at once; the first
    exception any of them raised is raised here, in the test's thread."""
    errors: list[BaseException] = []

    def guarded(k):
        try:
            work(k)
        except BaseException as exc:  # a thread's failure would otherwise only be printed
            errors.append(exc)
    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def pointwise_chain(width: int) -> str:
    """IR text of a seven-node pointwise chain on ``Float(batch, width)``; :func:`pointwise_chain_ref`
    computes it in numpy."""
    return f"""graph(%x : Float(batch, {width})):
  %one : int = prim::Constant[value=1]()
  %half : float = prim::Constant[value=0.5]()
  %a : Tensor = aten::add(%x, %x, %one)
  %b : Tensor = aten::mul(%a, %half)
  %c : Tensor = aten::sigmoid(%b)
  %d : Tensor = aten::mul(%c, %x)
  %e : Tensor = aten::tanh(%d)
  %f : Tensor = aten::relu(%e)
  %g : Tensor = aten::sub(%f, %a, %one)
  return (%g)
"""


def pointwise_chain_ref(x: np.ndarray) -> np.ndarray:
    """What :func:`pointwise_chain`'s graph returns for ``x``."""
    a = x + x
    c = 1 / (1 + np.exp(-a * 0.5))
    return np.maximum(np.tanh(c * x), 0) - a


def conv_case(spec, seed: int = 0):
    """Seeded ``(x, weight, bias, residual or None)`` float32 data for a trt_like ``ConvSpec``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(spec.x_shape, np.float32)
    w = (rng.standard_normal(spec.weight_shape) / np.sqrt(np.prod(spec.weight_shape[1:]))).astype(np.float32)
    b = rng.standard_normal(spec.out_channels).astype(np.float32)
    res = rng.standard_normal(spec.out_shape, np.float32) if spec.residual else None
    return x, w, b, res


def conv_reference(spec, x, w, b, res) -> np.ndarray:
    """torch's float64 conv of a ``ConvSpec`` with its residual, relu and activation (hardswish, relu6,
    leaky relu): the reference for the SIMD conv kernels."""
    import torch
    import torch.nn.functional as F

    y = F.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), torch.from_numpy(b).double(),
                 spec.stride, spec.padding, spec.dilation, spec.groups)
    if res is not None:
        y = y + torch.from_numpy(res).double()
    if spec.relu:
        y = y.relu()
    if spec.activation == "hardswish":
        y = F.hardswish(y)
    elif spec.activation == "relu6":
        y = F.relu6(y)
    elif spec.activation == "leaky_relu":
        y = F.leaky_relu(y, spec.negative_slope)
    return y.numpy()
