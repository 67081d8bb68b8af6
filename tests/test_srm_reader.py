"""The .srm reader and writer against the written spec (docs/srm-format.md), byte by byte.

Each file here is checked or tampered with by hand: the layout and both checksums are recomputed
from the raw bytes with hashlib and json (not with srcore's helpers), and every tampered table or
metadata entry is re-sealed (header checksum recomputed) so that the check under test is the one
that fires; its error must name the file and the culprit.
"""
from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import re

import numpy as np
import pytest

import srcore
from srcore.format import srm
from srcore.ir.parser import parse_graph
from srcore.model import Model

pytestmark = pytest.mark.one_pass


def _model(params, metadata=None) -> Model:
    text = ["graph(%x : Float(2, 3)):"]
    acc = "%x"
    for i, (name, a) in enumerate(params.items()):
        dtype = {"float32": "Float", "float64": "Double", "int64": "Long", "int8": "Char", "uint8": "Byte",
                 "float16": "Half", "int32": "Int", "bool": "Bool", "int16": "Short"}[a.dtype.name]
        dims = ", ".join(str(d) for d in a.shape)
        text.append(f'  %p{i} : {dtype}({dims}) = prim::Constant[param="{name}"]()')
        text.append(f"  %a{i} : Float(2, 3) = aten::add(%x, %x, %one)" if i else
                    "  %one : int = prim::Constant[value=1]()\n  %a0 : Float(2, 3) = aten::neg(%x)")
        acc = f"%a{i}"
    if not params:
        text.append("  %a : Float(2, 3) = aten::neg(%x)")
        acc = "%a"
    text.append(f"  return ({acc})")
    g = parse_graph("\n".join(text) + "\n", params=params)
    return Model.from_graph(g, metadata=metadata or {})


def _split(data: bytes):
    n = int.from_bytes(data[:8], "little")
    return n, json.loads(data[8:8 + n]), data[8 + n:]


