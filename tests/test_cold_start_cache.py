"""The entry-point scan cache (srcore.plugin.discovery): hits, invalidation, corrupt files, opt-out.

Each test installs fake distributions (a ``*.dist-info`` directory with ``METADATA`` and
``entry_points.txt``, as pip writes them) into a temporary directory put on ``sys.path``,
and compares the cached answer with ``importlib.metadata``'s own.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from srcore.plugin import discovery
from srcore.plugin.manager import PluginManager

#: plugin discovery and its cache: no model runs
pytestmark = pytest.mark.one_pass

GROUP = "srcore_test.cold_start"
ROOT = Path(__file__).resolve().parents[1]


def install(site: Path, name: str, version: str, eps: dict[str, str], group: str = GROUP) -> Path:
    """Write ``<name>-<version>.dist-info`` as pip does (a fresh directory per version)."""
    for old in site.glob(f"{name.replace('-', '_')}-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{k} = {v}\n" for k, v in eps.items())
    (d / "entry_points.txt").write_text(f"[{group}]\n{lines}")
    return d


def as_tuples(eps):
    return sorted((e.name, e.value, e.dist.name, e.dist.version) for e in eps)


def truth(group=GROUP):
    return as_tuples(importlib.metadata.entry_points(group=group))


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A site directory on sys.path, a private cache directory, the cache enabled."""
    s = tmp_path / "site"
    s.mkdir()
    monkeypatch.syspath_prepend(str(s))
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SRCORE_NO_PLUGIN_CACHE", raising=False)
    return s


def cache_files(tmp_path):
    return sorted((tmp_path / "cache" / "plugins").glob("ep-*.marshal"))


def test_second_scan_is_served_from_the_cache(site, tmp_path, monkeypatch):
    install(site, "srcore-alpha", "1.0", {"alpha": "alpha_mod:plugin"})
    first, hit = discovery.discover(GROUP)
    assert not hit and as_tuples(first) == [("alpha", "alpha_mod:plugin", "srcore-alpha", "1.0")]
    assert len(cache_files(tmp_path)) == 1

    def no_scan(group):
        raise AssertionError("scanned although the cache is valid")
    monkeypatch.setattr(discovery, "scan", no_scan)
    again, hit = discovery.discover(GROUP)
    assert hit and as_tuples(again) == as_tuples(first) == truth()


@pytest.mark.parametrize("change", ["upgrade", "edit_entry_points", "remove", "add_another"])
def test_any_change_to_the_installed_distributions_rescans(site, tmp_path, change):
    d = install(site, "srcore-alpha", "1.0", {"alpha": "alpha_mod:plugin"})
    assert discovery.discover(GROUP)[1] is False
    assert discovery.discover(GROUP)[1] is True
    if change == "upgrade":
        install(site, "srcore-alpha", "1.1", {"alpha": "alpha_mod:plugin"})
    elif change == "edit_entry_points":  # in place, as a hand edit would
        (d / "entry_points.txt").write_text(f"[{GROUP}]\nalpha = alpha_mod.v2:plugin\nbeta = beta_mod:plugin\n")
    elif change == "remove":
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    else:
        install(site, "srcore-beta", "0.3", {"beta": "beta_mod:plugin"})
    got, hit = discovery.discover(GROUP)
    assert not hit
    assert as_tuples(got) == truth()
    expected = {
        "upgrade": [("alpha", "alpha_mod:plugin", "srcore-alpha", "1.1")],
        "edit_entry_points": [("alpha", "alpha_mod.v2:plugin", "srcore-alpha", "1.0"),
                              ("beta", "beta_mod:plugin", "srcore-alpha", "1.0")],
        "remove": [],
        "add_another": [("alpha", "alpha_mod:plugin", "srcore-alpha", "1.0"),
                        ("beta", "beta_mod:plugin", "srcore-beta", "0.3")],
    }[change]
    assert as_tuples(got) == expected
    got, hit = discovery.discover(GROUP)  # the cache was rewritten for the new state
    assert hit and as_tuples(got) == expected


def test_a_new_directory_on_sys_path_rescans(site, tmp_path, monkeypatch):
    install(site, "srcore-alpha", "1.0", {"alpha": "alpha_mod:plugin"})
    discovery.discover(GROUP)
    other = tmp_path / "other"
    install(other, "srcore-gamma", "2.0", {"gamma": "gamma_mod:plugin"})
    monkeypatch.syspath_prepend(str(other))
    got, hit = discovery.discover(GROUP)
    assert not hit and [e[0] for e in as_tuples(got)] == ["alpha", "gamma"]


