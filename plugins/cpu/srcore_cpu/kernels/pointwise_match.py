"""The matcher of the compiled one-pass activations (``jit_pointwise.py``), kept apart so that
matching a node does not import numba: only a node the compiled kernels take imports it.

float32 in and out with at least :data:`MIN_ELEMENTS` elements (:data:`MIN_ELEMENTS_SCIPY` for sigmoid,
silu and GELU; or an unknown count) and constant
parameters: the compiled kernel, compiled now (at load). A smaller float32 node of static size with
constant parameters gets its numpy kernel or the compiled one, chosen by timing at its first call
where numba is loaded anyway (``late_compiled.py``). Anything else is declined and the numpy
kernels take the node; those of sigmoid, silu, GELU and their in-place forms call
``scipy.special`` (~0.1-2 s to import), which is imported here, at load, so that the first call
does not pay for it.
"""
from __future__ import annotations

import math

from srcore.plugin import NodeInfo, Specialized, TensorType

from . import parallel as _par

#: below this many elements the numpy kernels are kept: for a few thousand elements a ufunc pass
#: costs about what the compiled call does
MIN_ELEMENTS = 16384
#: the ops whose numpy kernels call ``scipy.special`` (several passes and a scalar special function:
#: ~10 ns an element, against ~0.3-1 ns compiled) take the compiled kernel from this many elements
MIN_ELEMENTS_SCIPY = 1024
#: op -> the constant arguments that become the kernel's ``a`` and ``b`` (schema names)
PARAMS = {
    "aten::silu": (), "aten::sigmoid": (), "aten::hardsigmoid": (), "aten::hardswish": (),
    "aten::leaky_relu": ("negative_slope",), "aten::hardtanh": ("min_val", "max_val"), "aten::relu6": (),
    "aten::gelu": ("approximate",),
}
#: ops whose numpy kernels import scipy.special when called
_SCIPY_SPECIAL = ("aten::silu", "aten::sigmoid", "aten::gelu")


def _size(t) -> int | None:
    if not isinstance(t, TensorType) or t.shape is None or not all(isinstance(d, int) for d in t.shape):
        return None
    return math.prod(t.shape)


def _decline(op: str):
    if op in _SCIPY_SPECIAL:
        import scipy.special  # noqa: F401 - loaded now for the numpy kernel's first call
    return None


def _large_float32(t, least: int = MIN_ELEMENTS) -> bool:
    """A float32 tensor type of at least ``least`` elements, or of an unknown count."""
    if not isinstance(t, TensorType) or t.dtype != "float32":
        return False
    size = _size(t)
    return size is None or size >= least


def _compiled(key: str, consts: dict, a: float = 0.0, b: float = 0.0, size: int | None = None):
    """``fn(x, out=None)``: the compiled kernel ``key`` of :data:`jit_pointwise.KERNELS`, with its
    numpy kernel (called with ``consts``) for inputs it does not take. At more than one intra-op
    thread (:func:`.parallel.intra_op_threads`) a node of ``size`` elements splits over them only
    when :func:`split_pays` (timed now); an unknown size keeps ``SRCORE_CPU_THREADS`` (opt-in)."""
    from . import jit_pointwise as JP   # numba: only for a node the compiled kernels take

    kernel, numpy_kernel = JP.KERNELS[key]

    def fallback(x, out=None):
        return numpy_kernel(x, **consts, out=out)
    if size is None:
        return JP.make_pointwise(kernel, a, b, fallback, threads=_par.split_threads())
    one = JP.make_pointwise(kernel, a, b, fallback, threads=1)
    # below SPLIT_MIN nothing splits; only then is the BLAS thread count looked up (~0.1 s, once)
    threads = _par.intra_op_threads() if size >= JP.SPLIT_MIN else 1
    if threads <= 1:
        return one
    split = JP.make_pointwise(kernel, a, b, fallback, threads=threads, min_split=JP.SPLIT_MIN)
    try:
        split.what = key   # (the timing evidence's key, split_pays)
    except AttributeError:
        pass
    return split if split_pays(one, split, size) else one


def split_pays(one, split, size: int, timer=None) -> bool:
    """Whether ``split`` (the kernel over the intra-op threads) beats ``one`` (the same kernel on
    the caller) on ``size`` float32 elements, best of a few alternating calls each (``timer``:
    ``tactic.fastest``'s signature, injectable for tests). The hand-over to the part pool costs
    tens of microseconds and a second core that another job or OpenBLAS's spinning worker holds
    gains nothing, so only this machine's timing can tell; both give the same bits."""
    import numpy as np

    from . import tactic as _tactic

    x = np.linspace(-4.0, 4.0, size, dtype=np.float32)   # in the kernels' interesting range
    out = np.empty_like(x)
    if timer is not None:
        return timer({"one": one, "split": split}, (x, out)) == "split"
    # pooled with the earlier timings of the same kernel and size (tactic.pooled)
    key = ("pointwise", getattr(split, "what", None), size, _par.intra_op_threads())
    return _tactic.fastest({"one": one, "split": split}, (x, out), key=key) == "split"


