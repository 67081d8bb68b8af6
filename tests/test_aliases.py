"""Op aliases (srcore/ops/aliases.yaml, torch's alias table): declared, no rule or kernel of their own,
rewritten to the op they name at load, so both names run one kernel."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore.ops.aliases import alias_table, canonical
from srcore.ops.registry import default_registry
from srcore.passes import normalize_aliases

pytestmark = pytest.mark.one_pass
REG = default_registry()


def test_the_table_is_torchs():
    table = alias_table()
    assert table["aten::absolute"] == "aten::abs" and table["aten::special_expit"] == "aten::sigmoid"
    assert table["aten::swapaxes"] == "aten::transpose" and canonical("aten::abs") == "aten::abs"
    assert len(table) >= 75


def test_every_declared_alias_resolves_to_a_declared_overload_of_its_target():
    """An alias overload has the same arguments as an overload of the op it names (what makes the rewrite
    sound); aliases whose target srcore does not declare are not declared either."""
    for alias, target in alias_table().items():
        overloads = [s for s in REG.overloads(alias) if "out" not in s.overload_name and not s.is_mutable]
        if not overloads:
            continue
        targets = {tuple(str(a.type) for a in t.arguments) for t in REG.overloads(target)}
        assert targets, f"{alias} is declared but {target} is not"
        for s in overloads:
            assert tuple(str(a.type) for a in s.arguments) in targets, str(s)


def test_aliases_have_no_kernel_of_their_own():
    from srcore_cpu import declared_kernels
    ops = {k.op.split(".")[0] for k in declared_kernels()}
    assert not ops & set(alias_table()), sorted(ops & set(alias_table()))


def test_normalize_rewrites_and_both_names_agree():
    text = """graph(%x : Float(2, 3), %y : Float(2, 3)):
  %a : Tensor = aten::{a}(%x)
  %m : Tensor = aten::{m}(%a, %y)
  %t : Tensor = aten::{t}(%m, %y)
  %s : int = prim::Constant[value=0]()
  %o : int = prim::Constant[value=1]()
  %w : Tensor = aten::{w}(%t, %s, %o)
  return (%w)
"""
    alias = text.format(a="absolute", m="multiply", t="true_divide", w="swapaxes")
    plain = text.format(a="abs", m="mul", t="div", w="transpose")
    g = srcore.parse_graph(alias)
    assert normalize_aliases(g) and [n.kind for n in g.nodes if n.kind.startswith("aten")] == \
        ["aten::abs", "aten::mul", "aten::div", "aten::transpose"]
    assert list(g.nodes)[0].meta["alias_of"] == "aten::absolute"
    x, y = np.random.default_rng(0).standard_normal((2, 2, 3)).astype(np.float32)
    got = srcore.StaticModule(srcore.parse_graph(alias))(x, y)
    np.testing.assert_array_equal(got, srcore.StaticModule(srcore.parse_graph(plain))(x, y))
    np.testing.assert_allclose(got, np.swapaxes(np.abs(x) * y / y, 0, 1), rtol=1e-6)
    # propagation on a graph that was not normalized finds the target's rule
    from srcore.ops.shapes import propagate
    g = srcore.parse_graph(alias)
    propagate(g)
    assert str(g.outputs[0].type) == "Float(3, 2)"