def test_a_directory_without_distributions_on_sys_path_is_the_same_installation(site, tmp_path, monkeypatch):
    """A script's directory (``sys.path[0]``) holds no metadata: starting from another one is a hit."""
    install(site, "srcore-alpha", "1.0", {"alpha": "alpha_mod:plugin"})
    discovery.discover(GROUP)
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "app.py").write_text("")
    monkeypatch.syspath_prepend(str(scripts))
    got, hit = discovery.discover(GROUP)
    assert hit and as_tuples(got) == truth() == [("alpha", "alpha_mod:plugin", "srcore-alpha", "1.0")]


@pytest.mark.parametrize("change", [None, "upgrade", "edit_entry_points", "remove", "same_name_in_another_dist",
                                    "same_name_in_a_new_directory", "same_name_in_a_directory_that_had_none",
                                    "another_name"])
def test_entry_points_of_some_names_skip_the_fingerprint_until_what_they_depend_on_changes(site, tmp_path,
                                                                                         monkeypatch, change):
    """``entry_points(group, only=...)`` (a selective start) is checked by the stamps of the ``sys.path``
    directories and of the named entry points' metadata: unchanged, no fingerprint is taken; after any
    change that could alter the answer it falls back to the full check, and agrees with importlib.metadata."""
    d = install(site, "srcore-alpha", "1.0", {"alpha": "alpha_mod:plugin"})
    install(site, "srcore-beta", "0.3", {"beta": "beta_mod:plugin"})
    empty = tmp_path / "empty"   # on sys.path, no distributions: recorded by its stamp, not listed again
    (empty / "some_module").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(empty))
    discovery.discover(GROUP)  # a full check records the stamps
    time.sleep(0.02)  # past the file system clock's tick: the change below gets a later mtime
    taken = []
    real = discovery.fingerprint
    monkeypatch.setattr(discovery, "fingerprint", lambda *a, **k: taken.append(1) or real(*a, **k))
    if change == "upgrade":
        install(site, "srcore-alpha", "1.1", {"alpha": "alpha_mod:plugin"})
    elif change == "edit_entry_points":  # in place, as a hand edit would
        (d / "entry_points.txt").write_text(f"[{GROUP}]\nalpha = alpha_mod.v2:plugin\n")
    elif change == "remove":
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    elif change == "same_name_in_another_dist":
        install(site, "srcore-aardvark", "9.0", {"alpha": "aardvark_mod:plugin"})
    elif change == "same_name_in_a_new_directory":
        other = tmp_path / "other"
        install(other, "srcore-gamma", "2.0", {"alpha": "gamma_mod:plugin"})
        monkeypatch.syspath_prepend(str(other))
    elif change == "same_name_in_a_directory_that_had_none":
        install(empty, "srcore-delta", "3.0", {"alpha": "delta_mod:plugin"})
    elif change == "another_name":  # in place too: it changes what the other names' entry points are only
        (site / "srcore_beta-0.3.dist-info" / "entry_points.txt").write_text(f"[{GROUP}]\nbeta = beta_mod.v2:p\n")
    got = discovery.entry_points(GROUP, only={"alpha"})
    assert as_tuples(got) == [t for t in truth() if t[0] == "alpha"]
    assert bool(taken) == (change not in (None, "another_name")), taken
    assert [e[0] for e in as_tuples(discovery.entry_points(GROUP, only={"alpha", "beta"}))] == \
        [t[0] for t in truth() if t[0] in ("alpha", "beta")]


@pytest.mark.parametrize("damage", [b"", b"not marshal at all", "truncate", "wrong_shape", "wrong_format"])
def test_a_corrupt_cache_file_is_ignored_and_rewritten(site, tmp_path, damage):
    import marshal

    install(site, "srcore-alpha", "1.0", {"alpha": "alpha_mod:plugin"})
    expected = as_tuples(discovery.discover(GROUP)[0])
    (path,) = cache_files(tmp_path)
    good = path.read_bytes()
    fmt, fp, records = marshal.loads(good)
    if damage == "truncate":
        data = good[: len(good) // 2]
    elif damage == "wrong_shape":
        data = marshal.dumps((fmt, fp, (("alpha", 3),)))
    elif damage == "wrong_format":
        data = marshal.dumps((fmt + 100, fp, records))
    else:
        data = damage
    path.write_bytes(data)
    got, hit = discovery.discover(GROUP)
    assert not hit and as_tuples(got) == expected
    got, hit = discovery.discover(GROUP)  # rewritten
    assert hit and as_tuples(got) == expected


def test_unwritable_cache_dir_only_costs_the_scan(site, tmp_path, monkeypatch):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a directory")
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(blocker))
    install(site, "srcore-alpha", "1.0", {"alpha": "alpha_mod:plugin"})
    for _ in range(2):
        got, hit = discovery.discover(GROUP)
        assert not hit and as_tuples(got) == truth()


