"""``GraphConverter``: walks an ONNX graph (and its If/Loop subgraphs) into an srcore Graph.

Each node is looked up in the converter table (:mod:`.ops`) by op type and by the
version of its schema at the model's opset; problems (unknown ops, versions,
attributes, dtypes, non-constant inputs a converter needs constant) are
collected, one line per node, for one ``ConversionError``.
"""
from __future__ import annotations

from typing import Any, Sequence

import attrs
import numpy as np

from ...ir.builder import BlockScope, GraphBuilder
from ...ir.graph import Block, SourceLocation, Value
from ...ir.types import ListType, OptionalType, TensorType, Type
from .context import NodeContext, Unsupported
from .dtypes import DTYPE_TO_ONNX, UnsupportedDtype, dtype_of
from .values import Val

#: a value whose producer could not be converted (already reported)
FAILED = object()

#: ops never computed at conversion (random, or with effects the reference models differently)
NO_FOLD = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                     "Bernoulli", "Dropout", "If", "Loop", "Scan", "SequenceMap", "Constant", "Identity"})
#: what a DequantizeLinear of a constant keeps as a quantized parameter instead of folding it
QDQ_STORAGE = frozenset({"uint8", "int8", "int32"})
#: the largest constant (elements) folded at conversion
FOLD_LIMIT = 1 << 16


def _evaluate(node, arrays, opset: int) -> list:
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [f"in{i}" if a is not None else "" for i, a in enumerate(arrays)]
    n = helper.make_node(node.op_type, names, [f"out{j}" if o else "" for j, o in enumerate(node.output)],
                         domain=node.domain)
    n.attribute.extend(node.attribute)
    ev = ReferenceEvaluator(n, opsets={"": opset})
    feeds = {nm: a for nm, a in zip(names, arrays) if nm}
    return ev.run(None, feeds)


def clean_name(name: str) -> str:
    """An ONNX value name as an IR value name (letters, digits, ``_`` and ``.``)."""
    out = "".join(c if c.isalnum() or c in "_." else "_" for c in name)
    return out if out and not out[0].isdigit() else "v" + out


def merge_types(onnx_t: Type, srcore_t: Type, name: str) -> Type:
    """ONNX's inferred type of an output, completed by srcore's; a contradiction is Unsupported."""
    if not isinstance(onnx_t, TensorType) or not isinstance(srcore_t, TensorType):
        return onnx_t if isinstance(onnx_t, TensorType) and onnx_t != TensorType() else srcore_t
    if onnx_t.dtype and srcore_t.dtype and onnx_t.dtype != srcore_t.dtype:
        raise Unsupported(f"output {name!r} would be {srcore_t.dtype}, ONNX says {onnx_t.dtype}")
    dtype = onnx_t.dtype or srcore_t.dtype
    a, b = onnx_t.shape, srcore_t.shape
    if a is None or b is None:
        return TensorType(dtype, a if a is not None else b)
    if len(a) != len(b):
        raise Unsupported(f"output {name!r} would have shape {list(b)}, ONNX says {list(a)}")
    dims = []
    for x, y in zip(a, b):
        if isinstance(x, int) and isinstance(y, int) and x != y:
            raise Unsupported(f"output {name!r} would have shape {list(b)}, ONNX says {list(a)}")
        dims.append(x if isinstance(x, int) or y is None else y)
    return TensorType(dtype, tuple(dims))


class Scope:
    """ONNX value names visible in a (sub)graph: its own, then the enclosing graphs'."""

    def __init__(self, parent: "Scope | None" = None):
        self.parent = parent
        self.vals: dict[str, Any] = {}
        self.types: dict[str, Type] = {}

    def lookup(self, name: str) -> Any:
        s = self
        while s is not None:
            if name in s.vals:
                return s.vals[name]
            s = s.parent
        return None

    def type_of(self, name: str) -> Type:
        s = self
        while s is not None:
            if name in s.types:
                return s.types[name]
            s = s.parent
        return TensorType()


