"""The builtin plugin's shape rules from the cached index (srcore/plugin/rule_index.py): same rules as
importing every rule module, and an edited, added or removed rule module or a damaged file is a miss."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import srcore.ops
from srcore.dispatch.lazy import import_ref
from srcore.ops.shapes import load_rules
from srcore.plugin import rule_index

pytestmark = pytest.mark.one_pass


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("SRCORE_NO_RULE_INDEX", raising=False)
    monkeypatch.setattr(rule_index, "_may_write", lambda: True)  # this process may run under -B
    return tmp_path / "cache"


def _op_to_rule(records) -> dict:
    out = {}
    for r in records:
        fn = import_ref(r.rule) if isinstance(r.rule, str) else r.rule
        for op in r.ops:
            assert op not in out
            out[op] = fn
    return out


def test_index_hit_gives_every_core_rule(cache):
    expected = dict(load_rules())  # the reference: every rule module imported
    first = list(rule_index.core_shape_rules())  # a miss: the functions, and the index is written
    assert rule_index.index_path().is_file()
    assert all(callable(r.rule) for r in first)
    second = list(rule_index.core_shape_rules())
    assert sum(isinstance(r.rule, str) for r in second) > 100  # served as refs, imported on first use
    assert _op_to_rule(first) == expected
    assert _op_to_rule(second) == expected


def test_damaged_index_is_a_miss_and_rewritten(cache):
    list(rule_index.core_shape_rules())
    path = rule_index.index_path()
    good = path.read_text()
    for bad in ("{not json", json.dumps({"key": json.loads(good)["key"], "rules": [[1, 2, 3]]}), ""):
        path.write_text(bad)
        records = list(rule_index.core_shape_rules())
        assert all(callable(r.rule) for r in records)
        assert _op_to_rule(records) == dict(load_rules())
        assert json.loads(path.read_text()) == json.loads(good)


def test_changed_added_removed_rule_module_changes_the_key(tmp_path, monkeypatch):
    ops = tmp_path / "ops"
    shutil.copytree(os.path.join(os.path.dirname(srcore.ops.__file__), "shapes"), ops / "shapes",
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(srcore.ops, "__file__", str(ops / "__init__.py"))
    key = rule_index._key()
    assert key == rule_index._key()
    conv = ops / "shapes" / "conv.py"
    conv.write_text(conv.read_text() + "\n# edited\n")
    edited = rule_index._key()
    assert edited != key
    (ops / "shapes" / "extra.py").write_text("")
    added = rule_index._key()
    assert added != edited
    (ops / "shapes" / "extra.py").unlink()
    (ops / "shapes" / "pad.py").unlink()
    assert rule_index._key() not in (key, edited, added)


def test_stale_key_is_a_miss(cache):
    list(rule_index.core_shape_rules())
    path = rule_index.index_path()
    data = json.loads(path.read_text())
    data["key"][3][0][1] += 1  # one rule module's mtime moved: the index written for the old one is stale
    path.write_text(json.dumps(data))
    assert all(callable(r.rule) for r in rule_index.core_shape_rules())


def test_list_ops_same_with_and_without_the_index(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SRCORE_NO_RULE_INDEX")}
    env["SRCORE_CACHE_DIR"] = str(tmp_path)
    cmd = [sys.executable, "-m", "srcore", "list-ops"]
    without = subprocess.run(cmd, env={**env, "SRCORE_NO_RULE_INDEX": "1"}, capture_output=True, text=True)
    subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)  # writes the index
    assert (tmp_path / "rules").is_dir()
    with_index = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert without.returncode == with_index.returncode == 0, without.stderr + with_index.stderr
    assert with_index.stdout == without.stdout and len(without.stdout.splitlines()) > 100


def test_two_installations_sharing_a_cache_directory_keep_their_own_index(cache, monkeypatch):
    """The index file is per srcore installation: two checkouts (or environments) sharing
    ``$SRCORE_CACHE_DIR`` used to overwrite each other's single file and miss on every alternate start."""
    here = rule_index.index_path()
    monkeypatch.setattr(srcore.ops, "__file__", "/elsewhere/srcore/ops/__init__.py")
    there = rule_index.index_path()
    assert there != here and there.parent == here.parent
