"""Static Runtime's op set (tests/data/static_runtime_ops.txt) and how srcore covers each op.

Categories: ``numpy`` (a cpu kernel of srcore-cpu runs it, under its name or, for an alias, the
name of the op it names), ``runtime`` (the runtime or the load itself handles the node: control
flow, forks, type tests decided from static types), ``decomposition`` / ``fallback`` (the
fallback tier of the plugin contract, when a plugin provides one), ``out of scope`` (with the
reason), ``missing`` (in scope, not done yet).
"""
from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "static_runtime_ops.txt"
#: the heading of the section of docs/conformance.md this module writes (it runs to the end of the file)
MARKER = "## Static Runtime's op set"

#: run by srcore's runtime or decided at load, not by a kernel
RUNTIME = {
    "prim::If": "the runtime runs the taken block (a sub-block runner)",
    "prim::Loop": "the runtime drives the body's block runner",
    "prim::fork": "the runtime launches the subgraph as a task",
    "aten::wait": "the runtime waits for the forked task",
    "prim::isinstance": "decided at load from the value's static type (the known-value folder removes it)",
}

#: ops srcore refuses on purpose, with the reason
OUT_OF_SCOPE_PREFIX = {
    "_backward": "a backward (gradient) op: an inference runtime never runs training graphs",
    "_backward_data": "a backward (gradient) op: an inference runtime never runs training graphs",
}
OUT_OF_SCOPE = {
    "aten::complex": "builds complex tensors: complex dtypes are out of scope",
    "aten::polar": "builds complex tensors: complex dtypes are out of scope",
    "aten::view_as_complex": "complex dtypes are out of scope",
    "aten::view_as_real": "takes complex tensors: complex dtypes are out of scope",
    "aten::linalg_eigvals": "its result is complex for real input: complex dtypes are out of scope",
    "aten::_test_functorch_fallback": "functorch's test op",
    "aten::_convert_indices_from_coo_to_csr": "sparse layouts (COO/CSR) are out of scope",
    "aten::_convert_indices_from_csr_to_coo": "sparse layouts (COO/CSR) are out of scope",
    "prim::CreateObject": "module objects: srcore runs frozen graphs, whose attributes are constants",
    "prim::GetAttr": "module objects: srcore runs frozen graphs, whose attributes are constants",
    "prim::SetAttr": "module objects: srcore runs frozen graphs, whose attributes are constants",
    "prim::TypeCheck": "a guard of torch's profiling executor (TensorExpr fusion); never in a scripted or frozen graph",
    "prim::TensorExprDynamicGroup": "Static Runtime's own NNC fusion group",
    "prim::VarConcat": "made by Static Runtime's own passes (srcore's passes make their own fused ops)",
    "prim::VarStack": "made by Static Runtime's own passes (srcore's passes make their own fused ops)",
}
NAMESPACE_OUT_OF_SCOPE = {
    "static_runtime": "made by Static Runtime's own graph passes, never in a model (srcore's passes make "
                      "their own fused ops: srcore::*)",
    "quantized": "quantized dtypes: the srcore-quantized plugin's backend, not srcore-cpu's",
    "fb": "Meta-internal quantized op (fbgemm): the srcore-quantized plugin's domain",
}


def sr_ops() -> list[tuple[str, str]]:
    """(Static Runtime kernel kind, op) for every op Static Runtime registers a kernel for."""
    out = []
    for line in DATA.read_text().splitlines():
        if line and not line.startswith("#"):
            kind, op = line.split()
            out.append((kind, op))
    return out


def out_of_scope_reason(op: str) -> str | None:
    if op in OUT_OF_SCOPE:
        return OUT_OF_SCOPE[op]
    for suffix, why in OUT_OF_SCOPE_PREFIX.items():
        if op.endswith(suffix):
            return why
    return NAMESPACE_OUT_OF_SCOPE.get(op.split("::", 1)[0])


def coverage() -> list[dict]:
    """One record per op: op, sr_kind, category, detail (kernel kinds and dtypes, alias target or reason)."""
    from srcore.ops.aliases import canonical
    from srcore_cpu import declared_kernels

    kernels: dict[str, list] = {}
    for k in declared_kernels():
        kernels.setdefault(k.op.split(".")[0], []).append(k)
    rows = []
    for sr_kind, op in sr_ops():
        target = canonical(op)
        why = out_of_scope_reason(op)
        if op in RUNTIME:
            cat, detail = "runtime", RUNTIME[op]
        elif why is not None:
            cat, detail = "out of scope", why
        elif target in kernels:
            ks = kernels[target]
            kinds = sorted({k.kind for k in ks})
            dtypes = sorted({d for k in ks for d in k.dtypes})
            cat = "numpy"
            detail = ("alias of `" + target + "`; " if target != op else "") + \
                "/".join(kinds) + " (" + ", ".join(dtypes) + ")"
        else:
            cat, detail = "missing", "alias of `" + target + "`" if target != op else ""
        rows.append({"op": op, "sr_kind": sr_kind, "category": cat, "detail": detail})
    return rows


def summary(rows) -> dict:
    in_scope = [r for r in rows if r["category"] != "out of scope"]
    native = [r for r in in_scope if r["category"] in ("numpy", "runtime")]
    return {"total": len(rows), "in_scope": len(in_scope), "native": len(native),
            "share": len(native) / max(1, len(in_scope)),
            "missing": [r["op"] for r in in_scope if r["category"] == "missing"]}


def render(rows) -> str:
    s = summary(rows)
    lines = [
        MARKER,
        "",
        "Every op PyTorch's Static Runtime registers a kernel for (`ops.cpp`, `native_ops.cpp`,",
        "`generated_ops.cpp`; the list, `tests/data/static_runtime_ops.txt`, is read from libtorch by",
        "`tools/gen_static_runtime_ops.py`) and how srcore runs it. Generated by",
        "`SRCORE_CONFORMANCE=1 pytest tests/conformance/test_static_runtime_coverage.py`; the default run",
        "checks this section is current. Aliases (`srcore/ops/aliases.yaml`, torch's alias table) run the",
        "kernel of the op they name. Static Runtime's one-op tests run against torch in",
        "`tests/static_runtime/test_generated_ops.py`.",
        "",
        f"In scope: {s['in_scope']} of {s['total']} ops; run natively (numpy kernels or the runtime): "
        f"{s['native']} ({100 * s['share']:.1f} %); through a decomposition or the fallback tier: 0 "
        f"(no plugin provides one yet); missing: {len(s['missing'])}"
        + (f" ({', '.join('`' + m + '`' for m in s['missing'])})" if s["missing"] else "") + ".",
        "",
        "| op | Static Runtime | srcore | how |",
        "| --- | --- | --- | --- |",
    ]
    for r in sorted(rows, key=lambda r: (r["category"] == "out of scope", r["op"])):
        lines.append(f"| `{r['op']}` | {r['sr_kind']} | {r['category']} | {r['detail']} |")
    return "\n".join(lines) + "\n"
