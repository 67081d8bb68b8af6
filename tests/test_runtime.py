"""StaticModule / StaticRuntime end to end, with every executor and planner."""
from __future__ import annotations

import gc
import threading

import attrs
import numpy as np
import pytest

import srcore
from srcore.ir.parser import parse_graph
from srcore.model import InputSpec, Model

from _shared import pointwise_chain, pointwise_chain_ref

COMBOS = [(e, p) for e in ("codegen", "interpreter") for p in ("standard_resizing", "precomputed_offsets")]


@pytest.fixture(params=COMBOS, ids=[f"{e}-{p}" for e, p in COMBOS])
def options(request):
    executor, planner = request.param
    return srcore.Options(executor=executor, memory_planner_algorithm=planner)


CHAIN = pointwise_chain(64)
chain_ref = pointwise_chain_ref


def chain_module(options, **kw):
    return srcore.StaticModule(Model.from_graph(parse_graph(CHAIN)), options=options, **kw)


def test_chain_matches_numpy_and_reuses_memory(options):
    sm = chain_module(options)
    rng = np.random.default_rng(0)
    for batch in (1, 4, 2, 4, 8, 1):   # growth, shrink, re-use
        x = rng.standard_normal((batch, 64)).astype(np.float32)
        y = sm(x)
        np.testing.assert_allclose(y, chain_ref(x), rtol=1e-5, atol=1e-6)
        assert y.dtype == np.float32 and y.shape == (batch, 64)
    rt = sm.runtime()
    assert 0 < rt.arena_bytes
    # 6 intermediates (a..f) are managed; a lives until the end, so at most 3 are live at once
    rows = sm.memory_report(np.zeros((8, 64), np.float32))
    top = rows[0]
    assert top["managed_tensors"] == 6
    assert top["lower_bound_bytes"] == 3 * 8 * 64 * 4
    assert top["arena_bytes"] <= top["no_reuse_bytes"]


def test_output_never_aliases_the_arena(options):
    sm = chain_module(options)
    x = np.ones((2, 64), np.float32)
    y1 = sm(x).copy()
    y_kept = sm(x)
    sm(np.full((2, 64), 3.0, np.float32))      # a later run must not overwrite a returned array
    np.testing.assert_array_equal(y_kept, y1)


@pytest.mark.parametrize("executor", ["codegen", "interpreter"])
def test_managed_output_tensors_outlive_the_run(executor):
    sm = chain_module(srcore.Options(manage_output_tensors=True, executor=executor))
    x = np.ones((2, 64), np.float32)
    y = sm(x)
    base = y.base
    assert base is not None                   # a view into the output arena
    y2 = sm(np.zeros((2, 64), np.float32))
    np.testing.assert_allclose(y, chain_ref(x), rtol=1e-6)
    assert not np.shares_memory(y, y2)


def test_out_variants_off_gives_same_result():
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    ref = chain_module(srcore.Options())(x)
    sm = chain_module(srcore.Options(enable_out_variant=False))
    np.testing.assert_allclose(sm(x), ref, rtol=1e-6)
    assert sm.runtime().arena_bytes == 0
    assert all(not b.managed for b in sm.blocks)


LOOP = """graph(%x : Float(1, n)):
  %true : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %itwo : int = prim::Constant[value=2]()
  %two : float = prim::Constant[value=2.]()
  %half : float = prim::Constant[value=0.5]()
  %n : int = aten::size(%x, %one)
  %trips : int = aten::floordiv(%n, %itwo)
  %y : Tensor = prim::Loop(%trips, %true, %x)
    block0(%i : int, %c : Tensor):
      %s : Tensor = aten::sum(%c, %none)
      %pos : Tensor = aten::gt(%s, %zero)
      %cond : bool = aten::Bool(%pos)
      %r : Tensor = prim::If(%cond)
        block0():
          %t0 : Tensor = aten::mul(%c, %two)
          %t1 : Tensor = aten::tanh(%t0)
          -> (%t1)
        block1():
          %e0 : Tensor = aten::sigmoid(%c)
          %e1 : Tensor = aten::sub(%e0, %half, %one)
          -> (%e1)
      -> (%true, %r)
  return (%y)
"""


