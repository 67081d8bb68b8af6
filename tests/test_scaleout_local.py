"""Scale-out pieces that need no cluster: column mapping, shards, batch jobs on the local engine,
``srcore batch --on local``, and the serving logic (request parsing, batching, isolation of failures)."""
from __future__ import annotations

import io
import json

import jsonschema
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import srcore
from srcore.cli import main
from srcore.cli.output import load_schema
from srcore.scaleout.columns import ColumnInfo, ColumnMap, Rows
from srcore.scaleout.job import BatchJob, LocalEngine, run_job
from srcore.scaleout.shards import read_rows, read_table, scan

import _scaleout as S

pytestmark = pytest.mark.one_pass

A_COLS = ["a0", "a1", "a2", "a3"]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return S.save(S.two_by_two(), tmp_path_factory.mktemp("m") / "two.srm")


def write_parquet(path, a, b, row_group_size=None):
    """``a`` spread over scalar columns a0..a3, ``b`` as a fixed-shape tensor column, an ``id`` column."""
    cols = {"id": pa.array(np.arange(len(a)))}
    cols.update({c: pa.array(a[:, i]) for i, c in enumerate(A_COLS)})
    cols["b"] = pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(b))
    pq.write_table(pa.table(cols), path, row_group_size=row_group_size)
    return str(path)


def write_npz(path, a, b, compressed=False):
    (np.savez_compressed if compressed else np.savez)(path, **{c: a[:, i] for i, c in enumerate(A_COLS)}, b=b)
    return str(path)


# -- the column mapping ---------------------------------------------------------------------------------------
def test_column_map_defaults_to_names_and_rejects_unknown_or_missing_names():
    m = S.two_by_two()
    cm = ColumnMap.build(m)
    assert cm.input_columns == ["a", "b"] and cm.output_columns == ["output0", "output1"]
    assert ColumnMap.build(m, {"a": A_COLS, "b": "bb"}, {"output1": "z"}).output_columns == ["z"]
    assert ColumnMap.build(m, {"a": "x"}).input_columns == ["x", "b"]   # an input not named: its own name
    cases = [({"a": "x", "c": "y"}, None, "no input 'c'"),
             (None, {"nope": "p"}, "no output 'nope'"), (None, {"output0": "p", "output1": "p"}, "named twice"),
             ({"a": "x", "b": ["b0", "b1", 3]}, None, "expected a column name"), (None, {}, "outputs must map")]
    for inputs, outputs, msg in cases:
        with pytest.raises(srcore.SrcoreError, match=msg):
            ColumnMap.build(m, inputs, outputs)


def test_schema_check_names_the_table_and_the_column():
    cm = ColumnMap.build(S.two_by_two(), {"a": A_COLS, "b": "b"})
    ok = {**{c: ColumnInfo("float32", ()) for c in A_COLS}, "b": ColumnInfo("float64", (3,))}
    cm.check_schema(ok, "f.parquet")   # float64 -> float32 is a cast of the same kind
    bad = [({**ok, "b": ColumnInfo("float32", (4,))}, "f.parquet: column 'b' holds values of shape \\(4,\\)"),
           ({**ok, "b": ColumnInfo("float32", (3, 1))}, "rank 2"),
           ({**ok, "a2": ColumnInfo("int64", (2,))}, "must each hold one number"),
           ({k: v for k, v in ok.items() if k != "a1"}, "no column 'a1' for model input 'a'; the columns are"),
           ({**ok, "b": ColumnInfo("string (not numeric)", ())}, "holds string")]
    for columns, msg in bad:
        with pytest.raises(srcore.SrcoreInputError, match=msg):
            cm.check_schema(columns, "f.parquet")
    lk = ColumnMap.build(S.lookup(), {"i": "idx"})
    with pytest.raises(srcore.SrcoreInputError, match="holds float32 values; model input 'i' takes int64"):
        lk.check_schema({"idx": ColumnInfo("float32", ())}, "t")
    with pytest.raises(srcore.SrcoreError, match="output column 'output0' already exists"):
        ColumnMap.build(S.two_by_two()).check_schema({"a": ColumnInfo(None, None), "b": ColumnInfo(None, None),
                                                      "output0": ColumnInfo(None, None)}, "ds", new_columns=True)
    with pytest.raises(srcore.SrcoreError, match="has 4 features but 3 columns"):
        ColumnMap.build(S.two_by_two(), {"a": A_COLS[:3], "b": "b"}).check_schema(ok, "t")


