"""TorchScript -> srcore: ``from_torchscript(module_or_path, example_inputs=None)``.

The module is scripted (or traced when scripting fails and example inputs are
given) and frozen in eval mode (a module or file that is frozen already is taken
as it is), and its ``torch._C.Graph`` is walked through the
graph API (never its printed text) into an ``srcore.ir.Graph``. Tensor
constants become named parameters (``fc1.weight``: freezing names the constant
after its ``prim::GetAttr`` path; anything else is ``_tensor_constant_N``).
"""
from __future__ import annotations

import os
from typing import Any, Mapping

import attrs

from ..errors import ConversionError
from ..ir.graph import Block, Graph
from ..ir.types import NONE, ListType, OptionalType, TensorType, Type
from ..model import Model, default_output_names
from . import _mkldnn, _quantized
from . import _torch_common as tc
from ._paths import portable_path

#: node kinds that cannot run without a Python interpreter or module objects
UNSUPPORTED = {"prim::CallMethod", "prim::CallFunction", "prim::PythonOp", "prim::SetAttr",
               "prim::Enter", "prim::Exit", "prim::CreateObject",
               "prim::ModuleContainerIndex", "prim::Closure", "prim::awaitable", "prim::rpc_async",
               "prim::IgnoredPythonOp", "prim::TypeCheck", "prim::profile", "prim::DifferentiableGraph"}


def from_torchscript(module_or_path, example_inputs=None, *,
                     dynamic_dims: Mapping[str, Mapping[int, str]] | None = None) -> Model:
    """Convert an ``nn.Module``, a function, a ``ScriptModule``/``ScriptFunction`` or a
    ``torch.jit.save``'d file to a ``Model``.

    ``example_inputs`` (a tuple of tensors) fix the input specs' dtypes and shapes, and
    allow tracing when scripting fails; ``dynamic_dims={"x": {0: "batch"}}`` makes
    dims symbolic. Unsupported constructs are all listed in one ``ConversionError``.
    """
    torch = tc.import_torch()
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    script, source = _script_module(torch, module_or_path, example_inputs)
    if isinstance(script, torch.jit.ScriptFunction):  # a function: nothing to freeze, inline its calls
        frozen = None
        ts_graph = script.graph.copy()
        torch._C._jit_pass_inline(ts_graph)
        torch._C._jit_pass_dce(ts_graph)  # the now-unused function constants
        arg_names = [a.name for a in script.schema.arguments]
        schema_args = list(script.schema.arguments)
    else:
        methods = script._c._method_names()
        if "forward" not in methods:
            overloads = sorted(m for m in methods if m.startswith("forward__"))
            why = (f"its forward is overloaded ({', '.join(overloads)}), as nn.LSTM/GRU/RNN's are"
                   if overloads else "it has no forward method")
            raise ConversionError(f"cannot convert {source}: {why}; wrap it in a module whose forward calls "
                                  f"it with the inputs you use")
        frozen = _frozen(torch, script, source)
        ts_graph = frozen.graph
        arg_names = [a.name for a in frozen.forward.schema.arguments]
        schema_args = list(frozen.forward.schema.arguments)[1:]  # without self
    conv = _Converter(torch, source, frozen)
    graph = conv.convert(ts_graph, arg_names)
    if example_inputs is not None:
        _bind_defaults(graph, schema_args, len(example_inputs), torch)
    output_names = _flatten_return(graph)
    tc.canonicalize(graph)
    types = [v.type for v in graph.inputs]
    specs = tc.input_specs([v.name for v in graph.inputs], example_inputs, types, dynamic_dims, torch)
    by_name = {s.name: s for s in specs}
    for v in graph.inputs:
        s = by_name.get(v.name)
        if s is not None and _is_optional_tensor(v.type):
            # `mask: Optional[Tensor] = None` given a tensor example: the model takes a tensor there
            # (its `is not None` checks fold away); a None example keeps the input optional
            v.type = s.tensor_type() if s.dtype is not None else TensorType()
        elif s is not None and isinstance(v.type, TensorType) and s.dtype is not None:
            v.type = s.tensor_type()
    meta = {"producer": f"srcore.from_torchscript (torch {torch.__version__})",
            "source": portable_path(source)}
    return Model(graph, conv.params, specs, output_names, meta)


