"""Serialized engines (``StaticModule.save``, ``srcore build``), the engine cache, optimization
profiles (``engine_options={"profiles": ...}``, ``sm.warmup``) and what bad input they meet."""
from __future__ import annotations

import logging
import re

import attrs
import numpy as np
import pytest
import torch

import srcore
from srcore.format import srm
from srcore.format.safetensors_io import Container

# engines are one node whatever the executor and memory planner: this is independent of both
pytestmark = pytest.mark.one_pass

TRT = ("trt_like", "cpu")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y) + y)
        y = torch.nn.functional.max_pool2d(y, 2)
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


PROFILE = {"x": {"min": (1, 3, 12, 12), "max": (3, 3, 12, 12)}}


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    m = Net().eval()
    model = srcore.from_torchscript(torch.jit.script(m), (torch.randn(2, 3, 12, 12),),
                                    dynamic_dims={"x": {0: "batch"}})
    return m, model


@pytest.fixture(scope="module")
def built(net, tmp_path_factory):
    """The model saved with its engine's plans for batch 1 and 3."""
    m, model = net
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"profiles": PROFILE}))
    path = tmp_path_factory.mktemp("built") / "net.engine.srm"
    assert sm.save(path) == ["trt_like_engine_0"]
    return path


def check(sm, m, batches=(1, 3)):
    for b in batches:
        x = np.random.default_rng(b).standard_normal((b, 3, 12, 12)).astype(np.float32)
        with torch.no_grad():
            want = m(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(sm(x), want, rtol=1e-4, atol=1e-5)


@pytest.fixture
def no_building(monkeypatch):
    """Converting, timing or laying out weights fails the test."""
    from srcore_trt_like import engine
    from srcore_trt_like.conv import winograd, winograd_packed
    from srcore_trt_like.kernels import gemm
    from srcore_trt_like.tactics import choose

    def fail(*a, **k):
        raise AssertionError("a stored plan was rebuilt")
    for mod, name in ((engine, "make_plan"), (engine, "build_network"), (choose, "rank"), (gemm, "pack_weight"),
                      (winograd, "transform_weight"), (winograd_packed, "transform_weight")):
        monkeypatch.setattr(mod, name, fail)


def test_a_built_model_loads_without_converting_timing_or_laying_out(net, built, no_building):
    m, _ = net
    model = srcore.load(built)
    assert len(model.engines) == 1 and not any(k.startswith("engine/") for k in model.params)
    (data,) = model.engines.values()
    # weights are the model's own (referred to, not stored twice); what is stored is what the tactics laid out
    # and the network's own constants (a bias made a tensor)
    assert data.arrays and all(".layout." in name or re.fullmatch(r"p\d+\.c\d+", name) for name in data.arrays)
    sm = srcore.StaticModule(model, backends=TRT)
    (seg,) = sm.partition.engines
    assert seg.loaded and seg.description.count("loaded from the serialized engine") == 2
    check(sm, m)
    assert sm.partition.engines[0].description.count("plan for inputs") == 2   # nothing built on use


def _rewritten(path, out, edit):
    model = srcore.load(path)
    (data,) = model.engines.values()
    edit(data.meta)
    srm.save(model, out)
    return out


def test_a_plan_from_another_machine_is_rebuilt_with_a_warning(net, built, tmp_path, caplog):
    m, _ = net

    def other_cpu(meta):
        meta["plans"][0]["compat"]["cpu"] = "Another CPU 9000"
    path = _rewritten(built, tmp_path / "other.srm", other_cpu)
    with caplog.at_level(logging.WARNING, logger="srcore.trt_like"):
        sm = srcore.StaticModule(srcore.load(path), backends=TRT)
    (msg,) = [r.getMessage() for r in caplog.records]
    assert "the serialized plan for inputs (1, 3, 12, 12) is not used, it was built for another machine" in msg
    assert "cpu 'Another CPU 9000'" in msg and "rebuilding it" in msg
    desc = sm.partition.engines[0].description
    assert "(1, 3, 12, 12): 7 layers" in desc and desc.count("loaded from the serialized engine") == 1
    check(sm, m)


def test_other_engine_options_rebuild_the_plans(net, built, caplog):
    m, _ = net
    with caplog.at_level(logging.WARNING, logger="srcore.trt_like"):
        sm = srcore.StaticModule(srcore.load(built), options=srcore.Options(
            backends=TRT, engine_options={"fusion": False}))
    assert len(caplog.records) == 2 and all("built with other engine options" in r.getMessage()
                                            for r in caplog.records)
    check(sm, m, batches=(3,))


def test_tampered_or_truncated_engines_are_errors(built, tmp_path):
    c = Container(built)
    name = next(n for n in c.entries if n.startswith("engine/") and ".layout." in n)
    _, _, begin, _ = c.entries[name]
    raw = bytearray(built.read_bytes())
    raw[c.data_start + begin + 5] ^= 0x40
    bad = tmp_path / "tampered.srm"
    bad.write_bytes(bytes(raw))
    with pytest.raises(srcore.SrcoreFormatError, match=r"serialized engine trt_like_engine_0, plan for inputs "
                                                       r"\(\d, 3, 12, 12\): .*do not match their checksum"):
        srcore.StaticModule(srcore.load(bad), backends=TRT)
    short = tmp_path / "truncated.srm"
    short.write_bytes(built.read_bytes()[:-100])
    with pytest.raises(srcore.SrcoreFormatError, match="truncated"):
        srcore.load(short)


def test_malformed_engine_metadata_is_an_error(built, tmp_path):
    def no_layers(meta):
        del meta["plans"][1]["layers"]
    path = _rewritten(built, tmp_path / "malformed.srm", no_layers)
    with pytest.raises(srcore.SrcoreFormatError, match=r"plan for inputs .* is malformed: KeyError: 'layers'"):
        srcore.StaticModule(srcore.load(path), backends=TRT)


def test_the_engine_cache_makes_a_second_load_cheap(net, tmp_path, monkeypatch, caplog):
    m, model = net
    opts = srcore.Options(backends=TRT, engine_options={"engine_cache": str(tmp_path), "profiles": PROFILE})
    first = srcore.StaticModule(model, options=opts)
    files = sorted(tmp_path.glob("*.plan"))
    assert len(files) == 2 and "built in" in first.partition.engines[0].description
    from srcore_trt_like import engine
    real = engine.make_plan
    monkeypatch.setattr(engine, "make_plan", lambda *a: pytest.fail("the cached plan was rebuilt"))
    second = srcore.StaticModule(model, options=opts)
    assert second.partition.engines[0].description.count("loaded from the engine cache") == 2
    check(second, m)
    # a damaged cache file is rebuilt (with a warning), not an error
    files[0].write_bytes(files[0].read_bytes()[:-8])
    monkeypatch.setattr(engine, "make_plan", real)
    with caplog.at_level(logging.WARNING, logger="srcore.trt_like"):
        third = srcore.StaticModule(model, options=opts)
    assert any("engine cache file" in r.getMessage() and "rebuilding" in r.getMessage() for r in caplog.records)
    check(third, m)


def test_profiles_and_warmup_plan_before_the_first_call(net, monkeypatch):
    m, model = net
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"profiles": PROFILE}))
    (seg,) = sm.partition.engines
    assert "(1, 3, 12, 12)" in seg.description and "(3, 3, 12, 12)" in seg.description
    assert sm.warmup(x=np.zeros((2, 3, 12, 12), np.float32)) == [("trt_like_engine_0", ((2, 3, 12, 12),))]
    from srcore_trt_like import engine
    monkeypatch.setattr(engine, "make_plan", lambda *a: pytest.fail("a profile's first call built a plan"))
    check(sm, m, batches=(1, 2, 3))


