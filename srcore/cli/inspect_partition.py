"""``srcore inspect MODEL --partition BACKEND``: engine segments and per-node fallback."""
from __future__ import annotations

from html import escape


def partitioned_module(ctx):
    """A StaticModule whose backend list starts with ``--partition``'s backend (cached on ctx)."""
    module = getattr(ctx, "_partitioned", None)
    if module is None:
        backend = getattr(ctx.args, "section_partition", None)
        if not backend:
            module = ctx.module
        else:
            from ..runtime.options import DEFAULT_BACKENDS
            from ._common import make_module

            rest = [b for b in (ctx.args.backends or DEFAULT_BACKENDS) if b != backend]
            ctx.args.backends, saved = [backend, *rest], ctx.args.backends
            try:
                module = make_module(ctx.args, ctx.model)
            finally:
                ctx.args.backends = saved
        ctx._partitioned = module
        shapes = _input_shapes(getattr(ctx.args, "inputs", None))
        if shapes and module.partition is not None:
            module.warmup(shapes)   # the engines' plans (layers, tactics) for these shapes
    return module


def _input_shapes(items) -> dict:
    """``-i NAME=FILE.npy`` (its shape) or ``-i NAME=1x3x64x64`` as ``{name: shape}``."""
    import os

    from ..errors import SrcoreInputError
    from ..runtime.engines import parse_shape

    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SrcoreInputError(f"-i {item!r}: expected NAME=FILE.npy or NAME=SHAPE (1x3x64x64)")
        if value.endswith(".npy"):
            import numpy as np

            if not os.path.exists(value):
                raise SrcoreInputError(f"-i {name}: {value}: no such file")
            out[name] = np.load(value, mmap_mode="r", allow_pickle=False).shape
        else:
            out[name] = parse_shape(value, f"-i {name}")
    return out


def render_partition(ctx) -> str:
    from ..errors import SrcoreError

    module = partitioned_module(ctx)
    backends = module.options.backends
    builders = module.plugin_manager.registry.engine_builders
    if not any(b in builders for b in backends):
        known = ", ".join(sorted(builders)) or "none installed"
        exc = SrcoreError(f"--partition {backends[0]}: no engine builder for that backend "
                          f"(engine backends: {known})")
        exc.hint = "--partition takes an engine backend; --dispatch shows the kernels of per-node backends"
        raise exc
    head = f"== partition (backends: {', '.join(backends)}; load {module.setup_time * 1e3:.1f} ms)"
    return head + "\n" + module.partition.format()


def partition_html(ctx) -> str:
    module = partitioned_module(ctx)
    backends = module.options.backends
    if module.partition is None:
        return (f"<p>No engine backend among {escape(', '.join(backends))}: every node runs on its own "
                f"kernel (<code>--partition BACKEND</code> partitions for an engine backend).</p>")
    return (f"<p>Backends, highest priority first: {escape(', '.join(backends))}.</p>"
            f"<pre>{escape(module.partition.format())}</pre>")


def partition_json(ctx) -> dict:
    """``--partition`` for ``--format json``: backends, segments and the nodes left outside engines."""
    render_partition(ctx)  # the same checks (an engine backend) as the text section
    module = partitioned_module(ctx)
    report = module.partition
    segments = [{"name": s.name, "backend": s.backend, "ops": list(s.ops), "source": s.source, "status": s.status,
                 "reason": s.reason, "build_seconds": s.build_seconds, "description": s.description}
                for s in report.segments]
    refused = [{"backend": r.backend, "node": r.node, "source": r.source, "reason": r.reason}
               for r in report.refused]
    return {"backends": list(module.options.backends), "segments": segments, "refused": refused}