def test_gather_stacks_spread_columns_casts_and_rejects_ragged_rows():
    cm = ColumnMap.build(S.two_by_two(), {"a": A_COLS, "b": "b"})
    a, b = S.data(3)
    batch = {**{c: a[:, i].astype(np.float64) for i, c in enumerate(A_COLS)},
             "b": np.array([r for r in b.astype(np.float64)] + [None], dtype=object)[:3]}
    ga, gb = cm.gather(batch, Rows("t", 0, 3))
    assert ga.dtype == np.float32 and np.array_equal(ga, a) and np.array_equal(gb, b)
    ragged = np.empty(2, dtype=object)
    ragged[:] = [np.zeros(3), np.zeros(2)]
    with pytest.raises(srcore.SrcoreInputError, match="t rows 10-11: column 'b': the rows' values have different"):
        cm.gather({**batch, "b": ragged}, Rows("t", 10, 12))


# -- shards ---------------------------------------------------------------------------------------------------------
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 40), group=st.integers(1, 17), data=st.data())
def test_row_ranges_of_parquet_and_npz_shards_are_the_rows_written(tmp_path, rows, group, data):
    a, b = S.data(rows, seed=rows)
    cube = np.arange(rows * 6, dtype=np.int32).reshape(rows, 3, 2)
    table = pa.table({
        "t": pa.FixedShapeTensorArray.from_numpy_ndarray(cube),
        "f": pa.array(list(cube.reshape(rows, 6)), type=pa.list_(pa.int32(), 6)),
        "l": pa.array([list(map(list, r)) for r in cube], type=pa.list_(pa.list_(pa.int32()))),
        "s": pa.array(a[:, 0])})
    pq.write_table(table, tmp_path / "x.parquet", row_group_size=group)
    pf = scan(str(tmp_path / "x.parquet"))
    assert pf.rows == rows and pf.columns["t"] == ColumnInfo("int32", (3, 2))
    assert pf.columns["f"] == ColumnInfo("int32", (6,)) and pf.columns["l"] == ColumnInfo("int32", (None, None))
    compressed = data.draw(st.booleans())
    nz = scan(write_npz(tmp_path / "x.npz", a, b, compressed))
    assert nz.rows == rows and nz.columns["b"] == ColumnInfo("float32", (3,))
    start = data.draw(st.integers(0, rows - 1))
    stop = data.draw(st.integers(start + 1, rows))
    got = read_rows(pf.path, "parquet", start, stop, ["t", "f", "l", "s"], pf.row_groups)
    assert np.array_equal(got["t"], cube[start:stop]) and np.array_equal(got["l"], cube[start:stop])
    assert np.array_equal(got["f"], cube[start:stop].reshape(-1, 6)) and np.array_equal(got["s"], a[start:stop, 0])
    got = read_rows(nz.path, "npz", start, stop, ["a2", "b"])
    assert np.array_equal(got["a2"], a[start:stop, 2]) and np.array_equal(got["b"], b[start:stop])


