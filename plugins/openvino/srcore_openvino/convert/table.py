"""The converter table: every op an openvino engine takes, and how it becomes OpenVINO ops.

One :class:`Rule` per op overload: the arguments that must be constants, an
optional ``check(node_info)`` for what the op's OpenVINO form cannot express with torch's
semantics (those nodes run on the next backend), and the converter. ``supports()``
(:mod:`srcore_openvino.support`) answers from this table, so what is accepted is exactly what converts.

A converter gets a :class:`Ctx` (the node's arguments by schema name, its constants, the
OpenVINO values of its tensor arguments, ``ctx.o`` = the opset module) and returns the
OpenVINO output of the node (a tuple for several outputs, a list for a ``Tensor[]``).
Nothing here imports openvino: the opset module arrives in ``ctx.o`` at build time.
"""
from __future__ import annotations

import contextvars
from typing import Any, Callable

import attrs
import numpy as np

from srcore.plugin import EngineBuildError

_MISSING = object()

#: whether converters restore torch's NaN and inf results where OpenVINO's ops differ (the engine
#: option ``nan_checks``; set by the model builder for the segment being converted)
NAN_CHECKS: contextvars.ContextVar[bool] = contextvars.ContextVar("nan_checks", default=True)


def nan_checks() -> bool:
    return NAN_CHECKS.get()


#: the model is built for finite inputs only (``srcore_openvino.finite``): no NaN checks, and where
#: a check-free form is also exact on finite values (the sign of zero), that form
FINITE_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("finite_only", default=False)


#: the engine's precision ("f32" or "bf16"; set by the model builder): where the faster form of a
#: check depends on it (``pointwise.relu``)
PRECISION: contextvars.ContextVar[str] = contextvars.ContextVar("precision", default="f32")


#: while a model is built with softmax row checks deferred: the softmax nodes left unchecked
#: because their only readers are matmuls (an attention block OpenVINO may fuse); None: no deferral
DEFERRED_SOFTMAX: contextvars.ContextVar[list | None] = contextvars.ContextVar("deferred_softmax", default=None)


@attrs.frozen
class Rule:
    """How one op converts: ``consts`` must be constant arguments; ``check(node_info)`` may
    refuse a node its OpenVINO form would get wrong; ``tensor_dtypes`` the dtypes its tensor
    arguments and results may have."""

    convert: Callable[["Ctx"], Any]
    consts: tuple[str, ...] = ()
    check: Callable[[Any], bool] | None = None
    tensor_dtypes: tuple[str, ...] = ("float32",)


#: the tensor dtypes of a rule that also takes int64 (an attention mask sliced and made float inside
#: the engine): only rules that move values or convert them to float32, so the values an engine's
#: int64 tensors hold are its inputs' (which the engine keeps within int32's range, the precision
#: OpenVINO's CPU plugin computes int64 in; see :mod:`.model`)
INT_RULE_DTYPES = ("float32", "int64")

#: op overload ("aten::add.Tensor", "aten::relu") -> its rule
TABLE: dict[str, Rule] = {}


def rule_for(op: str) -> Rule | None:
    """The rule of overload ``op`` (``"aten::add.Tensor"``; ``"aten::relu"`` for an overload with an
    empty name). Exact: another overload of the same op may mean something else."""
    return TABLE.get(op)


def register(*ops: str, consts: tuple[str, ...] = (), check=None, tensor_dtypes=("float32",)):
    def deco(fn):
        for name in ops:
            if name in TABLE:
                raise ValueError(f"two converters for {name}")
            TABLE[name] = Rule(fn, tuple(consts), check, tuple(tensor_dtypes))
        return fn
    return deco