def test_opt_out_never_uses_the_cache(site, tmp_path, monkeypatch):
    monkeypatch.setenv("SRCORE_NO_PLUGIN_CACHE", "1")
    install(site, "srcore-alpha", "1.0", {"alpha": "alpha_mod:plugin"})
    assert [discovery.discover(GROUP)[1] for _ in range(2)] == [False, False]
    assert cache_files(tmp_path) == []


def test_a_replaced_importlib_metadata_entry_points_is_honoured(site, tmp_path, monkeypatch):
    install(site, "srcore-alpha", "1.0", {"alpha": "alpha_mod:plugin"})
    discovery.discover(GROUP)
    assert discovery.discover(GROUP)[1] is True
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda *, group: [])
    assert discovery.discover(GROUP) == ([], False)


def test_cached_entry_point_loads_module_and_nested_attribute(site):
    (site / "cs_fake_mod.py").write_text("class Outer:\n    class Inner:\n        value = 42\n")
    install(site, "srcore-fake", "1.0", {"fake": "cs_fake_mod:Outer.Inner", "bad": "cs_fake_mod:Missing"})
    discovery.discover(GROUP)
    eps, hit = discovery.discover(GROUP)
    assert hit
    by_name = {e.name: e for e in eps}
    real = {e.name: e for e in importlib.metadata.entry_points(group=GROUP)}
    assert by_name["fake"].load() is real["fake"].load()
    assert by_name["fake"].load().value == 42
    with pytest.raises(AttributeError):
        by_name["bad"].load()
    sys.modules.pop("cs_fake_mod", None)


PLUGIN_V1 = textwrap.dedent("""
    from srcore.plugin import Backend, hookimpl

    @hookimpl
    def srcore_backends():
        yield Backend("cs_backend_v1", "cold-start cache test")
""")


def test_plugin_manager_sees_an_upgrade_through_the_cache(site, tmp_path):
    """No stale plugin: after an upgrade the manager reports the new version and its new records."""
    pkg = site / "cs_plugin_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(PLUGIN_V1)
    install(site, "srcore-cs-plugin", "1.0", {"cs_plugin": "cs_plugin_pkg"}, group="srcore.plugins")
    try:
        pm = PluginManager().load()
        assert pm.report("cs_plugin").version == "1.0" and "cs_backend_v1" in pm.registry.backends
        pm = PluginManager().load()  # served from the cache now
        assert discovery.discover("srcore.plugins")[1] is True
        assert pm.report("cs_plugin").version == "1.0" and "cs_backend_v1" in pm.registry.backends
        # upgrade: new code, new dist-info
        (pkg / "__init__.py").write_text(PLUGIN_V1.replace("_v1", "_v2"))
        # a same-size source rewritten within the second of the first write keeps its .pyc's mtime
        # and size stamp: Python would import v1's bytecode (a pip upgrade writes a newer file)
        shutil.rmtree(pkg / "__pycache__", ignore_errors=True)
        sys.modules.pop("cs_plugin_pkg", None)
        install(site, "srcore-cs-plugin", "2.0", {"cs_plugin": "cs_plugin_pkg"}, group="srcore.plugins")
        pm = PluginManager().load()
        assert pm.report("cs_plugin").version == "2.0"
        assert "cs_backend_v2" in pm.registry.backends and "cs_backend_v1" not in pm.registry.backends
        # uninstall
        for d in site.glob("srcore_cs_plugin-*.dist-info"):
            for f in d.iterdir():
                f.unlink()
            d.rmdir()
        pm = PluginManager().load()
        assert "cs_plugin" not in {r.name for r in pm.reports}
    finally:
        sys.modules.pop("cs_plugin_pkg", None)


CHILD = r"""
import json, sys
import srcore
pm = srcore.get_plugin_manager()
reg = pm.registry
print(json.dumps({"metadata_imported": "importlib.metadata" in sys.modules,
                  "plugins": sorted((r.name, r.dist, r.version, r.status) for r in pm.reports),
                  "kernels": len(reg.kernel_table)}))
"""


