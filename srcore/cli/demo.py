"""``srcore demo``: the installed plugins, then a real model: a digits classifier run through srcore.

The model is ``examples/digits/digits.srm`` (a small CNN trained on scikit-learn's
8x8 digits by ``examples/digits/train.py``), with its held-out split in
``digits_test.npz`` beside it, so the demo needs neither scikit-learn nor torch.
It prints accuracy on the held-out split (one batch run and one run per sample,
which must agree) and latency of both executors; with torch installed, torch
eager's latency on the same weights (``digits_torch.npz`` + ``net.py``) beside it.
"""
from __future__ import annotations

import contextlib

import importlib.util
import os
from collections import Counter
from pathlib import Path

from ..errors import SrcoreError

NAME = "demo"
HELP = "show the installed plugins, then run a digits classifier: held-out accuracy and latency (vs torch)"

MODEL_FILE = "digits.srm"
MIN_ACCURACY = 0.9


def configure_parser(p) -> None:
    p.add_argument("--model", metavar="MODEL.srm", help="the model to run (default: the shipped "
                   "examples/digits/digits.srm); its held-out split is MODEL_test.npz beside it")
    p.add_argument("--data", metavar="FILE.npz", help="held-out split with arrays x and y (default: beside MODEL)")
    from .flags import positive_int

    p.add_argument("--rounds", type=positive_int, default=3, help="timed rounds per latency figure (default 3)")
    p.add_argument("--runs", type=positive_int, default=None, help="calls per round (default: ~0.2 s worth)")
    p.add_argument("--no-torch", action="store_true", help="do not time torch even if it is installed")
    p.add_argument("--quantized", action="store_true", help="also quantize the model (srcore.quantize) and show "
                   "int8 beside float: accuracy, file size, latency")
    p.add_argument("--calibration", metavar="FILE.npz", help="--quantized: calibration samples (default: "
                   "MODEL_calib.npz beside MODEL)")


def default_model_path() -> Path:
    """The shipped digits model: in the source checkout srcore runs from, else under the working directory."""
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        p = root / "examples" / "digits" / MODEL_FILE
        if p.exists():
            return p
    raise SrcoreError(f"cannot find examples/digits/{MODEL_FILE} (looked beside the srcore package and under "
                      f"{Path.cwd()}); run the demo from a srcore checkout or pass --model PATH")


def run(args) -> int:
    from ..plugin.manager import get_plugin_manager

    pm = get_plugin_manager()
    plugins_ok = _report_plugins(pm)
    if not _run_tiny_model(pm):
        return 1
    print()
    model_ok = _run_digits(pm, args)
    return 0 if plugins_ok and model_ok else 1


def _report_plugins(pm) -> bool:
    from .. import __version__

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
    return not any(r.status == "failed" for r in pm.reports)


TINY = """
graph(%x : Float(4, 8), %w : Float(8, 3)):
  %one : int = prim::Constant[value=1]()
  %h : Float(4, 3) = aten::matmul(%x, %w)
  %r : Float(4, 3) = aten::relu(%h)
  %y : Float(4, 3) = aten::add(%r, %h, %one)
  return (%y)
"""


def _run_tiny_model(pm) -> bool:
    """Self-check: build and run a 3-op graph on backend cpu, checked against numpy."""
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
    print(f"  self-check: matmul -> relu -> add on cpu, {1e3 * sm.setup_time:.0f} ms to load, "
          f"max |error| vs numpy {err:.1e}")
    return err < 1e-4


