"""Check a graph's invariants; raise :class:`srcore.VerificationError` naming the node.

Checked:

* SSA: every value is produced by exactly one node, whose ``outputs[offset]``
  it is; every use is consistent (``use.user.inputs[use.offset] is value``,
  and every input appears in its value's uses);
* def-before-use: an input is defined earlier in the same block, or in an
  enclosing block before the node that owns the block (block outputs are
  treated as uses at the block end); no value leaks out of its block;
* block structure: nodes link back to their block; ``prim::If`` has 1 bool
  input and 2 blocks without inputs, each returning the node's outputs;
  ``prim::Loop`` has inputs (trip count, cond, *carried), one block with inputs
  (i, *carried) and outputs (cond, *carried), and as many outputs as carried;
* with ``schemas`` (a ``SchemaRegistry``): every node other than ``prim::``
  structural ones resolves to a schema (``schemas.resolve(node)``), its input
  count fits the schema, and no mutable (``Tensor(a!)``) argument is a graph
  input (srcore never writes into the caller's tensors; out= arguments must be
  values allocated inside the graph).
"""
from __future__ import annotations

from typing import Any

from ..errors import SrcoreError, VerificationError
from .graph import PARAM, RETURN, Block, Graph, Node, Value
from .names import BLOCK_OWNERS  # node kinds that may own blocks (defined there: the parser needs only it)
from .types import BOOL, INT, AnyType, OptionalType, TensorType

__all__ = ["verify"]


#: node kinds the verifier never looks up in the schema registry
STRUCTURAL = frozenset({"prim::Constant", "prim::If", "prim::Loop", "prim::Param", "prim::Return"})


def verify(graph: Graph, schemas: Any = None) -> None:
    """Raise VerificationError on the first broken invariant; return None if all hold."""
    _Verifier(graph, schemas).run()


def _describe(node: Node) -> str:
    try:
        from .printer import print_node
        text = print_node(node).splitlines()[0].strip()
    except Exception:  # never let printing hide the real error
        text = node.kind
    src = f" (at {node.source})" if node.source is not None else ""
    return f"{text}{src}"


