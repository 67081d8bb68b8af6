"""What a cold start imports: a fresh process that loads the digits model and runs it once, with the full
registry and with a selection (its parse cached by an earlier start), leaves out the modules it does not need (the JIT compilers and scipy of
other plugins' kernels, yaml, and the standard-library modules srcore used to pull in at start-up:
logging, difflib, importlib.resources with tempfile and zipfile, hashlib with OpenSSL, pathlib with urllib.parse
and ipaddress; ml_dtypes, which a model without its dtypes does not need), and srcore's loggers still log."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from srcore._lazylog import DEBUG, INFO, LazyLogger
from srcore.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.srm"

pytestmark = pytest.mark.one_pass

CHILD = f"""
import sys
import numpy as np
import srcore
m = srcore.load({str(DIGITS)!r})
y = srcore.StaticModule(m)(np.zeros((1, 1, 8, 8), np.float32))
assert y.shape == (1, 10)
modules = sorted(sys.modules)
import json
print(json.dumps(modules))
"""

NOT_AT_START = ("numba", "llvmlite", "scipy", "yaml", "torch", "logging", "difflib", "importlib.resources",
                "tempfile", "zipfile", "hashlib", "ml_dtypes",
                # the caches a start reads name their files with os.path (srcore.cachedir): ~3-8 ms of CPU
                "pathlib", "urllib", "ipaddress",
                # a load does not verify the graph it parsed, and digits' kernels need no MKL loader
                "srcore.ir.verify", "srcore.blas.mkl",
                # nor do its conv and linear+relu kernels time tactics or compile activations
                "srcore_cpu.kernels.tactic", "srcore.clock", "srcore_cpu.kernels.pointwise_match",
                "srcore_cpu.kernels.activation_fast")


def _child(**env) -> subprocess.CompletedProcess:
    env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    return subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)


@pytest.fixture(scope="module")
def selection(tmp_path_factory):
    """(selection file, a cache of its own where one start parsed it and cached the parse)."""
    path = tmp_path_factory.mktemp("sel") / "digits.yaml"
    cache = str(tmp_path_factory.mktemp("sel_cache"))
    assert main(["select", str(DIGITS), "-o", str(path)]) == 0
    _child(SRCORE_SELECTION=str(path), SRCORE_CACHE_DIR=cache)  # parses the file (yaml), caches the parse
    return str(path), cache


@pytest.mark.parametrize("mode", ["full", "selection"])
def test_a_first_run_leaves_out_what_it_does_not_need(mode, selection, tmp_path):
    # each start in a cache of its own, warmed by one start before: in the suite's shared cache the
    # processes beside it leave caches this start would rewrite (the attrs code cache keeps at most
    # 1,000 entries, the last writer's), importing tempfile; the selective start's fixture warmed its own
    path, cache = selection
    if mode == "full":
        cache = str(tmp_path)
        _child(SRCORE_CACHE_DIR=cache)
    out = _child(SRCORE_SELECTION=path if mode == "selection" else None, SRCORE_LOG=None, SRCORE_CACHE_DIR=cache)
    modules = set(json.loads(out.stdout.splitlines()[-1]))
    assert "srcore.runtime.static_module" in modules  # the child did load and run the model
    loaded = {m for m in modules for top in NOT_AT_START if m == top or m.startswith(top + ".")}
    assert not loaded, f"imported on a {mode} cold start: {sorted(loaded)}"
    if mode == "selection":   # only the rule modules the selection names (the full registry reads them all)
        assert "srcore.ops.shapes.conv" in modules and "srcore.ops.shapes.quantized" not in modules
        assert "pluggy" not in modules   # the selected plugins' hooks are plain functions, called directly
    assert "json" not in modules   # JSON is read by _json's C parser directly (srcore._fastjson)
    # digits has none of peephole's rule kinds (srcore.passes.triggers), and no plugin failed
    assert "srcore.passes.peephole" not in modules and "srcore.plugin.requirements" not in modules


def test_a_selective_start_builds_no_record_class_of_the_hooks_it_does_not_call(selection):
    """Op libraries, dtypes, decompositions, engine builders and subcommands (srcore.plugin.hook_types) are
    not built by a selective start; the names resolve to the same classes from every module exporting them."""
    code = f"""
