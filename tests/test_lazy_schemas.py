"""The full registry declares every op by name and builds a schema only when it is looked up."""
from __future__ import annotations

import marshal

import pytest

from srcore.ops import cache, declarations
from srcore.ops.registry import core_declaration_files
from srcore.plugin.manager import PluginManager

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass


@pytest.fixture
def warm_cache(monkeypatch, tmp_path):
    """A schema cache filled by one registry build, the in-process memo emptied (a fresh start)."""
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SRCORE_NO_SCHEMA_CACHE", raising=False)
    monkeypatch.delenv("SRCORE_SELECTION", raising=False)
    cache.clear_memory_cache()
    PluginManager().load(entry_points=False).registry  # parses the core files and writes the cache
    cache.clear_memory_cache()
    built = []
    real = cache.CachedDeclarations._build

    def counting(self, row):
        built.append(row[0])
        return real(self, row)

    monkeypatch.setattr(cache.CachedDeclarations, "_build", counting)
    yield built
    cache.clear_memory_cache()


def test_a_registry_from_the_cache_builds_only_the_schemas_looked_up(warm_cache):
    reg = PluginManager().load(entry_points=False).registry
    assert len(reg.declared) > 1000 and "aten::add.Tensor" in reg.declared and warm_cache == []
    schema, who = reg.declared["aten::add.Tensor"]
    assert str(schema).startswith("aten::add.Tensor(Tensor self, Tensor other") and who.name == "builtin"
    assert warm_cache == ["aten::add"]
    assert reg.schemas.get("aten::add.Tensor") is schema  # the registry and `declared` share the built object
    relu = reg.schemas.overloads("aten::relu")
    assert [s.qualified_name for s in relu] == ["aten::relu", "aten::relu.out"]
    assert sorted(warm_cache) == ["aten::add", "aten::relu", "aten::relu"]
    assert reg.declared.get("nope::x") is None and "nope::x" not in reg.declared


def test_lazily_built_schemas_equal_a_fresh_parse(warm_cache):
    reg = PluginManager().load(entry_points=False).registry
    parsed = {}
    for path in core_declaration_files():  # the parser itself, no cache
        for d in declarations.load_declarations(path):
            parsed.setdefault(d.schema.qualified_name, d.schema)
    assert set(reg.declared) == set(parsed)
    for q, (schema, _who) in reg.declared.items():
        assert schema == parsed[q], q
        assert reg.schemas.find(q) is schema
    assert dict(reg.declared) == {q: (s, w) for q, (s, w) in reg.declared.items()}


def test_registry_resolves_an_overload_from_lazy_entries(warm_cache):
    from srcore.ir import types as T
    from srcore.ir.graph import Graph

    reg = PluginManager().load(entry_points=False).registry
    g = Graph()
    node = g.create("aten::add", [g.add_input(t) for t in (T.FLOAT, T.INT)], [T.FLOAT])
    assert reg.schemas.resolve(node).qualified_name == "aten::add.float_int"  # as tests/test_matching.py
    assert set(warm_cache) == {"aten::add"}  # only the overloads of that name were built


V2 = "- func: ex::f(Tensor self, float s=2.5) -> Tensor\n- func: ex::g(int[2] k=1) -> ()\n"


def test_a_cache_file_whose_row_points_outside_its_tables_is_a_miss(monkeypatch, tmp_path):
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SRCORE_NO_SCHEMA_CACHE", raising=False)
    cache.clear_memory_cache()
    good = cache.load_schemas([("v2.yaml", V2)])
    (path,) = (tmp_path / "schemas").glob("*.marshal")
    fmt, types, args, rets, rows = marshal.loads(path.read_bytes())
    bad_row = (rows[0][0], rows[0][1], (len(args) + 5,), *rows[0][3:])
    path.write_bytes(marshal.dumps((fmt, types, args, rets, (bad_row, *rows[1:]))))
    with pytest.raises(ValueError):
        cache.CachedDeclarations(marshal.loads(path.read_bytes()))
    cache.clear_memory_cache()
    parses = []
    real = declarations.parse_declarations
    monkeypatch.setattr(declarations, "parse_declarations", lambda t, s: parses.append(s) or real(t, s))
    assert cache.load_schemas([("v2.yaml", V2)]) == good and parses == ["v2.yaml"]  # reparsed, rewritten
    cache.clear_memory_cache()


def test_declared_ops_named_in_one_pass_match_the_fresh_parse(warm_cache):
    """``DeclaredOp.all_of`` (the start-up path over cached rows) names each overload, its source and
    whether it binds kernels as the parsed declaration does, and builds nothing."""
    from srcore.plugin.schemas import DeclaredOp

    for path in core_declaration_files():
        rows = cache.load_schemas_lazily(path)
        assert isinstance(rows, cache.CachedDeclarations)
        ops = DeclaredOp.all_of(rows, "aten")
        assert warm_cache == []
        parsed = declarations.load_declarations(path)
        assert [(o.qualified_name, o.source, o.binds_kernels) for o in ops] == [
            (d.schema.qualified_name.removesuffix("."), d.source, bool(d.dispatch) or d.structured_delegate is not None)
            for d in parsed]
        assert [o.schema for o in ops] == [d.schema for d in parsed]
        warm_cache.clear()
