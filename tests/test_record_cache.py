"""A plugin's kernel records from the record cache: the same records as its build, rebuilt on any change."""
from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from srcore.plugin import Kernel, record_cache
from srcore.plugin import discovery

pytestmark = pytest.mark.one_pass

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.srm"


def _fields(kernels):
    return [(k.op, k.backend, k.kind, k.dtypes, k.impl, k.matcher, k.priority, k.source, k.provider) for k in kernels]


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SRCORE_NO_RECORD_CACHE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    src = tmp_path / "decl"
    src.mkdir()
    (src / "a.py").write_text("A = 1\n")
    builds = []

    def build():
        builds.append(1)
        return [Kernel("ex::f", "cpu", "out", ("float32",), "ex.kernels:f"),
                Kernel("ex::g.out", "cpu", "native", ("*",), "ex.kernels:g", matcher="ex.kernels:m", priority=2,
                       source="ops.yaml:3")]

    return src, build, builds


def test_a_second_call_serves_the_build_s_records_without_building(env):
    src, build, builds = env
    first = record_cache.cached_kernels("ex", build, sources=[src], key=(True,))
    again = record_cache.cached_kernels("ex", build, sources=[src], key=(True,))
    assert builds == [1] and _fields(again) == _fields(build()) == _fields(first)
    assert record_cache.index_path("ex").is_file()


@pytest.mark.parametrize("change", ["edit", "add", "key", "installed"])
def test_anything_the_records_depend_on_changing_is_a_miss(env, change, monkeypatch):
    src, build, builds = env
    record_cache.cached_kernels("ex", build, sources=[src], key=(True,))
    key = (True,)
    if change == "edit":
        (src / "a.py").write_text("A = 22\n")  # another size (and mtime)
    elif change == "add":
        (src / "b.py").write_text("")
    elif change == "key":
        key = (False,)
    else:
        monkeypatch.setattr(discovery, "installed_key", lambda: "another set of distributions")
    record_cache.cached_kernels("ex", build, sources=[src], key=key)
    assert builds == [1, 1]
    record_cache.cached_kernels("ex", build, sources=[src], key=key)  # rewritten under the new key
    assert builds == [1, 1]


#: a stored row with one field damaged (the row's fields: op, backend, kind, dtypes, impl, matcher, priority, source)
_BAD_FIELDS = {"bad op": (0, "not an op"), "bad backend": (1, "c p u"), "bad kind": (2, "sometimes"),
               "no dtypes": (3, ()), "dtypes not a tuple": (3, "float32"), "bad impl": (4, "no colon"),
               "bad matcher": (5, 7), "priority not an int": (6, "2")}


@pytest.mark.parametrize("damage", ["truncated", "bad row", *_BAD_FIELDS])
def test_a_damaged_file_is_a_miss_and_rewritten(env, damage):
    src, build, builds = env
    record_cache.cached_kernels("ex", build, sources=[src])
    path = record_cache.index_path("ex")
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:-7])
    else:
        fmt, key, rows = marshal.loads(path.read_bytes())
        if damage == "bad row":
            row = rows[0][:3]
        else:
            i, value = _BAD_FIELDS[damage]
            row = (*rows[1][:i], value, *rows[1][i + 1:])  # the second row has a matcher and a priority
        path.write_bytes(marshal.dumps((fmt, key, (rows[0], row))))
    got = record_cache.cached_kernels("ex", build, sources=[src])
    assert builds == [1, 1] and _fields(got) == _fields(build()[:2])
    record_cache.cached_kernels("ex", build, sources=[src])
    assert builds == [1, 1, 1]


def test_callable_kernels_are_never_stored(env):
    src, _build, _ = env
    calls = []

    def build():
        calls.append(1)
        return [Kernel("ex::f", "cpu", "out", ("float32",), lambda *a: None)]

    for _ in range(2):
        assert callable(record_cache.cached_kernels("ex2", build, sources=[src])[0].impl)
    assert calls == [1, 1] and not record_cache.index_path("ex2").exists()


@pytest.mark.parametrize("off", ["env", "dont_write_bytecode"])
def test_turned_off_builds_every_time(env, monkeypatch, off):
    src, build, builds = env
    if off == "env":
        monkeypatch.setenv("SRCORE_NO_RECORD_CACHE", "1")
    else:
        monkeypatch.setattr(sys, "dont_write_bytecode", True)
    for _ in range(2):
        record_cache.cached_kernels("ex", build, sources=[src])
    assert builds == [1, 1] and not record_cache.index_path("ex").exists()


def test_the_cpu_plugin_serves_its_declared_kernels_from_the_cache(env):
    import srcore_cpu

    first = srcore_cpu.declared_kernels()   # builds (imports every decl module) and writes the file
    again = srcore_cpu.declared_kernels()
    want = [*srcore_cpu._decl_kernels(), *srcore_cpu.EXTRA_KERNELS]
    assert len(want) > 500 and _fields(first) == _fields(again) == _fields(want)
    assert record_cache.index_path("srcore_cpu").is_file()


CHILD = f"""
import json, sys
import numpy as np
import srcore
y = srcore.StaticModule(srcore.load({str(DIGITS)!r}))(np.zeros((1, 1, 8, 8), np.float32))
assert y.shape == (1, 10)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("srcore_cpu.decl."))))
"""


def test_a_warm_start_imports_no_kernel_declaration_module(tmp_path):
    env = {**os.environ, "SRCORE_CACHE_DIR": str(tmp_path)}
    for name in ("PYTHONDONTWRITEBYTECODE", "SRCORE_NO_RECORD_CACHE", "SRCORE_SELECTION"):
        env.pop(name, None)
    runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                                      check=True).stdout.splitlines()[-1]) for _ in range(2)]
    assert len(runs[0]) > 20  # the first start built the records (and filled the cache)
    assert runs[1] == ["srcore_cpu.decl.torch_fallback"]  # whether torch is importable is part of the key