def test_reading_a_bad_range_names_the_file_and_rows(tmp_path):
    table = pa.table({"l": pa.array([[1.0, 2.0], [3.0], None, [4.0, 5.0]], type=pa.list_(pa.float32()))})
    pq.write_table(table, tmp_path / "bad.parquet")
    path = str(tmp_path / "bad.parquet")
    assert np.array_equal(read_rows(path, "parquet", 0, 1, ["l"], (4,))["l"], [[1.0, 2.0]])
    with pytest.raises(srcore.SrcoreInputError, match="bad.parquet rows 0-1: column 'l': rows hold lists of different"):
        read_rows(path, "parquet", 0, 2, ["l"], (4,))
    with pytest.raises(srcore.SrcoreInputError, match="bad.parquet rows 2-3: column 'l' has missing"):
        read_rows(path, "parquet", 2, 4, ["l"], (4,))
    np.savez(tmp_path / "uneven.npz", a=np.zeros(3), b=np.zeros(4))
    with pytest.raises(srcore.SrcoreInputError, match="different numbers of rows"):
        scan(str(tmp_path / "uneven.npz"))
    np.savez(tmp_path / "obj.npz", b=np.array([None, 1], dtype=object))
    with pytest.raises(srcore.SrcoreInputError, match="never unpickled"):
        read_rows(str(tmp_path / "obj.npz"), "npz", 0, 1, ["b"])


# -- batch jobs -----------------------------------------------------------------------------------------------------
def test_local_job_matches_the_numpy_reference_in_input_order(model_path, tmp_path):
    parts = [S.data(n, seed=n) for n in (23, 0, 9, 31)]
    files = [write_parquet(tmp_path / "p0.parquet", *parts[0], row_group_size=5),
             write_npz(tmp_path / "p1.npz", *parts[1]), write_npz(tmp_path / "p2.npz", *parts[2], compressed=True),
             write_parquet(tmp_path / "p3.parquet", *parts[3], row_group_size=100)]
    a = np.concatenate([p[0] for p in parts])
    b = np.concatenate([p[1] for p in parts])
    ry, rz = S.two_by_two_reference(a, b)
    for out, fmt in ((tmp_path / "out.parquet", None), (tmp_path / "out.bin", "npz")):
        job = BatchJob.plan(model_path, files, str(out), input_columns={"a": A_COLS, "b": "b"},
                            output_columns={"output0": "pred", "output1": ["z0", "z1", "z2", "z3"]},
                            batch_size=7, output_format=fmt)
        assert [u.stop - u.start for u in job.units if u.shard == 0] == [7, 7, 7, 2]
        report = run_job(job, LocalEngine(3), timeout=60)
        assert report.rows == len(a) == 63 and report.outputs == (str(out),)
        got = read_table(str(out)) if fmt is None else dict(np.load(out))
        assert list(got) == ["pred", "z0", "z1", "z2", "z3"]
        np.testing.assert_allclose(got["pred"], ry, rtol=1e-5, atol=1e-6)
        assert np.array_equal(np.stack([got[f"z{i}"] for i in range(4)], 1), rz)   # exact: every row once, in order
    outdir = tmp_path / "per-file"
    job = BatchJob.plan(model_path, files, str(outdir) + "/", input_columns={"a": A_COLS, "b": "b"}, batch_size=8)
    report = run_job(job, LocalEngine(2), timeout=60)
    assert [p.rsplit("/", 1)[1] for p in report.outputs] == ["p0.parquet", "p2.npz", "p3.parquet", "p1.npz"]
    for i, name in enumerate(["p0.parquet", "p1.npz", "p2.npz", "p3.parquet"]):
        got = read_table(str(outdir / name))
        assert got["output1"].shape == (len(parts[i][0]), 4) and np.array_equal(got["output1"], parts[i][0] * 2)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 30), min_size=1, max_size=4), batch=st.integers(1, 16),
       workers=st.integers(1, 3))
def test_every_row_exactly_once_in_order_for_any_shards_and_batch_size(model_path, tmp_path, sizes, batch, workers):
    files, parts = [], []
    for i, n in enumerate(sizes):
        a, b = S.data(n, seed=100 + n)
        a[:, 0] = np.arange(sum(sizes[:i]), sum(sizes[:i]) + n)   # row numbers, doubled by output1
        parts.append(a)
        files.append(write_npz(tmp_path / f"s{i}.npz", a, b))
    job = BatchJob.plan(model_path, files, str(tmp_path / "o.npz"), input_columns={"a": A_COLS, "b": "b"},
                        batch_size=batch)
    run_job(job, LocalEngine(workers), timeout=60)
    z = np.load(tmp_path / "o.npz")["output1"]
    assert z.shape == (sum(sizes), 4) and np.array_equal(z[:, 0], 2 * np.arange(sum(sizes)))


