"""The suite keeps srcore's on-disk caches in one temporary root per session (the repository's
``conftest.py``), never in the user's ``~/.cache/srcore``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from srcore.cachedir import cache_root

pytestmark = pytest.mark.one_pass

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.srm"

CHILD = f"""
import json
import numpy as np
import srcore
from srcore.cachedir import cache_root
y = srcore.StaticModule(srcore.load({str(DIGITS)!r}))(np.zeros((1, 1, 8, 8), np.float32))
assert y.shape == (1, 10)
print(json.dumps(str(cache_root())))
"""


def _home_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "srcore"


def test_the_session_cache_root_is_temporary(srcore_session_cache_dir, tmp_path_factory):
    assert cache_root() == srcore_session_cache_dir == Path(os.environ["SRCORE_CACHE_DIR"])
    assert srcore_session_cache_dir.is_dir()
    home = _home_cache().resolve()
    assert home != srcore_session_cache_dir.resolve() and home not in srcore_session_cache_dir.resolve().parents
    if not os.environ.get("SRCORE_TEST_CACHE_DIR"):   # made by this session, in its basetemp (an xdist
        base = tmp_path_factory.getbasetemp()          # worker's is a directory in the controller's)
        assert srcore_session_cache_dir in (base / "srcore-cache", base.parent / "srcore-cache")


def test_a_model_run_under_the_suite_writes_no_home_cache(tmp_path, srcore_session_cache_dir):
    """A process the suite starts inherits the session's root: with the home directory (and so the
    default ``~/.cache/srcore``) moved to an empty directory, loading and running a model writes
    nothing there, and its caches land in the session's root."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    for name in ("XDG_CACHE_HOME", "SRCORE_NO_SCHEMA_CACHE", "SRCORE_NO_PLUGIN_CACHE", "SRCORE_NO_RECORD_CACHE",
                 "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert Path(json.loads(out.stdout.splitlines()[-1])) == srcore_session_cache_dir
    assert not (home / ".cache" / "srcore").exists(), sorted(str(p) for p in home.rglob("*"))
    assert any((srcore_session_cache_dir / "schemas").iterdir())
    assert any((srcore_session_cache_dir / "plugins").iterdir())


@pytest.mark.parametrize("env", [{"SRCORE_CACHE_DIR": "/tmp/sc-root"}, {"XDG_CACHE_HOME": "/tmp/xdg"}, {}])
def test_the_string_cache_paths_name_the_same_directory(env, monkeypatch, tmp_path):
    """The start path's caches name files with ``cache_dir_str`` (no pathlib): the same places as
    ``cache_root()``, with ``$SRCORE_CACHE_DIR``, ``$XDG_CACHE_HOME`` or the home default; ``read_bytes`` reads them."""
    from srcore.cachedir import cache_dir_str, read_bytes

    for name in ("SRCORE_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    expected = {"SRCORE_CACHE_DIR": Path("/tmp/sc-root"), "XDG_CACHE_HOME": Path("/tmp/xdg/srcore")}.get(
        next(iter(env), None), tmp_path / ".cache" / "srcore")
    assert cache_root() == expected and cache_dir_str() == str(expected)
    assert cache_dir_str("schemas", "x.marshal") == str(cache_root() / "schemas" / "x.marshal")
    f = tmp_path / "f.bin"
    f.write_bytes(b"\x00\x01srcore")
    assert read_bytes(str(f)) == read_bytes(f) == b"\x00\x01srcore"
    with pytest.raises(OSError):
        read_bytes(str(tmp_path / "missing"))