import json, sys
import numpy as np
import srcore
srcore.StaticModule(srcore.load({str(DIGITS)!r}))(np.zeros((1, 1, 8, 8), np.float32))
before = "srcore.plugin.hook_types" in sys.modules
import srcore.plugin as p, srcore.plugin.types as t, srcore.plugin.hook_types as h
from srcore.plugin import Subcommand
from srcore.plugin.hookspecs import HOOK_RECORDS, record_type
names = ("OpLibrary", "DType", "Decomposition", "EngineBuilder", "Subcommand")
same = all(getattr(p, n) is getattr(t, n) is getattr(h, n) for n in names) and Subcommand is h.Subcommand
print(json.dumps([before, same, sorted(record_type(k).__name__ for k in HOOK_RECORDS)]))
"""
    env = {**os.environ, "SRCORE_SELECTION": selection[0], "SRCORE_CACHE_DIR": selection[1]}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    before, same, names = json.loads(out.stdout.splitlines()[-1])
    assert before is False and same
    assert names == sorted(["OpLibrary", "DType", "Backend", "Kernel", "ShapeRule", "Decomposition", "EngineBuilder",
                            "Subcommand"])


def test_records_a_plain_load_does_not_use_are_built_on_first_use():
    """A load at full strength without engine backends builds neither the load report's entries nor the
    engine records; the names still resolve, from their old modules too, to the same classes."""
    code = f"""
import json, sys
import numpy as np
import srcore
m = srcore.load({str(DIGITS)!r})
sm = srcore.StaticModule(m)
sm(np.zeros((1, 1, 8, 8), np.float32))
loaded = sorted(n for n in ("srcore.runtime.load_entries", "srcore.plugin.engine_types") if n in sys.modules)
import srcore.plugin, srcore.plugin.types, srcore.runtime.load_report as lr
from srcore.plugin import Segment
from srcore.runtime.load_entries import Fallback
same = [srcore.plugin.EngineData is srcore.plugin.types.EngineData, Segment is srcore.plugin.types.Segment,
        lr.Fallback is Fallback, not sm.load_report]
