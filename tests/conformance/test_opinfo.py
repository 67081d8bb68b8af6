"""Conformance of the cpu plugin's aten kernels against torch's OpInfo samples.

For every aten kernel the ``cpu`` plugin declares, the OpInfos of the same op
(``op_db``, matched on ``aten_name`` or the last part of the OpInfo name) give
sample inputs for each dtype the kernel claims; each sample is bound to the
kernel's aten overload schema, run through ``torch.ops.aten.<op>.<overload>``
(the reference) and through the srcore kernel (``out=None``, then a
preallocated ``out`` for out variants), and the results compared.

The full run is part of the default test command (first pass only: kernels are called
directly, no executor or planner; roughly 30 s on an idle 2-core machine, docs/testing.md): every sample
attempted must pass, and every kernel that has OpInfos must attempt at least one sample,
unless it is listed, with the reason its samples do not fit, in ``NO_FITTING_SAMPLE``
(the test checks that reason and that the entry is still needed). With
``SRCORE_CONFORMANCE=1`` it also rewrites ``docs/conformance.md``.
"""
from __future__ import annotations

import importlib
import os
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")  # needed by torch.testing._internal

import srcore  # noqa: E402
from _opinfo_samples import quick_samples  # noqa: E402
from conformance.opinfo_args import INFO_ALIASES, Skip, bind, to_srcore  # noqa: E402

#: kernels are called directly: the executor and the planner play no part
pytestmark = pytest.mark.one_pass

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "conformance.md"
MAX_SAMPLES = 8           # per (op overload, OpInfo, dtype)
DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "int32": torch.int32,
          "bool": torch.bool}


def cpu_kernels():
    """The cpu plugin's aten kernels, each (op, impl) once: a compiled kernel declared ahead of the
    numpy one (group_norm, upsample_bilinear2d, topk) names the numpy impl, which its matcher falls
    back to; the compiled ones are tested with their matchers in plugins/cpu/tests/test_jit_*.py."""
    from srcore_cpu import declared_kernels
    seen, out = set(), []
    for k in declared_kernels():
        if k.op.startswith("aten::") and k.backend == "cpu" and k.impl not in FACTORY_IMPLS and (k.op, k.impl) not in seen:
            seen.add((k.op, k.impl))
            out.append(k)
    return out


#: impls that are factories (their matcher builds the kernel for one node), not kernels: the compiled
#: pointwise activations are tested with their matcher in plugins/cpu/tests/test_jit_pointwise.py, and
#: the numpy kernels of the same ops are run here
FACTORY_IMPLS = {"srcore_cpu.kernels.jit_pointwise:make_pointwise"}


def _overload(op: str):
    name = op.split("::", 1)[1]
    base, _, ov = name.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return None
    return getattr(packet, ov or "default", None)


def _as_list(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


#: ops whose result values are unspecified (only shapes and dtypes are compared)
UNINITIALIZED = {"aten::empty_like", "aten::empty.memory_format", "aten::new_empty", "aten::empty_strided",
                 "aten::new_empty_strided"}


def _numpy(t: torch.Tensor) -> np.ndarray:
    """``t`` as numpy (a view with a conjugate or negative bit, such as ``conj``'s of a complex tensor,
    resolved first: numpy has no such views)."""
    return t.detach().resolve_conj().resolve_neg().numpy()


def compare(got, ref, values=True):
    """None when ``got`` (srcore) matches ``ref`` (torch); else a short reason."""
    got, ref = _as_list(got), _as_list(ref)
    if len(got) != len(ref):
        return f"{len(got)} results, torch gives {len(ref)}"
    for i, (g, r) in enumerate(zip(got, ref)):
        if not isinstance(r, torch.Tensor):
            if g != r:
                return f"result {i}: {g!r} != {r!r}"
            continue
        rn = _numpy(r)
        g = np.asarray(g)
        if g.shape != rn.shape:
            return f"result {i}: shape {g.shape} != {rn.shape}"
        if g.dtype != rn.dtype:
            return f"result {i}: dtype {g.dtype} != {rn.dtype}"
        if not values:
            continue
        tol = {np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.float64): (1e-7, 1e-9),   # complex: its parts'
               np.dtype(np.complex64): (1e-4, 1e-5), np.dtype(np.complex128): (1e-7, 1e-9)}.get(rn.dtype, (0, 0))
        try:
            np.testing.assert_allclose(g, rn, rtol=tol[0], atol=tol[1], equal_nan=True)
        except AssertionError as e:
            msg = [ln for ln in str(e).splitlines() if "Max absolute" in ln or "Mismatched" in ln]
            return f"result {i}: " + "; ".join(m.strip() for m in msg)
    return None