def loop_ref(x):
    for _ in range(x.shape[1] // 2):
        x = np.tanh(x * 2) if x.sum() > 0 else 1 / (1 + np.exp(-x)) - 0.5
    return x


def test_loop_with_data_dependent_if(options):
    g = parse_graph(LOOP)
    sm = srcore.StaticModule(Model.from_graph(g), options=options)
    rng = np.random.default_rng(3)
    for _ in range(5):
        x = rng.standard_normal((1, 16)).astype(np.float32)
        np.testing.assert_allclose(sm(x), loop_ref(x), rtol=1e-5, atol=1e-6)
    assert len(sm.blocks) == 4   # graph, loop body, then, else


def test_input_errors_name_the_input():
    sm = chain_module(srcore.Options())
    with pytest.raises(srcore.SrcoreInputError, match="input 'x': expected dtype float32, got float64"):
        sm(np.zeros((1, 64)))
    with pytest.raises(srcore.SrcoreInputError, match="input 'x': expected rank 2"):
        sm(np.zeros((64,), np.float32))
    with pytest.raises(srcore.SrcoreInputError, match="dimension 1 must be 64"):
        sm(np.zeros((1, 63), np.float32))
    with pytest.raises(srcore.SrcoreInputError, match="takes 1 input"):
        sm(np.zeros((1, 64), np.float32), np.zeros((1, 64), np.float32))
    with pytest.raises(srcore.SrcoreInputError, match="missing input"):
        sm()
    with pytest.raises(srcore.SrcoreInputError, match="unknown input 'y'"):
        sm(y=np.zeros((1, 64), np.float32))
    assert sm(x=np.zeros((1, 64), np.float32)).shape == (1, 64)   # by keyword


def test_byte_swapped_inputs_are_read_as_their_numbers(options):
    # '>f4' (a big-endian file) holds float32 numbers: first call or after a native one, same answer
    sm = chain_module(options)
    x = np.random.default_rng(5).standard_normal((3, 64)).astype(np.float32)
    swapped = x.astype(x.dtype.newbyteorder())
    assert not swapped.dtype.isnative
    for arg in (swapped, x, swapped):
        np.testing.assert_allclose(sm(arg), chain_ref(x), rtol=1e-5, atol=1e-6)
    assert sm(x=swapped).dtype == np.float32
    with pytest.raises(srcore.SrcoreInputError, match="expected dtype float32, got >f8|expected dtype float32, got float64"):
        sm(x.astype(">f8"))


def test_symbolic_dims_must_agree():
    g = parse_graph("""graph(%a : Float(n, 4), %b : Float(n, 4)):
  %one : int = prim::Constant[value=1]()
  %c : Tensor = aten::add(%a, %b, %one)
  return (%c)
""")
    sm = srcore.StaticModule(Model.from_graph(g))
    assert sm(np.ones((3, 4), np.float32), np.ones((3, 4), np.float32)).shape == (3, 4)
    with pytest.raises(srcore.SrcoreInputError, match="symbolic dim 'n'"):
        sm(np.ones((3, 4), np.float32), np.ones((2, 4), np.float32))


def test_kernel_failure_names_the_node(options):
    g = parse_graph("""graph(%a : Float(*, *), %b : Float(*, *)):
  %c : Tensor = aten::matmul(%a, %b) # model.py:7:3
  return (%c)
""")
    sm = srcore.StaticModule(Model.from_graph(g), options=srcore.Options(executor=options.executor,
                                                                          check_inputs=False))
    with pytest.raises((srcore.KernelError, srcore.SrcoreInputError)) as info:
        sm(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))
    assert "aten::matmul" in str(info.value)


def test_precomputed_offsets_without_replan_raises():
    sm = chain_module(srcore.Options(memory_planner_algorithm="precomputed_offsets", replan_on_growth=False))
    sm(np.ones((2, 64), np.float32))
    sm(np.ones((1, 64), np.float32))      # smaller: fits the plan
    with pytest.raises(srcore.MemoryPlanError, match="precomputed offsets never resize"):
        sm(np.ones((4, 64), np.float32))


