"""The prepared-model cache (``srcore.runtime.prepared_cache``): a second process loading the same ``.srm`` file
reads the model prepared (no pass), with the outputs of a load without the cache; anything the prepared graph
depends on (the file's bytes, the selection, the options, a plugin's version, the model edited in memory) misses;
a damaged entry is a miss, never a wrong answer.

The suite runs with the cache off (conftest.py: a cache filled by one test would change what the next load
does); these tests turn it on, with their own cache root."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import srcore
from srcore.runtime import prepared as prepared_mod
from srcore.runtime import prepared_cache

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits"
X = np.load(DIGITS / "digits_test.npz")["x"][:5]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache root of this test's own, the cache on and written (the suite sets PYTHONDONTWRITEBYTECODE)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(root))
    monkeypatch.delenv("SRCORE_NO_PREPARED_CACHE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return root


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "digits.srm"
    shutil.copyfile(DIGITS / "digits.srm", path)
    return path


def _load(path, **options):
    sm = srcore.StaticModule(srcore.load(path), srcore.Options(prepared_cache=True, **options))
    return sm, sm(X)


def _reference(path, **options):
    return srcore.StaticModule(srcore.load(path), srcore.Options(prepared_cache=False, **options))(X)


def _entries(root):
    prepared_cache.wait_for_writes()   # entries are written by a thread of their own after a first call
    return sorted((root / "prepared").glob("*/*.srm"))


def _torch_reference(weights):
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(DIGITS))
    try:
        from net import DigitsNet
    finally:
        sys.path.remove(str(DIGITS))
    net = DigitsNet().eval()
    net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in weights.items()})
    with torch.inference_mode():
        return net(torch.from_numpy(X)).numpy()


CHILD = """
import json, sys, numpy as np, srcore
import srcore.ir.parser as parser
from srcore.format.lazy_graph import unparsed_text
parses, parse_graph = [], parser.parse_graph
parser.parse_graph = lambda *a, **k: parses.append(1) or parse_graph(*a, **k)
x = np.load(sys.argv[2])["x"][:5]
m = srcore.load(sys.argv[1])
sm = srcore.StaticModule(m)
y = sm(x)
print("@@", json.dumps({"cache": sm.prepared_cache, "before": sm.prepared_before, "passes": "passes" in sm.load_stages,
                        "imported_passes": "srcore.passes.prepare" in sys.modules, "y": y.tolist(),
                        "parses_to_result": len(parses), "original_parsed": unparsed_text(m) is None}))
