"""Declaration files: - func: entries, strict keys, file:line(:col) errors, fuzzing."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import srcore
from srcore.ops.declarations import load_declarations
from srcore.ops.schema import FunctionSchema

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

TEXT = """\
# example ops
- func: example::scaled_tanh(Tensor self, *, float scale=1.0) -> Tensor
  doc: tanh(self) * scale
  tags: [pointwise, core]

- func: "example::pair(Tensor a, Tensor b) -> (Tensor, Tensor)"
  variants: function, method
"""


def test_loads_entries_with_line_numbers(tmp_path):
    p = tmp_path / "ops.yaml"
    p.write_text(TEXT)
    decls = load_declarations(p)
    assert [d.schema.qualified_name for d in decls] == ["example::scaled_tanh", "example::pair"]
    assert [d.source for d in decls] == [f"{p}:2", f"{p}:6"]
    assert decls[0].doc == "tanh(self) * scale" and decls[0].tags == ("pointwise", "core")
    assert decls[1].variants == ("function", "method") and decls[1].doc is None
    assert decls[0].schema == FunctionSchema.parse(
        "example::scaled_tanh(Tensor self, *, float scale=1.) -> Tensor")
    # a string path works too, and text with a source name
    assert load_declarations(str(p)) == decls
    assert [d.source for d in load_declarations(TEXT, source="x.yaml")] == ["x.yaml:2", "x.yaml:6"]


def test_empty_file_is_no_declarations():
    assert load_declarations("# nothing\n", source="e.yaml") == []


@pytest.mark.parametrize("text,where,what", [
    ("- func: a::b() -> ()\n  dco: typo\n", "f.yaml:2", "unknown key 'dco'"),
    ("- func: a::b() -> ()\n- doc: x\n", "f.yaml:2", "missing the 'func' key"),
    ("func: a::b() -> ()\n", "f.yaml:1", "a list of"),
    ("- func: [1]\n", "f.yaml:1", "'func' must be a string"),
    ("- func: a::b() -> ()\n  tags: {a: 1}\n", "f.yaml:2", "'tags' must be"),
    ("- func: a::b() -> ()\n- func: a::b(int x) -> ()\n", "f.yaml:2", "a::b is declared twice (first at f.yaml:1)"),
    ("- func: a::b() -> ()\n  func: a::c() -> ()\n", "f.yaml:2", "duplicate key 'func'"),
    ("- func: a::b(\n  - x", "f.yaml:", "invalid YAML"),
])
def test_strict_errors_name_file_and_line(text, where, what):
    with pytest.raises(srcore.DeclarationError) as ei:
        load_declarations(text, source="f.yaml")
    assert str(ei.value).startswith(where) and what in str(ei.value)


def test_bad_schema_names_file_line_and_column():
    text = "- func: a::ok() -> ()\n- func: a::b(Tensor self Tensor) -> Tensor\n"
    with pytest.raises(srcore.DeclarationError) as ei:
        load_declarations(text, source="f.yaml")
    e = ei.value
    assert isinstance(e, srcore.SchemaError)
    # 'func: ' value starts at column 9; the bad token 'Tensor' is at schema column 18
    assert str(e).startswith("f.yaml:2:26: expected ',' or ')'")
    assert e.column == 18 and e.expected == "',' or ')'"
    quoted = "- func: 'a::b(int x=) -> ()'\n"
    with pytest.raises(srcore.DeclarationError, match=r"^f.yaml:1:21: expected a default value"):
        load_declarations(quoted, source="f.yaml")


def test_missing_file_is_a_declaration_error(tmp_path):
    with pytest.raises(srcore.DeclarationError, match="cannot read"):
        load_declarations(tmp_path / "nope.yaml")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 2), st.sampled_from("-: \n\t()[]{}'\"#,*!&|>a")),
                min_size=1, max_size=5))
def test_fuzz_only_declaration_errors(edits):
    text = TEXT
    for pos, op, ch in edits:
        pos %= len(text) + 1
        text = (text[:pos] + ch + text[pos:] if op == 0 else
                text[:pos] + text[pos + 1:] if op == 1 else text[:pos] + ch + text[pos + 1:])
    try:
        decls = load_declarations(text, source="fz.yaml")
    except srcore.DeclarationError:
        return
    for d in decls:
        assert FunctionSchema.parse(str(d.schema)) == d.schema