def test_two_environments_sharing_a_cache_directory_keep_their_own_entries(env, monkeypatch):
    """The file is per environment (sys.prefix, srcore's directory): two venvs (or checkouts) sharing
    ``$SRCORE_CACHE_DIR`` used to overwrite each other's single file and miss on every alternate start."""
    src, build, builds = env
    prefix = sys.prefix
    record_cache.cached_kernels("ex", build, sources=[src])
    here = record_cache.index_path("ex")
    monkeypatch.setattr(sys, "prefix", prefix + "-other-venv")
    there = record_cache.index_path("ex")
    assert there != here and there.parent == here.parent
    record_cache.cached_kernels("ex", build, sources=[src])   # the other environment: its own miss
    assert here.is_file() and there.is_file() and builds == [1, 1]
    record_cache.cached_kernels("ex", build, sources=[src])   # ... then its own hit
    monkeypatch.setattr(sys, "prefix", prefix)
    record_cache.cached_kernels("ex", build, sources=[src])   # and the first one's entry is still there
    assert builds == [1, 1]


def test_sources_fingerprint_follows_every_python_file_below_a_directory(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "a.py").write_text("A = 1\n")
    (pkg / "sub" / "b.py").write_text("B = 1\n")
    first = record_cache.sources_fingerprint([pkg])
    assert record_cache.sources_fingerprint([pkg]) == first
    # compiled files and other suffixes are not the code
    (pkg / "sub" / "__pycache__" / "b.cpython-311.py").write_text("x")
    (pkg / "notes.txt").write_text("x")
    assert record_cache.sources_fingerprint([pkg]) == first
    # an edit of a nested module (size and mtime change) is a new fingerprint
    (pkg / "sub" / "b.py").write_text("B = 22\n")
    edited = record_cache.sources_fingerprint([pkg])
    assert edited != first
    (pkg / "sub" / "c.py").write_text("")
    assert record_cache.sources_fingerprint([pkg]) not in (first, edited)


def test_a_hit_gives_the_registry_the_same_records_as_building_them(env, monkeypatch):
    """The registry builds a hit's records stamped in one pass (``CachedKernels.with_provider``, no
    validators run again): its kernel table must hold exactly what the plugins' own records give."""
    from srcore.plugin.manager import PluginManager

    def table():
        return _fields(PluginManager().load().registry.kernel_table)  # every field, the provider included

    monkeypatch.setenv("SRCORE_NO_RECORD_CACHE", "1")
    built = table()
    monkeypatch.delenv("SRCORE_NO_RECORD_CACHE")
    table()  # a miss: builds and writes the file
    import srcore_cpu

    hit = srcore_cpu.srcore_kernels()
    assert isinstance(hit, record_cache.CachedKernels) and len(hit) > 500
    assert hit.with_provider(None)[0] == hit[0] and hit[0].provider is None
    served = table()
    assert len(built) > 900 and served == built
    assert {row[-1].name for row in served} >= {"cpu", "quantized"}


def test_the_installed_key_ignores_path_entries_without_distributions(tmp_path, monkeypatch):
    """Starting from another directory (``sys.path[0]``) is the same installation: the key, and the kernel
    records cached under it, must not change; a directory holding a distribution's metadata does change it."""
    monkeypatch.setattr(discovery, "_last_fingerprint", [])
    base = discovery.installed_key()
    empty, other = tmp_path / "scripts", tmp_path / "site"
    empty.mkdir()
    (empty / "app.py").write_text("")
    monkeypatch.setattr(sys, "path", [str(empty), *sys.path])
    assert base is not None and discovery.installed_key() == base
    (other / "mydist-1.0.dist-info").mkdir(parents=True)
    (other / "mydist-1.0.dist-info" / "METADATA").write_text("Name: mydist\nVersion: 1.0\n")
    monkeypatch.setattr(sys, "path", [str(other), *sys.path])
    assert discovery.installed_key() != base


def test_starting_from_another_directory_still_hits_the_record_cache(tmp_path):
    env = {**os.environ, "SRCORE_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("PYTHONDONTWRITEBYTECODE", "SRCORE_NO_RECORD_CACHE", "SRCORE_SELECTION"):
        env.pop(name, None)
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=d, capture_output=True, text=True,
                                      check=True).stdout.splitlines()[-1]) for d in dirs]
    assert len(runs[0]) > 20 and runs[1] == ["srcore_cpu.decl.torch_fallback"]


def test_installations_keep_their_own_files_and_old_ones_are_pruned(env, monkeypatch):
    """A program started inside a source checkout sees its ``*.egg-info`` (another set of distributions):
    each view keeps its own file, so alternating between them hits; files beyond KEEP are removed."""
    src, build, builds = env
    views = [f"installation {i}" for i in range(record_cache.KEEP + 2)]
    for view in (views[0], views[1], views[0], views[1]):
        monkeypatch.setattr(discovery, "installed_key", lambda view=view: view)
        record_cache.cached_kernels("ex", build, sources=[src])
    assert builds == [1, 1]
    paths = []
    for i, view in enumerate(views):
        monkeypatch.setattr(discovery, "installed_key", lambda view=view: view)
        record_cache.cached_kernels("ex", build, sources=[src])
        paths.append(record_cache.index_path("ex"))
        t = time.time_ns() + (i + 1) * 10**9  # newest last, whatever the file system's clock resolution
        os.utime(paths[-1], ns=(t, t))
    files = set(paths[0].parent.glob("ex-*.marshal"))
    assert files == set(paths[-record_cache.KEEP:])  # the two oldest installations' files are gone