"""


def _child(path, cache_root, **env_over):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SRCORE_NO_PREPARED_CACHE")}
    env.update(SRCORE_CACHE_DIR=str(cache_root), **env_over)
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(DIGITS / "digits_test.npz")], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("@@"))[2:])


def test_a_second_fresh_process_loads_the_model_prepared_from_the_cache(model_file, tmp_path):
    root = tmp_path / "cache"
    first, second = _child(model_file, root), _child(model_file, root)
    off = _child(model_file, root, SRCORE_NO_PREPARED_CACHE="1")
    assert (first["cache"], first["before"], first["passes"]) == ("miss", False, True)
    assert (second["cache"], second["before"], second["passes"]) == ("hit", True, False)
    assert not second["imported_passes"] and first["imported_passes"]
    # the hit parsed no graph: the entry's comes from its graph form (tests/test_graph_form.py), and srcore.load left
    # the file's (read by the first process) unparsed
    assert (second["parses_to_result"], second["original_parsed"]) == (0, False)
    assert first["original_parsed"] and off["original_parsed"]
    assert (off["cache"], off["before"]) == (None, False)
    assert len(_entries(root)) == 1
    np.testing.assert_array_equal(np.array(second["y"], np.float32), np.array(off["y"], np.float32))
    with np.load(DIGITS / "digits_torch.npz") as w:
        ref = _torch_reference({k: w[k] for k in w.files})
    np.testing.assert_allclose(np.array(second["y"], np.float32), ref, rtol=1e-4, atol=1e-4)


def test_a_different_selection_misses(model_file, tmp_path):
    root = tmp_path / "cache"
    selection = tmp_path / "selection.yaml"
    subprocess.run([sys.executable, "-m", "srcore", "select", str(model_file), "-o", str(selection)], check=True,
                   capture_output=True)
    assert _child(model_file, root)["cache"] == "miss"
    assert _child(model_file, root)["cache"] == "hit"
    selected = [_child(model_file, root, SRCORE_SELECTION=str(selection)) for _ in range(2)]
    assert [s["cache"] for s in selected] == ["miss", "hit"]
    assert len(_entries(root)) == 2
    np.testing.assert_array_equal(selected[1]["y"], _child(model_file, root)["y"])


def test_an_edited_model_file_misses_even_with_the_same_size_and_mtime(model_file, cache):
    sm, y = _load(model_file)
    assert sm.prepared_cache == "miss"
    assert _load(model_file)[0].prepared_cache == "hit"
    # one weight changed in place: same size, and the modification time put back
    st_before = os.stat(model_file)
    offset = os.path.getsize(model_file) - 4    # the last float32 of the data section (a parameter's)
    raw = bytearray(model_file.read_bytes())
    raw[offset:offset + 4] = np.float32(7.5).tobytes()
    model_file.write_bytes(bytes(raw))
    os.utime(model_file, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
    assert os.stat(model_file).st_size == st_before.st_size
    edited, y_edited = _load(model_file)
    assert edited.prepared_cache == "miss" and not edited.prepared_before
    np.testing.assert_array_equal(y_edited, _reference(model_file))
    assert not np.array_equal(y_edited, y)
    assert _load(model_file)[0].prepared_cache == "hit"


def test_a_rewritten_model_agrees_with_torch_on_its_new_weights(model_file, cache):
    _load(model_file)
    m = srcore.load(model_file)
    weights = {k: np.array(v) for k, v in m.params.items()}
    weights["classifier.3.bias"] = weights["classifier.3.bias"] + np.arange(10, dtype=np.float32)
    m.params["classifier.3.bias"] = weights["classifier.3.bias"]
    m.bind_params()
    srcore.save(m, model_file)
    for expected in ("miss", "hit"):
        sm, y = _load(model_file)
        assert sm.prepared_cache == expected
        np.testing.assert_allclose(y, _torch_reference(weights), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("options", [{"executor": "interpreter"}, {"memory_planner_algorithm": "precomputed_offsets"},
                                     {"manage_output_tensors": True}, {"backends": ("cpu",)}])
def test_other_options_miss(model_file, cache, options):
    base = {"executor": "codegen", "memory_planner_algorithm": "standard_resizing", "backends": ("cpu",)}
    if options.get("backends") == ("cpu",):
        base["backends"] = ("quantized_cpu", "cpu")
    assert _load(model_file, **base)[0].prepared_cache == "miss"
    assert _load(model_file, **base)[0].prepared_cache == "hit"
    other = {**base, **options}
    sm, y = _load(model_file, **other)
    assert sm.prepared_cache == "miss"
    np.testing.assert_array_equal(y, _reference(model_file, **other))
    assert _load(model_file, **other)[0].prepared_cache == "hit"
    assert len(_entries(cache)) == 2


def test_another_plugin_version_misses(model_file, cache, monkeypatch):
    assert _load(model_file)[0].prepared_cache == "miss"
    assert _load(model_file)[0].prepared_cache == "hit"
    real = prepared_mod.registry_plugins

    def bumped(pm):
        return tuple((name, dist, f"{version}.post1", status) for name, dist, version, status in real(pm))

    monkeypatch.setattr(prepared_mod, "registry_plugins", bumped)
    sm, y = _load(model_file)
    assert sm.prepared_cache == "miss"
    np.testing.assert_array_equal(y, _reference(model_file))


def test_another_cpu_or_thread_setting_misses(model_file, cache, monkeypatch):
    """A load's timed choices hold only on the machine and thread setting that timed them (a cache root
    shared by an Intel and an AMD machine must not hand one's choices to the other)."""
    assert _load(model_file)[0].prepared_cache == "miss"
    assert _load(model_file)[0].prepared_cache == "hit"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert _load(model_file)[0].prepared_cache == "miss"
    import srcore.cpu_features as cpu_features

    monkeypatch.setattr(cpu_features, "cpu_name", lambda: "AMD EPYC 9654 96-Core Processor")
    sm, y = _load(model_file)
    assert sm.prepared_cache == "miss"
    np.testing.assert_array_equal(y, _reference(model_file))