def tie_indices(op, pos, got, ref):
    """``ref`` with its indices replaced by ``got``'s where both select the same values.

    torch's topk picks tied elements in an unspecified order (nth_element), so the
    indices are checked for what they must satisfy: distinct, in range, and
    selecting the returned values.
    """
    if op == "aten::argsort":
        return _argsort_ties(pos, got, ref)
    if op != "aten::topk" or not isinstance(got, (tuple, list)) or len(got) != 2:
        return ref
    x, dim = pos[0].detach().numpy(), pos[2]
    idx, rvals = np.asarray(got[1]), ref[0].detach().numpy()
    if idx.shape != rvals.shape or idx.dtype != np.int64 or x.ndim == 0:
        return ref
    n = x.shape[dim]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        return ref
    srt = np.sort(idx, axis=dim)
    if np.any(np.diff(srt, axis=dim) == 0):
        return ref
    picked = np.take_along_axis(x, idx, axis=dim)
    if not np.array_equal(picked, rvals, equal_nan=x.dtype.kind == "f"):
        return ref
    return (ref[0], torch.from_numpy(idx.copy()))


def _argsort_ties(pos, got, ref):
    """Non-stable argsort orders tied elements as it likes: ``got`` stands for ``ref`` when it is a
    permutation along ``dim`` that sorts ``x`` to the same values."""
    x = pos[0].detach().numpy()
    dim = pos[1] if len(pos) > 1 and isinstance(pos[1], int) else -1
    idx, ridx = np.asarray(got), ref.detach().numpy()
    if x.ndim == 0 or idx.shape != ridx.shape or idx.dtype != np.int64:
        return ref
    n = x.shape[dim]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        return ref
    if not np.array_equal(np.sort(idx, axis=dim), np.sort(ridx, axis=dim)):
        return ref
    same = np.array_equal(np.take_along_axis(x, idx, axis=dim), np.take_along_axis(x, ridx, axis=dim),
                          equal_nan=x.dtype.kind == "f")
    return torch.from_numpy(idx.copy()) if same else ref


def _impl(kernel):
    if callable(kernel.impl):
        return kernel.impl
    mod, _, attr = kernel.impl.partition(":")
    return getattr(importlib.import_module(mod), attr)


def is_inplace(op: str) -> bool:
    base = op.split("::", 1)[1].split(".")[0]
    return base.endswith("_") and not base.startswith("__")