# -- the node as converters see it ---------------------------------------------------------------
class Ctx:
    """One segment node during conversion."""

    def __init__(self, node, op: str, env: dict[int, Any], o, constants: dict[int, Any]):
        self.node = node
        self.op = op
        self.env = env
        self.o = o
        self._constants = constants
        schema = node.schema
        self.args = list(schema.arguments) if schema is not None else []
        self.names = [a.name for a in self.args]

    def where(self) -> str:
        src = f" at {self.node.source}" if self.node.source is not None else ""
        outs = ", ".join(f"%{v.name}" for v in self.node.outputs)
        return f"{outs} = {self.op}{src}"

    def fail(self, why: str):
        raise EngineBuildError(f"{self.where()}: {why}")

    def value(self, name: str):
        """The IR value passed for argument ``name`` (None when the node leaves it out)."""
        i = self.names.index(name)
        return self.node.inputs[i] if i < len(self.node.inputs) else None

    def const(self, name: str, default: Any = _MISSING) -> Any:
        """The constant value of argument ``name`` (its schema default when left out; ``default``
        also when this overload has no such argument)."""
        if name not in self.names:
            if default is _MISSING:
                self.fail(f"internal: the overload has no argument {name!r}")
            return default
        i = self.names.index(name)
        if i >= len(self.node.inputs):
            d = self.args[i].default
            if d is None:
                if default is _MISSING:
                    self.fail(f"argument {name!r} is missing")
                return default
            return d.value
        v = self.node.inputs[i]
        ok, value = constant_of(v)
        if not ok:
            if default is _MISSING:
                self.fail(f"argument {name!r} is not a constant")
            return default
        return value

    def is_none(self, name: str) -> bool:
        v = self.value(name)
        if v is None:
            i = self.names.index(name)
            d = self.args[i].default
            return d is None or d.value is None
        ok, value = constant_of(v)
        return ok and value is None

    def x(self, name: str):
        """The OpenVINO value of tensor argument ``name``."""
        return self.tensor(self.value(name))

    def tensor(self, v):
        got = self.env.get(id(v))
        if got is not None:
            return got
        ok, value = constant_of(v)
        if ok and value is not None and not isinstance(value, (list, tuple)):
            key = id(v)
            c = self._constants.get(key)
            if c is None:
                dtype = np.int64 if getattr(v.type, "dtype", None) == "int64" else np.float32
                c = self._constants[key] = self.o.constant(np.ascontiguousarray(value, dtype=dtype)).output(0)
            return c
        self.fail(f"internal: %{v.name} has no OpenVINO value")

    def tensors(self, name: str) -> list:
        """The OpenVINO values of a ``Tensor[]`` argument (made by a ``prim::ListConstruct`` or an
        op returning a list inside the segment)."""
        v = self.value(name)
        got = self.env.get(id(v))
        if isinstance(got, list):
            return got
        self.fail(f"argument {name!r} is not a tensor list made inside the engine")


def constant_of(v) -> tuple[bool, Any]:
    """(True, value) for a ``prim::Constant`` or a ``prim::ListConstruct`` of constants."""
    n = v.node
    if n.kind == "prim::Constant":
        return True, n.attrs.get("value")
    if n.kind == "prim::ListConstruct" and all(i.node.kind == "prim::Constant" for i in n.inputs):
        return True, [i.node.attrs.get("value") for i in n.inputs]
    return False, None


# -- small OpenVINO helpers ------------------------------------------------------------------------
def f32(o, v):
    return o.constant(np.float32(v)).output(0)


def i64(o, v):
    return o.constant(np.asarray(v, dtype=np.int64)).output(0)


def rank(x) -> int:
    r = x.get_partial_shape().rank
    if r.is_dynamic:
        raise EngineBuildError("a value of unknown rank inside an engine")
    return r.get_length()


def dims(x) -> list[int | None]:
    """Static sizes of ``x`` (None for a dynamic dim)."""
    ps = x.get_partial_shape()
    return [d.get_length() if d.is_static else None for d in ps]


def out(node):
    return node.output(0)


#: the rt_info key (``ov::NonconvertibleDivide``) that keeps OpenVINO from turning a Divide into a
#: multiplication by the divisor's reciprocal (``ConvertDivide``), which is off by an ulp a fifth
#: of the time and wrong where the reciprocal overflows or is subnormal (on AVX-512, 1e-30 / 1e-40
#: gave inf and -0 / 1e-40 NaN; torch: 1e10 and -0)
EXACT_DIVIDE = "nonconvertable_divide_0"


