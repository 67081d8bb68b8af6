"""torch.export -> srcore: ``from_torch(module, example_inputs, *, dynamic_shapes=None)``.

The module is exported with ``torch.export.export`` (or an ``ExportedProgram`` /
``torch.export.save``'d ``.pt2`` file is taken as is). By default the program is
used *without* decompositions: export's ATen graph keeps ``linear``, ``conv2d``,
``batch_norm``, ``layer_norm``, ``scaled_dot_product_attention``, the ops srcore
declares, where core ATen would lower them to ``addmm``/``convolution``/
``_native_batch_norm_legit_no_training``. Only if the graph holds a mutating op
(``detach_``, ``add_``) is it functionalized with ``run_decompositions({})``;
``decompositions="core"`` asks for the full core ATen opset instead.

The FX graph is walked into srcore IR: user placeholders -> graph inputs;
parameter/buffer/constant placeholders -> named params (``fc1.weight`` from the
graph signature); ``torch.ops.ns.op.overload`` -> node ``ns::op`` with all
arguments positional in schema order and ``node.schema`` set;
``operator.getitem`` -> the producer's outputs; ``higher_order.cond`` ->
``prim::If``; ``higher_order.while_loop`` -> ``prim::Loop``; ``wrap_with_set_grad_enabled``
(``with torch.no_grad():``) -> its body, inlined.
"""
from __future__ import annotations

import contextlib
import logging
import operator
import os
import re
from typing import Any

from ..errors import ConversionError
from ..ir.graph import Block, Graph, SourceLocation, Value
from ..ir.types import BOOL, FLOAT, INT, ListType, OptionalType, TensorType, TupleType, Type
from ..model import InputSpec, Model, default_output_names
from ..runtime.inputs import INPUT_TREE
from . import _torch_common as tc
from ._paths import portable_path

INT64_MAX = 2**63 - 1
#: operator.* on SymInts -> the TorchScript int ops
_PY_OPS = {operator.add: "aten::add", operator.sub: "aten::sub", operator.mul: "aten::mul",
           operator.floordiv: "aten::floordiv", operator.truediv: "aten::div", operator.mod: "aten::remainder",
           operator.neg: "aten::neg", operator.eq: "aten::eq", operator.ne: "aten::ne", operator.lt: "aten::lt",
           operator.le: "aten::le", operator.gt: "aten::gt", operator.ge: "aten::ge",
           operator.and_: "aten::__and__", operator.or_: "aten::__or__", operator.pow: "aten::pow"}
#: runtime assertions export inserts for symbolic shapes; they produce nothing the graph uses
_SKIP = {"aten::_assert_scalar", "aten::_assert_async", "aten::_assert_tensor_metadata",
         "aten::sym_constrain_range", "aten::sym_constrain_range_for_size", "aten::_print"}
_RENAME = {"aten::sym_size": ("aten::size", "aten::size.int(Tensor self, int dim) -> int"),
           "aten::sym_numel": ("aten::numel", "aten::numel(Tensor self) -> int"),
           "aten::sym_stride": ("aten::stride", "aten::stride.int(Tensor self, int dim) -> int"),
           # export's view of a fresh result (e.g. after matmul): a reshape, the runtime's view op
           "aten::_unsafe_view": ("aten::reshape", "aten::reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)")}


