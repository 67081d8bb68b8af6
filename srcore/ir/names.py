"""Op names: ``namespace::name.overload``."""
from __future__ import annotations

#: the ops whose nodes may own blocks (the parser checks it as it reads; :mod:`srcore.ir.verify` too)
BLOCK_OWNERS = frozenset({"prim::If", "prim::Loop", "prim::Closure", "prim::With", "prim::fork"})


def base_op(kind: str) -> str:
    """The op without its overload name: ``aten::add.Tensor`` -> ``aten::add`` (a name without a
    namespace is returned as it is)."""
    ns, _, name = kind.partition("::")
    return f"{ns}::{name.split('.', 1)[0]}" if name else kind
