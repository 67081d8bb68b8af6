"""``check_kernel``: test one kernel against a reference, the way the runtime calls it.

Like tinygrad's ``helper_test_op``: one line per case::

    check_kernel("srcore_cpu.kernels.activation:gelu", torch.nn.functional.gelu, x)
    check_kernel(add, lambda a, b: a + 2 * b, a, b, alpha=2)
    check_kernel("example::scaled_tanh", lambda x: np.tanh(x) * 2, shapes=[(3, 4)], scale=2.0)

Out variants run twice, with ``out=None`` (must allocate and return) and with
a preallocated ``out`` filled with garbage (must write into it and return
it). The inputs must come back unchanged.
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable

import numpy as np

__all__ = ["check_kernel", "node_info", "random_inputs", "resolve_kernel"]

_TOL = {"float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2), "float32": (1e-5, 1e-6), "float64": (1e-10, 1e-12)}


def random_inputs(shapes, dtype="float32", seed: int = 0) -> list[np.ndarray]:
    """Random arrays of the given shapes: normal floats, ints in [-5, 5), random bools."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    out = []
    for s in shapes:
        if dt.kind == "f":
            out.append(rng.standard_normal(s).astype(dt))
        elif dt.kind == "b":
            out.append(rng.random(s) < 0.5)
        else:
            out.append(rng.integers(-5 if dt.kind == "i" else 0, 5, size=s).astype(dt))
    return out


def resolve_kernel(kernel, *, backend: str = "cpu", dtype: str | None = None) -> tuple[Callable, str | None]:
    """A callable and its kind from a callable, a ``"module:attr"`` string, or an op name.

    An op name (``"aten::add.Tensor"``) is looked up among the installed
    plugins' ``srcore_kernels`` for ``backend`` (and ``dtype`` if given),
    preferring an out variant.
    """
    if callable(kernel):
        return kernel, None
    if "::" not in kernel:
        mod, _, attr = kernel.partition(":")
        return getattr(importlib.import_module(mod), attr), None
    from importlib.metadata import entry_points

    from ..dispatch.resolve import accepts_dtypes

    found = []
    for ep in entry_points(group="srcore.plugins"):
        plugin = ep.load()
        hook = getattr(plugin, "srcore_kernels", None)
        if hook is None:
            continue
        for k in hook():
            if k.op == kernel and k.backend == backend and (dtype is None or accepts_dtypes(k, (dtype,))):
                found.append(k)
    if not found:
        raise LookupError(f"no installed plugin has a {backend} kernel for {kernel}"
                          + (f" and dtype {dtype}" if dtype else ""))
    found.sort(key=lambda k: ("out", "native", "fallback").index(k.kind))
    k = found[0]
    impl = k.impl
    if isinstance(impl, str):
        mod, _, attr = impl.partition(":")
        impl = getattr(importlib.import_module(mod), attr)
    return impl, k.kind


def _takes_out(fn) -> bool:
    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # ufuncs and builtins
        return isinstance(fn, np.ufunc)


def _to_ref(v, torch):
    if isinstance(v, np.ndarray):
        return torch.from_numpy(v.copy()) if torch is not None else v.copy()
    if isinstance(v, (list, tuple)):
        return type(v)(_to_ref(x, torch) for x in v)
    return v


def _to_numpy(v):
    if isinstance(v, (list, tuple)):
        return type(v)(_to_numpy(x) for x in v)
    if hasattr(v, "detach") and hasattr(v, "numpy"):  # a torch tensor
        return v.detach().cpu().numpy()
    if isinstance(v, np.generic):
        return np.asarray(v)
    return v


def _compare(got, exp, rtol, atol, check_dtype, where="result"):
    if isinstance(exp, np.ndarray):
        assert isinstance(got, np.ndarray), f"{where}: expected an ndarray, got {type(got).__name__} {got!r}"
        assert got.shape == exp.shape, f"{where}: shape {got.shape} != expected {exp.shape}"
        if check_dtype:
            assert got.dtype == exp.dtype, f"{where}: dtype {got.dtype} != expected {exp.dtype}"
        rt, at = _TOL.get(exp.dtype.name, (0, 0))
        rt, at = rt if rtol is None else rtol, at if atol is None else atol
        if exp.dtype.kind in "fc":
            np.testing.assert_allclose(got, exp, rtol=rt, atol=at, equal_nan=True, err_msg=where)
        else:
            np.testing.assert_array_equal(got, exp, err_msg=where)
    elif isinstance(exp, (list, tuple)):
        assert isinstance(got, (list, tuple)), f"{where}: expected a sequence, got {type(got).__name__}"
        assert len(got) == len(exp), f"{where}: {len(got)} elements, expected {len(exp)}"
        for i, (g, e) in enumerate(zip(got, exp)):
            _compare(g, e, rtol, atol, check_dtype, f"{where}[{i}]")
    elif isinstance(exp, float):
        assert isinstance(got, (int, float)) and not isinstance(got, bool), f"{where}: {got!r} is not a number"
        np.testing.assert_allclose(got, exp, rtol=rtol or 1e-12, atol=atol or 0, err_msg=where)
    else:
        assert got == exp and type(got) is type(exp), f"{where}: {got!r} != expected {exp!r}"


