"""The package's layout: wings that import only the wings below them, and no import circles."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import srcore_trt_like

pytestmark = pytest.mark.one_pass

ROOT = Path(srcore_trt_like.__file__).resolve().parent
PKG = "srcore_trt_like"

#: wing -> the wings (and top-level modules) it may import
ALLOWED = {
    "kernels": set(),
    "pointwise": {"kernels"},
    "conv": {"kernels", "errors"},
    "builder": {"errors"},
    "tactics": {"builder", "conv", "pointwise", "kernels", "errors"},
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = (PKG,) + path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module of the package ``name`` imports (at any depth of its code)."""
    found = set()
    pkg_parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[:len(pkg_parts) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = {f"{target}.{a.name}" for a in node.names} & modules.keys()
            found |= subs or ({target} & modules.keys())
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names} & modules.keys()
    found.discard(name)
    return found


def _graph():
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def test_no_import_circles():
    graph = _graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                raise AssertionError("import circle: " + " -> ".join(path[path.index(n):] + [n]))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = 2
    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_wings_import_only_the_wings_below_them():
    bad = []
    for m, deps in _graph().items():
        parts = m.split(".")
        if len(parts) < 3 or parts[1] not in ALLOWED:
            continue
        wing = parts[1]
        for d in deps:
            other = d.split(".")[1] if d.count(".") else ""
            if other != wing and other not in ALLOWED[wing]:
                bad.append(f"{m} imports {d}")
    assert not bad, "\n".join(bad)


def test_supports_reads_the_table_the_converters_follow():
    """One op table: every row names an existing converter, and supports() accepts no op outside it."""
    from srcore_trt_like.builder import converters, support

    assert all(callable(getattr(converters, row.converter, None)) for row in support.SUPPORT.values())
    assert support.lookup("aten::logcumsumexp") is None