def from_torch(module, example_inputs=None, *, dynamic_shapes=None, decompositions: str = "auto") -> Model:
    """Convert an ``nn.Module`` (exported with ``example_inputs``), an ``ExportedProgram`` or a
    ``.pt2`` file to a ``Model``. ``decompositions``: ``"auto"`` (keep export's high-level
    ops, functionalize only if needed) or ``"core"`` (core ATen).

    Symbolic dims are named after the ``torch.export.Dim``s in ``dynamic_shapes`` (a dict or a
    tuple/list). An ExportedProgram or ``.pt2`` file does not record those names (torch keeps only
    its own symbols, ``s77``): pass the ``dynamic_shapes`` it was exported with to name them."""
    torch = tc.import_torch()
    if decompositions not in ("auto", "core"):
        raise ValueError(f"decompositions must be 'auto' or 'core', not {decompositions!r}")
    ep, source = _exported(torch, module, example_inputs, dynamic_shapes)
    if decompositions == "core":
        ep = ep.run_decompositions()
    elif any(_is_mutating(n) for n in _all_fx_nodes(ep.graph_module)):
        ep = ep.run_decompositions({})
    conv = _Converter(torch, ep, source, _dim_names(torch, ep, dynamic_shapes))
    graph, specs = conv.convert()
    tc.canonicalize(graph)
    from ..passes.fold_qdq import fold_qdq

    fold_qdq(graph)   # a PT2E-quantized model (prepare_pt2e / convert_pt2e): quantized values and ops
    meta = {"producer": f"srcore.from_torch (torch {torch.__version__})",
            "source": portable_path(source)}
    tree = _input_tree(ep)
    if tree is not None:
        meta[INPUT_TREE] = tree
    return Model(graph, conv.params, specs, _output_names(ep, len(graph.outputs)), meta)


def _input_tree(ep) -> str | None:
    """JSON of how export flattened the inputs, when an argument is a list, tuple or dict (its
    tensors are the model's inputs ``xs_0``, ``xs_1``, ``d_key``...): the runtime flattens a call
    with the same structure (srcore.runtime.inputs.flatten_structured). None if every input is a
    tensor (or a number), or the structure is one the runtime cannot walk (named tuples, dataclasses)."""
    import json

    spec = getattr(ep.call_spec, "in_spec", None)
    if spec is None or spec.type is not tuple:
        return None
    top = _children(spec)
    if len(top) != 2 or top[0].type is not tuple or top[1].type is not dict:
        return None
    args = [_tree(c) for c in _children(top[0])]
    kw = [_tree(c) for c in _children(top[1])]
    if any(t is None for t in args + kw) or all(t == 0 for t in args + kw):
        return None
    return json.dumps({"args": args, "kwargs": [list(top[1].context), kw]})


def _tree(spec):
    """A TreeSpec as JSON-able data: 0 a leaf, ["list", children], ["dict", keys, children]; None
    for what the runtime does not flatten."""
    if spec.is_leaf():
        return 0
    children = [_tree(c) for c in _children(spec)]
    if any(c is None for c in children):
        return None
    if spec.type in (list, tuple):
        return ["list", children]
    if spec.type is dict and all(isinstance(k, str) for k in spec.context):
        return ["dict", list(spec.context), children]
    return None


def _output_names(ep, n: int) -> tuple[str, ...]:
    """A top-level dict of tensors (string keys) names the outputs after its keys, as from_torchscript
    does; anything else is ``output`` / ``output0``, ``output1``, ..."""
    spec = getattr(ep.call_spec, "out_spec", None)
    keys = list(getattr(spec, "context", None) or []) if spec is not None and spec.type is dict else []
    leaves = _children(spec) if spec is not None else []
    if len(keys) == n and all(isinstance(k, str) for k in keys) and len(set(keys)) == n \
            and all(c.is_leaf() for c in leaves):
        return tuple(keys)
    return default_output_names(n)


def _children(spec) -> list:
    """A TreeSpec's children: ``children()`` where torch has it (2.10 deprecates ``children_specs``
    with a FutureWarning on every conversion), else ``children_specs``."""
    children = getattr(spec, "children", None)
    return list(children() if callable(children) else getattr(spec, "children_specs", None) or [])


