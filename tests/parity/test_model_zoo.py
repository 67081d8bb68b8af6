"""The parity model zoo (tests/parity/models.py) vs torch eager: each model through
from_torchscript (scripted, or traced) and from_torch where torch.export can, round-tripped
through .srm, run with both executors x both memory planners; and as users of Static Runtime
hold it (frozen with torch.jit.freeze, saved with torch.jit.save: the file converted as it is),
run with the pass's default executor and planner; and frozen then torch.jit.optimize_for_inference'd
("optimized": oneDNN-layout nodes that the importer lowers back to ATen) on every input of the case
(the first twice: the second run reuses the plan; symbolic dims: other sizes, same StaticModule).
Floats: max relative error <= 1e-4; integer and bool outputs: exact.

The runs with an explicit executor and planner are the same in both passes of test.sh, so they run
in the first only; by default each model runs two of the four combinations that cover both
executors and both planners (one per frontend; which two alternates over the zoo), every
conversion all four with ``SRCORE_TESTS_FULL=1``. The
second pass runs "frozen" and "optimized" for ``parity_models.SECOND_PASS`` (one model per
architecture family, and the graph shapes executors and planners treat differently)."""
from __future__ import annotations

import re
import tempfile

import pytest
import torch

import srcore
from _harness import COMBOS, assert_close, build, frozen_file, round_trip, run, torch_outputs
from parity_models import SECOND_PASS, ZOO

FRONTENDS = ("torchscript", "export")
#: "frozen": the TorchScript conversion of a torch.jit.freeze'd, torch.jit.save'd file
DEFAULT_COMBO = ("default", "default")
#: zoo models that torch.jit.optimize_for_inference itself cannot take (strict xfail: asserted)
OPTIMIZE_FAILS = {"pools": "torch's optimize_for_inference fails an internal assert (isIntList) on this model"}


def _same_shapes(a, b) -> bool:
    return all(x.shape == y.shape for x, y in zip(a, b))


@pytest.fixture(scope="module")
def cases():
    cache = {}

    def get(name):
        if name not in cache:
            m, inputs, others = ZOO[name].build()
            cache[name] = (m, inputs, others, {})
        return cache[name]
    return get


def _export_dynamic_shapes(case):
    if not case.dynamic or case.export_static:
        return None
    dims, ranges = {}, case.dim_range or {}

    def dim(n):
        lo, hi = ranges.get(n, (1, 4096))
        return dims.setdefault(n, torch.export.Dim(n, min=lo, max=hi))
    return {inp: {d: dim(n) for d, n in spec.items()} for inp, spec in case.dynamic.items()}


@pytest.fixture(scope="module")
def converted(cases):
    cache = {}

    def get(name, frontend):
        key = (name, frontend)
        if key not in cache:
            case = ZOO[name]
            m, inputs, *_ = cases(name)
            if frontend in ("torchscript", "frozen", "optimized"):
                src = torch.jit.script(m) if case.torchscript == "script" else torch.jit.trace(m, inputs)
                if frontend == "frozen":
                    with tempfile.TemporaryDirectory() as d:
                        model = srcore.from_torchscript(frozen_file(src, d), inputs, dynamic_dims=case.dynamic)
                    m.eval()  # freezing needs eval mode; the torch reference runs in it anyway
                elif frontend == "optimized":
                    optimized = torch.jit.optimize_for_inference(torch.jit.freeze(src.eval()))
                    model = srcore.from_torchscript(optimized, inputs, dynamic_dims=case.dynamic)
                else:
                    model = srcore.from_torchscript(src, inputs, dynamic_dims=case.dynamic)
            else:
                model = srcore.from_torch(m, inputs, dynamic_shapes=_export_dynamic_shapes(case))
            cache[key] = round_trip(model)
        return cache[key]
    return get