def test_standard_resizing_grows_after_a_dynamic_run():
    sm = chain_module(srcore.Options(memory_planner_algorithm="standard_resizing"))
    rt = sm.runtime()
    rt(np.ones((1, 64), np.float32))
    small = rt.arena_bytes
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    np.testing.assert_allclose(rt(x), chain_ref(x), rtol=1e-5, atol=1e-6)   # outgrows: dynamic allocations
    assert rt.arenas[0].dynamic_allocations > 0
    np.testing.assert_allclose(rt(x), chain_ref(x), rtol=1e-5, atol=1e-6)   # next run: grown slab
    assert rt.arena_bytes > small


BN_PARTS = """graph(%x : Float(batch, 4), %w : Float(4), %b : Float(4), %m : Float(4), %v : Float(4)):
  %mom : float = prim::Constant[value=0.1]()
  %eps : float = prim::Constant[value=1e-05]()
  %y : Tensor, %s1 : Tensor, %s2 : Tensor = aten::_native_batch_norm_legit_no_training(%x, %w, %b, %m, %v, %mom, %eps)
  %z : Tensor = aten::relu(%y)
  return (%z)
"""


def test_growth_with_a_multi_output_node_whose_outputs_grow_differently(options):
    """torch.export's batch norm has outputs (y, empty, empty): when the batch outgrows the
    standard_resizing plan only y's buffer is missing; the generated code once passed
    ``out=(None, buf, buf)`` and the kernel failed (a zoo model via export, codegen only)."""
    sm = srcore.StaticModule(Model.from_graph(parse_graph(BN_PARTS)), options=options)
    rng = np.random.default_rng(3)
    w, b, m = (rng.standard_normal(4).astype(np.float32) for _ in range(3))
    v = rng.uniform(0.5, 1.5, 4).astype(np.float32)
    for batch in (2, 7, 7, 1, 9):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        want = np.maximum((x - m) / np.sqrt(v + 1e-5) * w + b, 0)
        np.testing.assert_allclose(sm(x, w, b, m, v), want, rtol=1e-5, atol=1e-6)


def test_runtime_pool_threads_match_single_thread_and_memory_is_stable():
    sm = chain_module(srcore.Options())
    pool = srcore.RuntimePool(sm, size=4)
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((2, 64)).astype(np.float32) for _ in range(8)]
    expected = [sm.runtime().clone()(x).copy() for x in xs]
    errors = []

    def work(t):
        try:
            for i in range(2000):
                k = (t + i) % len(xs)
                if not np.array_equal(pool.run(xs[k]), expected[k]):
                    errors.append((t, i))
        except Exception as exc:  # surfaced below
            errors.append(exc)

    def rss():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))

    work(0)
    gc.collect()
    before = rss()
    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    assert not errors
    assert pool.runtimes_created <= 4
    assert rss() - before < 20_000   # KiB: no growth with the number of calls


def test_codegen_source_is_straight_line():
    sm = chain_module(srcore.Options(executor="codegen"))
    src = sm.codegen.source
    assert "for " not in src and "while " not in src and "[" not in src.split("\n", 1)[1]
    assert src.count("\n    v") == 7


@pytest.mark.parametrize("executor", ["codegen", "interpreter"])
def test_run_async_and_launcher(executor):
    sm = chain_module(srcore.Options(executor=executor))
    rt = sm.runtime()
    x = np.ones((1, 64), np.float32)
    assert np.allclose(rt.run_async(x).result(), chain_ref(x))
    launched = []

    def launcher(task):
        launched.append(task)
        task()

    fut = rt.run_async(x, launcher=launcher)
    assert launched and np.allclose(fut.result(), chain_ref(x))


def test_benchmark_individual_ops():
    sm = chain_module(srcore.Options())
    m = sm.benchmark_individual_ops([np.ones((2, 64), np.float32)], warmup=2, runs=5)
    assert len(m.nodes) == 7 and m.kind_counts.get("out", 0) >= 6
    assert abs(sum(r[2] for r in m.per_op) - 100.0) < 1e-6
    assert "aten::sigmoid" in m.format()


