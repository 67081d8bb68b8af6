"""benchmarks.thread_share: per node, the process's CPU time against the calling thread's."""
from __future__ import annotations

import numpy as np

import srcore
from _shared import pointwise_chain
from benchmarks.thread_share import node_times, report
from srcore.ir.parser import parse_graph
from srcore.model import Model


def test_every_node_is_reported_and_a_caller_only_run_has_par_near_one():
    sm = srcore.StaticModule(Model.from_graph(parse_graph(pointwise_chain(64))))
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    rows = node_times(sm, (x,), calls=5, warmup=1)
    assert len(rows) == sum(len(b.nodes) for b in sm.blocks) > 0
    for wall, proc, caller, op, _ in rows:
        assert wall >= 0 and proc >= 0 and caller >= 0 and op
    text = report(rows)
    assert text.startswith("TOTAL wall") and " par " in text


def test_report_sums_per_op_and_says_how_many_threads_a_node_kept_busy():
    """par = process CPU / caller CPU: 2.00 for a node whose work half ran on a second thread."""
    rows = [(10.0, 20.0, 10.0, "aten::linear", "k1"), (4.0, 6.0, 3.0, "aten::linear", "k2"),
            (5.0, 5.0, 5.0, "aten::add", "k3")]
    lines = report(rows).splitlines()
    assert lines[0] == "TOTAL wall 19.00 ms  process cpu 31.00  caller cpu 18.00"
    assert lines[1].startswith("aten::linear") and "wall   14.000" in lines[1] and "par 2.00 x2" in lines[1]
    assert lines[2].startswith("aten::add") and "par 1.00 x1" in lines[2]
