"""Op-by-op cases for checking a backend against torch: random inputs with special values, graphs of
srcore IR text built from op calls, and a comparison that places NaNs and infinities exactly.

An engine backend's conformance tests (trt_like's and openvino's use these) describe each op call
by its arguments: :class:`In` (a runtime input, possibly a non-contiguous view), :class:`Param` (a
tensor constant), :class:`TList` (a tensor list built in the graph) or a Python constant.
:class:`GraphText` turns the calls into IR text; :func:`to_torch` and :func:`call_aten` run the
same arguments through torch (imported by the caller, never here).
"""
from __future__ import annotations

from typing import Callable

import attrs
import numpy as np

#: values sprinkled into float inputs: NaN, infinities, signed zeros, overflow and underflow
#: (denormals), the saturation points of exp, tanh and sigmoid, hardswish's and relu6's kinks
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-40, -1e-40, 88.8, -88.8, 104.0,
                     -104.0, 20.0, -20.0, 9.0, -9.0, 1e-8, 3.0, -3.0, 6.0], np.float32)
DTYPE_NAMES = {np.dtype(np.float32): "Float", np.dtype(np.float64): "Double", np.dtype(np.int64): "Long",
               np.dtype(np.int32): "Int", np.dtype(np.bool_): "Bool", np.dtype(np.float16): "Half"}