def _numpy_kernel(op: str, consts: dict):
    """``fn(x, out=None)``: the numpy kernel the node would get without the compiled one (sigmoid
    scipy's expit, GELU ``activation_fast``'s); ``out`` may be ``x`` (the multi-pass kernels read
    ``x`` after writing ``out``: an ``out`` overlapping ``x`` gets a copy of the result)."""
    import numpy as np

    from . import activation as A

    if op == "aten::sigmoid":
        from scipy.special import expit

        return lambda x, out=None: expit(x, out=out) if out is not None else expit(x)
    if op == "aten::gelu":
        from .activation_fast import gelu

        approximate = consts["approximate"]

        def fn(x, out=None):
            return gelu(x, approximate=approximate, out=out)
    else:
        act = getattr(A, op.split("::")[1])

        def fn(x, out=None):
            return act(x, **consts, out=out)

    def numpy_kernel(x, out=None):
        if out is not None and np.may_share_memory(x, out):
            np.copyto(out, fn(x), casting="same_kind")
            return out
        return fn(x, out=out)
    return numpy_kernel


def _late(op: str, consts: dict, inplace: bool, size: int):
    """A small float32 node of static size: its numpy kernel or the compiled one, whichever is
    faster at the first call where numba is loaded anyway (``late_compiled.py``; nothing compiled or
    imported now)."""
    import numpy as np

    from .late_compiled import late

    _decline(op)   # (scipy.special loaded now for the numpy kernels that call it)
    numpy_fn = _numpy_kernel(op, consts)
    key, a, b = _kernel_key(op, consts)

    def build():
        return _compiled(key, consts, a, b, size=size)

    def sample():
        x = np.linspace(-4.0, 4.0, size, dtype=np.float32)
        return x, np.empty_like(x)
    return _specialized(late(numpy_fn, build, sample, what=op), inplace)


def _kernel_key(op: str, consts: dict) -> tuple[str, float, float]:
    """The :data:`jit_pointwise.KERNELS` key of ``op`` and its two scalar parameters."""
    if op == "aten::gelu":
        return "gelu:" + consts["approximate"], 0.0, 0.0
    if op == "aten::relu6":
        return op, 0.0, 6.0
    a, b = ([float(v) for v in consts.values()] + [0.0, 0.0])[:2]
    return op, a, b


def _specialized(fn, inplace: bool) -> Specialized:
    """``fn(x, out=...)`` as the node's kernel; an in-place op writes over its input and returns it."""
    if inplace:
        def run_inplace(self):
            fn(self, out=self)
            return self
        return Specialized(run_inplace, args=(0,))
    return Specialized(fn, args=(0,))


def pointwise_matcher(node: NodeInfo):
    """The compiled kernel for a large float32 node (see the module doc), or None. In-place ops
    (``aten::silu_``, ...) write over their input and return it."""
    name = node.op.split(".")[0]
    inplace = name.endswith("_")
    op = name[:-1] if inplace else name
    src = node.args[0].type if node.args else None
    dst = node.output_types[0] if node.output_types else None
    least = MIN_ELEMENTS_SCIPY if op in _SCIPY_SPECIAL else MIN_ELEMENTS
    params = PARAMS[op]
    if not (isinstance(src, TensorType) and src.dtype == "float32" and all(node.is_const(p) for p in params)):
        return _decline(op)
    consts = {p: node.const(p) for p in params}
    if op == "aten::gelu" and consts["approximate"] not in ("none", "tanh"):
        return _decline(op)   # the numpy kernel raises torch's error
    if not _large_float32(dst, least):
        return _late(op, consts, inplace, _size(dst)) if _size(dst) else _decline(op)
    key, a, b = _kernel_key(op, consts)
    return _specialized(_compiled(key, consts, a, b, size=_size(dst)), inplace)


def compiled_inplace(key: str, out_type, **consts):
    """``act_(out) -> out``: the compiled kernel ``key`` of :data:`jit_pointwise.KERNELS`
    (``"aten::silu"``, ``"gelu:none"``, ...) applied in place on a float32 ``out`` of at least
    :data:`MIN_ELEMENTS` elements (or an unknown count), for fused nodes whose activation runs on
    their own output; ``consts`` are the numpy kernel's arguments (non-contiguous ``out``). None for
    anything else, without importing numba."""
    if not _large_float32(out_type):
        return None
    fn = _compiled(key, consts, size=_size(out_type))

    def act_(out):
        return fn(out, out=out)
    act_.what = key   # (which activation, for timing evidence keys: linear_split.py)
    return act_
