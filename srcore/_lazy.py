"""Module attributes imported on first use (PEP 562), so that ``import srcore`` and the optional
``srcore.ray`` / ``srcore.dask`` stay cheap until a name is used."""
from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_getattr(module: str, table: dict[str, str], namespace: dict[str, Any],
                 submodules: frozenset[str] | set[str] = frozenset()) -> Callable[[str], Any]:
    """A module ``__getattr__``: ``table`` maps a name to ``"package.module:attr"``, or to
    ``"package.module"`` for the module itself (imported once, then kept in ``namespace``, the
    module's globals); a name in ``submodules`` is ``module.name``."""
    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is not None:
            mod, colon, attr = target.partition(":")
            from ._gcpause import paused

            with paused():   # a first use imports much of srcore: no collection meanwhile
                value = importlib.import_module(mod)
            if colon:
                value = getattr(value, attr)
            namespace[name] = value
            return value
        if name in submodules:
            return importlib.import_module(f"{module}.{name}")
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