def test_graph_with_input_specs_from_model():
    g = parse_graph(CHAIN)
    model = Model(g, {}, (InputSpec("x", "float32", ("batch", 64)),))
    sm = srcore.StaticModule(model)
    assert sm.input_names == ("x",)
    assert sm(np.zeros((5, 64), np.float32)).shape == (5, 64)


FORK = """graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %f : Future(Tensor) = prim::fork(%x)
    block0(%a : Tensor):
      %b : Tensor = aten::relu(%a)
      -> (%b)
  %c : Tensor = aten::wait(%f)
  %d : Tensor = aten::add(%c, %x, %one)
  return (%d)
"""


def test_fork_and_wait_run_on_the_launcher(options):
    sm = srcore.StaticModule(Model.from_graph(parse_graph(FORK)), options=options)
    x = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(sm(x), np.maximum(x, 0) + x, rtol=1e-6)
    tasks = []

    def launcher(task):
        tasks.append(task)
        task()

    out = sm.runtime().run_async(x, launcher=launcher).result()
    np.testing.assert_allclose(out, np.maximum(x, 0) + x, rtol=1e-6)
    assert len(tasks) == 2          # the run itself and the forked block
    assert all(not b.managed for b in sm.blocks if b.block.owning_node is not None)


def test_per_signature_caches_are_bounded():
    from srcore.runtime.lru import MAX_SIGNATURES

    sm = chain_module(srcore.Options())
    rt = sm.runtime()
    for batch in range(1, MAX_SIGNATURES + 20):
        x = np.full((batch, 64), 0.5, np.float32)
        np.testing.assert_allclose(rt(x), chain_ref(x), rtol=1e-5)
    assert len(sm._signatures) <= MAX_SIGNATURES
    assert all(len(a.views) <= MAX_SIGNATURES for a in rt.arenas)


