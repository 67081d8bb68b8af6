"""What is static about one conv layer (:class:`ConvSpec`), and the base of every conv tactic."""
from __future__ import annotations

from functools import partial

import attrs
import numpy as np

from ..errors import TacticSpecError
from ..kernels import threads as _threads
from ..kernels import activation as _activation
from ..kernels.activation import ACTIVATIONS


def as_pair(name):
    """A converter to an (h, w) int pair that names ``name`` in its error."""
    def convert(v):
        if isinstance(v, (int, np.integer)):
            return (int(v), int(v))
        try:
            t = tuple(int(i) for i in v)
        except (TypeError, ValueError):
            raise TacticSpecError(f"conv spec: {name} must be an int or a pair of ints, got {v!r}") from None
        if len(t) != 2:
            raise TacticSpecError(f"conv spec: {name} must be a pair (height, width), got {v!r}")
        return t
    return convert


def as_shape4(v):
    """``v`` as an (N, C, H, W) int tuple, or a :class:`TacticSpecError`."""
    try:
        t = tuple(int(i) for i in v)
    except (TypeError, ValueError):
        raise TacticSpecError(f"conv spec: x_shape must be (N, C, H, W), got {v!r}") from None
    if len(t) != 4:
        raise TacticSpecError(f"conv spec: x_shape must be 4-D (N, C, H, W), got {v!r}")
    return t