def _run_digits(pm, args) -> bool:
    import time

    import numpy as np

    import srcore

    from .bench import measure

    path = Path(args.model) if args.model else default_model_path()
    data_path = Path(args.data) if args.data else path.with_name(path.stem + "_test.npz")
    if not data_path.exists():
        raise SrcoreError(f"{data_path}: no such file (the held-out split for {path}); pass --data FILE.npz")
    try:
        with np.load(data_path, allow_pickle=False) as d:
            missing = [k for k in ("x", "y") if k not in d.files]
            if missing:
                exc = SrcoreError(f"{data_path}: no array {' or '.join(missing)} (has {', '.join(d.files) or 'none'})")
                exc.hint = "--data takes an .npz file with arrays x (inputs) and y (labels)"
                raise exc
            x, y = d["x"], d["y"]
    except (OSError, ValueError) as exc:  # not an .npz file, pickled arrays
        raise SrcoreError(f"{data_path}: not a readable .npz file ({exc})") from None

    t0 = time.perf_counter()
    model = srcore.load(path)
    sm = srcore.StaticModule(model, backends=("cpu",), plugin_manager=pm)
    load_ms = (time.perf_counter() - t0) * 1e3
    kernels = Counter(pn.fn.op for b in sm.blocks for pn in b.nodes if pn.fn is not None)
    spec = ", ".join(f"{s.name}: {s.dtype}[{', '.join(map(str, s.shape or ()))}]" for s in model.input_specs)
    nparams = sum(int(a.size) for a in model.params.values())
    print(f"model: {_show(path)} ({os.path.getsize(path) / 1e3:.0f} kB, {nparams} parameters), input {spec}")
    print(f"  loaded in {load_ms:.0f} ms: {sm.num_nodes} nodes after preparation, "
          + ", ".join(f"{op}" + (f" x{n}" if n > 1 else "") for op, n in kernels.items()))

    # accuracy: one batch run, and one run per sample on a second runtime; both must agree
    rt_one = sm.runtime()
    rt_batch = rt_one.clone()
    logits = rt_batch(x)
    singles = np.concatenate([rt_one(x[i:i + 1]) for i in range(len(x))])
    pred = logits.argmax(1)
    agree = bool((singles.argmax(1) == pred).all())
    diff = float(np.abs(singles - logits).max())
    acc = float((pred == y).mean())
    print(f"  held-out accuracy {acc:.4f} ({int((pred == y).sum())}/{len(y)}); batch run and {len(x)} "
          f"single-sample runs {'agree' if agree else 'DISAGREE'} (max |logit difference| {diff:.1e})")

    # latency: best-round median per call, one sample and the whole split
    one, batch = x[:1], x
    rows = []
    with _blas_one_thread() as limited:
        for executor in ("codegen", "interpreter"):
            m = sm if executor == "codegen" else srcore.StaticModule(
                model, options=srcore.Options(executor=executor), backends=("cpu",), plugin_manager=pm)
            r1, rb = m.runtime(), m.runtime().clone()
            rows.append((f"srcore ({executor})", _best(measure(lambda: r1(one), args.rounds, args.runs)),
                         _best(measure(lambda: rb(batch), args.rounds, args.runs))))
        torch_row = None if args.no_torch else _torch_row(path, one, batch, logits, args.rounds, args.runs)
        quantized_ok = True
        if getattr(args, "quantized", False):
            quantized_ok, qrow = _quantized(path, model, x, y, acc, pm, args)
            rows.append(qrow)
    if torch_row is not None:
        rows.append(torch_row)
    if limited:
        note = "; one BLAS/intra-op thread" + (" each" if torch_row is not None else "")
    else:
        note = "; numpy's default BLAS threads" + ("; torch on one thread" if torch_row is not None else "")
    rounds = f"{args.rounds} round{'s' if args.rounds != 1 else ''}"
    print(f"  latency, best-round median per call ({rounds}{note}):")
    print(f"    {'':26s} {'1 sample':>10s} {f'batch of {len(x)}':>14s}")
    for name, t1, tb in rows:
        print(f"    {name:26s} {t1:>10s} {tb:>14s}")
    if torch_row is None and not args.no_torch:
        print("    (torch is not installed: pip install torch==2.13.0 to time it beside srcore)")
    print()
    print(f"next: srcore inspect {_show(path)} --dispatch --memory-plan --codegen")
    return agree and acc >= MIN_ACCURACY and quantized_ok


