"""Every bench model and every zoo model through the trt_like engine backend (backends
``("trt_like", "cpu")``: engines for what trt_like supports, cpu kernels for the rest) match
torch eager like the cpu-only runs do (max relative error <= 1e-4; ints exact), on every
input of the case, including other batch sizes (engines with symbolic dims plan per shape).

``engine_min_block_size=1`` puts every supported node into an engine, so every converter
and every fallback boundary of the zoo is exercised. test.sh's second pass runs the bench models
and the zoo's ``SECOND_PASS`` models (one per architecture family).

A zoo model runs on its first input set. By default the models of ``SECOND_PASS`` (one per
architecture family: CNNs, encoder-decoder, detection, 1-D and 3-D convs, recurrent, decoder and
encoder transformers, point sets, graphs, embedding bags, norms, control flow) also run on their first
other set (another batch size or sequence length: the engines plan and compile that shape too); the
other models' other sets run on cpu in ``test_model_zoo.py``. ``SRCORE_TESTS_FULL=1`` runs every
other set of every model here. Each new shape times the tactics and compiles the model's generated
segments again (5-13 s of CPU a transformer block, measured cold: llama_block 10.5-12.7 s,
swin_window 8.9-10 s, vit_tiny 5.2 s), and a third shape takes the same path as the second.
"""
from __future__ import annotations

import os

import pytest

import srcore
from _harness import assert_matches_torch, bench_case, zoo_case
from benchmarks.models import MODELS
from parity_models import SECOND_PASS, ZOO

BACKENDS = ("trt_like", "cpu")
FULL = os.environ.get("SRCORE_TESTS_FULL") == "1"


#: the second pass varies the executor and planner around the engines, not the engines: their
#: tactics are taken untimed there (the first candidate) rather than timed again (resnet_small's
#: tactic timing took 40 s of the second pass on the loaded CI machine, where choices timed while a
#: core is taken are not kept in the timing cache)
SECOND_PASS_RUN = os.environ.get("SRCORE_EXECUTOR") == "interpreter"


def _options(**kw):
    engine = {"timing": False} if SECOND_PASS_RUN else {}
    return srcore.Options(backends=BACKENDS, engine_min_block_size=1, engine_options=engine, **kw)


#: what the partitioner must make of each bench model: engines, and nodes left to cpu
EXPECTED_ENGINES = {"mlp_tiny": 1, "elementwise_chain": 1, "mlp_wide": 1, "resnet_small": 1,
                    "transformer_block": 1, "transformer_block_explicit": 1}


@pytest.mark.parametrize("name", list(MODELS))
def test_bench_model_through_trt_like(name):
    m, inputs, model = bench_case(name)
    sm = srcore.StaticModule(model, options=_options())
    assert_matches_torch(sm, m, inputs, (), f"{name} via trt_like")
    engines = sm.partition.engines
    if name in EXPECTED_ENGINES:
        assert len(engines) == EXPECTED_ENGINES[name], sm.partition.format()
        assert not sm.partition.refused, sm.partition.format()


def _zoo_params():
    out = []
    for name, case in ZOO.items():
        if case.no_torchscript or case.xfail or case.unsupported:
            continue
        # the second pass (the other executor and planner around the engines) runs one model per family
        out.append(pytest.param(name, id=name, marks=() if name in SECOND_PASS else pytest.mark.one_pass))
    return out


@pytest.mark.parametrize("name", _zoo_params())
def test_zoo_model_through_trt_like(name):
    m, inputs, others, model = zoo_case(name)
    sm = srcore.StaticModule(model, options=_options())
    assert_matches_torch(sm, m, inputs, others if FULL else others[:1] if name in SECOND_PASS else (),
                         f"{name} via trt_like")
    failed = [s for s in sm.partition.segments if s.status == "fallback"]
    assert not failed, "\n".join(f"{s.name}: {s.reason}" for s in failed)
