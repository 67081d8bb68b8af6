"""The cache of attrs-generated methods (srcore/_attrs_code_cache.py): a second process compiles none of
srcore's (or attrs' own) attrs methods and its objects behave exactly like those of a process without the cache
(same repr, equality, hashing, validation errors); a damaged file is ignored; nothing is written under
PYTHONDONTWRITEBYTECODE; a changed class source is a miss, never a stale hit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from srcore import _attrs_code_cache as cache

pytestmark = pytest.mark.one_pass

CHILD = r"""
import json, sys
import srcore
from srcore.runtime.options import Options
from srcore.ir.types import TensorType
from srcore import _attrs_code_cache as c
o = Options()
t = TensorType.__name__
try:
    Options(executor=12345)
    err = None
except Exception as e:
    err = type(e).__name__
import attrs  # attrs' own validator classes are served from the cache too
v = attrs.validators.instance_of(int)
v_eq = v == attrs.validators.instance_of(int) and hash(v) == hash(attrs.validators.instance_of(int))
print(json.dumps({"stats": c.stats, "repr": repr(o), "validator": repr(v), "v_eq": v_eq, "eq": o == Options(), "hash_ok": hash(o) == hash(Options()),
                  "err": err, "patched": getattr(sys.modules["attr._make"]._compile_and_eval, "_srcore_cached", False)}))
"""


def _run(tmp_path, **env_over):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SRCORE_NO_ATTRS_CACHE")}
    env.update(SRCORE_CACHE_DIR=str(tmp_path / "cache"), **env_over)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def _files(tmp_path):
    d = tmp_path / "cache" / "attrs"
    return sorted(d.glob("*.marshal")) if d.is_dir() else []


def test_second_process_compiles_nothing_and_behaves_the_same(tmp_path):
    plain = _run(tmp_path, SRCORE_NO_ATTRS_CACHE="1")
    assert not plain["patched"] and not _files(tmp_path)
    first = _run(tmp_path)
    assert first["patched"] and first["stats"]["misses"] > 10 and first["stats"]["hits"] == 0
    assert len(_files(tmp_path)) == 1
    second = _run(tmp_path)
    assert second["stats"] == {"hits": first["stats"]["misses"], "misses": 0}
    for key in ("repr", "eq", "hash_ok", "err", "validator", "v_eq"):
        assert plain[key] == first[key] == second[key], key
    assert second["v_eq"] and second["validator"].startswith("<instance_of validator")


def test_damaged_cache_file_is_ignored_and_rewritten(tmp_path):
    _run(tmp_path)
    (f,) = _files(tmp_path)
    f.write_bytes(b"\x00not marshal")
    again = _run(tmp_path)
    assert again["stats"]["hits"] == 0 and again["stats"]["misses"] > 10
    assert _run(tmp_path)["stats"]["misses"] == 0


def test_entries_are_marshalled_one_by_one_and_the_first_format_and_damaged_entries_still_work(tmp_path):
    """Each code object is stored as its own marshal bytes (a start unmarshals only the ~90 it uses, not the
    whole file); a file of the first format (code objects) is still served, and an entry whose bytes are not
    a code object is compiled again, never run."""
    import marshal

    first = _run(tmp_path)
    (f,) = _files(tmp_path)
    entries = marshal.loads(f.read_bytes())
    assert len(entries) == first["stats"]["misses"]
    assert all(isinstance(v, bytes) and isinstance(marshal.loads(v), types.CodeType) for v in entries.values())
    f.write_bytes(marshal.dumps({k: marshal.loads(v) for k, v in entries.items()}))   # the first format's values
    old = _run(tmp_path)
    assert old["stats"] == {"hits": first["stats"]["misses"], "misses": 0}
    assert old["repr"] == first["repr"] and old["eq"] and old["hash_ok"]
    damaged = dict.fromkeys(marshal.loads(f.read_bytes()), marshal.dumps(12345))   # bytes, but of an int
    some = next(iter(damaged))
    damaged[some] = b"\xffnot marshal"
    f.write_bytes(marshal.dumps(damaged))
    again = _run(tmp_path)
    assert again["stats"] == {"hits": 0, "misses": first["stats"]["misses"]}
    assert again["repr"] == first["repr"] and again["err"] == first["err"]
    assert _run(tmp_path)["stats"] == {"hits": first["stats"]["misses"], "misses": 0}   # rewritten whole


def test_nothing_written_when_bytecode_writing_is_off(tmp_path):
    res = _run(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert res["patched"] and res["stats"]["misses"] > 10
    assert not _files(tmp_path)


def _fake_attrs_make():
    """A stand-in for ``attr._make`` with the function the cache wraps (same signature as attrs')."""
    mod = types.ModuleType("fake_attr_make")

    def _compile_and_eval(script, globs, locs=None, filename=""):
        eval(compile(script, filename, "exec"), globs, locs)

    mod._compile_and_eval = _compile_and_eval
    mod.__file__ = __file__
    return mod


def test_changed_source_is_a_miss_and_other_libraries_are_not_served(tmp_path, monkeypatch):
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_codes", {})
    monkeypatch.setattr(cache, "_used", {})
    monkeypatch.setattr(cache, "stats", {"hits": 0, "misses": 0})
    monkeypatch.setattr("atexit.register", lambda *a, **k: None)
    mod = _fake_attrs_make()
    cache._patch(mod)
    run = mod._compile_and_eval
    name = "<attrs generated methods srcore.fake.Thing>"
    for value, hits, misses in ((1, 0, 1), (2, 0, 2), (1, 1, 2)):  # same file name, new text: compiled
        g: dict = {}
        run(f"def f():\n    return {value}\n", g, None, name)
        assert g["f"]() == value
        assert cache.stats == {"hits": hits, "misses": misses}
    g = {}
    run("def f():\n    return 3\n", g, None, "<attrs generated methods otherlib.Thing>")
    assert g["f"]() == 3 and cache.stats == {"hits": 1, "misses": 2}  # not ours: plain attrs path
    cache._patch(mod)  # idempotent: no double wrapping
    assert mod._compile_and_eval is run


def test_unknown_attrs_internals_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path / "cache"))
    mod = types.ModuleType("fake_attr_make")

    def _compile_and_eval(src, g):  # a future attrs with another signature
        exec(src, g)

    mod._compile_and_eval = _compile_and_eval
    cache._patch(mod)
    assert mod._compile_and_eval is _compile_and_eval