def divide(o, a, b):
    """``a / b``: IEEE division, torch's quotient (:data:`EXACT_DIVIDE`), where ``b`` is computed at
    run time (its reciprocal may overflow or be subnormal). Not where either is a constant:
    OpenVINO's CPU plugin fuses a Divide of a constant numerator into the layer computing the
    divisor with the operands swapped (2.5 / sum(x) came out as sum(x) / 2.5), so ``c / b``
    (rsqrt, reciprocal, rms_norm's ``1 / sqrt(...)``) stays OpenVINO's ``c * b^-1`` (``b^-1`` is
    IEEE's: exact for c = 1); and ``a / c`` is ``a * (1 / c)`` (within an ulp; a constant divisor
    without a normal reciprocal is refused, :func:`constant_divisor_ok`), which OpenVINO fuses into
    the layer before it (an attention's scaling: marking it cost bert_encoder's bf16 engine 3 %)."""
    node = o.divide(a, b)
    if "Constant" not in (a.get_node().get_type_name(), b.get_node().get_type_name()):
        node.get_rt_info()[EXACT_DIVIDE] = ""
    return node.output(0)


#: the divisors whose float32 reciprocal is a normal number: a Divide by a constant that OpenVINO
#: fuses into the layer before it becomes a multiplication by the reciprocal whatever the rt_info
#: says (within an ulp), so constant divisors outside this range run elsewhere
RECIPROCAL_NORMAL = (2.0 ** -126, 2.0 ** 126)


def constant_divisor_ok(v) -> bool:
    """Whether dividing by the constant ``v`` (a scalar or an array) is safe as a multiplication
    by its reciprocal: every finite nonzero value within :data:`RECIPROCAL_NORMAL`."""
    a = np.abs(np.asarray(v, dtype=np.float32))
    a = a[np.isfinite(a) & (a != 0)]
    return bool(((a >= RECIPROCAL_NORMAL[0]) & (a <= RECIPROCAL_NORMAL[1])).all())


def norm_dim(d: int, r: int, what: str = "dim") -> int:
    if not -max(r, 1) <= d < max(r, 1):
        raise EngineBuildError(f"{what} {d} out of range for rank {r}")
    return d % max(r, 1) if r else 0


def shape_parts(o, x, parts) -> Any:
    """An i64 shape vector: ``parts`` are ints (fixed sizes) or ``("dim", i)`` (x's dim i) or
    ``("prod", i, j)`` (the product of x's dims i..j-1)."""
    ds = dims(x)
    if all(isinstance(p, int) or (p[0] == "dim" and ds[p[1]] is not None)
           or (p[0] == "prod" and all(ds[k] is not None for k in range(p[1], p[2]))) for p in parts):
        vals = []
        for p in parts:
            if isinstance(p, int):
                vals.append(p)
            elif p[0] == "dim":
                vals.append(ds[p[1]])
            else:
                vals.append(int(np.prod([ds[k] for k in range(p[1], p[2])], dtype=np.int64)))
        return i64(o, vals)
    shp = out(o.shape_of(x, "i64"))
    pieces = []
    for p in parts:
        if isinstance(p, int):
            pieces.append(i64(o, [p]))
        elif p[0] == "dim":
            pieces.append(out(o.gather(shp, i64(o, [p[1]]), i64(o, 0))))
        else:
            if p[2] <= p[1]:
                pieces.append(i64(o, [1]))
            else:
                sl = out(o.gather(shp, i64(o, list(range(p[1], p[2]))), i64(o, 0)))
                pieces.append(out(o.reduce_prod(sl, i64(o, [0]), True)))
    return out(o.concat(pieces, 0))


# -- checks (on the NodeInfo supports() sees) ---------------------------------------------------------
def rank_of(node, i: int) -> int | None:
    t = node.args[i].type
    shape = getattr(t, "shape", None)
    return None if shape is None else len(shape)


def arg_shape(node, i: int):
    return getattr(node.args[i].type, "shape", None)


def _arg_index(node, name: str) -> int | None:
    for i, a in enumerate(node.args):
        if a.name == name:
            return i
    return None


def static_dim(node, i: int, d: int) -> int | None:
    shape = arg_shape(node, i)
    if shape is None or not shape:
        return None
    d = d % len(shape)
    return shape[d] if isinstance(shape[d], int) else None