def test_a_model_with_a_fixed_row_dimension_runs_in_chunks_of_it(tmp_path):
    path = S.save(S.two_by_two(rows=2), tmp_path / "fixed.srm")
    a, b = S.data(10)
    np.savez(tmp_path / "in.npz", a=a, b=b)
    job = BatchJob.plan(path, [str(tmp_path / "in.npz")], str(tmp_path / "o.npz"), batch_size=5)
    assert [u.stop - u.start for u in job.units] == [4, 4, 2]   # 5 rounded down to a multiple of 2
    run_job(job, LocalEngine(1), timeout=60)
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["output0"], S.two_by_two_reference(a, b)[0], rtol=1e-5)
    np.savez(tmp_path / "odd.npz", a=a[:7], b=b[:7])
    with pytest.raises(srcore.SrcoreInputError, match="odd.npz: 7 rows, but the model takes exactly 2 rows"):
        BatchJob.plan(path, [str(tmp_path / "odd.npz")], str(tmp_path / "o.npz"))


def test_a_bad_batch_fails_the_job_naming_the_file_and_rows(model_path, tmp_path):
    a, b = S.data(12)
    lists = [list(r) for r in b]
    lists[9] = lists[9][:2]   # one short row
    table = pa.table({"a": pa.array(list(a), type=pa.list_(pa.float32())), "b": pa.array(lists)})
    pq.write_table(table, tmp_path / "ragged.parquet")
    job = BatchJob.plan(model_path, [str(tmp_path / "ragged.parquet")], str(tmp_path / "o.parquet"), batch_size=4)
    with pytest.raises(srcore.SrcoreInputError, match=r"ragged.parquet rows 8-11: column 'b': rows hold lists"):
        run_job(job, LocalEngine(2), timeout=60)
    assert not (tmp_path / "o.parquet").exists() and not list(tmp_path.glob("o.parquet.part*"))


def test_plan_errors_name_the_culprit(model_path, tmp_path):
    a, b = S.data(4)
    np.savez(tmp_path / "in.npz", a=a, b=b)
    np.savez(tmp_path / "ints.npz", a=a.astype(np.int64), b=b.astype(np.float16))
    inp = [str(tmp_path / "in.npz")]
    for kwargs, msg in [(dict(inputs=[str(tmp_path / "nope.npz")]), "nope.npz: no such file"),
                        (dict(output=str(tmp_path / "o.csv")), "say the output format"),
                        (dict(output=str(tmp_path / "missing" / "o.npz")), "does not exist"),
                        (dict(input_columns={"a": "a", "b": "c"}), "in.npz: no column 'c' for model input 'b'"),
                        (dict(batch_size=0), "batch size must be"),
                        (dict(inputs=[str(tmp_path)]), None)]:
        args = {"inputs": inp, "output": str(tmp_path / "o.npz"), **kwargs}
        if msg is None:   # a directory is its .npz files, in name order
            assert [s.path.rsplit("/", 1)[1] for s in BatchJob.plan(model_path, **args).shards] == ["in.npz", "ints.npz"]
            continue
        with pytest.raises(srcore.SrcoreError, match=msg):
            BatchJob.plan(model_path, **args)
    job = BatchJob.plan(model_path, [str(tmp_path / "ints.npz")], str(tmp_path / "o.npz"))   # int -> float: same kind
    run_job(job, LocalEngine(1), timeout=60)
    with pytest.raises(srcore.SrcoreError, match="no such model file"):
        BatchJob.plan(str(tmp_path / "none.srm"), inp, str(tmp_path / "o.npz"))