@pytest.mark.parametrize("profiles,message", [
    ({"y": (1, 3, 12, 12)}, r"engine_options\['profiles'\]: unknown input\(s\) 'y'; the model's tensor inputs: x"),
    ({"x": (1, 3, 12)}, r"engine_options\['profiles'\]: input 'x': shape \(1, 3, 12\) has rank 3, the "
                        r"input's spec \(batch, 3, 12, 12\) has rank 4"),
    ({"x": (1, 4, 12, 12)}, r"shape \(1, 4, 12, 12\) has 4 in dim 1, the input's spec \(batch, 3, 12, 12\) fixes "
                            r"it at 3"),
    ({"x": {"min": (1, 3, 12, 12), "best": (2, 3, 12, 12)}}, r"a range takes min, opt and max, got 'best'"),
    ({"x": (-1, 3, 12, 12)}, r"must be whole numbers >= 0"),
    ([{}], r"engine_options\['profiles'\]\[0\]: no shape for input 'x' \(its spec \(batch, 3, 12, 12\) has "
           r"symbolic dims\)"),
    ("x=1x3x12x12", r"engine_options\['profiles'\]: expected a mapping of input names to shapes, or a list of them"),
])
def test_a_profile_that_does_not_fit_the_inputs_is_an_error_naming_it(net, profiles, message):
    _, model = net
    with pytest.raises(srcore.EngineOptionError, match=message):
        srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"profiles": profiles}))