@contextlib.contextmanager
def _quiet_logger(name: str):
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _exported(torch, obj, example_inputs, dynamic_shapes):
    if isinstance(obj, (str, os.PathLike)):
        path = os.fspath(obj)
        try:
            with _quiet_logger("torch.export"):  # it logs a traceback before raising; we report the error
                return torch.export.load(path), path
        except Exception as exc:
            raise ConversionError(f"{path}: not a loadable torch.export file: {type(exc).__name__}: {exc}") from exc
    if isinstance(obj, torch.export.ExportedProgram):
        return obj, "ExportedProgram"
    if not isinstance(obj, torch.nn.Module):
        raise ConversionError(f"from_torch takes an nn.Module, ExportedProgram or .pt2 path, not {type(obj).__name__}")
    if example_inputs is None:
        raise ConversionError(f"from_torch needs example_inputs to export {type(obj).__name__}")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    was_training = obj.training
    mode = _Mode(obj)
    try:
        return torch.export.export(obj, tuple(example_inputs), dynamic_shapes=dynamic_shapes), type(obj).__name__
    except Exception as exc:
        raise ConversionError(f"torch.export failed on {type(obj).__name__}: {type(exc).__name__}: {exc}") from exc
    finally:
        mode.restore(was_training)


class _Mode:
    """``eval()`` for the export, restored afterwards; a module that was exported already (PT2E's
    ``convert_pt2e`` result) refuses train/eval and is taken as it is."""

    def __init__(self, obj):
        self.obj = obj
        try:
            obj.eval()
            self.switched = True
        except NotImplementedError:
            self.switched = False

    def restore(self, was_training: bool) -> None:
        if self.switched:
            self.obj.train(was_training)


def _all_fx_nodes(gm):
    for n in gm.graph.nodes:
        yield n
        if n.op == "get_attr":
            sub = getattr(gm, n.target, None)
            if hasattr(sub, "graph"):
                yield from _all_fx_nodes(sub)


def _is_mutating(n) -> bool:
    schema = getattr(n.target, "_schema", None)
    return n.op == "call_function" and schema is not None and schema.is_mutable


