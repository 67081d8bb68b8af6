"""srcore's IR: SSA graphs with blocks, in TorchScript's semantics.

``Graph``/``Block``/``Node``/``Value`` are the data structure; ``parse_graph``
and ``print_graph`` the text format; ``GraphBuilder`` builds graphs from
Python; ``verify`` checks the invariants.
"""
from .quant import QDTYPES, check_qparams, is_quantized
from .graph import Block, Graph, Node, SourceLocation, Use, Value, clone_node, copy_block_into
from .types import (ANY, BOOL, DEVICE, FLOAT, INT, NONE, NUMBER, STR, TENSOR, AnyType, BoolType,
                    DeviceType, FloatType, IntType, ListType, NoneType, NumberType, StrType, TensorType, Type)

__all__ = [
    "Graph", "Block", "Node", "Value", "Use", "SourceLocation", "clone_node", "copy_block_into",
    "Type", "TensorType", "IntType", "FloatType", "BoolType", "StrType", "NoneType", "DeviceType",
    "NumberType", "AnyType", "ListType", "OptionalType", "TupleType", "DictType",
    "INT", "FLOAT", "BOOL", "STR", "NONE", "DEVICE", "NUMBER", "ANY", "TENSOR",
    "QParams", "QDTYPES", "check_qparams", "is_quantized",
    "parse_graph", "print_graph", "GraphBuilder", "verify",
]


def __getattr__(name):  # the text format, builder and verifier load on first use (and QParams: srcore.ir.qparams)
    if name == "QParams":
        from .qparams import QParams
        return QParams
    if name in ("OptionalType", "TupleType", "DictType"):   # (srcore.ir.rare_types)
        from . import types
        return getattr(types, name)
    if name == "parse_graph":
        from .parser import parse_graph
        return parse_graph
    if name == "print_graph":
        from .printer import print_graph
        return print_graph
    if name == "GraphBuilder":
        from .builder import GraphBuilder
        return GraphBuilder
    if name == "verify":
        from .verify import verify
        return verify
    raise AttributeError(name)