def test_a_model_edited_in_memory_or_built_in_memory_is_not_cached(model_file, cache):
    _load(model_file)
    m = srcore.load(model_file)
    const = next(n for n in m.graph.all_nodes() if n.attrs.get("param") == "classifier.3.bias")
    const.attrs["value"] = np.array(const.attrs["value"]) + 1   # replaced in memory: no longer the file's
    sm = srcore.StaticModule(m, srcore.Options(prepared_cache=True))
    assert sm.prepared_cache is None and not sm.prepared_before
    built = srcore.Model.from_graph(srcore.load(model_file).graph.copy())
    assert srcore.StaticModule(built, srcore.Options(prepared_cache=True)).prepared_cache is None
    # a graph edit keeps the file's arrays: another key (the printed graph), not the entry of the file
    m2 = srcore.load(model_file)
    relu = next(n for n in m2.graph.all_nodes() if n.kind == "aten::relu")
    relu.kind = "aten::sigmoid"
    relu.schema = None
    sm2 = srcore.StaticModule(m2, srcore.Options(prepared_cache=True))
    assert sm2.prepared_cache == "miss"
    np.testing.assert_array_equal(sm2(X), srcore.StaticModule(m2, srcore.Options(prepared_cache=False))(X))


def test_the_option_and_the_variable_turn_it_off(model_file, cache, monkeypatch):
    sm = srcore.StaticModule(srcore.load(model_file), srcore.Options(prepared_cache=False))
    sm(X)
    assert sm.prepared_cache is None and not _entries(cache)
    monkeypatch.setenv("SRCORE_NO_PREPARED_CACHE", "1")
    assert srcore.Options().prepared_cache is False
    monkeypatch.setenv("SRCORE_NO_PREPARED_CACHE", "0")
    assert srcore.Options().prepared_cache is True
    monkeypatch.setattr(sys, "dont_write_bytecode", True)   # like srcore's other caches: nothing written
    sm, _ = _load(model_file)
    assert sm.prepared_cache == "miss" and not _entries(cache)


def test_a_truncated_entry_falls_back_and_is_rewritten(model_file, cache):
    _, y = _load(model_file)
    (entry,) = _entries(cache)
    data = entry.read_bytes()
    for cut in (0, 7, len(data) // 2, len(data) - 1):
        entry.write_bytes(data[:cut])
        sm, got = _load(model_file)
        assert sm.prepared_cache == "miss" and not sm.prepared_before
        np.testing.assert_array_equal(got, y)
        prepared_cache.wait_for_writes()
        assert entry.read_bytes() == data   # written again after the first call
    assert _load(model_file)[0].prepared_cache == "hit"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1, exclude_max=True), value=st.integers(0, 255))
def test_a_corrupt_entry_never_gives_a_wrong_answer(model_file, cache, where, value):
    if not _entries(cache):
        _load(model_file)
    (entry,) = _entries(cache)
    good = entry.read_bytes()
    y = _reference(model_file)
    try:
        raw = bytearray(good)
        i = int(where * len(raw))
        raw[i] = value
        entry.write_bytes(bytes(raw))
        sm, got = _load(model_file)
        assert sm.prepared_cache in ("hit", "miss")
        np.testing.assert_array_equal(got, y)
    finally:
        entry.write_bytes(good)


def test_an_entry_is_checked_by_the_blake2b_it_records(model_file, cache):
    import hashlib

    from srcore.format import srm
    from srcore.format.safetensors_io import Container

    _, y = _load(model_file)
    (entry,) = _entries(cache)
    c = Container(entry)
    data = bytes(c.data_view())
    assert c.metadata["data_blake2b"] == hashlib.blake2b(data, digest_size=32).hexdigest()
    assert c.metadata["data_sha256"] == hashlib.sha256(data).hexdigest()   # still a complete .srm file
    good = entry.read_bytes()
    assert good.endswith(data)
    entry.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))   # one bit of the last weight
    with pytest.raises(srcore.SrcoreFormatError, match="data checksum mismatch"):
        srm.load(entry, verify="entry")
    sm, got = _load(model_file)
    assert sm.prepared_cache == "miss"
    np.testing.assert_array_equal(got, y)


def test_a_file_without_a_blake2b_is_checked_by_its_sha256_as_an_entry(tmp_path):
    from srcore.format import srm

    path = tmp_path / "digits.srm"
    good = (DIGITS / "digits.srm").read_bytes()
    path.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    srm.load(path, verify="header")
    with pytest.raises(srcore.SrcoreFormatError, match="data checksum mismatch"):
        srm.load(path, verify="entry")