@pytest.mark.parametrize("options,message", [
    ({"fusoin": False}, r"unknown trt_like engine option 'fusoin' \(did you mean 'fusion'\?\)"),
    ({"timing": "no"}, r"timing='no': expected true or false"),
    ({"exclude_tactics": ["winograd_f4x4_pakced"]}, r"unknown trt_like tactic 'winograd_f4x4_pakced' \(did you "
                                                    r"mean 'winograd_f4x4_packed'\?\)"),
    ({"precision": "fp16"}, r"precision='fp16': expected one of float32, int8"),
    ({"precision": "int8"}, r"precision='int8' on a float model needs 'calibration' data"),
    ({"engine_cache": 3}, r"engine_cache=3: expected true/false or a directory path"),
    ({"trt_like": {"fusoin": False}}, r"unknown trt_like engine option 'fusoin'"),
    ({"trt_like": 3}, r"engine option 'trt_like' must be a dict of trt_like options, not 3"),
])
def test_an_unknown_engine_option_or_tactic_is_an_error_naming_it(net, options, message):
    _, model = net
    with pytest.raises(srcore.EngineOptionError, match=message):
        srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options=options))


def test_options_under_trt_like_win_and_other_builders_namespaces_are_ignored(net):
    _, model = net
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={
        "fusion": True, "trt_like": {"fusion": False}, "openvino": {"precision": "bf16", "nan_checks": False}}))
    engine = sm.partition.engines[0].describe.__self__
    assert engine.options["fusion"] is False and "openvino" not in engine.options and "trt_like" not in engine.options


def test_a_segment_key_names_graph_and_weights(net):
    _, model = net
    a = srcore.StaticModule(model, backends=TRT).partition.engines[0].segment
    changed = attrs.evolve(model, graph=model.graph.copy())
    key = a.key()
    assert key == srcore.StaticModule(model, backends=TRT).partition.engines[0].segment.key()
    w = next(n for n in changed.graph.all_nodes() if n.kind == "prim::Constant"
             and isinstance(n.attrs.get("value"), np.ndarray) and n.attrs["value"].ndim == 4)
    w.attrs["value"] = w.attrs["value"] + 1
    assert srcore.StaticModule(changed, backends=TRT).partition.engines[0].segment.key() != key


def test_dropped_pages_of_a_mapped_file_read_back_the_same(built):
    from srcore.format.safetensors_io import drop_resident_pages

    model = srcore.load(built)
    arrays = list(model.params.values()) + [a for d in model.engines.values() for a in d.arrays.values()]
    copies = [a.copy() for a in arrays]
    drop_resident_pages(arrays + [np.ones(10_000, np.float32)])      # an array not in a file: left alone
    assert all(np.array_equal(a, c) for a, c in zip(arrays, copies))