@attrs.frozen
class ConvSpec:
    """Everything static about one 2-D conv layer: float32, NCHW, symmetric padding, and the epilogue
    ``out = act(conv(x) + bias (+ residual))``, act relu (fused in the kernels' stores) or
    ``activation`` (hardswish, hardsigmoid, silu, sigmoid, gelu, gelu_tanh, leaky_relu with
    ``negative_slope``: fused into the stores by the tactics listing it in
    :attr:`ConvTactic.fused_activations`, else applied in place after the store). Invalid specs
    raise :class:`TacticSpecError`."""
    x_shape: tuple[int, int, int, int] = attrs.field(converter=as_shape4)
    out_channels: int = attrs.field(converter=int)
    kernel: tuple[int, int] = attrs.field(converter=as_pair("kernel"))
    stride: tuple[int, int] = attrs.field(default=(1, 1), converter=as_pair("stride"))
    padding: tuple[int, int] = attrs.field(default=(0, 0), converter=as_pair("padding"))
    dilation: tuple[int, int] = attrs.field(default=(1, 1), converter=as_pair("dilation"))
    groups: int = attrs.field(default=1, converter=int)
    relu: bool = attrs.field(default=False, converter=bool)
    residual: bool = attrs.field(default=False, converter=bool)
    #: applied after the epilogue, in place on the output (``kernels/activation.py``)
    activation: str = attrs.field(default="none", kw_only=True)
    #: leaky relu's slope below zero (read only with ``activation="leaky_relu"``)
    negative_slope: float = attrs.field(default=0.01, converter=float, kw_only=True)

    def __attrs_post_init__(self):
        N, C, H, W = self.x_shape
        bad = []
        if min(self.x_shape) < 1:
            bad.append(f"x_shape {self.x_shape} has an empty dimension")
        for name in ("kernel", "stride", "dilation"):
            if min(getattr(self, name)) < 1:
                bad.append(f"{name} {getattr(self, name)} must be >= 1")
        if min(self.padding) < 0:
            bad.append(f"padding {self.padding} must be >= 0")
        if self.groups < 1 or self.out_channels < 1:
            bad.append(f"groups ({self.groups}) and out_channels ({self.out_channels}) must be >= 1")
        elif C % self.groups or self.out_channels % self.groups:
            bad.append(f"groups {self.groups} must divide in channels {C} and out_channels {self.out_channels}")
        if not bad and min(self.out_shape[2:]) < 1:
            bad.append(f"the {self.kernel} kernel (dilation {self.dilation}) is larger than the padded "
                       f"input {(H + 2 * self.padding[0], W + 2 * self.padding[1])}: no output")
        if self.activation not in ACTIVATIONS:
            bad.append(f"activation {self.activation!r} is not one of {', '.join(ACTIVATIONS)}")
        elif self.activation != "none" and self.relu:
            bad.append(f"relu and activation {self.activation!r} both set")
        if bad:
            raise TacticSpecError("conv spec: " + "; ".join(bad))

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        N, _, H, W = self.x_shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = self.kernel, self.stride, self.padding, self.dilation
        return (N, self.out_channels, (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1,
                (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1)

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        return (self.out_channels, self.x_shape[1] // self.groups) + self.kernel

    @property
    def macs(self) -> int:
        """Multiply-adds of the direct convolution."""
        N, O, Ho, Wo = self.out_shape
        return N * O * Ho * Wo * (self.x_shape[1] // self.groups) * self.kernel[0] * self.kernel[1]


def check_array(role, a, shape):
    """A :class:`TacticSpecError` naming ``role`` unless ``a`` is a C-contiguous float32 ``shape`` array."""
    if not isinstance(a, np.ndarray) or a.dtype != np.float32 or a.shape != shape or not a.flags.c_contiguous:
        what = (f"{type(a).__name__}" if not isinstance(a, np.ndarray)
                else f"{a.dtype} {a.shape}{'' if a.flags.c_contiguous else ' non-contiguous'}")
        raise TacticSpecError(f"{role} must be a C-contiguous float32 array of shape {shape}, got {what}")


class ConvTactic:
    """One implementation of a :class:`ConvSpec` with its weights laid out at construction.

    ``tactic(x, out, residual=None)`` writes ``act(conv(x) + bias (+ residual))`` into ``out``;
    every array C-contiguous float32 of the spec's shapes (checked: a few microseconds a call).
    Subclasses set :attr:`name` and implement :meth:`_run`; those that call numpy's BLAS set
    :attr:`uses_blas`: built for more than one intra-op thread, they run it on the calling thread
    (the engine's threads are numba's OpenMP pool, see ``kernels/threads.py``).

    The weights a subclass lays out (packed, transformed) come from :meth:`_laid_out`, and
    :meth:`layout` returns them: a serialized engine stores them, and a tactic made with
    ``layout=`` (those arrays, checked for dtype and shape) does not compute them again.
    """
    name = "conv"
    uses_blas = False
    #: the activations the kernel applies in its own stores (no in-place pass after it)
    fused_activations: tuple[str, ...] = ()
    #: whether :meth:`_run` is ``self.conv(x, out, residual, ...)`` on a conv of srcore's bound-call
    #: protocol (``srcore.conv.direct.run_bound``), which :meth:`serial_calls` relies on
    bound_run = False

    def __init__(self, spec: ConvSpec, weight: np.ndarray, bias: np.ndarray | None,
                 layout: dict[str, np.ndarray] | None = None):
        self._given = dict(layout or {})
        self._layout_names: list[str] = []
        if not isinstance(spec, ConvSpec):
            raise TacticSpecError(f"{self.name}: spec must be a ConvSpec, got {type(spec).__name__}")
        weight = np.asarray(weight)
        if weight.shape != spec.weight_shape:
            raise TacticSpecError(f"{self.name}: weight shape {weight.shape} does not match the spec's "
                                  f"{spec.weight_shape} (out_channels, in_channels / groups, kh, kw)")
        O = spec.out_channels
        if bias is not None and np.shape(bias) != (O,):
            raise TacticSpecError(f"{self.name}: bias shape {np.shape(bias)} must be ({O},)")
        self.spec = spec
        self.out_shape = spec.out_shape
        self.bias = (np.zeros(O, np.float32) if bias is None
                     else np.ascontiguousarray(bias, dtype=np.float32))
        if self.uses_blas and _threads.count() > 1:
            self._run = _threads.on_caller(self._run)
        act = (None if spec.activation in self.fused_activations
               else _activation.in_place(spec.activation, spec.negative_slope))
        #: the in-place activation pass after the kernel, when it wraps the class's own ``_run``
        self._then = act if "_run" not in vars(self) else None
        if act is not None:
            # a kernel that does not fuse it into its stores: one in-place pass over the output
            # while it is still in cache, in the same layer (no separate pointwise layer)
            run = self._run

            def run_then_activate(x, out, residual):
                run(x, out, residual)
                act(out)
            self._run = run_then_activate

    def __call__(self, x: np.ndarray, out: np.ndarray, residual: np.ndarray | None = None) -> None:
        check_array(f"{self.name}: x", x, self.spec.x_shape)
        check_array(f"{self.name}: out", out, self.out_shape)
        if self.spec.residual:
            check_array(f"{self.name}: residual", residual, self.out_shape)
        elif residual is not None:
            raise TacticSpecError(f"{self.name}: a residual was passed but the spec has residual=False")
        self._run(x, out, residual)

    def _run(self, x, out, residual):
        raise NotImplementedError

    def serial_calls(self, x, out, residual):
        """The plain ``(fn, args)`` calls one :meth:`_run` on exactly these arrays makes on one thread
        (the bound call's compiled entry points, no Python between them), for a caller that runs the
        layer again on the same buffers; None where there are none yet (the entry points are found
        at a bound call's second run) or never (threads, a pass after the kernel)."""
        if (not self.bound_run or ("_run" in vars(self) and self._then is None) or getattr(self, "threads", 1) > 1
                or not all(a.flags.c_contiguous for a in (x, out) + (() if residual is None else (residual,)))):
            return None   # (a bound call holds a copy of a non-contiguous array, made at binding)
        conv = self.conv
        # (the conv's own, or its bound call's: srcore.conv.pointwise has no bound call)
        get = (partial(conv.serial_calls, x, out, residual) if hasattr(conv, "serial_calls")
               else getattr(conv.bind(x, out, residual), "serial_calls", None))
        calls = None if get is None else get()
        return calls if calls is None or self._then is None else (*calls, (self._then, (out,)))

    def _laid_out(self, name: str, shape: tuple[int, ...], make) -> np.ndarray:
        """The laid-out weight ``name`` of ``shape`` (float32): from the ``layout`` given at
        construction, else ``make()``."""
        given = self._given.pop(name, None)
        if given is None:
            arr = make()
        else:
            if not isinstance(given, np.ndarray) or given.dtype != np.float32 or given.shape != tuple(shape):
                got = f"{given.dtype} {given.shape}" if isinstance(given, np.ndarray) else type(given).__name__
                raise TacticSpecError(f"{self.name}: stored layout {name!r} is {got}, expected float32 {tuple(shape)}")
            # a file's arrays are read-only maps: those are copied; an own writeable one is taken
            arr = given if given.flags.writeable and given.flags.c_contiguous else np.array(given, order="C")
        self._layout_names.append(name)
        return arr

    def layout(self) -> dict[str, np.ndarray]:
        """The laid-out weights, by name (what ``layout=`` takes back)."""
        return {name: getattr(self, name) for name in self._layout_names}

    @property
    def weight_bytes(self) -> int:
        """Bytes of the laid-out weights a call reads (Winograd's transformed ones are larger)."""
        return sum(a.nbytes for a in vars(self).values() if isinstance(a, np.ndarray))

    def __repr__(self):
        s = self.spec
        return (f"<{type(self).__name__} {self.name} x{s.x_shape} -> {self.out_shape} k{s.kernel} s{s.stride} "
                f"p{s.padding} d{s.dilation} g{s.groups}{' +res' if s.residual else ''}{' relu' if s.relu else ''}"
                f"{' ' + s.activation if s.activation != 'none' else ''}>")