def test_generated_entry_point_checks_every_call(options):
    """Each runtime's ``__call__`` is its own generated entry: after a run has armed the fast
    path, other signatures, counts, keywords and dtypes still take the checked route, and two
    runtimes of one module keep separate signatures."""
    sm = chain_module(options)
    rt1 = sm.runtime()
    rt2 = rt1.clone()
    assert isinstance(rt1, srcore.StaticRuntime) and type(rt1) is not type(rt2)
    a = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((5, 64)).astype(np.float32)
    for _ in range(3):  # interleaved: each runtime's armed signature must not leak to the other
        np.testing.assert_allclose(rt1(a), chain_ref(a), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rt2(b), chain_ref(b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rt1(b), chain_ref(b), rtol=1e-5, atol=1e-6)   # a new signature
    np.testing.assert_allclose(rt1.run(x=a), chain_ref(a), rtol=1e-5, atol=1e-6)
    with pytest.raises(srcore.SrcoreInputError, match="expected dtype float32"):
        rt1(a.astype(np.float64))
    with pytest.raises(srcore.SrcoreInputError, match="takes 1 input"):
        rt1(a, a)
    with pytest.raises(srcore.SrcoreInputError, match="missing input"):
        rt1()
    np.testing.assert_allclose(srcore.StaticRuntime(sm)(a), chain_ref(a), rtol=1e-5, atol=1e-6)


NESTED = """graph(%x : Float(4, 4), %m : Float(4, 4)):
  %true : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %three : int = prim::Constant[value=3]()
  %big : int = prim::Constant[value=1000]()
  %half : float = prim::Constant[value=0.5]()
  %lim : float = prim::Constant[value=200.]()
  %a : Tensor, %b : Tensor = prim::Loop(%three, %true, %x, %m)
    block0(%i : int, %p : Tensor, %q : Tensor):
      %s : Tensor = aten::add(%p, %q, %one)
      %r : Tensor = prim::Loop(%two, %true, %s)
        block0(%j : int, %t : Tensor):
          %u : Tensor = aten::mul(%t, %half)
          -> (%true, %u)
      -> (%true, %q, %r)
  %w : Tensor = prim::Loop(%big, %true, %a)
    block0(%k : int, %z : Tensor):
      %z2 : Tensor = aten::add(%z, %b, %one)
      %sm : Tensor = aten::sum(%z2, %none)
      %lt : Tensor = aten::lt(%sm, %lim)
      %go : bool = aten::Bool(%lt)
      -> (%go, %z2)
  return (%w, %b)
"""


def nested_ref(x, m):
    p, q = x, m
    for _ in range(3):
        p, q = q, (p + q) * 0.5 * 0.5   # carried values swap: a simultaneous assignment
    z = p
    while True:
        z = z + q
        if not z.sum() < 200:
            break
    return z, q


def test_nested_loops_swapping_carried_values_and_a_while_loop(options):
    """Loop bodies (inlined by codegen) with carried values that swap places, a loop nested in a
    loop, and a data-dependent trip count."""
    sm = srcore.StaticModule(Model.from_graph(parse_graph(NESTED)), options=options)
    rng = np.random.default_rng(5)
    for _ in range(3):
        x, m = (np.abs(rng.standard_normal((4, 4))).astype(np.float32) for _ in range(2))
        for got, exp in zip(sm(x, m), nested_ref(x, m)):
            np.testing.assert_allclose(got, exp, rtol=1e-5)


def test_kernel_failure_inside_a_loop_names_the_inner_node(options):
    g = parse_graph("""graph(%x : Float(4, 4), %idx : Long(1)):
  %true : bool = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %two : int = prim::Constant[value=2]()
  %y : Tensor = prim::Loop(%two, %true, %x)
    block0(%i : int, %t : Tensor):
      %u : Tensor = aten::index_select(%t, %zero, %idx) # model.py:9:5
      %v : Tensor = aten::add(%u, %t, %two)
      -> (%true, %v)
  return (%y)
""")
    sm = srcore.StaticModule(Model.from_graph(g), options=options)
    x = np.ones((4, 4), np.float32)
    np.testing.assert_allclose(sm(x, np.array([1])), 9.0)
    with pytest.raises(srcore.KernelError, match=r"(?s)aten::index_select.*model\.py:9:5"):
        sm(x, np.array([7]))


def test_an_unknown_backend_is_named_with_the_installed_ones():
    with pytest.raises(srcore.UnknownBackendError, match=r"unknown backend 'trt-like' \(did you mean 'trt_like'\?\); "
                                                         r"installed backends: .*cpu"):
        chain_module(srcore.Options(), backends=("trt-like", "cpu"))
    with pytest.raises(ValueError):   # also a ValueError, like a bad input
        chain_module(srcore.Options(backends=("gpu",)))


@pytest.mark.parametrize("size", [0, -1, 2.5, "2", True, None])
def test_runtime_pool_size_must_be_a_whole_number_of_runtimes(size):
    with pytest.raises(srcore.SrcoreError, match="RuntimePool size must be a whole number >= 1, got "):
        srcore.RuntimePool(chain_module(srcore.Options()), size=size)


def test_runtime_pool_takes_a_numpy_integer_size():
    pool = srcore.RuntimePool(chain_module(srcore.Options()), size=np.int64(2))
    assert pool.size == 2 and type(pool.size) is int
    x = np.ones((2, 64), np.float32)
    np.testing.assert_allclose(pool.run(x), chain_ref(x), rtol=1e-5, atol=1e-6)


def test_options_take_one_backend_name_as_a_string_and_refuse_nonsense():
    assert srcore.Options(backends="cpu").backends == ("cpu",)
    assert chain_module(srcore.Options(), backends="cpu").options.backends == ("cpu",)
    assert srcore.Options(engine_fallback_ops="aten::relu").engine_fallback_ops == ("aten::relu",)
    for bad in (dict(backends=()), dict(backends=["cpu", None]), dict(engine_fallback_ops=[1]),
                dict(engine_min_block_size=0), dict(engine_min_block_size="3")):
        with pytest.raises(srcore.SrcoreError, match=f"Options.{next(iter(bad))}="):
            srcore.Options(**bad)


def test_calling_the_module_from_several_threads_uses_a_runtime_per_thread():
    # sm(x) from 3 threads at once used to share one arena: ~10 % of the answers were wrong
    sm = chain_module(srcore.Options())
    wrong, runtimes = [], []   # the runtimes themselves: a finished thread's could free its id

    def work(seed):
        r = np.random.default_rng(seed)
        runtimes.append(sm.runtime())
        for _ in range(300):
            x = r.standard_normal((32, 64)).astype(np.float32)
            if not np.allclose(sm(x), chain_ref(x), rtol=1e-5, atol=1e-6):
                wrong.append(seed)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong and len({id(rt) for rt in runtimes}) == 3
    assert sm.runtime() is sm.runtime()   # one per thread, kept


def test_a_returned_constant_is_the_callers_and_the_models_parameters_stay_put(options):
    w0 = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = parse_graph("""graph(%x : Float(2, 3)):
  %w : Tensor = prim::Constant[param="w"]()
  %y : Tensor = aten::mul(%x, %w)
  return (%y, %w)
""", params={"w": w0.copy()})
    model = Model.from_graph(g)
    sm = srcore.StaticModule(model, options=options)
    x = np.ones((2, 3), np.float32)
    y, w = sm(x)
    w *= 10                     # the caller's own copy: writing it must not change the model
    y2, w2 = sm(x)
    np.testing.assert_array_equal(y2, w0)
    np.testing.assert_array_equal(w2, w0)
    assert w2 is not w and w2.flags.writeable
    # kernels see the parameters read-only: a write into one is an error, not a changed model
    (const,) = [v for slot, v in sm.constants.items() if isinstance(v, np.ndarray) and v.shape == (2, 3)]
    assert not const.flags.writeable
    assert model.graph.nodes[0].attrs["value"].flags.writeable   # the model's own array is untouched


LIST_IN = """graph(%xs : Tensor[], %d : Dict(str, Tensor)):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %k : str = prim::Constant[value="w"]()
  %s : Tensor = aten::stack(%xs, %zero)
  %w : Tensor = aten::__getitem__(%d, %k)
  %y : Tensor = aten::mul(%s, %w)
  return (%y)
"""


def test_list_and_dict_inputs_on_repeated_runs(options):
    """A ``List[Tensor]`` / ``Dict[str, Tensor]`` input: the entry point's fast signature check
    compared the containers with ``!=`` ("truth value of an array is ambiguous" on the second run);
    they are keyed by structure (shapes, dtypes) now, so new inner shapes get their own plan."""
    sm = srcore.StaticModule(Model.from_graph(parse_graph(LIST_IN)), options=options)
    rng = np.random.default_rng(4)
    for n in (3, 3, 5, 3):
        xs = [rng.standard_normal(n).astype(np.float32) for _ in range(2)]
        w = rng.standard_normal(n).astype(np.float32)
        for _ in range(2):
            np.testing.assert_allclose(sm(xs, {"w": w}), np.stack(xs) * w, rtol=1e-6)


def test_the_one_declared_signature_is_prepared_at_load_not_in_the_first_call(options, monkeypatch):
    # every input of fixed shape and dtype: its shapes are propagated and its buffers planned when
    # the module and the runtime are made, so the first call costs what any other does
    static = Model.from_graph(parse_graph(CHAIN.replace("Float(batch, 64)", "Float(3, 64)")))
    sm = srcore.StaticModule(static, options=options)
    assert len(sm.declared_inputs) == 1 and sm.declared_inputs[0].shape == (3, 64)
    rt = sm.runtime()

    def no_propagation(*a):
        raise AssertionError("shape propagation in a call")
    monkeypatch.setattr(sm, "_compute_signature", no_propagation)
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    for _ in range(3):
        np.testing.assert_allclose(rt(x), chain_ref(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(srcore.SrcoreInputError, match="dimension 0 must be 3"):
        rt(np.zeros((4, 64), np.float32))
    # a symbolic dim: nothing to prepare before the first call
    assert srcore.StaticModule(Model.from_graph(parse_graph(CHAIN)), options=options).declared_inputs is None


def test_a_static_model_s_first_call_on_the_loading_thread_builds_nothing(options, monkeypatch):
    """The loading thread's runtime (entry point, arenas, buffers) is made at load for a model of
    static shapes: ``sm(x)`` then neither creates a runtime nor plans; another thread builds its own."""
    from srcore.runtime import static_runtime

    static = Model.from_graph(parse_graph(CHAIN.replace("Float(batch, 64)", "Float(3, 64)")))
    sm = srcore.StaticModule(static, options=options)
    loaded = sm._local.rt
    made = []
    monkeypatch.setattr(static_runtime.StaticRuntime, "_prepare", lambda *a: made.append("prepare"))
    monkeypatch.setattr(sm, "plan_for", lambda *a: made.append("plan"))
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    np.testing.assert_allclose(sm(x), chain_ref(x), rtol=1e-5, atol=1e-6)
    assert sm.runtime() is loaded and made == []
    monkeypatch.undo()
    other = []
    thread = threading.Thread(target=lambda: other.append((sm.runtime(), sm(x))))
    thread.start()
    thread.join()
    assert other[0][0] is not loaded
    np.testing.assert_allclose(other[0][1], chain_ref(x), rtol=1e-5, atol=1e-6)
    # a symbolic dim: the runtime waits for the first call
    assert getattr(srcore.StaticModule(Model.from_graph(parse_graph(CHAIN)), options=options)._local, "rt",
                   None) is None


def test_a_static_model_s_arena_is_planned_written_and_warmed_at_load(options, monkeypatch):
    """No call pays for a build: with static shapes the arena's slab exists at load (the first call
    allocates none), and one warm-up run on zeros has gone through the kernels (Options.warm_up)."""
    from srcore.runtime import arena

    static = Model.from_graph(parse_graph(CHAIN.replace("Float(batch, 64)", "Float(3, 64)")))
    sm = srcore.StaticModule(static, options=options)
    rt = sm.runtime()
    assert rt.arena_bytes >= 3 * 64 * 4 and "warm_up" in sm.load_stages
    slabs = [a.slab for a in rt.arenas]

    def no_slab(*a):
        raise AssertionError("an arena slab allocated in a call")
    monkeypatch.setattr(arena, "aligned_slab", no_slab)
    x = np.random.default_rng(2).standard_normal((3, 64)).astype(np.float32)
    for _ in range(2):
        np.testing.assert_allclose(rt(x), chain_ref(x), rtol=1e-5, atol=1e-6)
    assert all(a.slab is s for a, s in zip(rt.arenas, slabs))
    monkeypatch.undo()
    cold = srcore.StaticModule(static, options=attrs.evolve(options, warm_up=False))
    assert "warm_up" not in cold.load_stages
    np.testing.assert_allclose(cold(x), chain_ref(x), rtol=1e-5, atol=1e-6)


WHILE = """graph(%x : Float(3, 4)):
  %true : bool = prim::Constant[value=1]()
  %big : int = prim::Constant[value=1000]()
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %y : Tensor = prim::Loop(%big, %true, %x)
    block0(%i : int, %c : Tensor):
      %s : Tensor = aten::sum(%c, %none)
      %neg : Tensor = aten::lt(%s, %zero)
      %cond : bool = aten::Bool(%neg)
      %r : Tensor = aten::relu(%c)
      -> (%cond, %r)
  return (%y)
"""
RAISES = """graph(%x : Float(3, 4)):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %msg : str = prim::Constant[value="positive"]()
  %s : Tensor = aten::sum(%x, %none)
  %pos : Tensor = aten::gt(%s, %zero)
  %c : bool = aten::Bool(%pos)
   = prim::If(%c)
    block0():
       = prim::RaiseException(%msg, %none)
      -> ()
    block1():
      -> ()
  %y : Tensor = aten::relu(%x)
  return (%y)
"""
FOR = WHILE.replace("-> (%cond, %r)", "-> (%true, %r)")


@pytest.mark.parametrize("text,warmed", [(WHILE, False), (RAISES, False), (FOR, True)],
                         ids=["while_loop", "raises", "for_loop"])
def test_the_warm_up_skips_graphs_whose_run_is_observable_or_may_not_end(options, text, warmed):
    sm = srcore.StaticModule(Model.from_graph(parse_graph(text)), options=options)
    assert ("warm_up" in sm.load_stages) is warmed
    x = -np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(sm(x), np.zeros((3, 4), np.float32))