print(json.dumps([loaded, same]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, same = json.loads(out.stdout.splitlines()[-1])
    assert loaded == [] and all(same)


def test_the_mkl_gemm_kernels_import_without_subprocess():
    """The constant-weight linear kernels (mlp_tiny's) import ``srcore.blas.mkl``; ``ctypes.util``, and
    with it subprocess, shutil and tempfile, loads only when MKL is looked for (the first GEMM timed), and
    pathlib not at all (importlib.metadata's, then)."""
    code = ("import json, sys; import srcore_cpu.kernels.fused, srcore_cpu.kernels.mkl_gemm; "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = set(json.loads(out.stdout.splitlines()[-1]))
    assert "srcore.blas.mkl" in modules
    assert not modules & {"ctypes.util", "subprocess", "shutil", "tempfile", "pathlib"}, sorted(modules)


BFLOAT16_CHILD = """
import json, sys
import numpy as np
import srcore
g = srcore.parse_graph('''graph(%x : Float(2, 3)):
  %bf : int = prim::Constant[value=15]()
  %f32 : int = prim::Constant[value=6]()
  %f : bool = prim::Constant[value=0]()
  %n : NoneType = prim::Constant()
  %b : Tensor = aten::to(%x, %bf, %f, %f, %n)
  %one : int = prim::Constant[value=1]()
  %m : Tensor = aten::mul(%b, %b)
  %s : Tensor = aten::add(%m, %b, %one)
  %y : Tensor = aten::to(%s, %f32, %f, %f, %n)
  return (%y)''')
before = "ml_dtypes" in sys.modules
sm = srcore.StaticModule(g)
y = sm(np.array(X, np.float32))
arena = [v.dtype.name for views in sm.runtime().arenas[0].views.values() for v in views.values()]
print(json.dumps([before, y.tolist(), arena]))
"""
X = [[1.0, 3.14159, -2.5], [100.3, 0.001, 7.77]]


def test_a_model_computing_in_bfloat16_still_gets_ml_dtypes():
    """The cpu kernels no longer import ml_dtypes at import: a float32 model that computes in bfloat16
    (``x.to(torch.bfloat16)``) gets it at load when its graph holds such a tensor (in a fresh process),
    so its arena still plans the bfloat16 intermediates."""
    import ml_dtypes

    out = subprocess.run([sys.executable, "-c", BFLOAT16_CHILD.replace("np.array(X,", f"np.array({X!r},")],
                         capture_output=True, text=True, check=True)
    before, y, arena = json.loads(out.stdout.splitlines()[-1])
    assert before is False
    assert arena and set(arena) == {"bfloat16"}  # the intermediates are planned in the arena, not left to kernels
    b = np.array(X, np.float32).astype(ml_dtypes.bfloat16)
    ref = (b * b + b).astype(np.float32)  # ml_dtypes' own bfloat16 arithmetic: each op rounded once
    np.testing.assert_array_equal(np.array(y, np.float32), ref)


def test_srcore_log_still_shows_the_load_path_records(selection):
    """SRCORE_LOG configures logging at ``import srcore``: the records of the lazily-logging modules appear."""
    err = _child(SRCORE_SELECTION=selection[0], SRCORE_CACHE_DIR=selection[1], SRCORE_LOG="info").stderr
    assert "read " in err and "digits.srm" in err, err          # srcore.format (srm.py)
    assert "loaded " in err and "nodes on" in err, err          # srcore.runtime (static_module.py)
    assert "registry of" in err, err                            # srcore.plugin (manager.py)


def test_lazy_logger_records_name_the_caller_and_honour_levels(caplog):
    log = LazyLogger("srcore.test_lazylog")
    with caplog.at_level(logging.INFO, logger="srcore.test_lazylog"):
        log.info("seen %d", 1); line = sys._getframe().f_lineno  # noqa: E702 (the line of the call)
        log.debug("hidden at INFO")
        assert log.isEnabledFor(INFO) and not log.isEnabledFor(DEBUG)
    [rec] = caplog.records
    assert (rec.getMessage(), rec.levelno, rec.name) == ("seen 1", logging.INFO, "srcore.test_lazylog")
    assert (rec.funcName, rec.lineno, Path(rec.pathname).name) == (
        "test_lazy_logger_records_name_the_caller_and_honour_levels", line, "test_cold_start_imports.py")
    with caplog.at_level(logging.DEBUG, logger="srcore.test_lazylog"):
        log.debug("now %s", "shown")
        log.warning("warned")
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")
    assert [(r.levelno, r.getMessage()) for r in caplog.records[1:]] == [
        (logging.DEBUG, "now shown"), (logging.WARNING, "warned"), (logging.ERROR, "failed")]
    assert caplog.records[-1].exc_info[0] is ValueError


@pytest.mark.parametrize("size", [0, 1, 55, 56, 64, 1000, 70_000])
def test_the_small_data_sha256_is_hashlibs(size):
    import hashlib

    from srcore._digest import small_sha256

    data = os.urandom(size)
    assert small_sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
    h = small_sha256()
    for i in range(0, size, 7):
        h.update(data[i:i + 7])
    assert h.digest() == hashlib.sha256(data).digest()


def test_a_selective_start_imports_only_the_plugins_the_selection_names(selection):
    """With SRCORE_SELECTION the process-wide manager imports the selected plugins (digits: builtin and
    cpu); asking for every plugin (``reports``) imports the others, whose subcommands then appear."""
    code = f"""
import json, sys
import numpy as np
import srcore
sm = srcore.StaticModule(srcore.load({str(DIGITS)!r}))
y = sm(np.zeros((1, 1, 8, 8), np.float32))
tops = lambda: sorted(n for n in sys.modules if n.startswith("srcore_") and "." not in n)
pm = srcore.get_plugin_manager()
first = [tops(), [r.name for r in pm.loaded_reports()], sorted(pm.registry.subcommands)]
every = [r.name for r in pm.reports]
print(json.dumps([first, [tops(), every, sorted(pm.registry.subcommands)]]))
"""
    env = {**os.environ, "SRCORE_SELECTION": selection[0], "SRCORE_CACHE_DIR": selection[1]}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    (mods, loaded, subs), (mods_after, every, subs_after) = json.loads(out.stdout.splitlines()[-1])
    assert mods == ["srcore_cpu"] and loaded == ["builtin", "cpu"] and subs == []
    full = subprocess.run([sys.executable, "-c", "import json, srcore; pm = srcore.get_plugin_manager(); "
                           "print(json.dumps([[r.name for r in pm.reports], sorted(pm.registry.subcommands)]))"],
                          capture_output=True, text=True, check=True)
    names, full_subs = json.loads(full.stdout.splitlines()[-1])
    assert every == names and len(every) > 2 and set(mods_after) >= set(mods) and len(mods_after) == len(every) - 1
    assert subs_after == full_subs


def test_attrs_validators_converters_and_filters_run_on_first_use():
    """A cold start leaves attrs' validators, converters and filters modules unexecuted (srcore._attrs_lazy);
    code that uses them later gets the real ones: a validator rejects, a converter converts, a filter filters."""
    code = f"""
import json, sys
import numpy as np
import srcore
from srcore._attrs_lazy import LAZY
srcore.StaticModule(srcore.load({str(DIGITS)!r}))(np.zeros((1, 1, 8, 8), np.float32))
lazy = sorted(n for n in LAZY if type(sys.modules[n]).__name__ == "_LazyModule")
import attrs

@attrs.define
class A:
    x: int = attrs.field(validator=attrs.validators.instance_of(int))
    y: object = attrs.field(default=None, converter=attrs.converters.optional(float))

try:
    A("1")
    rejected = False
except TypeError:
    rejected = True
a = A(1, "2.5")
print(json.dumps([lazy, rejected, a.y, attrs.asdict(a, filter=attrs.filters.exclude("y"))]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lazy, rejected, y, d = json.loads(out.stdout.splitlines()[-1])
    from srcore._attrs_lazy import LAZY

    assert lazy == sorted(LAZY) and rejected and y == 2.5 and d == {"x": 1}


def test_a_one_thread_start_does_not_scan_the_blas_libraries(selection):
    # OpenBLAS started on one thread by the environment: the cpu plugin's kernels read that 1 without
    # threadpoolctl's import and library scan (srcore.blas.openblas.started_on_one_thread)
    path, cache = selection
    out = _child(SRCORE_SELECTION=path, SRCORE_CACHE_DIR=cache, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                 GOTO_NUM_THREADS=None, SRCORE_CPU_THREADS=None)
    modules = set(json.loads(out.stdout.splitlines()[-1]))
    assert "srcore_cpu.kernels.conv" in modules and "threadpoolctl" not in modules


def test_a_start_on_every_core_finds_numpys_openblas_without_threadpoolctl(selection):
    # no thread variable set: the kernels ask numpy's OpenBLAS for its count, opened by its path
    # (srcore.blas.openblas.bundled_openblas), not through threadpoolctl's import and library scan
    from srcore.blas import openblas

    if openblas.bundled_openblas() is None:
        pytest.skip("numpy's BLAS is not its bundled OpenBLAS here: threadpoolctl is the way to it")
    path, cache = selection
    out = _child(SRCORE_SELECTION=path, SRCORE_CACHE_DIR=cache, OMP_NUM_THREADS=None, OPENBLAS_NUM_THREADS=None,
                 GOTO_NUM_THREADS=None, SRCORE_CPU_THREADS=None)
    modules = set(json.loads(out.stdout.splitlines()[-1]))
    assert "srcore_cpu.kernels.conv" in modules and "threadpoolctl" not in modules


#: classes a prepared-cache hit of digits does not use, each in a module of its own imported on first use
#: (an attrs class is ~1 M instructions of a cold start): module -> its classes
ON_DEMAND = {
    "srcore.ir.compound_types": ("OptionalType", "TupleType", "DictType"),
    "srcore.ir.qparams": ("QParams",),
    "srcore.ops.schema_rare_types": ("TupleType", "GenericType"),
    "srcore.ops.dispatch_entry": ("DispatchEntry",),
    "srcore.dispatch.unsupported": ("Unsupported",),
    "srcore.plugin.const": ("Const",),
    "srcore.runtime.scalar_spec": ("ScalarSpec",),
}


@pytest.mark.parametrize("mode", ["full", "selection"])
def test_a_prepared_cache_hit_builds_none_of_the_classes_it_does_not_use(mode, selection, tmp_path):
    """A selective hit (the second start) imports none of ``ON_DEMAND``'s modules nor ``srcore.plugin.hook_types``
    (``ShapeRule``: the cpu plugin imports it in its rule hook), a full one only what its registry holds; the
    names still resolve from every module that exported them before, to one class each, and the checks
    that stand in for ``isinstance`` before a module is imported (``lazy_type``, ``is_const``,
    ``is_scalar_spec``) answer as ``isinstance`` does once it is."""
    code = f"""
import json, sys
import numpy as np
import srcore
from srcore.ir.types import lazy_type, TENSOR
from srcore.plugin.types import is_const
from srcore.runtime.inputs import is_scalar_spec
stand_ins = [lazy_type("TupleType").__name__, isinstance(TENSOR, lazy_type("OptionalType"))]
y = srcore.StaticModule(srcore.load({str(DIGITS)!r}))(np.zeros((1, 1, 8, 8), np.float32))
loaded = sorted(m for m in {sorted(ON_DEMAND) + ["srcore.plugin.hook_types"]!r} if m in sys.modules)
import importlib
import srcore.ir, srcore.ir.types, srcore.ir.quant, srcore.ops.schema, srcore.ops.declarations, srcore.dispatch
import srcore.dispatch.resolve, srcore.plugin, srcore.plugin.types, srcore.runtime.inputs
homes = {{m: [getattr(importlib.import_module(m), n) for n in names] for m, names in {ON_DEMAND!r}.items()}}
ir_t, q, s_t, d, u, c, sc = (homes[m] for m in {list(ON_DEMAND)!r})
same = [
    ir_t == [getattr(srcore.ir.types, n) for n in ("OptionalType", "TupleType", "DictType")]
         == [getattr(srcore.ir, n) for n in ("OptionalType", "TupleType", "DictType")],
    q[0] is srcore.ir.quant.QParams is srcore.ir.QParams is srcore.QParams is srcore.plugin.QParams,
    s_t == [srcore.ops.schema.TupleType, srcore.ops.schema.GenericType],
    d[0] is srcore.ops.declarations.DispatchEntry,
    u[0] is srcore.dispatch.Unsupported is srcore.dispatch.resolve.Unsupported,
    c[0] is srcore.plugin.Const is srcore.plugin.types.Const,
    sc[0] is srcore.runtime.inputs.ScalarSpec,
    lazy_type("TupleType") is ir_t[1] and isinstance(ir_t[0](TENSOR), lazy_type("OptionalType")),
    is_const(c[0](1.5)) and not is_const(1),
    is_scalar_spec(sc[0]("n", srcore.ir.types.INT)) and not is_scalar_spec(srcore.model.InputSpec("x", "float32", (1,))),
]
print(json.dumps([loaded, stand_ins, same, y.tolist()]))
"""
    cache = str(tmp_path / "cache")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SRCORE_NO_PREPARED_CACHE",
                                                            "SRCORE_SELECTION")}
    env["SRCORE_CACHE_DIR"] = cache
    if mode == "selection":
        env["SRCORE_SELECTION"] = selection[0]
    outs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                      check=True).stdout.splitlines()[-1]) for _ in range(2)]
    loaded, stand_ins, same, y = outs[1]
    assert list(tmp_path.glob("cache/prepared/*/*.srm")), "the first start wrote no prepared entry"
    # the full registry calls every rule hook (ShapeRule), decodes every schema (tuples, Dict(...), Union(...)) and
    # imports every rule module (some name the IR's compound types)
    expected = (["srcore.ir.compound_types", "srcore.ops.schema_rare_types", "srcore.plugin.hook_types"]
                if mode == "full" else [])
    assert loaded == expected, f"a {mode} hit imported {loaded}"
    assert stand_ins == ["_NoInstances", False]
    assert all(same), same
    assert y == outs[0][3]   # the hit's answer is the first start's