#: the env value of a grad-mode context object (see ``_Converter.grad_mode``)
_GRAD_MODE = object()


def _is_grad_mode(ts_type) -> bool:
    name = ts_type.str() if hasattr(ts_type, "str") else str(ts_type)
    return name.startswith("__torch__.torch.autograd.grad_mode.")


def _is_optional_tensor(t: Type) -> bool:
    return isinstance(t, OptionalType) and isinstance(t.elem, TensorType)


def _bind_defaults(graph: Graph, schema_args, n_examples: int, torch) -> None:
    """Arguments after the example inputs that have a default (``src_mask=None``, ``is_causal=False``)
    take it, as torch.export does with the same example inputs: the model then takes the inputs
    it was shown, and its ``if mask is not None`` branches fold away."""
    for i in range(len(graph.inputs) - 1, n_examples - 1, -1):
        arg = schema_args[i] if i < len(schema_args) else None
        if arg is None or not arg.has_default_value():
            continue
        try:
            value, t = tc.python_constant(arg.default_value, torch)
        except ValueError:
            continue
        v = graph.inputs[i]
        c = graph.create("prim::Constant", (), (NONE if value is None else t,), {} if value is None else {"value": value})
        first = graph.block.nodes.first
        c.insert_before(first) if first is not None else graph.block.append(c)
        v.replace_all_uses_with(c.output)
        name = v.name
        graph.block.erase_input(i)
        graph.rename(c.output, name)


def _flatten_return(graph: Graph) -> tuple[str, ...]:
    """``return (a, b)`` -> two graph outputs ``output0``, ``output1``; ``return {"logits": a, "probs": b}``
    (string keys) -> two graph outputs named ``logits`` and ``probs``: the structure and names
    torch.export gives (nested tuples and other dicts stay). Returns the output names."""
    if len(graph.outputs) != 1:
        return default_output_names(len(graph.outputs))
    v = graph.outputs[0]
    node = v.node
    if node.owning_block is not graph.block or node.kind not in ("prim::TupleConstruct", "prim::DictConstruct"):
        return default_output_names(1)
    elems = list(node.inputs)
    names = default_output_names(len(elems))
    if node.kind == "prim::DictConstruct":
        keys = [k.constant_value() if k.is_constant() else None for k in elems[0::2]]
        if not keys or not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
            return default_output_names(1)
        names, elems = tuple(keys), elems[1::2]
    graph.block.erase_output(0)
    for e in elems:
        graph.register_output(e)
    if not v.uses:
        node.destroy()
    return names


def _script_module(torch, obj, example_inputs):
    if isinstance(obj, (str, os.PathLike)):
        path = os.fspath(obj)
        try:
            return torch.jit.load(path, map_location="cpu"), path
        except Exception as exc:
            raise ConversionError(f"{path}: not a loadable TorchScript file: {type(exc).__name__}: {exc}") from exc
    if isinstance(obj, torch.jit.ScriptModule):
        return obj, type(obj).__name__
    if isinstance(obj, torch.jit.ScriptFunction):
        return obj, obj.name
    if not isinstance(obj, torch.nn.Module) and not callable(obj):
        raise ConversionError(f"from_torchscript takes an nn.Module, a function, a ScriptModule or a file "
                              f"path, not {type(obj).__name__}")
    name = type(obj).__name__ if isinstance(obj, torch.nn.Module) else getattr(obj, "__name__", "function")
    was_training = getattr(obj, "training", False)
    if isinstance(obj, torch.nn.Module):
        obj.eval()
    try:
        return torch.jit.script(obj), name
    except Exception as script_exc:
        if example_inputs is None:
            raise ConversionError(f"torch.jit.script failed on {name} and no example_inputs were given "
                                  f"to trace it instead: {type(script_exc).__name__}: {script_exc}") from script_exc
        try:
            with torch.no_grad():
                return torch.jit.trace(obj, tuple(example_inputs), check_trace=False), name
        except Exception as exc:
            raise ConversionError(f"cannot script ({script_exc}) nor trace {name}: {exc}") from exc
    finally:
        if isinstance(obj, torch.nn.Module):
            obj.train(was_training)


