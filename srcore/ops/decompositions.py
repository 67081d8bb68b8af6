"""The core's decompositions: declared aten ops written with ops that have kernels.

A table of IR texts (the op's arguments in, its returns out), and one generator
for every ``.out`` and in-place overload whose functional sibling exists:
``aten::add.out(self, other, *, alpha, out)`` is ``aten::copy_(out,
aten::add(self, other, alpha))``; ``aten::round_.decimals(self, *, decimals)``
is ``aten::copy_(self, aten::round(self, decimals))``. The builtin plugin
yields them through the ``srcore_decompositions`` hook.
"""
from __future__ import annotations


def _g(signature: str, *body: str, ret: str = "%r") -> str:
    return f"graph({signature}):\n" + "".join(f"  {line}\n" for line in body) + f"  return ({ret})\n"


def _binary_alias(target: str, scalar: bool) -> str:
    other = "Scalar" if scalar else "Tensor"
    return _g(f"%self : Tensor, %other : {other}", f"%r : Tensor = {target}(%self, %other)")


def _matmul_dtype(name: str, args: str, types: str) -> str:
    """``aten::mm.dtype(self, mat2, out_dtype)``: the product computed in ``out_dtype``."""
    names = args.split(", ")
    casts = [f"%{n}_c : Tensor = aten::to(%{n}, %out_dtype, %false, %false)" for n in names]
    return _g(f"{types}, %out_dtype : int" + (", %beta : Scalar, %alpha : Scalar" if name in ("addmm", "baddbmm")
                                              else ""),
              "%false : bool = prim::Constant[value=0]()", *casts,
              f"%r : Tensor = aten::{name}({', '.join(f'%{n}_c' for n in names)}"
              + (", %beta, %alpha)" if name in ("addmm", "baddbmm") else ")"))


#: op overload -> IR text; the graph's inputs are the op's arguments in schema order
DECOMPOSITIONS: dict[str, str] = {
    "aten::__and__.Tensor": _binary_alias("aten::bitwise_and", False),
    "aten::__and__.Scalar": _binary_alias("aten::bitwise_and", True),
    "aten::__or__.Tensor": _binary_alias("aten::bitwise_or", False),
    "aten::__or__.Scalar": _binary_alias("aten::bitwise_or", True),
    "aten::__xor__.Tensor": _binary_alias("aten::bitwise_xor", False),
    "aten::__xor__.Scalar": _binary_alias("aten::bitwise_xor", True),
    "aten::bitwise_xor.Scalar_Tensor": _g("%self : Scalar, %other : Tensor",
                                          "%r : Tensor = aten::bitwise_xor(%other, %self)"),
    "aten::mm.dtype": _matmul_dtype("mm", "self, mat2", "%self : Tensor, %mat2 : Tensor"),
    "aten::bmm.dtype": _matmul_dtype("bmm", "self, mat2", "%self : Tensor, %mat2 : Tensor"),
    "aten::addmm.dtype": _matmul_dtype("addmm", "self, mat1, mat2", "%self : Tensor, %mat1 : Tensor, %mat2 : Tensor"),
    "aten::baddbmm.dtype": _matmul_dtype("baddbmm", "self, batch1, batch2",
                                         "%self : Tensor, %batch1 : Tensor, %batch2 : Tensor"),
    "aten::index_put.hacked_twin": _g("%self : Tensor, %indices : Tensor[], %values : Tensor, %accumulate : bool",
                                      "%r : Tensor = aten::index_put(%self, %indices, %values, %accumulate)"),
    "aten::index_put_.hacked_twin": _g("%self : Tensor, %indices : Tensor[], %values : Tensor, %accumulate : bool",
                                       "%r : Tensor = aten::index_put_(%self, %indices, %values, %accumulate)"),
    "aten::sym_size.int": _g("%self : Tensor, %dim : int", "%r : int = aten::size(%self, %dim)"),
    "aten::sym_size": _g("%self : Tensor", "%r : int[] = aten::size(%self)"),
    "aten::sym_numel": _g("%self : Tensor", "%r : int = aten::numel(%self)"),
}


