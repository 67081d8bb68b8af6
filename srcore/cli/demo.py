"""``srcore demo``: load every plugin and print a short report of what is available."""
from __future__ import annotations

from collections import Counter

NAME = "demo"
HELP = "load all plugins and show what srcore can run (a smoke test of the installation)"


def configure_parser(p) -> None:
    pass


def run(args) -> int:
    from .. import __version__
    from ..plugin.manager import get_plugin_manager

    pm = get_plugin_manager()
    reg = pm.registry
    ms = {k: v * 1e3 for k, v in pm.timings.items()}
    print(f"srcore {__version__}: plugins discovered in {ms.get('load', 0):.0f} ms, "
          f"registry built in {ms.get('registry', 0):.0f} ms")
    for r in pm.reports:
        extra = f" ({r.error})" if r.error else (f" ({len(r.errors)} rejected records)" if r.errors else "")
        print(f"  plugin {r.name:<10} {r.dist or '-'} {r.version or ''}: {r.status}{extra}")
    print(f"  {len(reg.declared)} ops declared, {len(reg.kernel_table)} kernels, "
          f"backends: {', '.join(sorted(reg.backends)) or 'none'}")
    per_backend = Counter(k.backend for k in reg.kernel_table)
    for backend, n in sorted(per_backend.items()):
        ops = {k.op for k in reg.kernel_table if k.backend == backend}
        print(f"    {backend:<14} {n} kernels for {len(ops)} ops")
    if reg.dtypes:
        print(f"  extra dtypes: {', '.join(sorted(reg.dtypes))}")
    if reg.engine_builders:
        print(f"  engine builders: {', '.join(sorted(reg.engine_builders))}")
    ok = _run_tiny_model(pm)
    failed = [r for r in pm.reports if r.status == "failed"]
    return 1 if failed or not ok else 0


TINY = """
graph(%x : Float(4, 8), %w : Float(8, 3)):
  %one : int = prim::Constant[value=1]()
  %h : Float(4, 3) = aten::matmul(%x, %w)
  %r : Float(4, 3) = aten::relu(%h)
  %y : Float(4, 3) = aten::add(%r, %h, %one)
  return (%y)
"""


def _run_tiny_model(pm) -> bool:
    """Build and run a 3-op graph on backend cpu, checked against numpy."""
    import numpy as np

    import srcore

    try:
        sm = srcore.StaticModule(srcore.parse_graph(TINY), backends=("cpu",), plugin_manager=pm)
    except srcore.SrcoreError as exc:  # e.g. no cpu backend installed: say so, exit 1
        print(f"  model: cannot load the demo model: {type(exc).__name__}: {exc}")
        return False
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    got = sm(x, w)
    expected = np.maximum(x @ w, 0) + x @ w
    err = float(np.max(np.abs(got - expected)))
    print(f"  model: matmul -> relu -> add on cpu, {1e3 * sm.setup_time:.0f} ms to load, "
          f"max |error| vs numpy {err:.1e}")
    return err < 1e-4