#: how much held-out accuracy ``srcore demo --quantized`` lets quantization lose
MAX_QUANTIZED_DROP = 0.005


def _quantized(path: Path, model, x, y, acc: float, pm, args):
    """Quantize the model with its calibration samples; print accuracy and size beside float's.
    Returns (accuracy within MAX_QUANTIZED_DROP of float's, latency row)."""
    import tempfile
    import time

    import srcore

    from .bench import measure

    calib = Path(args.calibration) if args.calibration else path.with_name(path.stem + "_calib.npz")
    if not calib.exists():
        exc = SrcoreError(f"{calib}: no such file (calibration samples for {path})")
        exc.hint = "pass --calibration FILE.npz with one array per model input (x)"
        raise exc
    t0 = time.perf_counter()
    qmodel = srcore.quantize(model, str(calib))
    q_ms = (time.perf_counter() - t0) * 1e3
    qsm = srcore.StaticModule(qmodel, plugin_manager=pm)
    qrt = qsm.runtime()
    qacc = float((qrt(x).argmax(1) == y).mean())
    with tempfile.TemporaryDirectory(prefix="srcore-demo-") as tmp:
        qpath = os.path.join(tmp, "q.srm")
        srcore.save(qmodel, qpath)
        qsize = os.path.getsize(qpath)
    size = os.path.getsize(path)
    backends = sorted({pn.fn.backend for b in qsm.blocks for pn in b.nodes if pn.fn is not None})
    drop = acc - qacc
    ok = drop <= MAX_QUANTIZED_DROP
    print(f"  quantized (srcore.quantize, calibrated on {_show(calib)}, {q_ms:.0f} ms; nodes on "
          f"{', '.join(backends)}): held-out accuracy {qacc:.4f} vs float {acc:.4f} "
          f"({'-' if drop >= 0 else '+'}{abs(drop) * 100:.2f} points{'' if ok else ', MORE THAN 0.5'}), "
          f"file {qsize / 1e3:.0f} kB vs {size / 1e3:.0f} kB")
    r1, rb = qsm.runtime(), qsm.runtime().clone()
    row = ("srcore int8 (codegen)", _best(measure(lambda: r1(x[:1]), args.rounds, args.runs)),
           _best(measure(lambda: rb(x), args.rounds, args.runs)))
    return ok, row


@contextlib.contextmanager
def _blas_one_thread():
    """numpy's BLAS on one thread while timing (yields whether it could: needs threadpoolctl), so
    srcore and torch (set to one thread) are compared like with like."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield False
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield True


def _best(res: dict) -> str:
    us = res["best_round_median_us"]
    if us >= 1000:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.0f} us" if us >= 100 else f"{us:.1f} us"


def _show(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return str(path)
    return str(path) if rel.startswith("..") else rel


def _torch_row(path: Path, one, batch, logits, rounds: int, runs: int):
    """Torch eager on the same weights (``<stem>_torch.npz`` and ``net.py`` beside the model), or None."""
    weights, net_py = path.with_name(path.stem + "_torch.npz"), path.with_name("net.py")
    if importlib.util.find_spec("torch") is None or not weights.exists() or not net_py.exists():
        return None
    import numpy as np
    import torch

    from .bench import measure

    spec = importlib.util.spec_from_file_location("_srcore_demo_net", net_py)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net = mod.DigitsNet().eval()
    with np.load(weights, allow_pickle=False) as w:
        net.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    t1, tb = torch.from_numpy(one), torch.from_numpy(batch)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # like srcore's BLAS while timing: compare like with like
    try:
        with torch.inference_mode():
            err = float(np.abs(net(tb).numpy() - logits).max())
            r1 = measure(lambda: net(t1), rounds, runs)
            rb = measure(lambda: net(tb), rounds, runs)
    finally:
        torch.set_num_threads(threads)
    name = f"torch {torch.__version__.split('+')[0]} eager"
    print(f"  torch eager on the same weights: max |logit difference| vs srcore {err:.1e}")
    return name, _best(r1), _best(rb)