# -- .out and in-place overloads, from their functional sibling -----------------------------------------
_IR_TYPES = {"ScalarType": "int", "Layout": "int", "MemoryFormat": "int", "SymInt": "int", "Dimname": "str"}


def _ir_type(t) -> str:
    """The IR text of a schema type, without its alias annotation (``Tensor(a!)`` -> ``Tensor``)."""
    kind = type(t).__name__
    if kind == "OptionalType":
        return _ir_type(t.elem) + "?"
    if kind == "ListType":
        return _ir_type(t.elem) + "[]"
    if kind == "BaseType":
        return _IR_TYPES.get(t.name, t.name)
    raise ValueError(f"no IR spelling for {t}")


def _same_args(a, b) -> bool:
    return (a.name, _ir_type(a.type)) == (b.name, _ir_type(b.type))


def _functional_sibling(schema, schemas):
    """The overload of the same op that takes ``schema``'s inputs (minus ``out``) and writes nothing;
    arguments it has beyond those must have defaults."""
    inputs = [a for a in schema.arguments if a not in schema.out_arguments]
    if not schema.is_out:  # in-place: the functional op is the name without its trailing "_"
        if not schema.name.endswith("_"):
            return None, inputs
        name = schema.name[:-1]
    else:
        name = schema.name
    for cand in schemas.overloads(name):
        if cand.is_mutable or len(cand.arguments) < len(inputs):
            continue
        if all(_same_args(a, b) for a, b in zip(inputs, cand.arguments)) and \
                all(a.default is not None for a in cand.arguments[len(inputs):]):
            return cand, inputs
    return None, inputs


def out_or_inplace(schema, schemas) -> str | None:
    """IR text computing an ``.out`` or in-place overload with its functional sibling and ``copy_``.

    An ``.out`` overload returns the functional result itself and copies it into ``out`` for
    whoever reads ``out`` afterwards; where torch would resize an ``out`` of another shape, the
    copy raises instead of broadcasting (a guard that constant-folds away for static shapes)."""
    if not schema.is_mutable:
        return None
    try:
        sibling, inputs = _functional_sibling(schema, schemas)
        if sibling is None:
            return None
        sig = ", ".join(f"%{a.name} : {_ir_type(a.type)}" for a in schema.arguments)
        targets = [f"%{a.name}" for a in schema.out_arguments] if schema.is_out else ["%self"]
        if len(targets) != len(sibling.returns) or any(_ir_type(r.type) != "Tensor" for r in sibling.returns):
            return None
    except ValueError:  # a type with no IR spelling
        return None
    results = [f"%r{i}" for i in range(len(targets))]
    body = ["%false : bool = prim::Constant[value=0]()",
            f"{', '.join(f'{r} : Tensor' for r in results)} = "
            f"{sibling.name}({', '.join(f'%{a.name}' for a in inputs)})"]
    for i, (t, r) in enumerate(zip(targets, results)):
        if schema.is_out:
            body += _same_size_guard(i, t, r, schema.qualified_name)
        body.append(f"%o{i} : Tensor = aten::copy_({t}, {r}, %false)")
    ret = results if schema.is_out else [f"%o{i}" for i in range(len(targets))]
    return _g(sig, *body, ret=", ".join(ret))


def _same_size_guard(i: int, target: str, result: str, op: str) -> list[str]:
    msg = (f"{op}: the out= tensor {target[1:]!r} has another shape than the result; torch would resize it, "
           "srcore does not (give an out= tensor of the result's shape)")
    return [f"%st{i} : int[] = aten::size({target})",
            f"%sr{i} : int[] = aten::size({result})",
            f"%same{i} : bool = aten::eq(%st{i}, %sr{i})",
            f" = prim::If(%same{i})",
            "  block0():",
            "    -> ()",
            "  block1():",
            f"    %msg{i} : str = prim::Constant[value=\"{msg}\"]()",
            f"     = prim::RaiseException(%msg{i})",
            "    -> ()"]
