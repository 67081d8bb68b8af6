"""The parsed-schema cache: hits, invalidation on change, corrupt files, opt-out, no pickle."""
from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

import srcore
from srcore.ops import cache, declarations
from srcore.ops.registry import core_declaration_files

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

V1 = "- func: ex::f(Tensor self, float s=1.5) -> Tensor\n"
V2 = "- func: ex::f(Tensor self, float s=2.5) -> Tensor\n- func: ex::g(int[2] k=1) -> ()\n"


@pytest.fixture
def parses(monkeypatch, tmp_path):
    """Counts real parses; isolates the cache dir and the in-process memo."""
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SRCORE_NO_SCHEMA_CACHE", raising=False)
    cache.clear_memory_cache()
    count = []
    real = declarations.parse_declarations

    def counting(text, source):
        count.append(source)
        return real(text, source)

    monkeypatch.setattr(declarations, "parse_declarations", counting)
    yield count
    cache.clear_memory_cache()


def _files(tmp_path):
    return sorted((tmp_path / "cache" / "schemas").glob("*.marshal"))


def test_unchanged_file_uses_the_cache(parses, tmp_path):
    p = tmp_path / "ops.yaml"
    p.write_text(V1)
    first = cache.load_schemas([p])
    assert len(parses) == 1 and len(_files(tmp_path)) == 1
    cache.clear_memory_cache()  # as a fresh process would
    again = cache.load_schemas([p])
    assert len(parses) == 1  # read from disk, not parsed
    assert again == first and again[0].source == f"{p}:1"
    assert again[0].schema.arguments[1].default.value == 1.5
    cache.load_schemas([p])
    assert len(parses) == 1  # and memoised in-process


def test_changed_file_is_reparsed(parses, tmp_path):
    p = tmp_path / "ops.yaml"
    p.write_text(V1)
    cache.load_schemas([p])
    p.write_text(V2)
    cache.clear_memory_cache()
    decls = cache.load_schemas([p])
    assert len(parses) == 2
    assert [d.schema.qualified_name for d in decls] == ["ex::f", "ex::g"]
    assert decls[0].schema.arguments[1].default.value == 2.5
    assert decls[1].schema.arguments[0].default.value == (1, 1)


@pytest.mark.parametrize("damage", [b"", b"garbage", b"\xe3\x00\x00", "truncate", "wrong-shape"])
def test_corrupt_cache_is_ignored_and_rewritten(parses, tmp_path, damage):
    p = tmp_path / "ops.yaml"
    p.write_text(V2)
    good = cache.load_schemas([p])
    (f,) = _files(tmp_path)
    data = f.read_bytes()
    if damage == "truncate":
        damage = data[: len(data) // 2]
    elif damage == "wrong-shape":
        damage = marshal.dumps((cache.FORMAT, (("ex::f",),)))
    f.write_bytes(damage)
    cache.clear_memory_cache()
    assert cache.load_schemas([p]) == good
    assert len(parses) == 2
    assert f.read_bytes() == data  # rewritten
    cache.clear_memory_cache()
    cache.load_schemas([p])
    assert len(parses) == 2


def test_opt_out_and_text_sources(parses, tmp_path, monkeypatch):
    monkeypatch.setenv("SRCORE_NO_SCHEMA_CACHE", "1")
    src = ("lib.yaml", V1)
    for _ in range(2):
        (d,) = cache.load_schemas([src])
        assert d.source == "lib.yaml:1"
    assert len(parses) == 2 and _files(tmp_path) == []


def test_same_text_under_another_name_is_its_own_entry(parses):
    a = cache.load_schemas([("a.yaml", V1)])
    b = cache.load_schemas([("b.yaml", V1)])
    assert len(parses) == 2 and a[0].source == "a.yaml:1" and b[0].source == "b.yaml:1"


def test_errors_are_not_cached(parses):
    bad = ("bad.yaml", "- func: ex::f(Tensor self -> Tensor\n")
    for _ in range(2):
        with pytest.raises(srcore.DeclarationError, match="bad.yaml:1:"):
            cache.load_schemas([bad])
    assert len(parses) == 2


def test_unwritable_cache_dir_still_loads(parses, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(blocker))  # a file, not a directory
    (d,) = cache.load_schemas([("x.yaml", V1)])
    assert d.schema.qualified_name == "ex::f"


def test_encoding_round_trips_the_core_declarations():
    decls = declarations.load_declarations(core_declaration_files()[0])
    data = marshal.dumps(cache.encode(decls))
    assert cache.decode(marshal.loads(data)) == decls


def test_default_cache_dir(monkeypatch):
    monkeypatch.delenv("SRCORE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache.cache_dir() == Path(os.path.expanduser("~/.cache/srcore/schemas"))


_TIMER = """
import time, sys
from srcore.ops.cache import load_schemas
from srcore.ops.registry import core_declaration_files
t = time.perf_counter()  # the load itself (yaml is imported only when something is parsed)
n = len(load_schemas(core_declaration_files()))
print(n, time.perf_counter() - t)
"""


def _fresh_load(env):
    out = subprocess.run([sys.executable, "-c", _TIMER], env=env, capture_output=True, text=True, check=True)
    n, secs = out.stdout.split()
    return int(n), float(secs)


@pytest.mark.slow
@pytest.mark.perf
def test_cache_makes_a_fresh_process_load_faster(tmp_path):
    env = {**os.environ, "SRCORE_CACHE_DIR": str(tmp_path)}
    env.pop("SRCORE_NO_SCHEMA_CACHE", None)
    n, _ = _fresh_load(env)  # fills the cache
    warm = min(_fresh_load(env)[1] for _ in range(3))
    cold = min(_fresh_load({**env, "SRCORE_NO_SCHEMA_CACHE": "1"})[1] for _ in range(3))
    assert n > 700
    assert warm < cold, (warm, cold)