def test_hash_salt_of_each_process_is_used_and_code_equals_a_fresh_compile(tmp_path, monkeypatch):
    """attrs salts ``__hash__`` with ``hash(file name)``, a per-process value: a hit must carry this
    process's salt, and the bytecode must be the one compiling this process's script gives."""
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_codes", {})
    monkeypatch.setattr(cache, "_used", {})
    monkeypatch.setattr(cache, "stats", {"hits": 0, "misses": 0})
    monkeypatch.setattr("atexit.register", lambda *a, **k: None)
    mod = _fake_attrs_make()
    cache._patch(mod)
    name = "<attrs generated methods srcore.fake.Hashed>"
    for salt, hits in ((-1911751866363153269, 0), (2902247343053023545, 1), (4, 2), (-5, 3)):
        script = f"def __hash__(self):\n        return hash((\n                {salt},\n                self.x,\n        ))\n"
        g: dict = {}
        mod._compile_and_eval(script, g, None, name)
        fresh: dict = {}
        eval(compile(script, name, "exec"), fresh)
        got, want = g["__hash__"].__code__, fresh["__hash__"].__code__
        for attr in ("co_code", "co_consts", "co_names", "co_varnames", "co_exceptiontable", "co_filename"):
            assert getattr(got, attr, None) == getattr(want, attr, None), attr
        assert g["__hash__"](types.SimpleNamespace(x=3)) == hash((salt, 3))
        assert cache.stats["hits"] == hits