def onnx_type(type_proto) -> Type:
    """An ONNX ``TypeProto`` as an IR type (tensor dtype + shape; dim_param -> symbolic dim)."""
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        tt = type_proto.tensor_type
        dtype = dtype_of(tt.elem_type) if tt.elem_type else None
        if not tt.HasField("shape"):
            return TensorType(dtype, None)
        dims = []
        for d in tt.shape.dim:
            kind = d.WhichOneof("value")
            dims.append(int(d.dim_value) if kind == "dim_value" else d.dim_param if kind == "dim_param" and d.dim_param
                        else None)
        return TensorType(dtype, tuple(dims))
    if which == "sequence_type":
        return ListType(onnx_type(type_proto.sequence_type.elem_type))
    if which == "optional_type":
        return OptionalType(onnx_type(type_proto.optional_type.elem_type))
    raise UnsupportedDtype(f"{which or 'an untyped value'} is not supported")


def _types(graph_proto, scope: Scope) -> None:
    for vi in list(graph_proto.value_info) + list(graph_proto.output):
        try:
            scope.types[vi.name] = onnx_type(vi.type)
        except UnsupportedDtype:
            pass  # reported where a node reads it, if one does


class GraphConverter:
    """Converts one ONNX model's graphs; ``tensor_array`` reads initializers (external data too)."""

    def __init__(self, table, opset: int, source_name: str, read_tensor):
        self.table = table
        self.opset = opset
        self.source_name = source_name
        self.read_tensor = read_tensor       # TensorProto -> np.ndarray (raises ValueError)
        self.builder = GraphBuilder()
        self.graph = self.builder.graph
        self.params: dict[str, np.ndarray] = {}
        self.problems: list[str] = []
        self.input_vals: dict[str, Val] = {}          # the main graph's inputs, by ONNX name
        #: graph inputs whose values a node that could not be converted needed at conversion
        self.wanted_constants: list[str] = []
        self._schemas: dict[tuple[str, str], Any] = {}
        from ...ops.shapes.interp import Interpreter
        from ...plugin.manager import get_plugin_manager

        # srcore's own shape rules, run on each node as it is emitted: they type what ONNX's inference
        # left unknown, and a disagreement with ONNX's types is reported rather than converted
        registry = get_plugin_manager().registry
        self.interp = Interpreter(False, registry.shape_rules, registry.schemas)

    # -- the main graph -------------------------------------------------------------------
    def convert_main(self, gp, large_initializers=()) -> tuple[list[str], list[str]]:
        """Convert the model's graph; returns (input names, output names). ``large_initializers``:
        initializers set aside while loading (they appear as graph inputs of ``gp``)."""
        scope = Scope()
        _types(gp, scope)
        self.add_initializers(gp, scope, large_initializers)
        input_names = []
        for vi in gp.input:
            if vi.name in scope.vals:  # an initializer listed as an input (IR < 4): a constant
                continue
            try:
                t = onnx_type(vi.type)
            except UnsupportedDtype as exc:
                self.problems.append(f"graph input {vi.name!r}: {exc}")
                scope.vals[vi.name] = FAILED
                continue
            seq = isinstance(t, ListType) and isinstance(t.elem, TensorType)   # a sequence: a Tensor[] input
            if not isinstance(t, TensorType) and not seq:
                self.problems.append(f"graph input {vi.name!r}: a {t} input is not supported (tensors and "
                                     f"sequences of tensors only)")
                scope.vals[vi.name] = FAILED
                continue
            v = self.graph.add_input(ListType(TensorType()) if seq else t, clean_name(vi.name))
            scope.vals[vi.name] = self.input_vals[vi.name] = Val(vi.name, t, tensor=v, seq=seq,
                                                                 block=self.graph.block)
            input_names.append(vi.name)
        self.convert_nodes(gp.node, scope)
        outs = self.outputs(gp, scope)
        for v in outs:
            if v is not None:
                self.graph.register_output(v)
        return input_names, [o.name for o in gp.output]

    def add_initializers(self, gp, scope: Scope, extra=()) -> None:
        for t in [*gp.initializer, *extra]:
            try:
                arr = self.tensor_array(t, f"initializer {t.name!r}")
            except Unsupported as exc:
                self.problems.append(str(exc))
                scope.vals[t.name] = FAILED
                continue
            scope.vals[t.name] = Val(t.name, TensorType(str(arr.dtype), arr.shape), const=arr, param_name=t.name)
        for st in gp.sparse_initializer:
            self.problems.append(f"sparse initializer {st.values.name!r} is not supported")
            scope.vals[st.values.name] = FAILED

    def outputs(self, gp, scope: Scope) -> list[Value | None]:
        res = []
        for o in gp.output:
            v = scope.lookup(o.name)
            if v is FAILED:
                res.append(None)
                continue
            if v is None:
                self.problems.append(f"graph output {o.name!r} is not produced by any node")
                res.append(None)
                continue
            res.append(v.tensor if v.seq else self.tensor_of(v))
        return res

    # -- subgraphs (If branches, Loop bodies) ----------------------------------------------
    def convert_subgraph(self, gp, block: Block, inputs: Sequence[Val], outer: Scope, where: str, finish
                         ) -> None:
        """Convert ``gp`` into ``block``: its inputs are bound to ``inputs``; ``finish(outputs)`` (run
        inside the block, given the subgraph's outputs as Vals) returns the block's output Values."""
        scope = Scope(outer)
        _types(gp, scope)
        if len(gp.input) != len(inputs):
            raise Unsupported(f"{where}: the subgraph takes {len(gp.input)} inputs, expected {len(inputs)}")
        for vi, v in zip(gp.input, inputs):
            scope.vals[vi.name] = v
        with BlockScope(self.builder, block):
            self.add_initializers(gp, scope)
            self.convert_nodes(gp.node, scope)
            outs = []
            for o in gp.output:
                v = scope.lookup(o.name)
                if v is None:
                    raise Unsupported(f"{where}: subgraph output {o.name!r} is not produced by any node")
                outs.append(None if v is FAILED else v)
            if any(v is None for v in outs):
                raise Unsupported(f"{where}: the subgraph has unsupported nodes (listed)")
            for value in finish(outs):
                block.register_output(value)

    # -- nodes ------------------------------------------------------------------------------
    def convert_nodes(self, nodes, scope: Scope) -> None:
        for i, node in enumerate(nodes):
            self.convert_node(node, i, scope)

    def describe(self, node, index: int) -> str:
        name = f"{node.name!r}" if node.name else f"#{index}"
        return f"{node.op_type} node {name}"

    def schema_version(self, node) -> int | None:
        from onnx import defs

        key = (node.op_type, node.domain)
        if key not in self._schemas:
            try:
                self._schemas[key] = defs.get_schema(node.op_type, self.opset, node.domain or "").since_version
            except Exception:  # noqa: BLE001 - onnx raises SchemaError for unknown ops
                self._schemas[key] = None
        return self._schemas[key]

    def convert_node(self, node, index: int, scope: Scope) -> None:
        where = self.describe(node, index)

        def fail(msg: str) -> None:
            self.problems.append(f"{where}: {msg}")
            for o in node.output:
                scope.vals[o] = FAILED

        if node.domain not in ("", "ai.onnx"):
            from .ops import DOMAIN_TABLES

            entry, version = DOMAIN_TABLES.get(node.domain, {}).get(node.op_type), 1
            if node.domain not in DOMAIN_TABLES:
                return fail(f"domain {node.domain!r} is not supported (only the default ONNX domain and a few "
                            f"com.microsoft ops are)")
            if entry is None:
                return fail(f"op {node.op_type!r} of domain {node.domain!r} is not supported (srcore maps "
                            f"{', '.join(sorted(DOMAIN_TABLES[node.domain]))} there)")
        else:
            version = self.schema_version(node)
            entry = self.table.get(node.op_type)
            if version is None:
                from .ops import ORT_DEFAULT_DOMAIN

                # onnxruntime's own default-domain ops (SimplifiedLayerNormalization), version 1
                entry, version = ORT_DEFAULT_DOMAIN.get(node.op_type), 1
                if entry is None:
                    return fail(f"no ONNX op {node.op_type!r} at opset {self.opset}")
        if entry is None:
            return fail("op not supported by srcore")
        if version not in entry.versions:
            return fail(f"version {version} of {node.op_type} is not supported (srcore maps versions "
                        f"{', '.join(map(str, entry.versions))})")
        vals = []
        for name in node.input:
            if not name:
                vals.append(None)
                continue
            v = scope.lookup(name)
            if v is FAILED:  # its producer was reported already
                for o in node.output:
                    scope.vals[o] = FAILED
                return
            if v is None:
                return fail(f"input {name!r} is not defined")
            vals.append(v)
        folded = self.fold(node, vals)
        if folded is not None:
            for name, arr in zip(node.output, folded):
                if name:
                    scope.vals[name] = Val(name, TensorType(str(arr.dtype), arr.shape), const=arr)
            return
        out_types = [scope.type_of(o) for o in node.output]
        cx = NodeContext(self, node, version, vals, out_types, self.location(node, index))
        cx.scope = scope
        block = self.builder.block
        mark = block.return_node.prev
        try:
            outs = entry.fn(cx)
            unread = cx.unread_attrs()
            if unread:
                raise Unsupported(f"attribute{'s' if len(unread) > 1 else ''} {', '.join(unread)} not supported")
            self.propagate_new(block, mark)
            if not isinstance(outs, (tuple, list)):
                outs = (outs,)
            bound = {}
            for j, name in enumerate(node.output):
                if not name:
                    continue
                out = outs[j] if j < len(outs) else None
                if out is None:
                    raise Unsupported(f"output {j} ({name!r}) is not supported")
                bound[name] = self.bind(name, out, out_types[j])
        except (Unsupported, UnsupportedDtype) as exc:
            self.wanted_constants.extend(n for n in cx.unknown_inputs if n not in self.wanted_constants)
            return fail(str(exc))
        except (IndexError, KeyError, TypeError, ValueError, ArithmeticError) as exc:
            # a converter that trips over an input it did not expect: still this node's problem, named
            return fail(f"cannot convert ({type(exc).__name__}: {exc})")
        scope.vals.update(bound)

    def propagate_new(self, block: Block, mark) -> None:
        """Run srcore's shape rules on the nodes appended to ``block`` after ``mark``."""
        from ...errors import ShapeError

        n = mark.next
        while n is not None and n is not block.return_node:
            try:
                self.interp.run_node(n)
            except ShapeError as exc:
                raise Unsupported(f"the converted nodes do not type-check: {str(exc).splitlines()[0]}") from None
            n = n.next

    def fold(self, node, vals) -> list[np.ndarray] | None:
        """The outputs of a node whose inputs are all known at conversion, computed by onnx's reference
        evaluator (ONNX's own semantics); None when it does not apply or fails (the converter runs)."""
        if node.op_type in NO_FOLD or any(a.type in (a.GRAPH, a.GRAPHS) for a in node.attribute):
            return None
        if node.op_type == "DequantizeLinear" and vals and vals[0] is not None and vals[0].dtype in QDQ_STORAGE:
            return None  # an integer weight stays quantized for fold_quantized (ops/quant.py)
        arrays = []
        for v in vals:
            if v is None:
                arrays.append(None)
                continue
            arr = v.const
            if arr is None:
                known = v.known_ints()
                if known is None or v.ints is None:
                    return None
                arr = np.array(known, dtype=v.dtype or "int64").reshape(() if v.scalar else (-1,))
            if arr.size > FOLD_LIMIT:
                return None
            arrays.append(arr)
        if not any(a is not None for a in arrays) and node.op_type not in ("Constant",):
            return None
        try:
            outs = _evaluate(node, arrays, self.opset)
        except Exception:  # noqa: BLE001 - the reference cannot: convert the node instead
            return None
        res = []
        for o in outs:
            if isinstance(o, (list, tuple)) or o is None:   # a sequence or optional: not a constant tensor
                return None
            o = np.asarray(o)
            if str(o.dtype) not in DTYPE_TO_ONNX or o.size > FOLD_LIMIT:
                return None
            res.append(np.array(o, order="C"))
        return res

    def bind(self, name: str, out: Any, t: Type) -> Val:
        """The Val of ONNX output ``name``: the converter's result, typed by ONNX's inference where it
        knows more than srcore's rules, checked against them where both know."""
        if isinstance(out, Val):
            out = attrs.evolve(out, name=name)
            if out.tensor is not None and out.tensor.name is None:
                self.graph.rename(out.tensor, clean_name(name))
            if out.const is None and out.ints is None and out.tensor is not None and not out.seq:
                out.type = merge_types(t, out.tensor.type, name)
            elif out.ints is not None or out.const is not None:
                merge_types(t, TensorType(out.dtype, out.shape), name)
            return out
        if out.name is None:
            self.graph.rename(out, clean_name(name))
        seq = isinstance(out.type, ListType)
        merged = out.type if seq else merge_types(t, out.type, name)
        return Val(name, merged, tensor=out, seq=seq, block=self.builder.block)

    def location(self, node, index: int) -> SourceLocation:
        where = f"{self.source_name}:{node.name}" if node.name else self.source_name
        return SourceLocation(where, index + 1)

    # -- values ----------------------------------------------------------------------------------
    def tensor_array(self, tensor_proto, what: str) -> np.ndarray:
        try:
            return self.read_tensor(tensor_proto)
        except (ValueError, UnsupportedDtype) as exc:
            raise Unsupported(f"{what}: {exc}") from None

    def param(self, name: str, arr: np.ndarray, t: TensorType | None = None) -> Value:
        """A named tensor constant at the top of the main graph (visible from every block)."""
        base = clean_name(name)
        pname, k = base, 0
        while pname in self.params:
            k += 1
            pname = f"{base}.{k}"
        self.params[pname] = arr
        t = TensorType(str(arr.dtype), arr.shape) if t is None else t
        node = self.graph.create("prim::Constant", (), (t,), {"param": pname, "value": arr}, output_names=[pname])
        first = self.graph.block.nodes.first
        if first is None:
            self.graph.block.append(node)
        else:
            node.insert_before(first)
        self.interp.run_node(node)
        return node.output

    def quantized_param(self, name: str, stored: np.ndarray, qdtype: str, qparams) -> Value:
        """A quantized parameter (``QuantizedArray``) from an integer initializer and its parameters."""
        from ...qarray import QuantizedArray

        qa = QuantizedArray(np.asarray(stored), qdtype, qparams)
        return self.param(name, qa, TensorType(qdtype, qa.shape, qparams))

    def tensor_of(self, v: Val) -> Value:
        """The srcore tensor Value of ``v``, made on first use (constants become parameters)."""
        if v.tensor is not None:
            return v.tensor
        if v.const is not None:
            v.tensor = self.param(v.param_name or v.name, v.const)
            v.block = self.graph.block
            return v.tensor
        if v.ints is not None:
            dtype = v.type.dtype if isinstance(v.type, TensorType) and v.type.dtype else "int64"
            from .dtypes import scalar_type

            b = self.builder
            if all(isinstance(i, int) for i in v.ints):
                arr = np.array(v.ints, dtype=dtype)
                t = self.param(v.name, arr.reshape(()) if v.scalar else arr)
            elif v.scalar:
                t = b.op("aten::tensor", v.ints[0], dtype=scalar_type(dtype))
            else:
                t = b.op("aten::tensor", b.value(list(v.ints)), dtype=scalar_type(dtype))
            if b.block is v.block or v.block is None:
                v.tensor, v.block = t, b.block
            return t
        raise Unsupported(f"value {v.name!r} has no tensor")

    def int_items(self, v: Val, what: str, cx: NodeContext) -> list:
        """``v`` (a 1-D or 0-d int tensor) as int items (Python ints, srcore int Values)."""
        known = v.known_ints()
        if known is not None:
            return known
        if v.ints is not None:
            return list(v.ints)
        if v.dtype is not None and v.dtype not in ("int64", "int32", "int16", "int8", "uint8"):
            raise Unsupported(f"{what} ({v.name!r}) must be an integer tensor, not {v.dtype}")
        shape = v.shape
        t = self.tensor_of(v)
        if shape == ():
            return [cx.int_op("aten::Int", t)]
        if shape is None or len(shape) != 1 or not isinstance(shape[0], int):
            cx.note_unknown(v)
            raise Unsupported(f"{what} ({v.name!r}) must be a constant or a 1-D tensor of known length")
        return [cx.int_op("aten::Int", cx.op("aten::select", t, 0, k)) for k in range(shape[0])]