def run_sample(kernel, overload, sample):
    """('pass' | 'refused' | 'fail', reason); raises Skip when the sample does not fit the overload.

    'refused' = the kernel raised a srcore error on purpose (an argument it does not support).
    """
    pos, kw = bind(kernel.op, overload._schema, [sample.input, *sample.args], sample.kwargs)
    t_pos = [a.clone() if isinstance(a, torch.Tensor) else a for a in pos]
    try:
        ref = overload(*t_pos, **kw)
    except Exception as e:  # torch rejects the sample for this overload
        raise Skip(f"torch: {type(e).__name__}") from None
    n_pos = [to_srcore(a) for a in pos]
    n_kw = {k: to_srcore(v) for k, v in kw.items()}
    fn = _impl(kernel)
    try:
        got = fn(*n_pos, **n_kw, out=None) if kernel.kind == "out" else fn(*n_pos, **n_kw)
    except srcore.SrcoreError as e:
        return "refused", f"{type(e).__name__}: {e}"[:160]
    except Exception as e:
        return "fail", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:160]
    values = kernel.op not in UNINITIALIZED
    ref = tie_indices(kernel.op, pos, got, ref)
    why = compare(got, ref, values)
    if why is None and is_inplace(kernel.op) and isinstance(n_pos[0], np.ndarray):
        why = compare(n_pos[0], t_pos[0])  # the mutated self
        why = why and "self after the in-place op: " + why
    if why is None and kernel.kind == "out":
        refs = _as_list(ref)
        if all(isinstance(r, torch.Tensor) for r in refs):
            bufs = [np.empty(tuple(r.shape), _numpy(r).dtype) for r in refs]
            out = bufs[0] if len(bufs) == 1 and not isinstance(ref, (tuple, list)) else tuple(bufs)
            n_pos = [to_srcore(a) for a in pos]
            try:
                fn(*n_pos, **n_kw, out=out)
                why = compare(out, ref, values)
                why = why and "out=: " + why
            except Exception as e:
                why = f"out=: {type(e).__name__}: {e}"[:160]
    return ("pass", "") if why is None else ("fail", why)


def opinfos_by_name():
    from torch.testing._internal.common_methods_invocations import op_db
    by = defaultdict(list)
    for info in op_db:
        names = {info.aten_name, info.name.split(".")[-1]}
        for n in names:
            if n:
                by[n].append(info)
    return by


def opinfos_for(by, op: str):
    """The OpInfos whose samples exercise ``op``: same name, its out-of-place form, or an alias."""
    base = op.split("::", 1)[1].split(".")[0]
    if is_inplace(op):
        base = base[:-1]
    infos = list(by.get(base, []))
    for alias in INFO_ALIASES.get(base, ()):
        infos += by.get(alias, [])
    return infos or by.get(base.lstrip("_"), [])


def conformance(kernels, dtypes=None, max_samples=MAX_SAMPLES):
    """{op: {"attempted", "passed", "refused", "dtypes", "failures", "skips", ...}} over OpInfo samples.

    ``attempted`` counts the samples the kernel claims (its dtypes, bound to its overload) minus
    the refused ones; ``skips`` counts why other samples were not run.
    """
    by = opinfos_by_name()
    results = {}
    # torch's sample iterator searches the stack for a TestCase and queues every reseed for the
    # accelerators (a formatted stack each): _opinfo_samples.quick_samples skips both, same samples
    with quick_samples():
        return _conformance(kernels, dtypes, max_samples, by, results)


def _conformance(kernels, dtypes, max_samples, by, results):
    for k in kernels:
        overload = _overload(k.op)
        # TorchScript scalar/list ops (cos.Scalar, add.int, len.t) compute in double precision on
        # Python values; torch.ops on Python numbers goes through float32 tensors, so not a reference
        scalar_op = overload is None or not any("Tensor" in str(a.type) for a in overload._schema.arguments)
        infos = [] if scalar_op else opinfos_for(by, k.op)
        rec = results.setdefault(k.op, {"attempted": 0, "passed": 0, "refused": 0, "dtypes": set(),
                                        "failures": [], "refusals": [], "opinfos": set(), "kind": k.kind,
                                        "has_opinfo": bool(infos), "scalar_op": scalar_op, "skips": Counter()})
        claimed = [d for d in (k.dtypes if "*" not in k.dtypes else DTYPES) if d in DTYPES]
        for d in claimed:
            if dtypes is not None and d not in dtypes:
                continue
            for info in infos:
                if DTYPES[d] not in info.supported_dtypes("cpu"):
                    continue
                try:
                    samples = info.sample_inputs("cpu", DTYPES[d], requires_grad=False)
                except Exception:
                    continue
                n = 0
                for sample in samples:
                    if n >= max_samples:
                        break
                    try:
                        status, why = run_sample(k, overload, sample)
                    except Skip as e:
                        rec["skips"][re.sub(r"\d+ positional", "n positional", str(e))] += 1
                        continue
                    n += 1
                    rec["opinfos"].add(info.name + (f".{info.variant_test_name}" if info.variant_test_name else ""))
                    if status == "refused":
                        rec["refused"] += 1
                        if len(rec["refusals"]) < 2 and why not in rec["refusals"]:
                            rec["refusals"].append(why)
                        continue
                    rec["attempted"] += 1
                    rec["dtypes"].add(d)
                    if status == "pass":
                        rec["passed"] += 1
                    elif len(rec["failures"]) < 3:
                        rec["failures"].append(f"{d}: {why}")
    return results