def _default_combos(index: int, frontends: list, frontend: str) -> set:
    """The executor x planner combinations a conversion runs by default. A model runs a pair that
    covers both executors and both planners, (codegen, standard_resizing) + (interpreter,
    precomputed_offsets) for even zoo positions and the other two for odd ones; with two frontends
    each conversion takes one of the pair, with one it takes both. So every combination runs on
    half the zoo's models (all four on every conversion with SRCORE_TESTS_FULL=1)."""
    straight = [("codegen", "standard_resizing"), ("interpreter", "precomputed_offsets")]
    assert set(straight) <= set(COMBOS)
    pair = straight if index % 2 == 0 else [c for c in COMBOS if c not in straight]
    return set(pair) if len(frontends) == 1 else {pair[frontends.index(frontend) % 2]}


def _params():
    """The explicit executor x planner runs do not depend on the pass (one_pass); "frozen" and
    "optimized" run with the pass's own executor and planner: every model in the first pass, the
    models of ``SECOND_PASS`` (one per architecture family) in the second too."""
    out = []
    for index, (name, case) in enumerate(ZOO.items()):
        if case.unsupported:
            continue
        frontends = [fe for fe in FRONTENDS
                     if not ((fe == "export" and case.export) or (fe == "torchscript" and case.no_torchscript))]
        for fe in frontends:
            xfail = case.xfail or (case.export_xfail if fe == "export" else None)
            default = _default_combos(index, frontends, fe)
            for ex, pl in COMBOS:
                marks = [pytest.mark.one_pass] + ([pytest.mark.xfail(reason=xfail, strict=True)] if xfail else [])
                if (ex, pl) not in default:
                    marks.append(pytest.mark.full)
                out.append(pytest.param(name, fe, ex, pl, id=f"{name}-{fe}-{ex}-{pl}", marks=marks))
        if not case.no_torchscript:
            first_only = [] if name in SECOND_PASS else [pytest.mark.one_pass]
            marks = first_only + ([pytest.mark.xfail(reason=case.xfail, strict=True)] if case.xfail else [])
            out.append(pytest.param(name, "frozen", *DEFAULT_COMBO, id=f"{name}-frozen", marks=marks))
            why = case.xfail or OPTIMIZE_FAILS.get(name)
            marks = first_only + ([pytest.mark.xfail(reason=why, strict=True)] if why else [])
            out.append(pytest.param(name, "optimized", *DEFAULT_COMBO, id=f"{name}-optimized", marks=marks))
    return out


@pytest.mark.parametrize("name,frontend,executor,planner", _params())
def test_zoo_model_matches_torch(cases, converted, name, frontend, executor, planner):
    case = ZOO[name]
    m, inputs, others, _ = cases(name)
    if frontend == "export" and case.export_static:  # exported for the example's shapes only
        others = [o for o in others if _same_shapes(o, inputs)]
    if executor == "default":  # the pass's own (SRCORE_EXECUTOR, SRCORE_MEMORY_PLANNER)
        sm = srcore.StaticModule(converted(name, frontend))
    else:
        sm = build(converted(name, frontend), executor, planner)
    what = f"{name} via {frontend} ({executor}, {planner})"
    # torch.export flattens container inputs (a Dict[str, Tensor] becomes feats_c3, feats_c4, ...)
    feed = _flat if frontend == "export" else tuple
    want = torch_outputs(m, inputs)
    assert_close(run(sm, feed(inputs)), want, what + " run 1")
    assert_close(run(sm, feed(inputs)), want, what + " run 2 (reused plan)")
    for i, other in enumerate(others):
        assert_close(run(sm, feed(other)), torch_outputs(m, other), f"{what} input set {i + 2}")
    assert_close(run(sm, feed(inputs)), want, what + " back to the first input")


def _flat(inputs) -> tuple:
    return tuple(torch.utils._pytree.tree_leaves(tuple(inputs)))


@pytest.mark.one_pass   # a conversion error
@pytest.mark.parametrize("name", [n for n, c in ZOO.items() if c.export])
def test_not_exportable_zoo_model_gives_clear_conversion_error(cases, name):
    m, inputs, *_ = cases(name)
    with pytest.raises(srcore.ConversionError) as info:
        srcore.from_torch(m, inputs)
    msg = str(info.value)
    assert "torch.export failed" in msg and type(m).__name__ in msg and ZOO[name].export in msg