# -- the command ----------------------------------------------------------------------------------------------------
def test_srcore_batch_local_writes_parquet_and_reports_json(model_path, tmp_path, capsys):
    a, b = S.data(50, seed=3)
    src = write_parquet(tmp_path / "in.parquet", a, b, row_group_size=16)
    rc = main(["batch", model_path, src, "-o", str(tmp_path / "out.parquet"), "--workers", "2", "--batch-size", "8",
               "--input-column", "a=" + ",".join(A_COLS), "--output-column", "output0=pred", "--format", "json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    jsonschema.validate(report, load_schema("batch"))
    assert report["rows"] == 50 and report["batches"] == 7 and report["on"] == "local" and report["workers"] == 2
    got = read_table(str(tmp_path / "out.parquet"))
    assert list(got) == ["pred"]
    np.testing.assert_allclose(got["pred"], S.two_by_two_reference(a, b)[0], rtol=1e-5, atol=1e-6)


def test_srcore_batch_writes_parquet_to_standard_output(model_path, tmp_path, capsysbinary):
    a, b = S.data(9, seed=4)
    src = write_npz(tmp_path / "in.npz", a, b)
    assert main(["batch", model_path, src, "-o", "-", "--batch-size", "4", "--input-column", "a=" + ",".join(A_COLS),
                 "--output-column", "output1=z"]) == 0
    captured = capsysbinary.readouterr()
    assert np.array_equal(pq.read_table(io.BytesIO(captured.out)).column("z").combine_chunks().to_numpy_ndarray(),
                          a * 2)
    assert b"9 rows in 3 batches on local" in captured.err


@pytest.mark.parametrize("argv, code, msg", [
    (["--input-column", "a"], 2, "expected NAME=COLUMN"),
    (["--address", "127.0.0.1:1"], 2, "use it with --on ray or --on dask"),
    (["--transfer", "path"], 2, "use it with --on ray or --on dask"),
    (["--timeout", "0"], 2, "argument --timeout: must be a number > 0"),
    (["--input-column", "a=a0,a1,a2,a3", "--input-column", "b=zz"], 1, "no column 'zz' for model input 'b'"),
    (["--workers", "0"], 2, "argument --workers: must be an integer >= 1"),
    (["--format", "json", "-o", "-"], 2, "both write to standard output"),
    (["--on", "spark"], 2, "invalid choice"),
])
def test_srcore_batch_errors_are_one_message_and_one_hint(model_path, tmp_path, capsys, argv, code, msg):
    a, b = S.data(3)
    src = write_npz(tmp_path / "in.npz", a, b)
    assert main(["batch", model_path, src, "-o", str(tmp_path / "o.npz"), *argv]) == code
    err = capsys.readouterr().err
    assert msg in err and err.count("hint:") == 1
    assert "Traceback" not in err


def test_the_ray_data_predictor_appends_output_columns_to_a_numpy_batch(model_path):
    from srcore.ray.data import Predictor   # the class map_batches instantiates, called here without Ray

    predictor = Predictor(model_path, inputs={"a": A_COLS}, outputs={"output0": "pred"})
    a, b = S.data(5, seed=9)
    batch = {"id": np.arange(5), **{c: a[:, i] for i, c in enumerate(A_COLS)}, "b": b}
    out = predictor(batch)
    assert list(out) == ["id", *A_COLS, "b", "pred"] and out["b"] is b
    np.testing.assert_allclose(out["pred"], S.two_by_two_reference(a, b)[0], rtol=1e-5, atol=1e-6)
    paths = np.array(["s3://x/part-1.parquet"] * 5, dtype=object)
    with pytest.raises(srcore.SrcoreInputError, match=r"s3://x/part-1.parquet rows 0-4: input 'b': dimension 1"):
        predictor({**batch, "b": b[:, :2], "path": paths})


# -- serving logic (the deployment's code, without Ray Serve) ---------------------------------------------------
def _server(model):
    from srcore.ray.serving import ModelServer
    from srcore.scaleout.source import ModelSource

    class Ref:   # a ModelRef without the object store: workers read the path
        def __init__(self, path):
            self.source = ModelSource.of_file(path)

        def fetcher(self):
            return None
    return ModelServer(Ref(model))


def _call(server, body, ctype="application/json", method="POST", path="/", accept=None):
    import asyncio

    headers = {"content-type": ctype, **({"accept": accept} if accept else {})}
    return asyncio.run(server.handle(method, path, headers, body))


def test_requests_are_checked_one_by_one_and_answered_in_their_format(model_path):
    server = _server(model_path)
    a, b = S.data(3)
    ry, rz = S.two_by_two_reference(a, b)
    status, body, ctype = _call(server, json.dumps({"inputs": {"a": a.tolist(), "b": b.tolist()}}).encode())
    out = json.loads(body)["outputs"]
    assert status == 200 and ctype == "application/json" and list(out) == ["output0", "output1"]
    np.testing.assert_allclose(out["output0"], ry, rtol=1e-5, atol=1e-6)
    buf = io.BytesIO()
    np.savez(buf, a=a.astype(np.float64), b=b)
    status, body, ctype = _call(server, buf.getvalue(), "application/x-npz")
    assert status == 200 and ctype == "application/x-npz" and np.array_equal(np.load(io.BytesIO(body))["output1"], rz)
    status, body, _ = _call(server, b"", method="GET", path="/health")
    assert status == 200 and json.loads(body)["inputs"][0] == {"name": "a", "dtype": "float32", "shape": ["batch", 4]}
    for payload, ctype, msg in [
            (b"{", "application/json", "not JSON"),
            (json.dumps({"inputs": {"a": a.tolist()}}).encode(), "application/json", "missing input 'b'"),
            (json.dumps({"inputs": {"a": a.tolist(), "b": b[:, :2].tolist()}}).encode(), "application/json",
             "input 'b': dimension 1 must be 3"),
            (json.dumps({"inputs": {"a": a.tolist(), "b": b[:2].tolist()}}).encode(), "application/json",
             "different numbers of rows"),
            (json.dumps({"inputs": {"a": [[1, 2], [3]], "b": b.tolist()}}).encode(), "application/json",
             "input 'a': expected nested lists of numbers"),
            (json.dumps({"inputs": [[1.0] * 4]}).encode(), "application/json", "takes 2 inputs"),
            (b"\x93NUMPY", "application/x-npy", "not a readable .npy"),
            (b"x", "text/csv", "unsupported Content-Type")]:
        status, body, _ = _call(server, payload, ctype)
        assert status == 400 and msg in json.loads(body)["error"], (msg, body)
    assert _call(server, b"", method="GET", path="/nope")[0] == 404


def test_a_request_that_fails_in_the_model_fails_alone(tmp_path):
    import asyncio

    server = _server(S.save(S.lookup(), tmp_path / "lookup.srm"))
    reqs = [{"i": np.array([0, 1])}, {"i": np.array([4, 9])}, {"i": np.array([3])}]
    results = asyncio.run(server.run_requests(reqs))
    assert np.array_equal(results[0]["output"], S.TABLE[[0, 1]]) and np.array_equal(results[2]["output"], S.TABLE[[3]])
    assert isinstance(results[1], srcore.KernelError) and "index 9 is out of bounds" in str(results[1])
    buf = io.BytesIO()
    np.save(buf, np.array([2, 7]))
    status, body, _ = _call(server, buf.getvalue(), "application/x-npy")
    assert status == 400 and "index 7 is out of bounds" in json.loads(body)["error"]
    np.save(buf := io.BytesIO(), np.array([2]))
    status, body, ctype = _call(server, buf.getvalue(), "application/x-npy")
    assert status == 200 and ctype == "application/x-npy" and np.array_equal(np.load(io.BytesIO(body)), S.TABLE[[2]])
    status, body, _ = _call(server, json.dumps({"inputs": [0.5]}).encode())
    assert status == 400 and "expected int64 values, got float64" in json.loads(body)["error"]