def _cell(text):
    return re.sub(r"[|\n]", " ", text)


def write_doc(results, seconds):
    tried = {op: r for op, r in results.items() if r["attempted"]}
    refused = {op: r for op, r in results.items() if r["refused"]}
    lines = [
        "# OpInfo conformance of the cpu plugin",
        "",
        "Generated by `SRCORE_CONFORMANCE=1 pytest tests/conformance/test_opinfo.py` (do not edit by hand).",
        "Each aten kernel of the `cpu` plugin runs torch's OpInfo sample inputs (`op_db`) of the same op",
        "(or of its out-of-place form for an in-place kernel, or of an alias: `convolution` uses the conv",
        f"OpInfos), for each dtype it claims (at most {MAX_SAMPLES} usable samples per OpInfo and dtype), bound to",
        "the kernel's overload schema, and is compared with `torch.ops.aten.<op>.<overload>`: with `out=None`,",
        "then (out variants) with preallocated outputs; in-place kernels also compare the mutated `self`.",
        "float32 and complex64: rtol 1e-4, atol 1e-5; float64 and complex128: rtol 1e-7; integers and bool",
        "exactly. topk and (non-stable)",
        "argsort indices of tied values may differ from torch's (whose tie order is unspecified): they must",
        "be distinct and select torch's values.",
        "",
        f"Ops with samples: {len(tried)} of {len(results)} aten kernels; samples passing:"
        f" {sum(r['passed'] for r in tried.values())} / {sum(r['attempted'] for r in tried.values())}"
        f" ({seconds:.0f} s); refused (out of scope, not counted): {sum(r['refused'] for r in results.values())}.",
        "",
        "| op | kind | dtypes | passed / attempted | OpInfos | first failures |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for op in sorted(tried):
        r = tried[op]
        fails = "<br>".join(_cell(f) for f in r["failures"])
        lines.append(f"| `{op}` | {r['kind']} | {', '.join(sorted(r['dtypes']))} | {r['passed']} / {r['attempted']}"
                     f" | {', '.join(sorted(r['opinfos']))} | {fails} |")
    known = [f"- `{op}` ({KNOWN_FAILURES[op]}): reported to the owner of its kernel file"
             for op in sorted(KNOWN_FAILURES) if op in tried and tried[op]["passed"] != tried[op]["attempted"]]
    lines += ["", "Known failures (bugs outside the conformance owner's files, tolerated by the must-pass check):",
              "", *(known or ["- none"])]
    lines += [
        "",
        "## Not attempted",
        "",
        "- **dtypes**: only the dtypes a kernel declares are run, among float32, float64, int64, int32 and bool;",
        "  the cpu plugin claims no float16, bfloat16, complex, uint8, int8 or int16 kernel, so those OpInfo",
        "  dtypes are never attempted (and a sample holding such a tensor or dtype argument is skipped).",
        "- **samples that do not fit the overload** (not counted): arguments the schema lacks, `torch` rejecting",
        "  the bound call, a tensor for a non-Scalar non-tensor argument (a srcore graph passes a number there;",
        "  a Scalar argument gets the tensor's first element as a number, for torch and srcore alike), `True`",
        "  for an `int` argument (TorchScript picks the `bool` overload), string convolution padding,",
        "  channels_last memory formats, layouts.",
        "- **refused** (not counted): the kernel raised a srcore error on purpose, naming what it does not support:",
        "",
        "| op | refused | reason |",
        "| --- | --- | --- |",
    ]
    for op in sorted(refused):
        r = refused[op]
        lines.append(f"| `{op}` | {r['refused']} | {'<br>'.join(_cell(x) for x in r['refusals'])} |")
    unusable = sorted(op for op, r in results.items() if not r["attempted"] and not r["refused"] and r["has_opinfo"])
    lines += ["", f"## Kernels whose OpInfo samples never fit the overload ({len(unusable)})", "",
              "| op | why (most frequent) |", "| --- | --- |"]
    for op in unusable:
        why = ", ".join(f"{_cell(w)} ({n})" for w, n in results[op]["skips"].most_common(2)) or "no sample for its dtypes"
        lines.append(f"| `{op}` | {why} |")
    none = sorted(op for op, r in results.items() if not r["has_opinfo"] and not r["scalar_op"])
    scalar = sorted(op for op, r in results.items() if r["scalar_op"])
    lines += ["", f"## Tensor kernels with no OpInfo entry ({len(none)})", "",
              ", ".join(f"`{o}`" for o in none), "",
              f"## Scalar and list ops, not run ({len(scalar)})", "",
              "No Tensor argument: TorchScript computes these on Python values in double precision, while",
              "`torch.ops.aten.<op>` on Python numbers goes through float32 tensors, so it is no reference",
              "(they are tested in the cpu plugin's scalar/prim tests): " + ", ".join(f"`{o}`" for o in scalar), ""]
    from conformance.static_runtime_coverage import MARKER
    old = DOC.read_text() if DOC.exists() else ""
    tail = "\n" + old[old.index(MARKER):] if MARKER in old else ""  # the Static Runtime section is kept
    DOC.write_text("\n".join(lines) + tail)


#: bugs reported to the owner of the kernel file, tolerated by test_opinfo_conformance (op: text every
#: failure of that op contains)
KNOWN_FAILURES: dict[str, str] = {}   # op -> reason, for bugs in kernel files outside this harness's owner


SMOKE = ("aten::conv2d", "aten::softmax.int", "aten::mm",  # plain overloads
         "aten::relu_", "aten::add.Scalar", "aten::batch_norm", "aten::topk")  # in-place, Scalar, adapter, ties


def test_smoke_subset():
    """A few ops, float32, few samples: always on (a quick guard for the harness and its binding paths)."""
    ks = [k for k in cpu_kernels() if k.op in SMOKE]
    assert len(ks) == len(SMOKE)
    res = conformance(ks, dtypes={"float32"}, max_samples=3)
    for op in SMOKE:
        assert res[op]["attempted"] >= 1, op
        assert res[op]["passed"] == res[op]["attempted"], (op, res[op]["failures"])


def test_harness_catches_a_wrong_kernel():
    """The comparison is not vacuous: a kernel off by one ulp-scale amount, or not in place, fails."""
    import attrs
    from torch.testing._internal.common_methods_invocations import op_db

    info = next(i for i in op_db if i.name == "nn.functional.relu")
    sample = next(s for s in info.sample_inputs("cpu", torch.float32) if s.input.numel() > 1)
    relu_ = next(k for k in cpu_kernels() if k.op == "aten::relu_")
    assert run_sample(relu_, torch.ops.aten.relu_.default, sample)[0] == "pass"
    not_in_place = attrs.evolve(relu_, impl=lambda x: np.maximum(x, 0))
    assert run_sample(not_in_place, torch.ops.aten.relu_.default, sample)[0] == "fail"
    relu = next(k for k in cpu_kernels() if k.op == "aten::relu")
    off = attrs.evolve(relu, impl=lambda x, out=None: np.maximum(x, 0) + np.float32(1e-3))
    assert run_sample(off, torch.ops.aten.relu.default, sample)[0] == "fail"


#: kernels with OpInfos none of whose samples can run, with what stops them: the most frequent skip
#: reason must contain the text given (an entry no longer needed, or stopped by something else, fails)
TORCH_REJECTS = "torch: RuntimeError"       # torch refuses every sample bound to this overload
UNMATCHED = "unmatched arguments"           # the samples pass arguments the overload lacks
MISSING = "missing argument"                # the samples lack an argument the overload requires
NO_FITTING_SAMPLE: dict[str, str] = {
    "aten::__interpolate.scale_list": TORCH_REJECTS,   # TorchScript's helper, not a torch.ops overload
    "aten::_conj": TORCH_REJECTS,
    "aten::adaptive_max_pool1d": UNMATCHED,
    "aten::argsort.stable_out": TORCH_REJECTS,
    "aten::cdist": TORCH_REJECTS,
    "aten::embedding_bag": TORCH_REJECTS,
    "aten::embedding_bag.padding_idx": MISSING,
    "aten::__getitem__.Dict_Tensor": TORCH_REJECTS,    # a TorchScript dict lookup
    "aten::eq.Tensor_list": TORCH_REJECTS,             # a TorchScript list comparison
    "aten::ne.Tensor_list": TORCH_REJECTS,             # (the same)
    "aten::fill.Tensor": TORCH_REJECTS,
    "aten::fill_.Tensor": TORCH_REJECTS,
    "aten::im2col.out": TORCH_REJECTS,
    "aten::imag": "",                                  # complex only: no sample in a claimed dtype
    "aten::linalg_cond.p_str": MISSING,
    "aten::meshgrid": UNMATCHED,
    "aten::movedim.int": TORCH_REJECTS,
    "aten::norm.ScalarOpt_dim_dtype": UNMATCHED,
    "aten::norm.ScalarOpt_dtype": UNMATCHED,
    "aten::pixel_shuffle.out": TORCH_REJECTS,
    "aten::pixel_unshuffle.out": TORCH_REJECTS,
    "aten::polygamma": "tensor for non-tensor argument",
    "aten::repeat_interleave.Tensor": UNMATCHED,
    "aten::repeat_interleave.Tensor_out": UNMATCHED,
    "aten::to.dtype_layout": UNMATCHED,
    "aten::to.prim_Device": UNMATCHED,
    "aten::to.prim_dtype": UNMATCHED,
    "aten::to.prim_other": UNMATCHED,
    "aten::view.dtype": TORCH_REJECTS,
    "aten::where": UNMATCHED,
}


@pytest.mark.slow
def test_opinfo_conformance():
    """Every sample a cpu kernel attempts passes; every kernel with OpInfos attempts one."""
    t0 = time.perf_counter()
    res = conformance(cpu_kernels())
    if os.environ.get("SRCORE_CONFORMANCE"):
        write_doc(res, time.perf_counter() - t0)
    bad = {op: r["failures"] for op, r in res.items()
           if r["passed"] != r["attempted"] and not all(KNOWN_FAILURES.get(op, "@") in f for f in r["failures"])}
    assert not bad, bad
    stale = sorted(op for op in KNOWN_FAILURES if op in res and res[op]["passed"] == res[op]["attempted"])
    assert not stale, f"known failures that pass now: remove them from KNOWN_FAILURES: {stale}"
    unattempted = {op: r for op, r in res.items() if r["has_opinfo"] and not r["scalar_op"] and not r["attempted"]}
    unlisted = {op: r["skips"].most_common(2) for op, r in unattempted.items() if op not in NO_FITTING_SAMPLE}
    assert not unlisted, f"kernels with OpInfos and no sample attempted (fix the binding or list them): {unlisted}"
    no_longer = sorted(op for op in NO_FITTING_SAMPLE if op in res and op not in unattempted)
    assert not no_longer, f"NO_FITTING_SAMPLE entries whose samples run now (remove them): {no_longer}"
    wrong = {op: unattempted[op]["skips"].most_common(1) for op, why in NO_FITTING_SAMPLE.items()
             if op in unattempted and why not in str(unattempted[op]["skips"].most_common(1))}
    assert not wrong, f"NO_FITTING_SAMPLE reasons that no longer hold: {wrong}"
    assert sum(r["attempted"] for r in res.values()) > 10_000
