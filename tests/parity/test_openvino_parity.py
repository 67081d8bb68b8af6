"""Bench and zoo models through the openvino engine backend (``backends=("openvino", "cpu")``:
OpenVINO engines for what its converter table takes, cpu kernels for the rest) match torch
eager like the cpu-only runs do (max relative error <= 1e-4; ints exact), on every input of
the case, including other batch sizes (engines with symbolic dims are compiled once, with
dynamic dimensions).

``engine_min_block_size=1`` and ``timing: False`` put every supported node into an engine, so
the converters and the fallback boundaries are exercised. A representative part runs by
default (each OpenVINO compile costs tens of ms of CPU); ``SRCORE_OPENVINO_PARITY=1`` runs
every bench and zoo model.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import srcore
from _harness import assert_matches_torch, bench_case, max_rel_err, run, torch_outputs, zoo_case
from benchmarks.models import MODELS
from parity_models import ZOO

BACKENDS = ("openvino", "cpu")
ALL = bool(os.environ.get("SRCORE_OPENVINO_PARITY")) or os.environ.get("SRCORE_TESTS_FULL") == "1"
#: the default run: every converter family (GEMM, conv + pools, attention both ways, norms,
#: activations, layout and tensor lists, dynamic batch)
DEFAULT_BENCH = ("mlp_tiny", "resnet_small", "transformer_block", "transformer_block_explicit")
DEFAULT_ZOO = ("mobilenet_like", "conv1d_net", "norm_net", "activations", "sdpa", "pools", "split_chunk",
               "llama_block")


@pytest.fixture(autouse=True)
def _cache_in_tmp(monkeypatch, tmp_path_factory):
    """OpenVINO's compiled models go to a temporary cache, never to ~/.cache/srcore."""
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "srcore-cache"))


def _options(**kw):
    engine_options = {"timing": False, **kw.pop("engine_options", {})}
    return srcore.Options(backends=BACKENDS, engine_min_block_size=1, engine_options=engine_options, **kw)




#: engines the partitioner must make of each bench model (control_flow: one per loop/branch body)
EXPECTED_ENGINES = {"mlp_tiny": 1, "elementwise_chain": 1, "mlp_wide": 1, "resnet_small": 1,
                    "transformer_block": 1, "transformer_block_explicit": 1}


def _bench_params():
    return [pytest.param(n, id=n) for n in MODELS if ALL or n in DEFAULT_BENCH]


@pytest.mark.parametrize("name", _bench_params())
def test_bench_model_through_openvino(name):
    m, inputs, model = bench_case(name)
    sm = srcore.StaticModule(model, options=_options())
    assert_matches_torch(sm, m, inputs, (), f"{name} via openvino")
    failed = [s for s in sm.partition.segments if s.status != "engine"]
    assert not failed, sm.partition.format()
    if name in EXPECTED_ENGINES:
        assert len(sm.partition.engines) == EXPECTED_ENGINES[name], sm.partition.format()
        assert not sm.partition.refused, sm.partition.format()


#: zoo models whose engines cannot all be built: a Tensor[] that a node outside the engine reads
#: (the partitioner cuts segments by node; see docs/openvino.md), so one segment falls back
LIST_LEAVES = {"split_chunk", "lstm_tagger", "bigru_encoder", "pointnet", "yolo_detect"}
#: why else a segment of these may fall back (yolo_detect's anchor grids: a meshgrid of aranges
#: sized at run time)
OTHER_FALLBACKS = {"yolo_detect": ("meshgrid of inputs of dynamic length",)}
#: zoo models with nothing an engine takes: float64 or integer work, control flow, in-place
#: aliasing, ops outside the table (every node refused, with its reason)
NO_ENGINE = {"stock_encoder", "int_ops", "double_net", "missing_ops", "one_hot_infer", "fpn_neck", "double_conv"}


def _zoo_params():
    out = []
    for name, case in ZOO.items():
        if case.no_torchscript or case.xfail or case.unsupported:
            continue
        if ALL or name in DEFAULT_ZOO:
            out.append(pytest.param(name, id=name))
    return out


@pytest.mark.parametrize("name", _zoo_params())
def test_zoo_model_through_openvino(name):
    m, inputs, others, model = zoo_case(name)
    sm = srcore.StaticModule(model, options=_options())
    assert_matches_torch(sm, m, inputs, others, f"{name} via openvino")
    failed = [s for s in sm.partition.segments if s.status == "fallback"]
    if name in LIST_LEAVES:
        ok = ("is not a tensor the engine makes", *OTHER_FALLBACKS.get(name, ()))
        assert all(any(r in s.reason for r in ok) for s in failed), sm.partition.format()
    else:
        assert not failed, "\n".join(f"{s.name}: {s.reason}" for s in failed)
    if name in NO_ENGINE:
        assert not sm.partition.engines and all(r.reason for r in sm.partition.refused), sm.partition.format()
    else:
        assert sm.partition.engines, sm.partition.format()


def _native_bf16() -> bool:
    try:
        from srcore_openvino.device import bf16_refusal

        return bf16_refusal() is None
    except Exception:   # OpenVINO missing: the float32 tests above say so
        return False


#: bfloat16 engines against torch's float32, max |error| / max |torch| per output: the issue
#: measured 1e-3 to 4e-3 (mlp_wide, resnet_small, transformer_block_explicit); on Sapphire Rapids
#: (AMX-BF16) these give 1.5e-3 (both transformers), 2.5e-3 (resnet_small), 5.4e-3 (mlp_tiny).
#: Outputs stay float32.
BF16_RTOL = 2e-2


@pytest.mark.skipif(not _native_bf16(), reason="no native bfloat16 on this CPU (refusal: plugins/openvino/tests)")
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in DEFAULT_BENCH])
def test_bench_model_through_openvino_bf16(name):
    m, inputs, model = bench_case(name)
    sm = srcore.StaticModule(model, options=_options(engine_options={"precision": "bf16"}))
    failed = [s for s in sm.partition.segments if s.status != "engine"]
    assert not failed, sm.partition.format()
    for got, want in zip(run(sm, inputs), torch_outputs(m, inputs), strict=True):
        assert got.dtype == want.dtype == np.float32
        err = max_rel_err(got, want)
        assert err <= BF16_RTOL, f"{name} bf16: max relative error {err:.3g} > {BF16_RTOL}"
