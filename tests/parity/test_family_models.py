"""The wider benchmark set (``benchmarks/families.py``: one model per architecture family) matches
torch eager through both frontends (TorchScript, torch.export), round-tripped through .srm, on the
cpu plugin and on the trt_like engine backend (``backends=("trt_like", "cpu")``), on the family's
small inputs (``meta["small_inputs"]``: the same modules and input kinds at fewer pixels, tokens,
steps or samples, to stay cheap) and on a second set of the same shapes and dtypes with other
values (int64 ids and masks drawn in the example's range). One executor x planner combination per test pass (the pass's
default, see test.sh). The torch.export cases run in the first pass only (``one_pass``): exporting
is most of their cost, and the second pass's executor and planner are checked on the same graphs
through the TorchScript cases and on every bench model through both frontends
(test_bench_models.py).
"""
from __future__ import annotations

import pytest
import torch

import srcore
from _harness import assert_close, round_trip, run, torch_outputs
from benchmarks.families import FAMILIES

FRONTENDS = ("torchscript", pytest.param("export", marks=pytest.mark.one_pass))
BACKENDS = {"cpu": None, "trt_like": ("trt_like", "cpu")}


def other_inputs(inputs, seed: int = 4321):
    """Same shapes and dtypes, other values: floats at the example's spread, integers (ids, masks)
    uniform over the example's range."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in inputs:
        if t.dtype.is_floating_point:
            out.append((torch.randn(t.shape, generator=g) * t.std()).to(t.dtype))
        else:
            lo, hi = int(t.min()), int(t.max())
            out.append(torch.randint(lo, hi + 1, t.shape, generator=g, dtype=t.dtype))
    return tuple(out)


@pytest.fixture(scope="module")
def family():
    cache = {}

    def get(name, frontend):
        if name not in cache:
            builder, meta = FAMILIES[name]
            m, _ = builder()
            inputs = meta["small_inputs"]()
            other = other_inputs(inputs)
            cache[name] = {"m": m, "cases": [(inputs, torch_outputs(m, inputs)), (other, torch_outputs(m, other))]}
        entry = cache[name]
        if frontend not in entry:
            m, inputs = entry["m"], entry["cases"][0][0]
            model = (srcore.from_torchscript(torch.jit.script(m), inputs) if frontend == "torchscript"
                     else srcore.from_torch(m, inputs))
            entry[frontend] = round_trip(model)
        return entry
    return get


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("name", list(FAMILIES))
def test_family_model_matches_torch(family, name, frontend, backend):
    entry = family(name, frontend)
    sm = srcore.StaticModule(entry[frontend], backends=BACKENDS[backend])
    what = f"{name} via {frontend} on {backend}"
    for i, (inputs, want) in enumerate(entry["cases"]):
        assert_close(run(sm, inputs), want, f"{what}, input set {i + 1}")
    assert_close(run(sm, entry["cases"][0][0]), entry["cases"][0][1], f"{what}, run again (reused plan)")
    if backend == "trt_like":
        failed = [s for s in sm.partition.segments if s.status == "fallback"]
        assert not failed, "\n".join(f"{s.name}: {s.reason}" for s in failed)


def test_other_inputs_differ_and_keep_dtypes():
    """The second input set is a real second case: other values, same shapes, dtypes and int ranges."""
    inputs = FAMILIES["bert_encoder"][1]["small_inputs"]()
    other = other_inputs(inputs)
    for a, b in zip(inputs, other):
        assert a.shape == b.shape and a.dtype == b.dtype and not torch.equal(a, b)
        assert int(b.min()) >= int(a.min()) and int(b.max()) <= int(a.max())