def test_fresh_process_with_a_warm_cache_skips_importlib_metadata(tmp_path):
    env = {**os.environ, "SRCORE_CACHE_DIR": str(tmp_path)}
    env.pop("SRCORE_NO_PLUGIN_CACHE", None)
    runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=ROOT, check=True,
                                      capture_output=True, text=True).stdout) for _ in range(2)]
    off = json.loads(subprocess.run([sys.executable, "-c", CHILD], env={**env, "SRCORE_NO_PLUGIN_CACHE": "1"},
                                    cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    assert runs[0]["metadata_imported"] and not runs[1]["metadata_imported"] and off["metadata_imported"]
    assert runs[0]["plugins"] == runs[1]["plugins"] == off["plugins"]
    assert runs[1]["kernels"] == off["kernels"] > 0
    assert any(p[0] == "cpu" and p[3] == "loaded" for p in runs[1]["plugins"])


# -- the parsed-schema cache's table encoding (FORMAT 2) ---------------------------------------------
def test_schema_tables_share_types_and_keep_default_value_types():
    import marshal

    from srcore.ops import cache, declarations

    text = ("- func: ex::f(Scalar s=1, Tensor self, int[2] k=1) -> Tensor\n"
            "- func: ex::g(Scalar s=1.0, Tensor self, int[2] k=1) -> Tensor\n"
            "- func: ex::h(Scalar s=True, Tensor(a!) self, *, Tensor? t=None) -> (Tensor(a!), Tensor)\n")
    decls = declarations.parse_declarations(text, "ex.yaml")
    enc = cache.encode(decls)
    back = cache.decode(marshal.loads(marshal.dumps(enc)))
    assert back == decls and [str(d.schema) for d in back] == [str(d.schema) for d in decls]
    defaults = [(type(d.schema.arguments[0].default.value), d.schema.arguments[0].default.text) for d in back]
    assert defaults == [(type(d.schema.arguments[0].default.value), d.schema.arguments[0].default.text)
                        for d in decls]
    # `Tensor self` and `int[2] k=1` are one row each, and one object each after decoding
    assert back[0].schema.arguments[1] is back[1].schema.arguments[1]
    assert back[0].schema.arguments[2] is back[1].schema.arguments[2]
    assert back[0].schema.arguments[0] is not back[1].schema.arguments[0]


def test_schema_cache_file_in_the_old_layout_is_a_miss(tmp_path, monkeypatch):
    import marshal

    from srcore.ops import cache

    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SRCORE_NO_SCHEMA_CACHE", raising=False)
    cache.clear_memory_cache()
    src = ("ops.yaml", "- func: ex::f(Tensor self) -> Tensor\n")
    (first,) = cache.load_schemas([src])
    (path,) = (tmp_path / "schemas").glob("*.marshal")
    old_layout = (1, (("ex::f", "", (), (), False, False, "ops.yaml:1", None, (), ()),))  # FORMAT 1 file
    path.write_bytes(marshal.dumps(old_layout))
    cache.clear_memory_cache()
    (again,) = cache.load_schemas([src])
    assert again == first
    assert cache.decode(marshal.loads(path.read_bytes())) == [first]  # rewritten in the current format
    cache.clear_memory_cache()


def test_a_distribution_finder_the_fingerprint_cannot_see_disables_the_cache(site, tmp_path, monkeypatch):
    install(site, "srcore-alpha", "1.0", {"alpha": "alpha_mod:plugin"})
    discovery.discover(GROUP)
    assert discovery.discover(GROUP)[1] is True

    class ExtraFinder:  # e.g. a zipapp or a custom importer that ships its own distributions
        @staticmethod
        def find_spec(*args, **kwargs):
            return None

        @staticmethod
        def find_distributions(context=None):
            return iter(())
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, ExtraFinder])
    got, hit = discovery.discover(GROUP)
    assert not hit and as_tuples(got) == truth()


def test_the_importlib_metadata_backport_keeps_the_cache(site, tmp_path):
    """dask imports the importlib_metadata backport, whose finder reads sys.path as the stdlib's does:
    the cache stays on, and its answer is still the backport's and the stdlib's."""
    importlib_metadata = pytest.importorskip("importlib_metadata")
    install(site, "srcore-bp", "1.0", {"bp": "bp_mod"})
    finder = importlib_metadata.MetadataPathFinder()
    sys.meta_path.append(finder)
    try:
        first, hit = discovery.discover(GROUP)
        assert not hit and len(cache_files(tmp_path)) == 1
        again, hit = discovery.discover(GROUP)
        assert hit and as_tuples(again) == as_tuples(first) == truth()
    finally:
        sys.meta_path.remove(finder)