def _garbage_like(exp):
    if isinstance(exp, (list, tuple)):
        return tuple(_garbage_like(e) for e in exp)
    buf = np.empty(exp.shape, exp.dtype)
    buf.fill(np.nan if exp.dtype.kind in "fc" else (True if exp.dtype.kind == "b" else 77))
    return buf


def _same_objects(r, out):
    if isinstance(out, tuple):
        return isinstance(r, (list, tuple)) and len(r) == len(out) and all(a is b for a, b in zip(r, out))
    return r is out


def check_kernel(kernel, reference: Callable[..., Any], *inputs, shapes=None, input_dtype="float32",
                 rtol: float | None = None, atol: float | None = None, kind: str | None = None,
                 backend: str = "cpu", check_dtype: bool = True, mutates: bool = False,
                 reference_lib: str = "torch", seed: int = 0, **kwargs):
    """Check ``kernel(*inputs, **kwargs)`` against ``reference(*inputs)``; return the kernel's result.

    ``kernel``: a callable, ``"module:attr"`` or an op name (see :func:`resolve_kernel`).
    ``reference`` gets the inputs as torch tensors (``reference_lib="torch"``, the
    default when torch is installed) or numpy arrays, and only the inputs:
    bind arguments in a lambda. ``shapes=[...]`` prepends random inputs of
    ``input_dtype``. ``kind`` is "out" (run with ``out=None`` and a preallocated
    out) or "native"; by default "out" when the kernel takes ``out``.
    ``mutates=True`` for in-place kernels (the inputs may change).
    ``kwargs`` go to the kernel only. Tolerances default by dtype.
    """
    fn, resolved_kind = resolve_kernel(kernel, backend=backend, dtype=input_dtype if shapes else None)
    kind = kind or resolved_kind or ("out" if _takes_out(fn) else "native")
    if shapes:
        inputs = (*random_inputs(shapes, input_dtype, seed), *inputs)
    torch = None
    if reference_lib == "torch":
        try:
            import torch
        except ImportError:
            torch = None
    expected = _to_numpy(reference(*_to_ref(inputs, torch)))
    before = _to_ref(inputs, None)
    got = fn(*inputs, out=None, **kwargs) if kind == "out" else fn(*inputs, **kwargs)
    _compare(got, expected, rtol, atol, check_dtype)
    if not mutates:
        _compare(list(inputs), list(before), 0, 0, True, where="input")
    if kind == "out" and not mutates:
        out = _garbage_like(expected)
        r = fn(*inputs, out=out, **kwargs)
        assert _same_objects(r, out), "an out variant must return the out it was given"
        _compare(out if isinstance(out, np.ndarray) else list(out), expected if isinstance(out, np.ndarray)
                 else list(expected), rtol, atol, check_dtype, where="out")
    return got


def node_info(op: str, *, outputs=(), **args):
    """A ``NodeInfo`` for testing matchers; ``args`` in schema order.

    An argument given as an IR type (``TensorType("float32", (2, 3))``, ``INT``)
    is a runtime value; anything else is a constant with that value::

        node_info("aten::add.Tensor", self=T, other=T, alpha=1, outputs=(T,))
    """
    from srcore.ir import types as ty
    from srcore.plugin import ArgInfo, NodeInfo

    def const_type(v):
        if isinstance(v, bool):
            return ty.BOOL
        if isinstance(v, int):
            return ty.INT
        if isinstance(v, float):
            return ty.FLOAT
        if isinstance(v, str):
            return ty.STR
        if isinstance(v, np.ndarray):
            return ty.TensorType(v.dtype.name, v.shape)
        if v is None:
            return ty.NONE
        return ty.ANY

    infos = tuple(ArgInfo(name, v, False, None) if isinstance(v, ty.Type) else ArgInfo(name, const_type(v), True, v)
                  for name, v in args.items())
    return NodeInfo(op, None, infos, tuple(outputs))
