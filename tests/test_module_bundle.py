"""The module bundle (srcore/_module_bundle.py): a second start takes srcore's modules from the one cache file
(no miss) and they are the modules ``PathFinder`` gives (same file, cached file, package path, source, code);
an entry never serves a module whose source changed (content, size or only its mtime), a directory where a
file was added that ``FileFinder`` would prefer (a package of the same name), another copy of the package
found first, or a deleted file; nothing is written under PYTHONDONTWRITEBYTECODE; a damaged file is ignored
and rewritten; ``SRCORE_NO_MODULE_BUNDLE=1`` turns it off."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.one_pass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# imports a package the tests write (in scope: its name starts with srcore_) and some of srcore
CHILD = r"""
import json, sys
import srcore
from srcore import _module_bundle as b
import srcore.ir.types, srcore.ops.schema
import srcore_bundle_probe.mod as mod
import srcore_bundle_probe.sub
out = {"stats": b.stats, "x": mod.X, "file": mod.__file__, "sub_file": srcore_bundle_probe.sub.__file__,
       "finder": b.BundleFinder in sys.meta_path, "loader": type(mod.__loader__).__name__}
for name in ("srcore.ir.types", "srcore.ops.schema", "srcore_bundle_probe.mod", "srcore_bundle_probe.sub"):
    m = sys.modules[name]
    out[name] = [m.__file__, m.__cached__, list(getattr(m, "__path__", []) or []), m.__spec__.origin,
                 m.__loader__.get_source(name) == open(m.__file__).read()]
out["mod_consts"] = repr(mod.f.__code__.co_consts)
out["co_filename"] = mod.f.__code__.co_filename
print(json.dumps(out))
"""


def _write_pkg(root, x=1, tag=""):
    pkg = root / "srcore_bundle_probe"
    (pkg / "sub").mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text(f"TAG = {tag!r}\n")
    (pkg / "mod.py").write_text(f"X = {x!r}\n\ndef f():\n    return ('{tag}', X)\n")
    return pkg


def _run(tmp_path, pkg_roots, **env_over):
    paths = [str(r) for r in pkg_roots] + [ROOT] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SRCORE_NO_MODULE_BUNDLE")}
    env.update(SRCORE_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=os.pathsep.join(p for p in paths if p))
    env.update({k: v for k, v in env_over.items() if v is not None})
    p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def _bundle(tmp_path):
    folder = tmp_path / "cache" / "modules"
    files = list(folder.iterdir()) if folder.exists() else []
    return files[0] if len(files) == 1 else None


@pytest.fixture
def probe(tmp_path):
    root = tmp_path / "a"
    _write_pkg(root, x=1, tag="a")
    return root


def test_a_second_start_takes_srcores_modules_from_the_bundle_unchanged(tmp_path, probe):
    off = _run(tmp_path, [probe], SRCORE_NO_MODULE_BUNDLE="1")
    assert not off["finder"] and _bundle(tmp_path) is None
    first = _run(tmp_path, [probe])
    assert first["stats"]["hits"] == 0 and first["finder"]
    assert _bundle(tmp_path) is not None
    second = _run(tmp_path, [probe])
    assert second["stats"]["misses"] == 0 and second["stats"]["hits"] >= 4
    assert second["loader"] == "_Loader"
    for key in ("srcore.ir.types", "srcore.ops.schema", "srcore_bundle_probe.mod", "srcore_bundle_probe.sub"):
        assert second[key] == off[key], key   # file, cached file, package path, origin, source
        assert second[key][-1] is True
    assert second["co_filename"] == off["co_filename"] == second["file"]
    assert second["mod_consts"] == off["mod_consts"]
    third = _run(tmp_path, [probe])
    assert third["stats"]["misses"] == 0


@pytest.mark.parametrize("change", ["content", "same_size", "touch_only"])
def test_a_changed_source_is_read_again_never_served_stale(tmp_path, probe, change):
    _run(tmp_path, [probe])
    assert _run(tmp_path, [probe])["x"] == 1
    mod = probe / "srcore_bundle_probe" / "mod.py"
    st = os.stat(mod)
    if change == "content":
        _write_pkg(probe, x=12345, tag="a")
        want = 12345
    elif change == "same_size":   # same size, other value: only the mtime tells
        mod.write_text(mod.read_text().replace("X = 1", "X = 7"))
        assert os.stat(mod).st_size == st.st_size
        want = 7
    else:
        want = 1
    os.utime(mod, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))   # whatever the clock's granularity
    out = _run(tmp_path, [probe])
    assert out["x"] == want
    assert out["stats"]["misses"] >= 1
    again = _run(tmp_path, [probe])   # the entry was rewritten at exit: served again
    assert again["x"] == want and again["stats"]["misses"] == 0


def test_a_package_that_filefinder_would_prefer_wins(tmp_path, probe):
    _run(tmp_path, [probe])
    assert _run(tmp_path, [probe])["stats"]["misses"] == 0
    # a package of the same name beside mod.py: FileFinder takes the package, so must the bundle
    pkg_dir = probe / "srcore_bundle_probe" / "mod"
    pkg_dir.mkdir()
    (pkg_dir / "__init__.py").write_text("X = 'package'\ndef f():\n    return 0\n")
    out = _run(tmp_path, [probe])
    assert out["x"] == "package" and out["file"] == str(pkg_dir / "__init__.py")


def test_another_copy_found_first_is_the_one_imported(tmp_path, probe):
    _run(tmp_path, [probe])
    other = tmp_path / "b"
    _write_pkg(other, x=2, tag="b")
    out = _run(tmp_path, [other, probe])   # b's copy first on sys.path
    assert out["x"] == 2 and out["file"] == str(other / "srcore_bundle_probe" / "mod.py")
    assert out["sub_file"] == str(other / "srcore_bundle_probe" / "sub" / "__init__.py")
    back = _run(tmp_path, [probe])   # and a's again afterwards
    assert back["x"] == 1 and back["file"] == str(probe / "srcore_bundle_probe" / "mod.py")


def test_a_deleted_module_is_not_imported(tmp_path, probe):
    _run(tmp_path, [probe])
    (probe / "srcore_bundle_probe" / "mod.py").unlink()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(SRCORE_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(probe), ROOT, env.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", "import srcore, srcore_bundle_probe.mod"], env=env,
                       capture_output=True, text=True)
    assert p.returncode != 0 and "ModuleNotFoundError" in p.stderr


def test_nothing_is_written_without_bytecode_and_a_damaged_file_is_rewritten(tmp_path, probe):
    out = _run(tmp_path, [probe], PYTHONDONTWRITEBYTECODE="1")
    assert out["x"] == 1 and _bundle(tmp_path) is None
    _run(tmp_path, [probe])
    path = _bundle(tmp_path)
    for damage in (b"", b"\xff" * 64, path.read_bytes()[: path.stat().st_size // 2]):
        path.write_bytes(damage)
        out = _run(tmp_path, [probe])
        assert out["x"] == 1 and out["co_filename"] == out["file"]
        if len(damage) < 100:   # no index: nothing served (a truncated file serves the entries it still holds)
            assert out["stats"]["hits"] == 0
        assert _run(tmp_path, [probe])["stats"]["misses"] == 0


def test_bundle_files_are_per_python_in_the_cache_directory(tmp_path, monkeypatch):
    from srcore import _module_bundle as b

    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path))
    path = b.bundle_file()
    assert os.path.dirname(path) == str(tmp_path / "modules")
    assert os.path.basename(path).startswith(sys.implementation.cache_tag + "-")
