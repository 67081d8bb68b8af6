"""srcore covers Static Runtime's op set: >= 95 % of the in-scope ops natively, every other op explained.

``SRCORE_CONFORMANCE=1`` rewrites the "Static Runtime's op set" section of docs/conformance.md; the
default run checks that it is current.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from conformance.static_runtime_coverage import MARKER, coverage, render, summary

pytestmark = pytest.mark.one_pass
DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def test_static_runtime_ops_are_covered():
    from srcore.ops.aliases import canonical
    from srcore.ops.registry import default_registry
    from srcore.ops.shapes import lookup

    rows = coverage()
    s = summary(rows)
    assert s["total"] >= 350 and s["share"] >= 0.95, s
    reg = default_registry()
    for r in rows:
        if r["category"] == "numpy":
            op = canonical(r["op"])
            assert reg.overloads(op), f"{op} has a kernel but no declaration"
            assert any(lookup(o.qualified_name) for o in reg.overloads(op)), f"{op} has no shape rule"
        if r["category"] in ("out of scope", "runtime"):
            assert len(r["detail"]) > 15, r


def test_the_coverage_table_in_the_docs_is_current():
    text = DOC.read_text()
    section = render(coverage())
    if os.environ.get("SRCORE_CONFORMANCE"):
        head = text.split(MARKER, 1)[0].rstrip("\n")
        DOC.write_text(head + "\n\n" + section)
        return
    assert MARKER in text, "docs/conformance.md has no Static Runtime section: run with SRCORE_CONFORMANCE=1"
    assert text[text.index(MARKER):] == section, "stale: rerun with SRCORE_CONFORMANCE=1"
