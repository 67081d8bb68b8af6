"""Source paths as stored in converted models: relative to the package or project, never absolute.

A converted model records where each node came from (``torch/nn/modules/linear.py:134``). The
converting machine's absolute paths (its virtual env, its home directory) mean nothing anywhere
else and leak its layout, so a path is made relative to the longest ``sys.path`` entry holding it
(``site-packages/torch/...`` -> ``torch/...``; a project directory on the path -> the project's
own layout), else to the current directory, else reduced to its file name.
"""
from __future__ import annotations

import os
import sys


def _roots() -> list[str]:
    roots = {os.path.abspath(p or os.curdir) for p in sys.path if isinstance(p, str)}
    roots.add(os.path.abspath(os.curdir))
    return sorted(roots, key=len, reverse=True)


def portable_path(path: str) -> str:
    """``path`` relative to the longest ``sys.path`` entry (or the current directory) that holds it;
    its base name when none does. Paths that are not absolute (``<string>``, ``model.onnx``) stay."""
    if not path or not os.path.isabs(path):
        return path
    full = os.path.normpath(path)
    for root in _roots():
        if full.startswith(root.rstrip(os.sep) + os.sep):
            return os.path.relpath(full, root).replace(os.sep, "/")
    return os.path.basename(full)