def _is_frozen(script) -> bool:
    """``torch.jit.freeze`` (and ``optimize_for_inference``) fold every attribute not asked to be
    preserved into the graph, ``training`` included; a scripted or traced module always has it."""
    return not script._c.hasattr("training")


def _frozen(torch, script, source: str):
    """``script`` frozen in eval mode; a module that is frozen already is taken as it is."""
    if _is_frozen(script):
        return script
    if script.training:
        script = script.eval()
    try:
        return torch.jit.freeze(script)
    except Exception as exc:
        raise ConversionError(f"cannot freeze {source}: {type(exc).__name__}: {exc}") from exc


@attrs.frozen
class _ModuleRef:
    """A ``torch._C`` value that is a (sub)module: ``prim::GetAttr`` chains resolve through it."""

    obj: Any
    path: str


class _Converter:
    def __init__(self, torch, source: str, frozen):
        self.torch = torch
        self.frozen = frozen
        self.attr_params: dict[str, str] = {}  # GetAttr path -> param name
        self.source = source
        self.params: dict[str, Any] = {}
        self.problems: list[str] = []
        self.env: dict[Any, Any] = {}
        self._anon = 0
        self.mkldnn = _mkldnn.Lowering(self.env, self.lowered_node)
        # torch's quantized engine now: with qnnpack, torch runs some quantized ops on QNNPACK's kernels
        self.quantized_engine = str(torch.backends.quantized.engine)

    def convert(self, ts_graph, arg_names) -> Graph:
        g = Graph()
        ts_inputs = list(ts_graph.inputs())
        if ts_inputs and ts_inputs[0].type().kind() == "ClassType":  # the module itself
            # freezing folds most attributes; the rest (e.g. weights a module compares by
            # identity) are read through prim::GetAttr, which we resolve against the frozen module
            self.env[ts_inputs[0]] = _ModuleRef(self.frozen, "")
            ts_inputs = ts_inputs[1:]
            arg_names = arg_names[1:]
        for i, v in enumerate(ts_inputs):
            name = arg_names[i] if i < len(arg_names) else v.debugName()
            self.env[v] = g.add_input(self.type_of(v, f"input {name!r}"), tc.clean_name(name))
        self.block(ts_graph, g.block, g)
        if self.problems:
            raise tc.unsupported_error(self.source, self.problems)
        return g

    def type_of(self, v, where: str) -> Type:
        try:
            return tc.ir_type(v.type())
        except ValueError as exc:
            self.problems.append(f"{where}: {exc}")
            return TensorType()

    def block(self, ts_block, dst: Block, g: Graph) -> None:
        """Convert the nodes of a ``torch._C`` Graph or Block into ``dst``."""
        for n in ts_block.nodes():
            self.node(n, dst, g)
        for o in ts_block.outputs():
            if self.env.get(o) is not None:  # else its producer was reported as unsupported
                dst.register_output(self.env[o])

    def where(self, n) -> str:
        loc = tc.source_from_range(n.sourceRange())
        return f"{n.kind()}" + (f" at {loc}" if loc else "")

    def node(self, n, dst: Block, g: Graph) -> None:
        kind = n.kind()
        if kind in ("prim::Constant", "prim::ConstantMKLDNNTensor"):
            self.constant(n, dst, g)
            return
        if self.grad_mode(n, dst, g):
            return
        if kind == "prim::GetAttr" and isinstance(self.env.get(n.input()), _ModuleRef):
            self.get_attr(n, dst, g)
            return
        if kind in UNSUPPORTED or any(isinstance(self.env.get(v), _ModuleRef) for v in n.inputs()):
            detail = f" ({n.s('name')})" if kind == "prim::CallMethod" and n.hasAttribute("name") else ""
            self.problems.append(f"{self.where(n)}{detail}")
            for o in n.outputs():
                self.env[o] = None
            return
        missing = [v for v in n.inputs() if self.env.get(v) is None]
        if missing:  # its input comes from an unsupported node, already reported
            for o in n.outputs():
                self.env[o] = None
            return
        if kind == "prim::fork":
            self.fork(n, inputs_of=[self.env[v] for v in n.inputs()], dst=dst, g=g)
            return
        if _mkldnn.is_mkldnn_kind(kind):  # torch.jit.optimize_for_inference's oneDNN layout
            self.mkldnn.lower(n, dst, g)
            return
        inputs = [self.env[v] for v in n.inputs()]
        if self.cell_list(n, kind, inputs):
            return
        # a Python list is a list of cells (cell_list): empty when its cells could not be unpacked
        cells = any(isinstance(v, list) for v in inputs)
        if cells or any(isinstance(v, _quantized.Packed) for v in inputs):  # unpacked weights
            try:
                if cells:
                    kind, inputs = _quantized.lower_cells(kind, inputs, lambda value, t: self.literal(value, t, dst, g),
                                                          lambda values: self.list_of_tensors(values, dst, g))
                else:
                    kind, inputs = _quantized.lower(kind, inputs, lambda value, t: self.literal(value, t, dst, g))
            except ValueError as exc:
                self.problems.append(f"{self.where(n)}: {exc}")
                for o in n.outputs():
                    self.env[o] = None
                return
        kind = _quantized.channels_last_kind(kind, inputs)   # torch's paths for a conv output (channels-last)
        kind, inputs = _quantized.engine_form(kind, inputs, self.quantized_engine,   # QNNPACK's kernels (engine qnnpack)
                                              lambda value, t: self.literal(value, t, dst, g))
        inputs = _quantized.scalar_first(kind, len(inputs) == 2 and n.inputsAt(0).type().kind() != "TensorType", inputs)
        out_types = [self.type_of(o, self.where(n)) for o in n.outputs()]
        names = [tc.clean_name(o.debugName()) for o in n.outputs()]
        out_of_place = self.mkldnn.out_of_place(n)
        node = g.create(out_of_place or kind, inputs, out_types, output_names=names,
                        source=tc.source_from_range(n.sourceRange()))
        scope = _module_scope(n)
        if scope:
            node.meta["scope"] = scope
        for a in n.attributeNames():  # non-Constant attributes are rare (e.g. prim::profile); keep scalars
            k = n.kindOf(a)
            if k in ("i", "f", "s", "is", "fs", "ss"):
                node.attrs[a] = getattr(n, k)(a)
            else:
                self.problems.append(f"{self.where(n)}: attribute {a} of kind {k}")
        if kind.startswith("aten::") and kind == n.kind() and not out_of_place:  # the overload TorchScript matched
            # (not for a node lowered to another op: quantize_dynamic's float16 Linear -> aten::linear)
            node.schema = tc.parse_schema(str(n.schema()))
        dst.append(node)
        for o, v in zip(n.outputs(), node.outputs):
            self.env[o] = v
        for b in n.blocks():
            nb = node.add_block()
            for bi in b.inputs():
                self.env[bi] = nb.add_input(self.type_of(bi, self.where(n)), tc.clean_name(bi.debugName()))
            self.block(b, nb, g)

    def fork(self, n, inputs_of, dst: Block, g: Graph) -> None:
        """``torch.jit.fork(fn, *args)``: TorchScript holds ``fn``'s graph as the node's ``Subgraph``
        attribute; srcore's ``prim::fork`` holds it as its block (inputs: the forked arguments),
        which the runtime launches as a task that ``aten::wait`` joins."""
        sub = n.g("Subgraph") if "Subgraph" in n.attributeNames() else None
        if sub is None:
            self.problems.append(f"{self.where(n)}: a fork without a subgraph")
            self.env[n.output()] = None
            return
        out_t = self.type_of(n.output(), self.where(n))
        node = g.create("prim::fork", inputs_of, [out_t], output_names=[tc.clean_name(n.output().debugName())],
                        source=tc.source_from_range(n.sourceRange()))
        dst.append(node)
        body = node.add_block()
        for si in sub.inputs():
            self.env[si] = body.add_input(self.type_of(si, self.where(n)), tc.clean_name(si.debugName()))
        self.block(sub, body, g)
        self.env[n.output()] = node.output

    def lowered_node(self, kind: str, inputs, n, dst: Block, g: Graph):
        """A one-output node of ``kind`` standing for the torch node ``n`` (its type, name, source)."""
        o = n.outputsAt(0)
        node = g.create(kind, inputs, [self.type_of(o, self.where(n))], output_names=[tc.clean_name(o.debugName())],
                        source=tc.source_from_range(n.sourceRange()))
        dst.append(node)
        return node

    def grad_mode(self, n, dst: Block, g: Graph) -> bool:
        """``with torch.no_grad():`` (or ``enable_grad``/``set_grad_enabled``) in forward: TorchScript
        creates the context object, sets its ``prev`` and brackets the body with ``prim::Enter`` /
        ``prim::Exit``. srcore never records gradients, so all of it goes and the body stays."""
        kind = n.kind()
        if kind == "prim::CreateObject":
            if not _is_grad_mode(n.output().type()):
                return False
            self.env[n.output()] = _GRAD_MODE
            return True
        if kind in ("prim::SetAttr", "prim::Enter", "prim::Exit") and n.inputsSize() \
                and self.env.get(n.inputsAt(0)) is _GRAD_MODE:
            for o in n.outputs():  # __enter__ returns None; __exit__'s result is never used
                c = g.create("prim::Constant", (), (NONE,), output_names=[tc.clean_name(o.debugName())])
                dst.append(c)
                self.env[o] = c.output
            return True
        return False

    def is_tensor_list(self, value) -> bool:
        """A ``Tensor[]``, or a ``Tensor?[]`` holding at least one tensor (``x[:, idx_a, idx_b]`` with
        index buffers freezes into ``aten::index(x, [None, idx_a, idx_b])``)."""
        return isinstance(value, (list, tuple)) and any(isinstance(x, self.torch.Tensor) for x in value) \
            and all(x is None or isinstance(x, self.torch.Tensor) for x in value)

    def tensor_list(self, debug_name: str, tensors, n, dst: Block, g: Graph):
        """A constant ``Tensor[]`` (e.g. ``nn.LSTM``'s ``_flat_weights`` after freezing): one
        parameter per tensor (``rnn._flat_weights.0``, ...) and a ``prim::ListConstruct`` of them."""
        src = tc.source_from_range(n.sourceRange())
        elems = []
        for i, x in enumerate(tensors):
            if x is None:
                c = g.create("prim::Constant", (), (NONE,), source=src)
                dst.append(c)
                elems.append(c.output)
                continue
            arr = tc.tensor_to_numpy(x)
            name = self.param_name(f"{debug_name}.{i}", arr)
            c = g.create("prim::Constant", (), (tc.array_type(arr),), {"value": arr, "param": name},
                         output_names=[tc.clean_name(name)], source=src)
            dst.append(c)
            elems.append(c.output)
        elem = OptionalType(TensorType()) if any(x is None for x in tensors) else TensorType()
        lc = g.create("prim::ListConstruct", elems, (ListType(elem),),
                      output_names=[tc.clean_name(n.output().debugName())], source=src)
        dst.append(lc)
        return lc.output

    def constant(self, n, dst: Block, g: Graph) -> None:
        o = n.output()
        if n.hasAttribute("value") and n.kindOf("value") == "ival" and isinstance(n.ival("value"), self.torch.ScriptObject):
            self.packed_params(n, n.ival("value"), o.debugName(), dst, g)
            return
        t = self.type_of(o, self.where(n))
        attrs: dict[str, Any] = {}
        if n.hasAttribute("value") and n.kindOf("value") == "ival" and self.is_tensor_list(n.ival("value")):
            try:
                self.env[o] = self.tensor_list(o.debugName(), n.ival("value"), n, dst, g)
            except ValueError as exc:
                self.problems.append(f"{self.where(n)}: {exc}")
                self.env[o] = None
            return
        if n.hasAttribute("value"):
            k = n.kindOf("value")
            try:
                value = self.constant_value(n, k, o.type().kind())
            except ValueError as exc:
                self.problems.append(f"{self.where(n)}: {exc}")
                self.env[o] = None
                return
            scalar = tc.wrapped_scalar(n.t("value"), o.uses(), self.torch) if k == "t" else None
            if scalar is not None:
                value, t = tc.python_constant(scalar, self.torch)
                attrs = {"value": value}
            elif k == "t":
                attrs = {"value": value, "param": self.param_name(o.debugName(), value)}
                t = tc.array_type(value)
            elif value is not None:
                attrs = {"value": value}
        elif isinstance(t, OptionalType):  # a None typed as the optional it stands for
            t = NONE
        elif t != NONE:
            self.problems.append(f"{self.where(n)}: constant of type {t} without a value")
        node = g.create("prim::Constant", (), (t,), attrs, output_names=[tc.clean_name(o.debugName())],
                        source=tc.source_from_range(n.sourceRange()))
        dst.append(node)
        self.env[o] = node.output

    def cell_list(self, n, kind: str, inputs: list) -> bool:
        """A dynamic-quantized LSTM's list of cells (built by ``prim::ListConstruct``, or appended to an
        empty one as torch's scripted module does) is kept as a Python list of :class:`_quantized.Cell`
        for the op that takes it (lowered there); True if ``n`` was such a node."""
        if kind == "prim::ListConstruct" and (all(isinstance(v, _quantized.Cell) for v in inputs) if inputs
                                              else _quantized.CELL in n.output().type().str()):
            self.env[n.output()] = list(inputs)
            return True
        if kind == "aten::append" and len(inputs) == 2 and isinstance(inputs[1], _quantized.Cell):
            if isinstance(inputs[0], list) and n.owningBlock().owningNode() is None:
                inputs[0].append(inputs[1])
                self.env[n.output()] = inputs[0]
            else:
                self.problems.append(f"{self.where(n)}: dynamic-quantized cells appended inside control flow")
                self.env[n.output()] = None
            return True
        return False

    def list_of_tensors(self, values: list, dst: Block, g: Graph):
        """A new ``Tensor[]`` of ``values`` (a list a lowering adds)."""
        c = g.create("prim::ListConstruct", values, (ListType(TensorType()),))
        dst.append(c)
        return c.output

    def literal(self, value, t: Type, dst: Block, g: Graph):
        """A new non-tensor constant (a value a lowering adds)."""
        c = g.create("prim::Constant", (), (t,), {} if value is None else {"value": value})
        dst.append(c)
        return c.output

    def packed_params(self, n, obj, debug_name: str, dst: Block, g: Graph) -> None:
        """A packed quantized weight (``LinearPackedParamsBase``...): unpacked through torch into a
        weight and a bias parameter, kept in ``env`` for the op that takes it."""
        src = tc.source_from_range(n.sourceRange())
        base = debug_name.removesuffix("._packed_weight").removesuffix("._packed_params").removesuffix("._packed_params")

        def constant(name: str, value):
            if value is None:
                c = g.create("prim::Constant", (), (NONE,), source=src)
            else:
                arr = tc.tensor_to_numpy(value)
                pname = self.param_name(name, arr)
                c = g.create("prim::Constant", (), (tc.array_type(arr),), {"value": arr, "param": pname},
                             output_names=[tc.clean_name(pname)], source=src)
            dst.append(c)
            return c.output

        try:
            self.env[n.output()] = _quantized.unpack(self.torch, obj, base, constant)
        except ValueError as exc:
            self.problems.append(f"{self.where(n)} ({debug_name}): {exc}")
            self.env[n.output()] = None

    def get_attr(self, n, dst: Block, g: Graph) -> None:
        ref: _ModuleRef = self.env[n.input()]
        attr = n.s("name")
        path = f"{ref.path}.{attr}" if ref.path else attr
        o = n.output()
        try:
            value = getattr(ref.obj, attr)
        except AttributeError:
            self.problems.append(f"{self.where(n)}: module has no attribute {path!r}")
            self.env[o] = None
            return
        if isinstance(value, (self.torch.nn.Module, self.torch._C.ScriptObject)):
            self.env[o] = _ModuleRef(value, path)
            return
        attrs: dict[str, Any]
        if self.is_tensor_list(value):
            try:
                self.env[o] = self.tensor_list("self." + path, value, n, dst, g)
            except ValueError as exc:
                self.problems.append(f"{self.where(n)} {path!r}: {exc}")
                self.env[o] = None
            return
        try:
            if isinstance(value, self.torch.Tensor):
                arr = tc.tensor_to_numpy(value)
                if path not in self.attr_params:
                    self.attr_params[path] = self.param_name("self." + path, arr)
                name = self.attr_params[path]
                arr = self.params[name]
                attrs, t = {"value": arr, "param": name}, tc.array_type(arr)
            else:
                v, t = tc.python_constant(value, self.torch)
                attrs = {} if v is None else {"value": v}
        except ValueError as exc:
            self.problems.append(f"{self.where(n)} {path!r}: {exc}")
            self.env[o] = None
            return
        node = g.create("prim::Constant", (), (t,), attrs, output_names=[tc.clean_name(o.debugName())],
                        source=tc.source_from_range(n.sourceRange()))
        dst.append(node)
        self.env[o] = node.output

    def constant_value(self, n, k: str, type_kind: str) -> Any:
        if k == "t":
            return tc.tensor_to_numpy(n.t("value"))
        if k == "i":
            v = n.i("value")
            return bool(v) if type_kind == "BoolType" else v
        if k == "f":
            return n.f("value")
        if k == "s":
            return n.s("value")  # strings and devices ("cpu", typed Device)
        if k in ("is", "fs", "ss"):
            return list(getattr(n, k)("value"))
        if k == "ival":
            v, _ = tc.python_constant(n.ival("value"), self.torch)
            return v
        raise ValueError(f"constant attribute kind {k!r} is not supported")

    def param_name(self, debug_name: str, value) -> str:
        name = debug_name.removeprefix("self.") if debug_name.startswith("self.") else None
        if name is None or name in self.params:
            while True:
                name = f"_tensor_constant_{self._anon}"
                self._anon += 1
                if name not in self.params:
                    break
        self.params[name] = value
        return name


def _module_scope(n) -> str | None:
    """The module hierarchy a frozen graph's node was called in (``b(Block).conv(Conv2d)``; the
    method's own ``SELF(...)`` dropped): what ``Options.engine_fallback_modules`` matches."""
    try:
        hierarchy = n.getModuleHierarchy()
    except (AttributeError, RuntimeError):   # an older torch, or a node without one
        return None
    parts = [p for p in _split_top(hierarchy) if p and not p.startswith("SELF(")]
    return ".".join(parts) or None


def _split_top(text: str) -> list[str]:
    """``a(A).b(x.B)`` -> ``["a(A)", "b(x.B)"]``: split at dots outside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "." and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur.append(ch)
    parts.append("".join(cur))
    return parts
