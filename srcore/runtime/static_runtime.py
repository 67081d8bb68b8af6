"""``StaticRuntime``: one per thread; owns the value array, the arenas and its block runners.

A runtime binds and checks the inputs, keys the run by its input signature,
gets the planned buffers of that signature from its arenas (once per
signature), and runs the top block with the module's executor.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .._attrs_code_cache import compile_exec
from ..errors import KernelError, SrcoreError
from ..ir.types import ListType, lazy_type
from .arena import BlockArena, aligned_slab, make_view
from .inputs import (as_arrays, bind, check, flatten_structured, has_foreign_byte_order,
                     input_types, is_scalar_spec, to_native_byte_order)
from .static_module import _nbytes

if TYPE_CHECKING:
    import concurrent.futures

_POOL: concurrent.futures.ThreadPoolExecutor | None = None


def _shared_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        import concurrent.futures  # here: only async runs need it (a few ms of cold start)

        _POOL = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="srcore-async")
    return _POOL


def _default_launch(fn: Callable, args: tuple) -> concurrent.futures.Future:
    return _shared_pool().submit(fn, *args)


class StaticRuntime:
    """Runs a :class:`StaticModule`; not thread-safe (use one per thread, or ``clone()``)."""

    def __init__(self, module):
        self.module = module
        self.arenas = [BlockArena(module, b.index) for b in module.blocks]
        self._key: Any = None
        self._tensor_inputs = tuple(not is_scalar_spec(s) for s in module.input_specs)
        # torch's Python API hands a scripted model copies of its list/dict inputs: a model that writes
        # into one (``d[1] = a``) leaves the caller's unchanged, so srcore copies them too
        self._container_inputs = tuple(i for i, s in enumerate(module.input_specs)
                                       if is_scalar_spec(s) and isinstance(s.type, (ListType, lazy_type("DictType"))))
        self._n_inputs = len(module.input_specs)
        # a torch.export model with list/dict arguments: calls as torch takes them are flattened
        # (the structure parsed once per module, not per runtime)
        self._input_tree = module.input_tree
        self._single = len(module.top.outputs) == 1
        self._launch = _default_launch
        self._out_layouts: list = []
        self._buffers: list[dict[int, np.ndarray]] = [{} for _ in module.blocks]
        gen = module.codegen
        if gen is not None:
            self._fns = gen.instantiate(self._launch_proxy)
            self._top = self._fns[0]
            self._runner = None
        else:
            from .interpreter import BlockRunner  # the interpreter executor only (codegen is the default)

            self._fns = None
            self._runner = BlockRunner(module, self)
            self._top = self._runner.run_top
        self._has_outputs_arena = bool(gen.output_slots) if gen is not None else module.options.manage_output_tensors
        self._output_slots = gen.output_slots if gen is not None else self._runner.output_slots

        self._arm_entry()
        if module.declared_inputs is not None:
            # the one signature the model accepts: its buffers now, so no call pays for planning
            self._prepare(self._key_of(module.declared_inputs), module.declared_inputs)

    def _arm_entry(self) -> None:
        """Generate the entry point for the current top block and make it this runtime's ``__call__``.

        Python looks ``__call__`` up on the type, and a forwarding method would cost a frame per
        call, so each runtime gets a class of its own whose ``__call__`` is the generated function.
        """
        self._fast_fn = _make_fast_call(self)
        self._armed = False   # its signature checks match nothing until ``_arm`` sets them
        cls = type(self)
        if cls.__dict__.get("_own_entry"):
            cls.__call__ = self._fast_fn
            return
        self.__class__ = type(cls.__name__, (cls,), {
            "__call__": self._fast_fn, "_own_entry": True, "__module__": cls.__module__,
            "__qualname__": cls.__qualname__, "__doc__": cls.__doc__})

    # -- public API ---------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        """Run the model: numpy arrays in, an array (or a tuple of them) out."""
        return self._fast_fn(self, *args, **kwargs)

    run = __call__

    def _call_slow(self, args, kwargs):
        """Bind, convert, key, and (for a new signature) check and plan; then run."""
        if self._input_tree is not None:
            args = tuple(flatten_structured(self._input_tree, self.module.input_names, args, kwargs))
        elif kwargs or len(args) != self._n_inputs:
            args = tuple(bind(self.module.input_names, args, kwargs))
        if any(t and type(v) is not np.ndarray for v, t in zip(args, self._tensor_inputs)):
            args = tuple(as_arrays(list(args), self.module.input_specs))
        if has_foreign_byte_order(args, self._tensor_inputs):
            args = to_native_byte_order(args, self._tensor_inputs)
        if self._container_inputs:
            args = tuple(_shallow_copy(v) if i in self._container_inputs else v for i, v in enumerate(args))
        key = self._key_of(args)
        if key != self._key:
            self._prepare(key, args)
        if self._has_outputs_arena:
            args = (*args, self._new_outputs())
        try:
            out = self._top(*args)
        except KernelError as exc:
            if exc.node is not None:
                raise
            raise self._kernel_error(exc) from exc
        except SrcoreError:
            raise
        except Exception as exc:
            raise self._kernel_error(exc) from exc
        if self.module._cache_entry is not None:   # a first call has returned: the prepared-model cache's turn
            self.module._keep_prepared()
        if not self._armed and self._key == key and self.module._cache_entry is None:
            # prepared, only kept off the fast path for the hand-off above (or a new entry point): the next call
            # with this signature takes it, without preparing it again
            self._arm(args)
        return out[0] if self._single else out

    def clone(self) -> "StaticRuntime":
        """A new runtime of the same module (for another thread)."""
        return StaticRuntime(self.module)

    def run_async(self, *args, launcher: Callable[[Callable[[], Any]], Any] | None = None, **kwargs):
        """Run on a task launcher (the seed's runAsync); returns a ``concurrent.futures.Future``.

        ``launcher(task)`` must run the no-argument callable ``task`` somewhere (a thread pool's
        ``submit``, an event loop's executor...); ``prim::fork`` nodes inside the model use the same
        launcher. Without one, srcore's shared thread pool runs it.
        """
        if launcher is None:
            return _shared_pool().submit(self._run_with_launch, None, args, kwargs)
        import concurrent.futures

        fut: concurrent.futures.Future = concurrent.futures.Future()

        def task():
            try:
                fut.set_result(self._run_with_launch(launcher, args, kwargs))
            except BaseException as exc:  # the caller sees it through the future
                fut.set_exception(exc)

        launcher(task)
        return fut

    def _run_with_launch(self, launcher, args, kwargs):
        if launcher is None:
            return self(*args, **kwargs)

        def launch(fn, fargs):
            import concurrent.futures

            f: concurrent.futures.Future = concurrent.futures.Future()

            def task():
                try:
                    f.set_result(fn(*fargs))
                except BaseException as exc:
                    f.set_exception(exc)

            launcher(task)
            return f

        saved = self._launch
        self._launch = launch
        try:
            return self(*args, **kwargs)
        finally:
            self._launch = saved

    def _launch_proxy(self, fn, args):
        return self._launch(fn, args)

    # -- signatures and memory ------------------------------------------------------------------
    def bind(self, args, kwargs) -> list:
        values = (bind(self.module.input_names, args, kwargs) if self._input_tree is None
                  else flatten_structured(self._input_tree, self.module.input_names, args, kwargs))
        return as_arrays(values, self.module.input_specs)

    def _key_of(self, values) -> tuple:
        """The signature key of a run: (shape, dtype) of tensor inputs, the value of the others."""
        return tuple(((v.shape, v.dtype.num) if type(v) is np.ndarray else (v.shape, v.dtype.num, _qdtype(v)))
                     if is_tensor else _value_key(v) for v, is_tensor in zip(values, self._tensor_inputs))

    def signature_of(self, values) -> tuple[Any, list]:
        """The signature key and the concrete input types of a run's (bound) inputs."""
        return self._key_of(values), input_types(values, self.module.input_specs)

    def _prepare(self, key, values) -> None:
        m = self.module
        if m.options.check_inputs:
            check(values, m.input_specs)
        info = m.signature_info(key, input_types(values, m.input_specs))
        pending = False
        for arena, bsig in zip(self.arenas, info.blocks):
            bufs = arena.buffers(key, bsig)
            self._buffers[arena.block] = bufs
            pending = pending or arena.pending is not None
        if self._runner is not None:
            self._runner.bind_buffers(self._buffers)
        if self._fns is not None:
            for fn, gb in zip(self._fns, m.codegen.blocks):
                if gb.buffers:
                    fn.__kwdefaults__ = {f"_b{s}": self._buffers[b].get(s) for b, s in gb.buffers}
        self._out_layouts = [info.outputs.get(s) for s in self._output_slots]
        # a pending slot growth (standard resizing) takes effect on the next run; a prepared-cache entry still to
        # write keeps calls on the slow path, which hands it to its writer after the first call (and then arms
        # the fast path for this signature: ``_call_slow``)
        self._key = None if pending else key
        self._arm(values if self._key is not None and m._cache_entry is None else None)

    def _arm(self, values) -> None:
        """Set the entry point's signature checks to the inputs ``values`` (None: no call takes the fast path)."""
        defaults = {}
        for i, (v, is_tensor) in enumerate(zip(values or (None,) * self._n_inputs, self._tensor_inputs)):
            if values is None:
                defaults[f"_s{i}"], defaults[f"_d{i}"] = _NEVER, _NEVER
            elif is_tensor and type(v) is np.ndarray:
                defaults[f"_s{i}"], defaults[f"_d{i}"] = v.shape, v.dtype
            elif is_tensor:  # a QuantizedArray: the slow path keys it by its quantized dtype too
                defaults[f"_s{i}"], defaults[f"_d{i}"] = _NEVER, _NEVER
            elif isinstance(v, (list, tuple, dict)):
                # `==` on containers of arrays is ambiguous: the slow path keys them by structure
                defaults[f"_s{i}"], defaults[f"_d{i}"] = _NEVER, _NEVER
            else:
                defaults[f"_s{i}"], defaults[f"_d{i}"] = v, type(v)
        if defaults:
            self._fast_fn.__kwdefaults__ = defaults
        self._armed = values is not None

    def _new_outputs(self) -> tuple:
        """Views for the managed output tensors of this run, in one fresh slab."""
        from ..memory.planner import align

        total = sum(align(_nbytes(*lay)) for lay in self._out_layouts if lay is not None)
        slab = aligned_slab(total)
        views, off = [], 0
        for lay in self._out_layouts:
            if lay is None:
                views.append(None)
                continue
            views.append(make_view(slab, off, lay[0], lay[1]))
            off += align(_nbytes(*lay))
        return tuple(views)

    @property
    def arena_bytes(self) -> int:
        """Bytes held by this runtime's arenas (all blocks)."""
        return sum(a.nbytes for a in self.arenas)

    # -- errors ---------------------------------------------------------------------------------
    def _kernel_error(self, exc: BaseException) -> KernelError:
        pn = self._failed_node(exc)
        if pn is None:
            return KernelError(f"the model failed: {type(exc).__name__}: {exc}")
        fn = pn.fn
        how = f" ({fn.op} on {fn.backend}, {fn.kind} kernel from {fn.plugin})" if fn is not None else ""
        err = KernelError(f"node failed{how}:\n  {pn.describe()}\n{type(exc).__name__}: {exc}")
        err.node = pn.node
        return err

    def _failed_node(self, exc: BaseException):
        if self._runner is not None:
            return self._runner.failed_node
        gen = self.module.codegen
        by_file = {b.code.co_filename: b for b in gen.blocks}
        tb = exc.__traceback__
        found = None
        while tb is not None:
            b = by_file.get(tb.tb_frame.f_code.co_filename)
            if b is not None:
                found = b.line_nodes.get(tb.tb_lineno, found)
            tb = tb.tb_next
        return found


class _Never:
    """Equal to nothing: a signature default that sends every call down the slow path."""

    def __eq__(self, other):
        return False

    def __ne__(self, other):
        return True

    __hash__ = object.__hash__


_NEVER = _Never()


def _qdtype(v) -> str | None:
    return getattr(v, "qdtype", None)


def _value_key(v):
    """The signature key of a non-tensor input: numbers as they are; lists, tuples and dicts (e.g.
    a ``List[Tensor]`` or ``Dict[str, Tensor]`` input) by structure, with each array's shape and
    dtype (their values do not change the plan)."""
    if isinstance(v, (int, float, bool, type(None), str)):
        return v
    if isinstance(v, np.ndarray):
        return ("array", v.shape, v.dtype.num)
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_value_key(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((k, _value_key(x)) for k, x in v.items()))
    return repr(v)


_MISSING = object()  # an input not passed positionally


def _shallow_copy(v):
    """A new list/dict holding the same elements (what torch's argument conversion gives a model)."""
    if isinstance(v, dict):
        return dict(v)
    if isinstance(v, list):
        return list(v)
    return v


def _make_fast_call(rt: "StaticRuntime"):
    """A generated entry point ``(self, *inputs)``: checks the signature of the last run inline,
    then calls the top block.

    Anything unusual (keywords, another count, a new signature, non-array tensors) goes to
    ``rt._call_slow``, which prepares the new signature and re-arms these checks.
    """
    n = rt._n_inputs
    names = [f"a{i}" for i in range(n)]
    checks = []
    for i, is_tensor in enumerate(rt._tensor_inputs):
        if i in rt._container_inputs:
            checks.append("True")  # copied on every call by the slow path (see StaticRuntime.__init__)
        elif is_tensor:
            checks.append(f"type(a{i}) is not _nd or a{i}.shape != _s{i} or a{i}.dtype is not _d{i}")
        else:
            # an array given for a non-tensor input (a Tensor? graph input) takes the slow path: `!=` on
            # arrays is elementwise
            checks.append(f"type(a{i}) is not _d{i} or _d{i} is _nd or a{i} != _s{i}")
    params = "".join(f"{a}=_MISSING, " for a in names)
    kw = "".join(f", _s{i}=_NEVER, _d{i}=_NEVER" for i in range(n))
    call_args = ", ".join(names + (["_outs()"] if rt._has_outputs_arena else []))
    # inputs are positional-only parameters with a default, so any call reaches the body;
    # a missing one (fewer positional arguments) goes to the slow path, which reports it
    missing = "".join(f" or {a} is _MISSING" for a in names)
    given = f"tuple(a for a in ({', '.join(names)}{',' if n == 1 else ''}) if a is not _MISSING) + rest"
    lines = [f"def __call__(self, {params}/, *rest{kw}, **kwargs):",
             f"    if rest or kwargs{missing}:",
             f"        return _slow({given if n else 'rest'}, kwargs)"]
    if n:
        lines += [f"    if {' or '.join(checks)}:", f"        return _slow(({', '.join(names)},), kwargs)"]
    lines += ["    try:",
              f"        out = _top({call_args})",
              "    except _KernelError as exc:",   # raised by a kernel itself: add the node
              "        if exc.node is not None:",
              "            raise",
              "        raise _wrap(exc) from exc",
              "    except _SrcoreError:",
              "        raise",
              "    except Exception as exc:",
              "        raise _wrap(exc) from exc",
              f"    return {'out[0]' if rt._single else 'out'}"]
    env = {"_nd": np.ndarray, "_slow": rt._call_slow, "_top": rt._top, "_outs": rt._new_outputs,
           "_SrcoreError": SrcoreError, "_KernelError": KernelError, "_wrap": rt._kernel_error, "_NEVER": _NEVER, "_MISSING": _MISSING}
    exec(compile_exec("\n".join(lines) + "\n", "<srcore-entry>"), env)   # cached by its text
    return env["__call__"]