@pytest.mark.one_pass   # an error at load, before any executor or planner
@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("name", [n for n, c in ZOO.items() if c.unsupported])
def test_unsupported_zoo_model_gives_clear_error(cases, converted, name, frontend):
    """A model using an op srcore deliberately lacks converts, but loading it without the fallback
    tier (which runs it through torch: tests/test_fallback.py) raises an UnsupportedOpError naming the
    op and the source line of each node that uses it."""
    op = ZOO[name].unsupported.split(":")[0]
    with pytest.raises(srcore.UnsupportedOpError) as info:
        srcore.StaticModule(converted(name, frontend), options=srcore.Options(allow_fallback=False))
    lines = [ln for ln in str(info.value).splitlines() if ln.strip().startswith(op)]   # the node lines
    assert lines and all(re.search(r"# \S+\.py:\d+", ln) for ln in lines), str(info.value)
    assert any(m.schema.startswith(op) for m in info.value.missing), info.value.missing


@pytest.mark.one_pass   # torch only
def test_zoo_inputs_exercise_what_they_claim(cases):
    """The extra inputs really take other branches / trip counts / sizes (else the tests prove less)."""
    m, inputs, others, _ = cases("data_if")
    means = [float(x[0].mean()) for x in [inputs, *others]]
    assert any(v > 0.5 for v in means) and any(v < -0.5 for v in means) and any(abs(v) <= 0.5 for v in means)
    m, inputs, others, _ = cases("while_loop")
    steps = {float(m(*x)[1]) for x in [inputs, *others]}
    assert len(steps) == 3 and 0.0 in steps  # zero trips, some, more
    for name, dim in (("rnn_loop", 1), ("size_arith", 0), ("text_classifier", 0), ("mobilenet_like", 0),
                      ("conv1d_net", 0), ("mha_encoder", 0), ("list_stack", 1), ("nested_loops", 0)):
        _, inputs, others, _ = cases(name)
        assert len({x[0].shape[dim] for x in [inputs, *others]}) >= 2, name


@pytest.mark.one_pass   # conversion only
def test_symbolic_dims_stay_symbolic(converted):
    """One StaticModule serves several batch sizes because the converted input specs are symbolic."""
    for name, frontend in (("size_arith", "torchscript"), ("size_arith", "export"),
                           ("text_classifier", "torchscript"), ("rnn_loop", "torchscript"),
                           ("mobilenet_like", "export"), ("mha_encoder", "export"), ("conv1d_net", "torchscript")):
        spec = converted(name, frontend).input_specs[0]
        dim = next(iter(ZOO[name].dynamic[spec.name]))
        assert isinstance(spec.shape[dim], str), (name, frontend, spec)


#: zoo models whose core-ATen decomposition needed ops or fixes of its own (scalar_tensor, uint8 eq,
#: native_group_norm, _cdist_forward, diagonal, _native_batch_norm_legit, _adaptive_avg_pool2d, a
#: folded 0-d NumToTensor); the rest decompose into ops the default conversion already runs
CORE_DECOMPOSITION_CASES = ("bert_like", "pointnet", "gpt_block", "llama_block", "metric_head", "diffusion_block",
                            "spatial_transformer", "norm_net", "pools")


@pytest.mark.one_pass   # an explicit executor and planner (build)
@pytest.mark.parametrize("name", CORE_DECOMPOSITION_CASES)
def test_zoo_model_core_decompositions_match_torch(cases, name):
    """``from_torch(..., decompositions="core")`` (core ATen: addmm, convolution, native norms,
    scalar_tensor, ...) on the example input and the other inputs of the same shapes."""
    m, inputs, others, _ = cases(name)
    model = round_trip(srcore.from_torch(m, inputs, decompositions="core"))
    sm = build(model, "codegen", "standard_resizing")
    for i, inp in enumerate([inputs, inputs] + [o for o in others if _same_shapes(o, inputs)]):
        assert_close(run(sm, _flat(inp)), torch_outputs(m, inp), f"{name} via core decompositions, input set {i + 1}")
