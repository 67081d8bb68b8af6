"""Golden before/after IR tests: tests/golden/passes/<pass>/<case>.ir.

Each file holds the graph before the pass, a line ``# ---- after ----``, and
the expected graph after it (hand-written; compared after canonical printing).
Parameters (``prim::Constant[param="w"]``) get deterministic random data of
their declared shape, so passes that look at tensor values (fold_bn) can run.
"""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from srcore.ir import parse_graph, print_graph
from srcore.ir.types import TensorType
from srcore.ir.verify import verify
from srcore.passes import (eliminate_common_subexpressions, eliminate_dead_code, fold_batch_norm,
                           fold_constants, functionalize_inplace, fuse_ops, inline_calls, inline_constant_ifs,
                           merge_parallel_convs, peephole, prepare_for_static_runtime, remove_training_ops, simplify_loops,
                           slice_unpacked_splits, unroll_loops)

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

GOLDEN = Path(__file__).parent / "golden" / "passes"
SEPARATOR = "# ---- after ----"

PASSES = {
    "dce": eliminate_dead_code,
    "constant_fold": fold_constants,
    "peephole": peephole,
    "cse": eliminate_common_subexpressions,
    "inline": lambda g: inline_calls(g) | inline_constant_ifs(g),
    "unroll": unroll_loops,
    "loops": simplify_loops,
    "training_ops": remove_training_ops,
    "fold_bn": fold_batch_norm,
    "merge_convs": merge_parallel_convs,
    "functionalize": functionalize_inplace,
    "split_unpack": slice_unpacked_splits,
    "fuse": fuse_ops,
    "prepare": None,  # prepare_for_static_runtime: returns a new graph
}

CASES = sorted(GOLDEN.glob("*/*.ir"))


def _params(text: str) -> dict[str, np.ndarray]:
    g = parse_graph(text)
    out = {}
    for n in g.all_nodes():
        name = n.attrs.get("param")
        if n.kind == "prim::Constant" and name is not None:
            t = n.output.type
            assert isinstance(t, TensorType) and t.is_static, f"param {name} needs a static type"
            rng = np.random.default_rng(zlib.crc32(name.encode()))
            data = rng.standard_normal(t.shape)
            if name.endswith("running_var"):
                data = np.abs(data) + 0.5
            out[name] = data.astype(t.dtype)
    return out


def load_case(path: Path):
    before, after = path.read_text().split(SEPARATOR)
    params = _params(before)
    return parse_graph(before, params or None, filename=str(path)), after


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_golden(path: Path):
    graph, expected = load_case(path)
    verify(graph)
    fn = PASSES[path.parent.name]
    if fn is None:
        graph = prepare_for_static_runtime(graph, verify=True)
    else:
        fn(graph)
    verify(graph)
    assert print_graph(graph) == print_graph(parse_graph(expected))


def test_every_pass_has_golden_cases():
    have = {p.parent.name for p in CASES}
    assert have == set(PASSES), f"passes without golden cases: {sorted(set(PASSES) - have)}"


# -- robustness: the pipeline runs (and verifies) on every golden torch graph of the IR tests -------
TORCH_GRAPHS = sorted((Path(__file__).parent / "golden" / "ir").glob("*.txt"))


@pytest.mark.parametrize("path", TORCH_GRAPHS, ids=[p.stem for p in TORCH_GRAPHS])
def test_prepare_runs_on_torch_graphs(path: Path):
    from srcore.errors import GraphParseError

    try:
        graph = parse_graph(path.read_text(), filename=str(path))
    except GraphParseError as exc:  # the IR text tests own these files
        pytest.skip(f"does not parse: {exc}")
    text = print_graph(graph)
    prepared = prepare_for_static_runtime(graph, verify=True)
    assert print_graph(graph) == text
    n = lambda g: sum(1 for x in g.all_nodes() if x.kind != "prim::Constant")  # noqa: E731
    assert n(prepared) <= n(graph)