def random_values(shape, seed: int, dtype=np.float32, special: bool = True, positive: bool = False,
                  scale: float = 3.0, specials: np.ndarray = SPECIALS) -> np.ndarray:
    """Random values of ``shape``: normal times ``scale`` with a third of the places (at most one per
    special) replaced by ``specials``; integers in [-5, 5]; booleans. ``positive``: ``|x| + 0.1``."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if np.dtype(dtype).kind in "iu":
        return np.asarray(rng.integers(-5, 6, size=shape), dtype=dtype)
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    if special and x.size:
        flat = x.reshape(-1)
        k = min(flat.size, len(specials), max(1, flat.size // 3))
        flat[rng.choice(flat.size, k, replace=False)] = rng.choice(specials, k, replace=False)
    if positive:
        x = np.abs(x) + np.float32(0.1)
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=dtype)


@attrs.frozen
class In:
    """A graph input: ``array`` is what the module is called with (it may be a non-contiguous view)."""

    array: np.ndarray = attrs.field(eq=False)


@attrs.frozen
class Param:
    """A tensor constant (``prim::Constant[param=...]``)."""

    array: np.ndarray = attrs.field(eq=False)


@attrs.frozen
class TList:
    """A list of tensors built in the graph (``prim::ListConstruct``: ``aten::cat``'s ``tensors``)."""

    items: tuple


def tin(shape, seed=0, dtype=np.float32, transposed=False, **kw) -> In:
    """An input of ``shape`` (:func:`random_values`); ``transposed``: a non-contiguous view (the
    transpose of a C array)."""
    if transposed and len(shape) >= 2:
        return In(random_values(tuple(reversed(shape)), seed, dtype, **kw).T)
    return In(random_values(shape, seed, dtype, **kw))


def tensor_type(a: np.ndarray) -> str:
    """The IR type of ``a`` (``Float(2, 3)``)."""
    return f"{DTYPE_NAMES[a.dtype]}({', '.join(map(str, a.shape))})"


def constant_line(name: str, v) -> str:
    """The IR line that defines ``%name`` as the Python constant ``v``."""
    if v is None:
        return f"  %{name} : NoneType = prim::Constant()"
    if isinstance(v, bool):
        return f"  %{name} : bool = prim::Constant[value={int(v)}]()"
    if isinstance(v, int):
        return f"  %{name} : int = prim::Constant[value={v}]()"
    if isinstance(v, float):
        return f"  %{name} : float = prim::Constant[value={v!r}]()"
    if isinstance(v, str):
        return f'  %{name} : str = prim::Constant[value="{v}"]()'
    if isinstance(v, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in v):
        return f"  %{name} : int[] = prim::Constant[value=[{', '.join(map(str, v))}]]()"
    if isinstance(v, (list, tuple)) and v and all(isinstance(i, float) for i in v):
        return f"  %{name} : float[] = prim::Constant[value=[{', '.join(map(repr, v))}]]()"
    raise TypeError(f"no IR constant for {v!r}")


class GraphText:
    """IR text under construction: :meth:`value` names an argument (declaring the input, parameter,
    list or constant it needs), :meth:`line` adds a node, :meth:`text` closes the graph.
    ``params`` and ``inputs`` are what :func:`srcore.ir.parser.parse_graph` and the call need.
    ``on_input(name)``, if given, may wrap each new input and returns the name to use instead."""

    def __init__(self, on_input: Callable[[str], str] | None = None):
        self.inputs: list[np.ndarray] = []
        self.params: dict[str, np.ndarray] = {}
        self.head: list[str] = []
        self.body: list[str] = []
        self.on_input = on_input

    def value(self, a, key: str) -> str:
        """The value name (without ``%``) that stands for argument ``a``; ``key`` makes constant and
        list names unique."""
        if isinstance(a, In):
            name = f"x{len(self.inputs)}"
            self.inputs.append(a.array)
            self.head.append(f"%{name} : {tensor_type(a.array)}")
            return self.on_input(name) if self.on_input is not None else name
        if isinstance(a, Param):
            name = f"w{len(self.params)}"
            self.params[name] = a.array
            self.body.append(f'  %{name} : {tensor_type(a.array)} = prim::Constant[param="{name}"]()')
            return name
        if isinstance(a, TList):
            names = [self.value(x, f"{key}_{i}") for i, x in enumerate(a.items)]
            self.body.append(f"  %l{key} : Tensor[] = prim::ListConstruct({', '.join('%' + n for n in names)})")
            return f"l{key}"
        name = f"c{key}"
        self.body.append(constant_line(name, a))
        return name

    def line(self, text: str) -> None:
        self.body.append(text)

    def text(self, outputs: list[str]) -> str:
        """The whole graph returning ``outputs`` (names with ``%``)."""
        return f"graph({', '.join(self.head)}):\n" + "\n".join(self.body) + f"\n  return ({', '.join(outputs)})\n"


def to_torch(v):
    """An argument as torch takes it: tensors copied (torch must not see the backend's buffers),
    lists of tensors as lists, tuples as lists, constants as they are."""
    if isinstance(v, (In, Param)):
        import torch

        return torch.from_numpy(np.array(v.array))
    if isinstance(v, TList):
        return [to_torch(x) for x in v.items]
    if isinstance(v, tuple):
        return list(v)
    return v


def call_aten(fn, args):
    """``fn`` (a ``torch.ops.aten`` overload) on ``args`` given positionally, as the IR passes them
    (keyword-only arguments by name)."""
    pos, kw = [], {}
    for a, v in zip(fn._schema.arguments, args):
        if a.kwarg_only:
            kw[a.name] = v
        else:
            pos.append(v)
    return fn(*pos, **kw)


def compare_specials(got, want, what: str = ""):
    """Check shape, dtype, and that NaNs and infinities are where torch's are; integers and booleans
    must be equal. Returns ``(got, want, finite)`` as float64 arrays and the mask of places left for
    a tolerance check, or None when nothing is left (exact dtypes)."""
    want, got = np.asarray(want), np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != torch's {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != torch's {want.dtype}"
    if want.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return None
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_w = np.isnan(w)
    bad = np.isnan(g) != nan_w
    assert not bad.any(), f"{what}: NaN at other places: got {got[bad][:5]}, torch {want[bad][:5]}"
    bad = (np.isinf(g) | np.isinf(w)) & ~((g == w) | nan_w)
    assert not bad.any(), f"{what}: infinities differ: got {got[bad][:5]}, torch {want[bad][:5]}"
    return g, w, np.isfinite(w)


def raise_worst(bad: np.ndarray, err: np.ndarray, bound, g: np.ndarray, w: np.ndarray, tol, what: str) -> None:
    """Fail naming the value farthest over its ``bound``, if any place is ``bad``."""
    if bad.any():
        bound = np.broadcast_to(bound, err.shape)
        i = np.argmax(np.where(bad, err - bound, -np.inf))
        mine, torchs, limit = (float(a.reshape(-1)[i]) for a in (g, w, bound))
        raise AssertionError(f"{what}: {int(bad.sum())} value(s) off by more than {tol}: worst got {mine!r}, "
                             f"torch {torchs!r} (bound {limit:.3g})")