class _Verifier:
    def __init__(self, graph: Graph, schemas: Any):
        self.g = graph
        self.schemas = schemas
        self.seen: set[int] = set()  # ids of values defined so far

    def fail(self, node: Node, message: str) -> VerificationError:
        return VerificationError(f"{message}\n  in node: {_describe(node)}")

    def run(self) -> None:
        self.block(self.g.block, None, scope=set())

    def define(self, node: Node, v: Value, index: int, scope: set[int]) -> None:
        if v.node is not node or node.outputs[v.offset] is not v or v.offset != index:
            raise self.fail(node, f"output %{v.name} does not point back to its node/offset")
        if id(v) in self.seen:
            raise self.fail(node, f"value %{v.name} is defined twice")
        self.seen.add(id(v))
        scope.add(id(v))

    def use(self, node: Node, i: int, v: Value, scope: set[int], what: str) -> None:
        if v.node.graph is not self.g:
            raise self.fail(node, f"{what} %{v.name} belongs to another graph")
        if id(v) not in scope:
            why = ("is defined inside a block that does not enclose this node" if id(v) in self.seen
                   else "is used before it is defined")
            raise self.fail(node, f"{what} %{v.name} {why} (def-before-use)")
        if sum(1 for u in v.uses if u.user is node and u.offset == i) != 1:
            raise self.fail(node, f"use list of %{v.name} does not record input {i} of this node")

    def block(self, block: Block, owner: Node | None, scope: set[int]) -> None:
        scope = set(scope)  # values defined inside do not leak out
        if block.param_node.owning_block is not block or block.return_node.owning_block is not block:
            raise VerificationError(f"block of {owner.kind if owner else 'graph'} has foreign param/return")
        for i, v in enumerate(block.inputs):
            self.define(block.param_node, v, i, scope)
        prev = block.param_node
        for n in block.nodes:
            if n.owning_block is not block or n.prev is not prev:
                raise self.fail(n, "node is linked into a block it does not belong to")
            if n.kind in (PARAM, RETURN):
                raise self.fail(n, f"{n.kind} inside a block's node list")
            prev = n
            for i, v in enumerate(n.inputs):
                self.use(n, i, v, scope, "input")
            for b in n.blocks:
                if b.owning_node is not n:
                    raise self.fail(n, "block does not point back to its node")
                self.block(b, n, scope)
            for i, v in enumerate(n.outputs):
                self.define(n, v, i, scope)
            self.uses_consistent(n)
            self.structure(n)
            if self.schemas is not None and n.kind not in STRUCTURAL:
                self.schema(n)
        if block.return_node.prev is not prev:
            raise VerificationError("block's node list is broken (return node not last)")
        for i, v in enumerate(block.outputs):
            self.block_output(owner, block, i, v, scope)

    def block_output(self, owner: Node | None, block: Block, i: int, v: Value, scope: set[int]) -> None:
        def fail(msg: str) -> VerificationError:
            return self.fail(owner, msg) if owner is not None else VerificationError(f"graph {msg}")
        if id(v) not in scope:
            raise fail(f"output {i} (%{v.name}) is not defined before the block's end")
        if sum(1 for u in v.uses if u.user is block.return_node and u.offset == i) != 1:
            raise fail(f"output {i}: use list of %{v.name} does not record it")

    def uses_consistent(self, n: Node) -> None:
        for v in n.outputs:
            for u in v.uses:
                user = u.user
                if u.offset >= len(user.inputs) or user.inputs[u.offset] is not v:
                    raise self.fail(n, f"%{v.name} lists a use by {user.kind} that does not use it")
                if user.kind != RETURN and user.owning_block is None:
                    raise self.fail(n, f"%{v.name} is used by a {user.kind} node that is not in a block")

    def structure(self, n: Node) -> None:
        nout = len(n.outputs)
        if n.kind == "prim::If":
            if len(n.inputs) != 1 or len(n.blocks) != 2:
                raise self.fail(n, "prim::If needs 1 input and 2 blocks")
            t = n.inputs[0].type
            if t != BOOL and not isinstance(t, AnyType):
                raise self.fail(n, f"prim::If condition must be bool, not {t}")
            for k, b in enumerate(n.blocks):
                if b.inputs or len(b.outputs) != nout:
                    raise self.fail(n, f"block{k} of prim::If must take no inputs and return {nout} "
                                       f"values, returns {len(b.outputs)}")
        elif n.kind == "prim::Loop":
            if len(n.blocks) != 1:
                raise self.fail(n, "prim::Loop needs exactly 1 block")
            b = n.blocks[0]
            if len(n.inputs) != nout + 2 or len(b.inputs) != nout + 1 or len(b.outputs) != nout + 1:
                raise self.fail(n, f"prim::Loop with {nout} outputs needs {nout + 2} inputs (trip "
                                   f"count, cond, carried), block inputs (i, carried) and outputs "
                                   f"(cond, carried); got {len(n.inputs)}, {len(b.inputs)}, "
                                   f"{len(b.outputs)}")
            for what, v, want in (("trip count", n.inputs[0], INT), ("condition", n.inputs[1], BOOL),
                                  ("body condition", b.outputs[0], BOOL)):
                if v.type != want and not isinstance(v.type, AnyType):
                    raise self.fail(n, f"prim::Loop {what} must be {want}, not {v.type}")
        elif n.kind == "prim::Constant":
            if n.inputs or nout != 1 or n.blocks:
                raise self.fail(n, "prim::Constant takes no inputs and has exactly one output")
        elif n.blocks and n.kind not in BLOCK_OWNERS:
            raise self.fail(n, f"{n.kind} cannot own blocks")

    def schema(self, n: Node) -> None:
        try:
            schema = self.schemas.resolve(n)
        except VerificationError as e:
            raise self.fail(n, str(e)) from None
        except SrcoreError as e:
            raise self.fail(n, f"no schema matches: {e}") from None
        args = list(schema.arguments)
        if not getattr(schema, "is_vararg", False):
            required = sum(1 for a in args if not a.has_default)
            if not (required <= len(n.inputs) <= len(args)) and len(n.inputs) != len(args):
                raise self.fail(n, f"{schema.qualified_name} takes {required}..{len(args)} inputs, "
                                   f"got {len(n.inputs)}")
        for a, v in zip(args, n.inputs):
            if a.type.is_mutable() and v.node.kind == PARAM and v.node.owning_block is self.g.block:
                raise self.fail(n, f"{schema.qualified_name} writes its argument {a.name} "
                                   f"(Tensor(a!)), which is graph input %{v.name}")
            if _schema_type_name(a.type) == "Tensor" and not _may_be_tensor(v.type):
                raise self.fail(n, f"argument {a.name} of {schema.qualified_name} must be a "
                                   f"Tensor, got %{v.name} : {v.type}")


def _schema_type_name(t: Any) -> str | None:
    return getattr(t, "name", None) if type(t).__name__ == "BaseType" else None


def _may_be_tensor(t: Any) -> bool:
    if isinstance(t, OptionalType):
        return False
    return isinstance(t, (TensorType, AnyType))
