"""attrs' ``validators``, ``converters`` and ``filters`` modules, run on first use.

``import attrs`` imports them (``attr/__init__.py``: ``from . import converters, ..., validators``), and
``attr.validators`` builds ~20 attrs classes of its own as it runs: ~2-3 ms CPU of a cold start on the Intel
VM of docs/performance.md, for modules srcore's load path never uses. This meta-path finder, installed by
``import srcore`` when attrs is not imported yet, gives those six modules ``importlib.util.LazyLoader``: the
module objects exist at once and their code runs at the first attribute access
(``attrs.validators.instance_of``), so code using them gets them as before. ``SRCORE_NO_LAZY_ATTRS=1``
turns it off.
"""
from __future__ import annotations

import os
import sys

__all__ = ["install", "LAZY"]

LAZY = frozenset({"attr.validators", "attr.converters", "attr.filters",
                  "attrs.validators", "attrs.converters", "attrs.filters"})


class _LazyAttrsModules:
    """A meta-path finder for the modules of ``LAZY``; it leaves ``sys.meta_path`` once it has found them all."""

    pending: set[str] = set(LAZY)

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in cls.pending:
            return None
        cls.pending.discard(name)
        if not cls.pending and cls in sys.meta_path:
            sys.meta_path.remove(cls)
        import importlib.util
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is not None and hasattr(getattr(spec, "loader", None), "exec_module"):
            spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


def install() -> None:
    """Defer attrs' validators, converters and filters (unless attrs is imported already, or turned off)."""
    if os.environ.get("SRCORE_NO_LAZY_ATTRS", "") not in ("", "0") or "attr" in sys.modules:
        return
    if _LazyAttrsModules not in sys.meta_path:
        sys.meta_path.insert(0, _LazyAttrsModules)