def _seal(header: dict) -> None:
    """Recompute header_sha256 as the spec says: SHA-256 of the canonical JSON without that key."""
    md = {k: v for k, v in header["__metadata__"].items() if k != "header_sha256"}
    canon = json.dumps({**header, "__metadata__": md}, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    header["__metadata__"]["header_sha256"] = hashlib.sha256(canon.encode()).hexdigest()


def _assemble(header: dict, body: bytes) -> bytes:
    raw = json.dumps(header).encode()
    raw += b" " * ((-(8 + len(raw))) % 8)
    return len(raw).to_bytes(8, "little") + raw + body


def _tampered(tmp_path, data: bytes, edit, seal=True, name="t.srm"):
    _, header, body = _split(data)
    edit(header)
    if seal:
        _seal(header)
    p = tmp_path / name
    p.write_bytes(_assemble(header, body))
    return p


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A file with 8-, 4-, 2- and 1-byte parameters, names chosen so that sorting by name alone misaligns."""
    params = {"a_u8": np.arange(3, dtype=np.uint8), "b_f16": np.ones(3, np.float16) / 3,
              "c_f32": np.linspace(0, 1, 5).astype(np.float32), "d_i64": np.array([-(2**40), 7]),
              "e_bool": np.array([True, False, True]), "f_f64": np.array([[np.pi, -0.0]])}
    m = _model(params, metadata={"author": "\u00e9l\u00e8ve \u2603"})
    p = tmp_path_factory.mktemp("srm") / "mixed.srm"
    srcore.save(m, p, producer="hand")
    return m, params, p.read_bytes()


def test_layout_and_checksums_follow_the_spec(tmp_path, mixed):
    m, params, data = mixed
    n, header, body = _split(data)
    text = data[8:8 + n].rstrip(b" ")
    assert (8 + n) % 8 == 0 and n - len(text) < 8         # padded with spaces to 8-byte aligned data, no more
    text.decode("ascii")                                  # canonical JSON is ASCII (escapes for non-ASCII)
    md = header["__metadata__"]
    assert md["data_sha256"] == hashlib.sha256(body).hexdigest()
    expected = dict(header, __metadata__={k: v for k, v in md.items() if k != "header_sha256"})
    canon = json.dumps(expected, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert md["header_sha256"] == hashlib.sha256(canon.encode()).hexdigest()
    assert text.decode() == json.dumps(header, sort_keys=True, separators=(",", ":"))
    # each tensor: its dtype name, shape, little-endian C-order bytes, naturally aligned, no holes
    st = {"uint8": "U8", "float16": "F16", "float32": "F32", "int64": "I64", "bool": "BOOL", "float64": "F64"}
    spans = sorted((e["data_offsets"], k) for k, e in header.items() if k != "__metadata__")
    assert spans[0][0][0] == 0 and spans[-1][0][1] == len(body)
    assert all(a[0][1] == b[0][0] for a, b in zip(spans, spans[1:]))
    sizes = [params[k].dtype.itemsize for _, k in spans]
    assert sizes == sorted(sizes, reverse=True)
    for (b, e), k in spans:
        a = params[k]
        assert header[k]["dtype"] == st[a.dtype.name] and header[k]["shape"] == list(a.shape)
        assert b % a.dtype.itemsize == 0 and body[b:e] == a.astype(a.dtype.newbyteorder("<")).tobytes()
    assert md["producer"] == "hand" and md["srcore_version"] == srcore.__version__
    assert md["format_version"] == "1" and json.loads(md["metadata"]) == m.metadata
    (tmp_path / "m.srm").write_bytes(data)
    loaded = srcore.load(tmp_path / "m.srm")
    assert loaded.metadata == {"author": "\u00e9l\u00e8ve \u2603"}
    plugins = json.loads(md["plugins"])                  # aten ops are declared by srcore itself
    assert [d["dist"] for d in plugins["namespaces"]["aten"]] == ["srcore"]
    assert loaded.plugins is not None and [d.name for d in loaded.plugins.for_namespace("aten")] == ["srcore"]
    assert json.loads(md["required_ops"]) == ["aten::add", "aten::neg", "prim::Constant"]
    assert json.loads(md["output_names"]) == ["output"] and loaded.output_names == ("output",)
    for k, a in params.items():
        assert loaded.params[k].dtype == a.dtype and loaded.params[k].tobytes() == a.tobytes()


def test_producer_defaults(tmp_path):
    m = _model({})
    srcore.save(m, tmp_path / "a.srm")
    assert srm.read_metadata(tmp_path / "a.srm")["producer"] == f"srcore {srcore.__version__}"
    m.metadata = {"producer": "from torch"}
    srcore.save(m, tmp_path / "b.srm")
    assert srm.read_metadata(tmp_path / "b.srm")["producer"] == "from torch"


def _entry(name, **change):
    def edit(h):
        h[name].update(change)
    return edit


@pytest.mark.parametrize("edit, match", [
    (lambda h: h.update(c_f32=[1, 2]), r"tensor 'c_f32': bad header entry"),
    (lambda h: h["c_f32"].update(extra=1), r"tensor 'c_f32': bad header entry"),
    (lambda h: h["c_f32"].pop("shape"), r"tensor 'c_f32': bad header entry"),
    (_entry("c_f32", dtype=4), r"tensor 'c_f32': unknown dtype 4"),
    (_entry("c_f32", dtype="f32"), r"tensor 'c_f32': unknown dtype 'f32'"),
    (_entry("c_f32", shape=5), r"tensor 'c_f32': bad shape 5"),
    (_entry("c_f32", shape=[5.0]), r"tensor 'c_f32': bad shape \[5.0\]"),
    (_entry("c_f32", shape=[True, 5]), r"tensor 'c_f32': bad shape \[True, 5\]"),
    (_entry("c_f32", shape=[-5, -1]), r"tensor 'c_f32': bad shape \[-5, -1\]"),
    (_entry("c_f32", data_offsets="0:20"), r"tensor 'c_f32': bad shape \[5\] or data_offsets '0:20'"),
    (_entry("c_f32", data_offsets=[16]), r"tensor 'c_f32': bad shape \[5\] or data_offsets \[16\]"),
    (_entry("c_f32", data_offsets=[16, 36, 36]), r"bad shape \[5\] or data_offsets \[16, 36, 36\]$"),
    (lambda h: h["c_f32"].update(data_offsets=[float(o) for o in h["c_f32"]["data_offsets"]]),
     r"tensor 'c_f32': bad shape \[5\] or data_offsets \[32.0, 52.0\]$"),
    (lambda h: h["c_f32"].update(data_offsets=[h["c_f32"]["data_offsets"][0], 52.0]),
     r"tensor 'c_f32': bad shape \[5\] or data_offsets \[32, 52.0\]$"),
    (_entry("c_f32", data_offsets=[-4, 16]), r"bad shape \[5\] or data_offsets \[-4, 16\]$"),
    (_entry("c_f32", dtype=["F32"]), r"tensor 'c_f32': unknown dtype \['F32'\]"),
    (_entry("c_f32", data_offsets=[36, 16]), r"tensor 'c_f32': data_offsets \[36, 16\] out of bounds"),
    (_entry("c_f32", data_offsets=[10**6, 10**6 + 20]), r"out of bounds \(data section is \d+ bytes\)"),
    (_entry("c_f32", shape=[4]), r"tensor 'c_f32': 20 bytes do not hold float32 of shape \[4\]"),
    (_entry("c_f32", shape=[5, 1, 2]), r"tensor 'c_f32': 20 bytes do not hold float32 of shape \[5, 1, 2\]"),
    (_entry("c_f32", shape=[0]), r"20 bytes do not hold float32 of shape \[0\]"),
])
def test_bad_tensor_table_entries_are_named(tmp_path, mixed, edit, match):
    p = _tampered(tmp_path, mixed[2], edit)
    with pytest.raises(srcore.SrcoreFormatError, match=match) as ei:
        srcore.load(p)
    assert str(ei.value).startswith(f"{p}: ")


def test_holes_overlaps_and_coverage_are_named(tmp_path, mixed):
    data = mixed[2]
    _, header, _ = _split(data)
    b, e = header["c_f32"]["data_offsets"]
    # c_f32 moved 4 bytes up: a hole before it; 4 bytes down: into the tensor before it
    p = _tampered(tmp_path, data, lambda h: h["c_f32"].update(data_offsets=[b + 4, e + 4]))
    with pytest.raises(srcore.SrcoreFormatError,
                       match=rf"tensor 'c_f32': data_offsets \[{b + 4}, {e + 4}\] leaves a hole at byte {b}$"):
        srcore.load(p)
    p = _tampered(tmp_path, data, lambda h: h["c_f32"].update(data_offsets=[b - 4, e - 4]))
    with pytest.raises(srcore.SrcoreFormatError,
                       match=rf"tensor 'c_f32': data_offsets \[{b - 4}, {e - 4}\] overlaps the previous tensor$"):
        srcore.load(p)
    # the whole file shifted by one tensor: the first one now starts past zero
    first = min((v["data_offsets"][0], k) for k, v in header.items() if k != "__metadata__")[1]
    p = _tampered(tmp_path, data, lambda h: h.pop(first))
    with pytest.raises(srcore.SrcoreFormatError, match=r"leaves a hole at byte 0"):
        srcore.load(p)
    # the last tensor dropped: the others no longer cover the data section
    last = max((v["data_offsets"][1], k) for k, v in header.items() if k != "__metadata__")[1]
    p = _tampered(tmp_path, data, lambda h: h.pop(last))
    with pytest.raises(srcore.SrcoreFormatError, match=rf"data section is {len(data) - 8 - _split(data)[0]} bytes "
                       r"but the tensors cover \d+ \(truncated or trailing data\)$"):
        srcore.load(p)


def _file(header: bytes, pad=0) -> bytes:
    return len(header).to_bytes(8, "little") + header + b" " * pad


@pytest.mark.parametrize("data, match", [
    (b"\x07" * 7, "file is 7 bytes, too short to hold a header length"),
    (b"", "file is 0 bytes"),
    ((0).to_bytes(8, "little"), "header is not valid JSON"),      # holds a length (0): not too short
    ((9).to_bytes(8, "little") + b"{}      ", "header length 9 exceeds the file size 16"),
    ((2**62).to_bytes(8, "little") + b"{}", "header length 4611686018427387904 exceeds the limit of 104857600 bytes"),
    (_file(b"\xff\xfe{}    "), "header is not valid JSON"),
    (_file(b"{{      "), "header is not valid JSON"),
    (_file(b"[1]     "), "header is not a JSON object"),
    (_file(b"{}      "), "header has no __metadata__ mapping str to str"),
    (_file(b'{"__metadata__":{"a":1}}'), "header has no __metadata__"),
    (_file(b'{"__metadata__":{"a":"b"},"x":1}'), r"tensor 'x': bad header entry 1"),
    (_file(b'{"__metadata__":[1, 2]}'), "header has no __metadata__"),
    (_file(b'{"__metadata__":{"format":"x"}}'), r"not a .srm file \(format 'x', expected 'srcore.srm'\)$"),
    (_file(b'{"__metadata__":{"format":"srcore.srm"}}'), r"unsupported .srm format version None \(this srcore reads 1, 2\)$"),
    (_file(b'{"__metadata__":{"format":"srcore.srm"}}', pad=3), "data section is 3 bytes but the tensors cover 0"),
])
def test_broken_containers_are_named(tmp_path, data, match):
    p = tmp_path / "broken.srm"
    p.write_bytes(data)
    with pytest.raises(srcore.SrcoreFormatError, match=f"^{re.escape(str(p))}: {match}"):
        srcore.load(p)


def test_the_header_length_limit_is_the_reference_implementations(tmp_path):
    """100 MiB, as safetensors: a longer header is refused before it is read, even if the file holds it."""
    limit = 100 * 1024 * 1024
    p = tmp_path / "sparse.srm"
    for n, match in ((limit + 1, f"header length {limit + 1} exceeds the limit of {limit} bytes"),
                     (limit, "header is not valid JSON")):        # read (sparse zeros), then rejected
        with open(p, "wb") as f:
            f.write(n.to_bytes(8, "little"))
            f.truncate(8 + limit + 1)
        with pytest.raises(srcore.SrcoreFormatError, match=match):
            srcore.load(p)


def test_an_unreadable_path_is_a_format_error(tmp_path):
    with pytest.raises(srcore.SrcoreFormatError, match=rf"^{tmp_path}: cannot read: "):
        srcore.load(tmp_path)                      # a directory
    with pytest.raises(srcore.SrcoreFormatError, match="cannot read"):
        srm.read_metadata(tmp_path / "missing.srm")


@pytest.mark.parametrize("key, value, match", [
    ("output_names", '"output"', "bad model metadata: output_names must be a list of str"),
    ("output_names", "[1]", "bad model metadata: output_names must be a list of str"),
    ("output_names", "[", "bad model metadata"),
    ("metadata", '["a"]', "bad model metadata: metadata must map str to str"),
    ("metadata", '{"a": 1}', "bad model metadata: metadata must map str to str"),
    ("input_specs", '{"x": 1}', "bad model metadata: input specs must be a JSON list"),
    ("plugins", "not json", "bad plugins metadata"),
    ("plugins", '{"extra": {}}', "bad plugins metadata: plugins must be an object"),
    ("schemas", "{", "bad schemas metadata"),
    ("schemas", '{"a": 1}', "bad schemas metadata: schemas must be a JSON list of str"),
    ("schemas", "[1]", "bad schemas metadata: schemas must be a JSON list of str"),
    ("schemas", '["not a schema"]', "bad schemas metadata"),
    ("engines", "[1]", "bad engines metadata: not an object"),
    ("engines", "{", "bad engines metadata"),
    ("engines", '{"k": {"backend": "x", "meta": {}}}', "bad engines metadata: engine k: expected backend, meta"),
    ("engines", '{"k": {"backend": 1, "meta": {}, "arrays": {}}}', "engine k: expected backend"),
    ("engines", '{"k": {"backend": "x", "meta": [], "arrays": {}}}', "engine k: expected backend"),
    ("engines", '{"k": {"backend": "x", "meta": {}, "arrays": []}}', "engine k: expected backend"),
    ("engines", '{"k": 3}', "engine k: expected backend"),
    ("engines", '{"0123456789abcdefXYZ": 3}', "engine 0123456789abcdef: expected backend"),
    ("engines", '{"0123456789abcdefXYZ": {"backend": "x", "meta": {}, "arrays": {"w": "engine/0/w"}}}',
     r"engine 0123456789abcdef: array 'w' names no tensor of the file \('engine/0/w'\)"),
    ("engines", '{"k": {"backend": "x", "meta": {}, "arrays": {"w": "c_f32"}}}', r"array 'w' names no tensor"),
    ("engines", '{"k": {"backend": "x", "meta": {}, "arrays": {"w": 5}}}', r"array 'w' names no tensor"),
])
def test_bad_metadata_entries_are_named(tmp_path, mixed, key, value, match):
    p = _tampered(tmp_path, mixed[2], lambda h: h["__metadata__"].update({key: value}))
    with pytest.raises(srcore.SrcoreFormatError, match=match) as ei:
        srcore.load(p)
    assert str(ei.value).startswith(f"{p}: ")


def test_an_unsealed_edit_is_caught_before_anything_else(tmp_path, mixed):
    p = _tampered(tmp_path, mixed[2], lambda h: h["c_f32"].update(shape=[4]), seal=False)
    with pytest.raises(srcore.SrcoreFormatError, match="do not hold"):   # the structure is checked first
        srcore.load(p)
    p = _tampered(tmp_path, mixed[2], lambda h: h["__metadata__"].update(metadata='{"a": "b"}'), seal=False)
    with pytest.raises(srcore.SrcoreFormatError, match=f"^{re.escape(str(p))}: header checksum mismatch: "
                       "the header was modified or corrupted$"):
        srcore.load(p)
    p = _tampered(tmp_path, mixed[2], lambda h: h["__metadata__"].pop("plugins"), seal=False)
    with pytest.raises(srcore.SrcoreFormatError, match="header checksum mismatch"):
        srcore.load(p)


def test_optional_metadata_may_be_absent(tmp_path, mixed):
    def drop(h):
        h["__metadata__"].pop("plugins")
        h["__metadata__"].pop("schemas")
    m = srcore.load(_tampered(tmp_path, mixed[2], drop))
    assert m.plugins is None and m.op_schemas == () and m.engines == {}


@pytest.mark.parametrize("missing", ["format_version", "srcore_version", "producer", "graph", "input_specs",
                                     "output_names", "required_ops", "metadata", "data_sha256"])
def test_each_required_key_is_required(tmp_path, mixed, missing):
    p = _tampered(tmp_path, mixed[2], lambda h: h["__metadata__"].pop(missing))
    with pytest.raises(srcore.SrcoreFormatError, match=("unsupported" if missing == "format_version"
                                                        else f"header metadata lacks {missing}$")):
        srcore.load(p)


def test_a_flipped_weight_bit_is_named_by_a_full_check(tmp_path, mixed):
    bad = bytearray(mixed[2])
    bad[-1] ^= 1
    p = tmp_path / "flip.srm"
    p.write_bytes(bytes(bad))
    with pytest.raises(srcore.SrcoreFormatError, match=f"^{re.escape(str(p))}: data checksum mismatch: "
                       "the parameter data was modified or corrupted$"):
        srcore.load(p, verify="full")
    assert srcore.load(p).params["e_bool"].tolist() == [True, False, False]   # "header" reads no weights


def test_every_missing_key_is_named(tmp_path, mixed):
    def drop(h):
        for k in ("producer", "graph", "metadata"):
            h["__metadata__"].pop(k)
    with pytest.raises(srcore.SrcoreFormatError, match="header metadata lacks producer, graph, metadata$"):
        srcore.load(_tampered(tmp_path, mixed[2], drop))


def test_header_checksum_key_is_required(tmp_path, mixed):
    _, header, body = _split(mixed[2])
    header["__metadata__"].pop("header_sha256")
    p = tmp_path / "t.srm"
    p.write_bytes(_assemble(header, body))
    with pytest.raises(srcore.SrcoreFormatError, match="header metadata lacks header_sha256$"):
        srcore.load(p)


def test_engines_round_trip_and_are_not_parameters(tmp_path):
    from srcore.plugin.types import EngineData

    m = _model({"w": np.arange(6, dtype=np.float32).reshape(2, 3)})
    blob = np.frombuffer(b"engine bytes", np.uint8)
    m.engines = {"segB": EngineData("trt_like", {"n": 1, "names": ["a"]}, {"blob": blob, "scale": np.float64([2.5])}),
                 "segA": EngineData("other", {}, {})}
    p = tmp_path / "e.srm"
    srcore.save(m, p)
    _, header, _ = _split(p.read_bytes())
    table = json.loads(header["__metadata__"]["engines"])
    assert table == {"segA": {"backend": "other", "meta": {}, "arrays": {}},
                     "segB": {"backend": "trt_like", "meta": {"n": 1, "names": ["a"]},
                              "arrays": {"blob": "engine/1/blob", "scale": "engine/1/scale"}}}
    for verify in ("header", "full"):
        m2 = srcore.load(p, verify=verify)
        assert set(m2.params) == {"w"}
        assert set(m2.engines) == {"segA", "segB"}
        e = m2.engines["segB"]
        assert e.backend == "trt_like" and e.meta == {"n": 1, "names": ["a"]}
        assert e.arrays["blob"].tobytes() == b"engine bytes" and e.arrays["scale"].tolist() == [2.5]
        assert m2.engines["segA"].backend == "other" and m2.engines["segA"].arrays == {}
    # two engines may share a tensor (a hand-edited file): both get it
    def share(h):
        table = json.loads(h["__metadata__"]["engines"])
        table["segA"]["arrays"] = {"same": "engine/1/blob"}
        h["__metadata__"]["engines"] = json.dumps(table)
    m3 = srcore.load(_tampered(tmp_path, p.read_bytes(), share, name="shared.srm"))
    assert m3.engines["segA"].arrays["same"].tobytes() == b"engine bytes" and set(m3.params) == {"w"}
    with pytest.raises(ValueError, match=r"^verify must be 'header' or 'full', not 'sometimes'$"):
        srcore.load(p, verify="sometimes")
    # a parameter whose name an engine array would take
    m.params["engine/1/blob"] = np.zeros(1, np.float32)
    with pytest.raises(srcore.SrcoreError, match=r"parameter 'engine/1/blob' collides with an engine array"):
        srcore.save(m, tmp_path / "c.srm")


def test_a_model_without_engines_writes_no_engines_key(tmp_path, mixed):
    _, header, _ = _split(mixed[2])
    assert "engines" not in header["__metadata__"]


def test_undeclared_schemas_round_trip(tmp_path):
    from srcore.ops.schema import FunctionSchema

    s = FunctionSchema.parse("mylib::frob(Tensor self, int k=2) -> Tensor")
    m = _model({})
    m.op_schemas = (s,)
    p = tmp_path / "s.srm"
    srcore.save(m, p)
    assert json.loads(srm.read_metadata(p)["schemas"]) == [str(s)]
    assert [str(x) for x in srcore.load(p).op_schemas] == [str(s)]
    srcore.save(_model({}), p)
    assert srm.read_metadata(p)["schemas"] == "[]" and srcore.load(p).op_schemas == ()


@pytest.mark.parametrize("where", ["input", "node"])
def test_quantized_graphs_are_version_2_and_their_parameters_come_back_quantized(tmp_path, where):
    from srcore.qarray import QuantizedArray

    if where == "input":
        text = """graph(%x : QUInt8(2, scale=0.1, zero_point=3)):
  %y : Float(2) = aten::dequantize(%x)
  return (%y)
"""
        params = {}
    else:
        text = """graph(%x : Float(2)):
  %w : QInt8(2, scale=0.5, zero_point=-1) = prim::Constant[param="w"]()
  %d : Float(2) = aten::dequantize(%w)
  %y : Float(2) = aten::mul(%x, %d)
  return (%y)
"""
        params = {"w": QuantizedArray(np.array([3, -4], np.int8), "qint8", (0.5, -1))}
    p = tmp_path / "q.srm"
    srcore.save(Model.from_graph(parse_graph(text, params=params)), p)
    assert srm.read_metadata(p)["format_version"] == "2"
    m = srcore.load(p, verify="full")
    if params:
        w = m.params["w"]
        assert isinstance(w, QuantizedArray) and w.qdtype == "qint8" and w.tolist() == [3, -4]
        assert (w.qparams.scale, w.qparams.zero_point) == (0.5, -1)
        assert _split(p.read_bytes())[1]["w"]["dtype"] == "I8"


def test_a_parser_crash_is_a_format_error_of_the_file(tmp_path, mixed, monkeypatch):
    import srcore.ir.parser as parser

    def crash(*a, **k):
        raise KeyError("boom")
    p = tmp_path / "m.srm"
    p.write_bytes(mixed[2])
    monkeypatch.setattr(parser, "parse_graph", crash)
    with pytest.raises(srcore.SrcoreFormatError, match=r"the graph does not parse: KeyError: 'boom'") as ei:
        srcore.load(p)
    assert str(ei.value).startswith(f"{p}: ")


def test_loading_logs_the_file_and_its_parameter_count(tmp_path, mixed, caplog):
    p = tmp_path / "m.srm"
    p.write_bytes(mixed[2])
    import time

    with caplog.at_level(logging.INFO, logger="srcore.format"):
        t0 = time.perf_counter()
        srcore.load(p, verify="full")
        wall_ms = (time.perf_counter() - t0) * 1e3
    records = [r for r in caplog.records if r.name == "srcore.format"]
    assert len(records) == 1 and records[0].getMessage().startswith(f"read {p} (6 parameters, verify=full) in ")
    assert 1e-3 < records[0].args[-1] <= wall_ms       # the load's own time in ms (it takes over a microsecond)


def test_save_validates_the_model_first(tmp_path):
    m = _model({})
    m.output_names = ("a", "b")           # one graph output, two names
    with pytest.raises(srcore.SrcoreError):
        srcore.save(m, tmp_path / "v.srm")
    assert not os.listdir(tmp_path)


def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    from srcore.format import safetensors_io

    def failing(a):
        raise OSError("disk full")
    m = _model({"w": np.ones(3, np.float32), "v": np.ones(2, np.int64)})
    p = tmp_path / "f.srm"
    srcore.save(m, p)
    before = p.read_bytes()
    monkeypatch.setattr(safetensors_io, "raw_bytes", failing)     # the write's, not the checksum's
    m.params["w"] = np.zeros(3, np.float32)
    with pytest.raises(OSError, match="disk full"):
        srcore.save(m, p)
    assert os.listdir(tmp_path) == ["f.srm"] and p.read_bytes() == before   # the old file untouched


# -- drop_resident_pages: checked against the kernel's page table (/proc/self/pagemap) -------------
def _pagemap_readable() -> bool:
    """Linux's page table of this process, readable here (some sandboxes refuse it)."""
    try:
        with open("/proc/self/pagemap", "rb") as f:
            return len(f.read(8)) == 8
    except OSError:
        return False


PAGEMAP = pytest.mark.skipif(not _pagemap_readable(), reason="no readable /proc/self/pagemap (Linux's, "
                                                             "and some sandboxes hide it)")


def _present(addr: int, nbytes: int) -> list[bool]:
    """For each page of [addr, addr + nbytes): is it mapped in this process (pagemap bit 63)."""
    page = mmap.PAGESIZE
    first, last = addr // page, (addr + nbytes - 1) // page
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(first * 8)
        raw = f.read((last - first + 1) * 8)
    return [bool(int.from_bytes(raw[i:i + 8], "little") >> 63) for i in range(0, len(raw), 8)]


@PAGEMAP
def test_dropped_pages_are_exactly_the_arrays_own(tmp_path):
    from srcore.format.safetensors_io import drop_resident_pages

    page = mmap.PAGESIZE
    # three float64 tensors back to back in one file; the middle one shares a page with each neighbour
    a = np.arange(3 * page // 8 + 5, dtype=np.float64)
    b = np.arange(4 * page // 8 + 3, dtype=np.float64) * 2
    c = np.arange(3 * page // 8, dtype=np.float64) * 3
    m = _model({"a": a, "b": b, "c": c, "u": np.arange(3, dtype=np.uint8)})   # u: the file's size is odd
    srcore.save(m, tmp_path / "p.srm")
    params = srcore.load(tmp_path / "p.srm").params
    la, lb, lc = (params[k] for k in "abc")
    assert la.ctypes.data + la.nbytes == lb.ctypes.data and lb.ctypes.data + lb.nbytes == lc.ctypes.data
    lo = lb.ctypes.data // page * page
    hi = -(-(lb.ctypes.data + lb.nbytes) // page) * page
    span_lo, span_hi = la.ctypes.data // page * page, lc.ctypes.data + lc.nbytes
    assert float(la.sum() + lb.sum() + lc.sum()) == float(a.sum() + b.sum() + c.sum())   # all pages in
    assert all(_present(span_lo, span_hi - span_lo))
    assert (tmp_path / "p.srm").stat().st_size % 2 == 1
    drop_resident_pages(["not an array", np.ones(page, np.float64), params["u"], lb])   # only lb's pages go
    state = _present(span_lo, span_hi - span_lo)
    for i, present in enumerate(state):
        pg = span_lo + i * page
        assert present == (not lo <= pg < hi), f"page {i}: present={present}, b's pages [{lo}, {hi})"
    assert np.array_equal(lb, b) and np.array_equal(la, a) and np.array_equal(lc, c)   # read back the same


@PAGEMAP
def test_small_arrays_and_views_through_a_memoryview(tmp_path):
    from srcore.format.safetensors_io import drop_resident_pages

    page = mmap.PAGESIZE
    p = tmp_path / "raw.bin"
    p.write_bytes(np.arange(4 * page, dtype=np.uint8).tobytes())
    with open(p, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    whole = np.frombuffer(memoryview(mm), np.uint8)              # its base is a memoryview of the map
    start = whole.ctypes.data
    one_page = whole[page:2 * page]                              # exactly one page: dropped
    tiny = whole[3 * page:4 * page - 1]                          # less than a page: left alone
    assert int(whole.astype(np.int64).sum()) >= 0 and all(_present(start, 4 * page))
    drop_resident_pages([tiny, one_page])
    assert _present(start, 4 * page) == [True, False, True, True]
    drop_resident_pages([whole[2 * page + 1:]])                  # from inside page 2 to the end of the map
    assert _present(start, 4 * page) == [True, False, False, False]
    assert np.array_equal(whole, np.arange(4 * page, dtype=np.uint8))
    del whole, one_page, tiny
    mm.close()


def test_raw_bytes_are_little_endian_c_order_and_copy_only_when_needed():
    from srcore.format.safetensors_io import raw_bytes

    for dtype in ("<f8", "<f4", "<i2", "<f2", "u1", "?", "i1"):
        a = np.arange(6).astype(dtype).reshape(2, 3)
        raw = raw_bytes(a)
        assert bytes(raw) == a.tobytes()
        assert np.shares_memory(np.frombuffer(raw, np.uint8), a), dtype      # already so: no copy
    for dtype in (">f8", ">f4", ">i2", ">f2", ">u2", ">i8"):
        a = np.arange(6).astype(dtype).reshape(2, 3)
        assert bytes(raw_bytes(a)) == a.astype(dtype.replace(">", "<")).tobytes(), dtype
    f = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert bytes(raw_bytes(f)) == np.arange(6, dtype=np.float32).tobytes()
    assert bytes(raw_bytes(np.array(2.5))) == np.float64(2.5).tobytes()
    assert bytes(raw_bytes(np.zeros((0, 3), np.float32))) == b""


def test_the_plugins_record_follows_backends_and_keeps_what_the_model_was_loaded_with(tmp_path):
    from srcore.plugin.requirements import Dist, RequiredPlugins

    g = parse_graph("""graph(%x : Float(2)):
  %y : Float(2) = mylib::frob(%x)
  %z : Float(2) = aten::neg(%y)
  return (%z)
""")
    m = Model.from_graph(g)
    # loaded from a file written where srcore-mylib and an npu backend were installed; they are not here
    m.plugins = RequiredPlugins({"mylib": (Dist("srcore-mylib", "1.0"),)}, {"npu": Dist("srcore-npu", "2.0")})
    p = tmp_path / "pl.srm"

    def record(**kw):
        srcore.save(m, p, **kw)
        rec = json.loads(srm.read_metadata(p)["plugins"])
        assert rec["namespaces"]["mylib"] == [{"dist": "srcore-mylib", "version": "1.0"}]
        assert [d["dist"] for d in rec["namespaces"]["aten"]] == ["srcore"]
        return rec["backends"]
    default = record()                     # every installed backend with a kernel for aten::neg, and npu
    assert default["npu"] == {"dist": "srcore-npu", "version": "2.0"} and default["cpu"]["dist"] == "srcore-cpu"
    assert set(record(backends=("cpu",))) == {"cpu"}
    assert record(backends=()) == {}



def test_loaded_nodes_get_no_made_up_source(tmp_path):
    """A node without a recorded source is not given a position in the file's embedded IR text."""
    from srcore.ir import Graph, TensorType

    g = Graph()
    x = g.add_input(TensorType("float32", (2,)), "x")
    n = g.create("aten::neg", (x,), (TensorType("float32", (2,)),))
    g.block.append(n)
    g.register_output(n.output)
    srcore.save(Model.from_graph(g), tmp_path / "s.srm")
    assert [nd.source for nd in srcore.load(tmp_path / "s.srm").graph.all_nodes()] == [None]