def _dim_names(torch, ep, dynamic_shapes) -> dict[str, str]:
    """Export's shape symbols (``s77``) -> the user's ``Dim`` names (``batch``).

    ``dynamic_shapes`` as torch.export takes it: a dict by argument name or a tuple/list in argument
    order, each entry a dict ``{dim: Dim}`` or a tuple/list with one ``Dim``/``None`` per dim. torch
    keeps no ``Dim`` names in an ExportedProgram or a ``.pt2`` file: for those the caller passes the
    same ``dynamic_shapes`` again to name the dims (see ``from_torch``).
    """
    if dynamic_shapes is None:
        return {}
    users = [n for n in ep.graph.nodes if n.op == "placeholder"
             and n.name in {s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"}]
    if isinstance(dynamic_shapes, dict):
        by_name = {n.name: n for n in users}
        unknown = sorted(set(dynamic_shapes) - set(by_name))
        if unknown:
            raise ConversionError(f"dynamic_shapes names unknown inputs {unknown} (inputs: {sorted(by_name)})")
        pairs = [(by_name[k], v) for k, v in dynamic_shapes.items()]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) > len(users):
            raise ConversionError(f"dynamic_shapes has {len(dynamic_shapes)} entries for {len(users)} inputs")
        pairs = list(zip(users, dynamic_shapes))
    else:
        raise ConversionError(f"dynamic_shapes must be a dict or a tuple/list, not {type(dynamic_shapes).__name__}")
    out: dict[str, str] = {}
    for node, dims in pairs:
        val = node.meta.get("val")
        if val is None or dims is None:
            continue
        items = dims.items() if isinstance(dims, dict) else enumerate(dims) if isinstance(dims, (tuple, list)) else ()
        for d, dim in items:
            name = getattr(dim, "__name__", None)
            if not name or not isinstance(d, int) or not -val.dim() <= d < val.dim():
                continue
            sym = val.shape[d]
            if isinstance(sym, torch.SymInt) and getattr(sym.node.expr, "is_Symbol", False):
                out[str(sym.node.expr)] = name
    return out


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')


def _source(n) -> SourceLocation | None:
    # the innermost frame in a real file (frames of generated code, "<eval_with_key>", say nothing)
    found = [f for f in _FILE_LINE.findall(n.meta.get("stack_trace") or "") if not f[0].startswith("<")]

    return SourceLocation(portable_path(found[-1][0]), int(found[-1][1])) if found else None


class _Converter:
    def __init__(self, torch, ep, source: str, dim_names: dict[str, str]):
        self.torch, self.ep, self.source, self.dim_names = torch, ep, source, dim_names
        self.params: dict[str, Any] = {}
        self.problems: list[str] = []
        self.g = Graph()
        self.unpacked: dict[int, list[Value]] = {}

    def convert(self) -> tuple[Graph, tuple[InputSpec, ...]]:
        sig = {s.arg.name: s for s in self.ep.graph_signature.input_specs}
        bad_out = [s for s in self.ep.graph_signature.output_specs if s.kind.name != "USER_OUTPUT"]
        for s in bad_out:
            self.problems.append(f"output {s.arg.name}: {s.kind.name} (the program mutates {s.target!r})")
        env: dict[Any, Any] = {}
        specs = []
        for n in self.ep.graph.nodes:
            if n.op != "placeholder":
                continue
            spec = sig.get(n.name)
            kind = spec.kind.name if spec is not None else "USER_INPUT"
            if kind == "USER_INPUT":
                t = self.type_of(n.meta.get("val"))
                env[n] = self.g.add_input(t, n.name)
                if isinstance(t, TensorType):  # non-tensor inputs need no spec: their IR type says it all
                    specs.append(InputSpec(n.name, t.dtype, t.shape))
            elif kind in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR") and n.users:
                env[n] = self.param(spec.target, n.name)
            elif n.users:
                self.problems.append(f"input {n.name}: {kind} inputs are not supported")
        outs = self.body(self.ep.graph_module, env, self.g.block)
        for v in outs:
            if v is not None:
                self.g.register_output(v)
        if self.problems:
            raise tc.unsupported_error(self.source, self.problems)
        return self.g, tuple(specs)

    # -- values and types ---------------------------------------------------------------------------------
    def type_of(self, val) -> Type:
        torch = self.torch
        if isinstance(val, torch.Tensor):
            return TensorType(tc.np_dtype_name(val.dtype), tuple(self.dim(d) for d in val.shape))
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            return INT
        if isinstance(val, (torch.SymFloat, float)):
            return FLOAT
        if isinstance(val, (torch.SymBool, bool)):
            return BOOL
        if isinstance(val, (list, tuple)) and val and all(isinstance(v, torch.Tensor) for v in val):
            return ListType(TensorType())
        return TensorType()

    def dim(self, d):
        if isinstance(d, int):
            return d
        expr = d.node.expr
        if getattr(expr, "is_Symbol", False):
            return self.dim_names.get(str(expr), str(expr))
        if getattr(expr, "is_number", False):
            return int(expr)
        # an expression such as 2*s0 (a derived Dim): unknown here, shape propagation recomputes it.
        # Not int(d): that returns the example's size (the hint) and would fix the dim to it
        return None

    def param(self, target: str, name: str) -> Value:
        if target not in self.params:
            t = self.ep.state_dict.get(target)
            if t is None:
                t = self.ep.constants.get(target)
            if not isinstance(t, self.torch.Tensor):
                self.problems.append(f"parameter {target!r}: not a tensor ({type(t).__name__})")
                return self.g.insert_constant(None)
            self.params[target] = tc.tensor_to_numpy(t)
        arr = self.params[target]
        c = self.g.create("prim::Constant", (), (TensorType(str(arr.dtype), arr.shape),),
                          {"value": arr, "param": target}, output_names=[tc.clean_name(name)])
        self.g.block.prepend(c)  # params are graph-level: visible in every block
        return c.output

    def const(self, value, block: Block) -> Value:
        v, t = tc.python_constant(value, self.torch)
        n = self.g.create("prim::Constant", (), (t,), {} if v is None else {"value": v})
        block.append(n)
        return n.output

    def arg(self, a, env, block: Block, schema_type=None) -> Value:
        """An FX argument -> a srcore value (constants and list constructions are inserted)."""
        fx = self.torch.fx
        if isinstance(a, fx.Node):
            v = env.get(a)
            if v is None:
                raise _Skip(a.name)
            if schema_type is not None and schema_type.kind() == "TensorType" and not v.type.is_tensor():
                return self.num_to_tensor(v, block)
            return v
        if isinstance(a, (list, tuple)) and any(isinstance(x, fx.Node) for x in a):
            elem_t = schema_type.getElementType() if schema_type is not None and schema_type.kind() == "ListType" else None
            vals = [self.arg(x, env, block, elem_t) for x in a]
            lt = tc.ir_type(schema_type) if elem_t is not None else ListType(vals[0].type)
            n = self.g.create("prim::ListConstruct", vals, (lt,))
            block.append(n)
            return n.output
        v = self.const(a, block)
        if schema_type is not None and schema_type.kind() == "TensorType" and isinstance(a, (int, float, bool)):
            return self.num_to_tensor(v, block)
        return v

    def num_to_tensor(self, v: Value, block: Block) -> Value:
        """A number where the schema wants a Tensor (FX's wrapped scalars): ``prim::NumToTensor``."""
        n = self.g.create("prim::NumToTensor", (v,), (TensorType(),))
        block.append(n)
        return n.output

    # -- nodes ---------------------------------------------------------------------------------------------
    def body(self, gm, env, block: Block) -> list[Value | None]:
        """Convert ``gm``'s non-placeholder nodes into ``block``; returns the output values."""
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                continue
            if n.op == "output":
                res = n.args[0]
                res = res if isinstance(res, (list, tuple)) else (res,)
                try:
                    return [self.arg(a, env, block) for a in res]
                except _Skip:
                    return []
            if n.op == "get_attr":
                env[n] = _SubGraph(getattr(gm, n.target))
                continue
            try:
                self.node(n, env, block)
            except _Skip:  # an input came from an unsupported node, already reported
                env[n] = None
        return []

    def where(self, n) -> str:
        loc = _source(n)
        return f"{n.name} ({n.target})" + (f" at {loc}" if loc else "")

    def node(self, n, env, block: Block) -> None:
        torch = self.torch
        t = n.target
        if t is operator.getitem:
            src, i = n.args
            env[n] = self.getitem(src, i, env, block)
            return
        if t is torch.ops.higher_order.cond:
            env[n] = self.cond(n, env, block)
            return
        if t is torch.ops.higher_order.while_loop:
            env[n] = self.while_loop(n, env, block)
            return
        if t is getattr(torch.ops.higher_order, "wrap_with_set_grad_enabled", None):
            # `with torch.no_grad():` in forward: srcore never records gradients, so the body inlines
            _enabled, body, *operands = n.args
            env[n] = _Multi(self.inline(env[body].gm, [self.arg(a, env, block) for a in operands], block))
            return
        if isinstance(t, torch._ops.OpOverload):
            self.op(n, env, block)
            return
        sym = {torch.sym_max: "prim::max", torch.sym_min: "prim::min", torch.sym_not: "aten::__not__",
               # int <-> float of a SymInt/SymFloat (``n * 1.0``, ``int(x.shape[0] * 0.5)``)
               torch.sym_float: "aten::Float", torch.sym_int: "aten::Int"}
        if t in _PY_OPS or t in sym:
            kind = _PY_OPS.get(t) or sym[t]
            ins = [self.arg(a, env, block) for a in n.args]
            node = self.g.create(kind, ins, (self.type_of(n.meta.get("val")),), output_names=[n.name],
                                 source=_source(n))
            block.append(node)
            env[n] = node.output
            return
        self.problems.append(f"{self.where(n)}: {n.op} target {t} is not supported")
        env[n] = None

    def op(self, n, env, block: Block) -> None:
        target = _scalar_overload(self.torch, n)
        schema = target._schema
        kind = schema.name
        if kind in _SKIP:
            return
        args, kwargs = n.args, n.kwargs
        if kind == "aten::_to_copy":
            lowered = _lower_to_copy(self.torch, n)
            if lowered is None:
                self.problems.append(f"{self.where(n)}: aten::_to_copy to another device, layout or memory "
                                     f"format is not supported ({dict(n.kwargs)})")
                env[n] = None
                return
            schema, args, kwargs = lowered
            kind = schema.name
        text = str(schema)
        kind, text = _RENAME.get(kind, (kind, text))
        ins = []
        for i, a in enumerate(schema.arguments):
            if i < len(args):
                v = args[i]
            elif a.name in kwargs:
                v = kwargs[a.name]
            elif a.has_default_value():
                v = a.default_value
            else:
                self.problems.append(f"{self.where(n)}: argument {a.name} missing")
                env[n] = None
                return
            ins.append(self.arg(v, env, block, a.type))
        val = n.meta.get("val")
        nret = len(schema.returns)
        if nret == 1:
            out_types = [self.type_of(val)]
        else:
            out_types = [self.type_of(v) for v in (val if isinstance(val, (list, tuple)) else [None] * nret)]
        names = [n.name] if nret == 1 else [f"{n.name}_{i}" for i in range(nret)]
        node = self.g.create(kind, ins, out_types, output_names=names, source=_source(n))
        node.schema = tc.parse_schema(text)
        block.append(node)
        env[n] = node.output if nret == 1 else _Multi(node.outputs)

    def getitem(self, src, i, env, block: Block) -> Value:
        v = env.get(src)
        if v is None:
            raise _Skip(src.name)
        if isinstance(v, _Multi):
            return v.values[i]
        if isinstance(v.type, ListType):  # a Tensor[] result: unpack it once, after its producer
            if id(v) not in self.unpacked:
                k = len(src.meta["val"])
                u = self.g.create("prim::ListUnpack", (v,), [TensorType()] * k,
                                  output_names=[f"{src.name}_{j}" for j in range(k)])
                u.insert_after(v.node)
                for o, fv in zip(u.outputs, src.meta["val"]):
                    o.type = self.type_of(fv)
                self.unpacked[id(v)] = u.outputs
            return self.unpacked[id(v)][i]
        self.problems.append(f"getitem on {src.name}, which is neither multi-output nor a list")
        raise _Skip(src.name)

    def to_bool(self, v: Value, block: Block) -> Value:
        if v.type == BOOL:
            return v
        n = self.g.create("aten::Bool", (v,), (BOOL,))
        n.schema = tc.parse_schema("aten::Bool.Tensor(Tensor a) -> bool")
        block.append(n)
        return n.output

    def cond(self, n, env, block: Block) -> _Multi:
        pred, true_gm, false_gm, operands = n.args
        p = self.to_bool(self.arg(pred, env, block), block)
        ops_vals = [self.arg(a, env, block) for a in operands]
        vals = n.meta.get("val") or ()
        node = self.g.create("prim::If", (p,), [self.type_of(v) for v in vals],
                             output_names=[f"{n.name}_{i}" for i in range(len(vals))], source=_source(n))
        block.append(node)
        for sub in (true_gm, false_gm):
            b = node.add_block()
            for v in self.inline(env[sub].gm, ops_vals, b):
                b.register_output(v)
        return _Multi(node.outputs)

    def inline(self, gm, inputs: list[Value], block: Block) -> list[Value]:
        phs = [p for p in gm.graph.nodes if p.op == "placeholder"]
        sub_env = dict(zip(phs, inputs))
        outs = self.body(gm, sub_env, block)
        if any(v is None for v in outs):
            raise _Skip("subgraph")
        return outs

    def while_loop(self, n, env, block: Block) -> _Multi:
        cond_fn, body_fn, carried, extra = n.args
        cond_gm, body_gm = env[cond_fn].gm, env[body_fn].gm
        init = [self.arg(a, env, block) for a in carried]
        extra_vals = [self.arg(a, env, block) for a in extra]
        first = self.to_bool(self.inline(cond_gm, init + extra_vals, block)[0], block)
        trips = self.const(INT64_MAX, block)
        vals = n.meta.get("val") or [None] * len(init)
        loop = self.g.create("prim::Loop", [trips, first, *init], [self.type_of(v) for v in vals],
                             output_names=[f"{n.name}_{i}" for i in range(len(init))], source=_source(n))
        block.append(loop)
        b = loop.add_block()
        b.add_input(INT, f"{n.name}_i")
        cur = [b.add_input(v.type, f"{n.name}_c{i}") for i, v in enumerate(loop.outputs)]
        new = self.inline(body_gm, cur + extra_vals, b)
        again = self.to_bool(self.inline(cond_gm, new + extra_vals, b)[0], b)
        b.register_output(again)
        for v in new:
            b.register_output(v)
        return _Multi(loop.outputs)


def _lower_to_copy(torch, n):
    """``aten::_to_copy`` (what export makes of ``.to(dtype)``/``.float()``) -> ``aten::to.dtype`` with
    ``copy=True``, or ``aten::clone`` without a dtype; ``None`` for another device/layout/format."""
    kw = dict(n.kwargs)
    device = kw.pop("device", None)
    if kw.pop("layout", None) not in (None, torch.strided) or (device is not None and torch.device(device).type != "cpu"):
        return None
    if kw.pop("memory_format", None) not in (None, torch.preserve_format, torch.contiguous_format):
        return None
    kw.pop("pin_memory", None)
    kw.pop("non_blocking", None)
    dtype = kw.pop("dtype", None)
    if kw or len(n.args) != 1:
        return None
    if dtype is None:
        return torch.ops.aten.clone.default._schema, n.args, {}
    return torch.ops.aten.to.dtype._schema, (n.args[0], dtype), {"copy": True}


def _scalar_overload(torch, n):
    """``aten.mul.Tensor(x, 0.5)`` -> ``aten.mul.Scalar``: a number passed where the schema wants a
    Tensor goes to the sibling overload that takes a Scalar there, as TorchScript would pick."""
    t = n.target
    schema = t._schema
    def is_number(a) -> bool:
        if isinstance(a, torch.fx.Node):
            a = a.meta.get("val")
        return isinstance(a, (int, float, torch.SymInt, torch.SymFloat)) and not isinstance(a, bool)

    numbers = {i for i, a in enumerate(schema.arguments) if i < len(n.args)
               and a.type.kind() == "TensorType" and is_number(n.args[i])}
    if not numbers:
        return t
    packet = getattr(getattr(torch.ops, schema.name.split("::")[0]), schema.name.split("::")[1])
    for name in packet.overloads():
        cand = getattr(packet, name)
        cargs = cand._schema.arguments
        if len(cargs) != len(schema.arguments) or cand._schema.is_mutable:
            continue
        ok = all(c.name == a.name and (c.type.kind() == "NumberType" if i in numbers else str(c.type) == str(a.type))
                 for i, (c, a) in enumerate(zip(cargs, schema.arguments)))
        if ok and [str(r.type) for r in cand._schema.returns] == [str(r.type) for r in schema.returns]:
            return cand
    return t


class _Skip(Exception):
    """An input comes from a node that was reported unsupported."""


class _Multi:
    __slots__ = ("values",)

    def __init__(self, values):
        self.values = list(values)


class _SubGraph:
    __slots__ = ("gm",)

    def __init__(self, gm):
        self.gm = gm