def test_a_file_with_a_large_data_section_is_not_cached(model_file, cache, monkeypatch):
    monkeypatch.setattr(prepared_cache, "MAX_DATA_BYTES", os.path.getsize(model_file) // 2)
    sm, y = _load(model_file)
    assert sm.prepared_cache is None and not _entries(cache)
    np.testing.assert_array_equal(y, _reference(model_file))


def test_the_first_call_does_not_wait_for_the_entry(model_file, cache, monkeypatch):
    """The entry is written on another thread, once the first call has returned (not inside it)."""
    returned, seen = threading.Event(), []
    real = prepared_cache.write

    def write(sm, entry):
        # a write inside the call would wait here in vain (the call cannot return meanwhile)
        seen.append((threading.current_thread() is threading.main_thread(), returned.wait(60)))
        return real(sm, entry)

    monkeypatch.setattr(prepared_cache, "write", write)
    sm = srcore.StaticModule(srcore.load(model_file), srcore.Options(prepared_cache=True))
    assert sm.prepared_cache == "miss"
    y = sm(X)
    returned.set()
    assert len(_entries(cache)) == 1
    assert seen == [(False, True)]
    np.testing.assert_array_equal(sm(X), y)
    np.testing.assert_array_equal(y, _reference(model_file))


def test_a_model_of_one_input_signature_writes_after_its_first_call_too(model_file, cache, tmp_path):
    """A model whose specs fix every input (its signature planned at load, its first call a steady one) keeps
    its entry after the first call as well, and its calls agree with and without the cache."""
    m = srcore.load(model_file)
    fixed = tmp_path / "fixed.srm"
    srcore.save(srcore.Model(m.graph, m.params, [srcore.InputSpec("x", "float32", list(X.shape))], m.output_names,
                             m.metadata), fixed)
    sm = srcore.StaticModule(srcore.load(fixed), srcore.Options(prepared_cache=True))
    assert sm.declared_inputs is not None and sm.prepared_cache == "miss"
    assert not _entries(cache)   # a load alone writes nothing
    y = [sm(X), sm(X), sm(X)]
    assert len(_entries(cache)) == 1
    hit, y_hit = _load(fixed)
    assert hit.prepared_cache == "hit" and hit.declared_inputs is not None
    for got in (*y, y_hit, hit(X)):
        np.testing.assert_array_equal(got, _reference(model_file))


def test_a_file_read_before_gets_its_graph_parsed_when_used(model_file, cache, monkeypatch):
    from srcore.format.lazy_graph import unparsed_text
    from srcore.ir.printer import print_graph

    eager = srcore.load(model_file)
    assert unparsed_text(eager) is None
    _load(model_file)
    _entries(cache)
    m = srcore.load(model_file)
    assert unparsed_text(m) is not None
    assert print_graph(m.graph) == print_graph(eager.graph)
    assert unparsed_text(m) is None and m.graph is m.graph
    consts = srcore.model.collect_params(m.graph)
    assert consts and all(consts[k] is m.params[k] for k in consts)   # the file's mapped arrays, as a load binds
    monkeypatch.setenv("SRCORE_NO_PREPARED_CACHE", "1")
    assert unparsed_text(srcore.load(model_file)) is None


def test_a_graph_parsed_when_used_is_still_checked(model_file, cache, tmp_path):
    """A file whose graph does not parse (its header checksum re-sealed) is refused by ``srcore.load``; had this
    srcore read the same header before, the first use of its graph refuses it with the same error."""
    from srcore.format import srm
    from srcore.format.safetensors_io import encode_header

    data = model_file.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header["__metadata__"]["graph"] = header["__metadata__"]["graph"].replace("aten::relu", "aten::relu(")
    header["__metadata__"]["header_sha256"] = srm._header_digest(header)
    hb = encode_header(header)
    bad = tmp_path / "bad.srm"
    bad.write_bytes(len(hb).to_bytes(8, "little") + hb + data[8 + n:])
    with pytest.raises(srcore.SrcoreFormatError, match="does not parse") as eager:
        srcore.load(bad)
    os.makedirs(prepared_cache._header_folder(header["__metadata__"]["header_sha256"]))
    m = srcore.load(bad)
    with pytest.raises(srcore.SrcoreFormatError, match="does not parse") as lazy:
        m.graph
    assert str(lazy.value) == str(eager.value) and str(bad) in str(lazy.value)
    with pytest.raises(srcore.SrcoreFormatError, match="does not parse"):
        srcore.StaticModule(m, srcore.Options(prepared_cache=True))