def test_swapping_the_salt_rebuilds_only_the_code_that_holds_it():
    """A served script holds several methods; the salt is put back into ``__hash__``'s code only, and the
    result is what compiling the script with the salt gives."""
    text = ("def __init__(self, x):\n    self.x = x + 7\n"
            "def __eq__(self, other):\n    return (self.x,) == (other.x,)\n"
            "def __hash__(self):\n    return hash((\n        {salt},\n        self.x,\n    ))\n")
    placeholder = int(cache._PLACEHOLDER)
    code = compile(text.format(salt=cache._PLACEHOLDER), "<s>", "exec")
    swapped = cache._swap_const(code, placeholder, 12345)
    want = compile(text.format(salt=12345), "<s>", "exec")
    by_name = lambda c: {k.co_name: k for k in c.co_consts if isinstance(k, types.CodeType)}  # noqa: E731
    got, fresh, orig = by_name(swapped), by_name(want), by_name(code)
    assert got["__hash__"].co_consts == fresh["__hash__"].co_consts and got["__hash__"].co_code == fresh["__hash__"].co_code
    assert got["__init__"] is orig["__init__"] and got["__eq__"] is orig["__eq__"]
    assert cache._swap_const(want, placeholder, 1) is want   # nothing to swap: the same object


COMPILED = r"""
import builtins, json
seen = []
real = builtins.compile
builtins.compile = lambda src, name, *a, **k: seen.append(str(name)) or real(src, name, *a, **k)
import srcore
import attrs
from srcore.runtime.options import Options
a = attrs.fields(Options)[0]
print(json.dumps([[n for n in seen if n.startswith("<attrs generated")], repr(a)[:10], a == a, hash(a) == hash(a)]))
"""


def test_attrs_own_classes_built_while_it_imports_are_served_too(tmp_path):
    """``Attribute``, ``Factory``, ... get their methods while ``attr._make`` runs, before its
    ``_compile_and_eval`` can be wrapped: a second process compiles none of them either."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SRCORE_NO_ATTRS_CACHE")}
    env["SRCORE_CACHE_DIR"] = str(tmp_path / "cache")
    runs = [json.loads(subprocess.run([sys.executable, "-c", COMPILED], env=env, capture_output=True, text=True,
                                      check=True).stdout.splitlines()[-1]) for _ in range(2)]
    first, second = runs
    assert "<attrs generated __repr__ attr._make.Attribute>" in first[0]
    assert second[0] == [] and first[1:] == second[1:] == ["Attribute(", True, True]


def test_generated_runtime_code_is_served_under_each_process_file_name(monkeypatch):
    """``compile_exec`` (codegen's blocks, the runtime's entry point): a second compile of the same text is a
    hit, its code objects (the nested function's too) carry the caller's file name, and it runs the same."""
    monkeypatch.setattr(cache, "_loaded", ["<a cache file>"])
    monkeypatch.setattr(cache, "_codes", {})
    monkeypatch.setattr(cache, "_used", {})
    monkeypatch.setattr(cache, "_dirty", False)
    monkeypatch.setattr(cache, "stats", {"hits": 0, "misses": 0})
    source = "def _block0(v0, v1):\n    v2 = v0 * v1 + 1\n    return (v2,)\n"
    ran = []
    for obj_id in ("7f01", "7f02"):
        filename = f"<srcore-codegen:{obj_id}:_block0>"
        code = cache.compile_exec(source, filename, "<srcore-codegen:_block0>")
        env: dict = {}
        exec(code, env)
        fn = env["_block0"]
        assert code.co_filename == fn.__code__.co_filename == filename
        ran.append(fn(3, 4))
    assert cache.stats == {"hits": 1, "misses": 1} and ran == [(13,), (13,)]
    assert cache.compile_exec(source, "<srcore-entry>").co_filename == "<srcore-entry>"


def test_generated_runtime_code_is_compiled_plainly_without_the_cache(monkeypatch):
    monkeypatch.setattr(cache, "_loaded", [])
    monkeypatch.setattr(cache, "stats", {"hits": 0, "misses": 0})
    code = cache.compile_exec("x = 1\n", "<srcore-entry>")
    assert code.co_filename == "<srcore-entry>" and cache.stats == {"hits": 0, "misses": 0}
