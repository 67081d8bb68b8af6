"""srcore on a local Dask cluster (two single-threaded worker processes on 127.0.0.1, started once):
``srcore.dask.predict`` on arrays and dataframes, batch jobs that survive a killed worker, bad input."""
from __future__ import annotations

import os
import signal
import time

import dask
import dask.array as da
import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd
import pytest

import srcore
import srcore.dask
from srcore.cli import main
from srcore.scaleout.job import BatchJob, run_job

import _scaleout as S

# one worker runs them all, so the module's cluster starts once: test.sh's --dist loadscope keeps a
# module on one worker; xdist_group does the same under --dist loadgroup
pytestmark = [pytest.mark.one_pass, pytest.mark.timeout(240), pytest.mark.xdist_group("dask")]
A_COLS = ["a0", "a1", "a2", "a3"]


@pytest.fixture(autouse=True)
def _restore_environment():
    """Dask's nannies write OMP/MKL/OPENBLAS_NUM_THREADS=1 (meant for their workers) into this process's
    environment whenever they start one; the engines of later tests would read them."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
ENVIRONMENT_BEFORE_THE_CLUSTER: dict = {}


# module scope: the cluster stops when this module ends. Session scope kept it running idle on its xdist
# worker for the rest of the pass: idle, its scheduler's loop (in the worker itself) and its two nannies
# used ~4.5 CPU-s a minute (1.9 + 2.6, AMD 2 vCPUs, 2026-11-29), of the cores the other tests need
@pytest.fixture(scope="module")
def dask_client():
    import srcore.dask

    # srcore's own local cluster (the one `srcore batch --on dask` starts), so the test below can check
    # that starting it leaves this process's environment as it was
    ENVIRONMENT_BEFORE_THE_CLUSTER.update({k: os.environ.get(k) for k in THREAD_VARIABLES})
    default_client, cluster = srcore.dask.connect(workers=2)
    default_client.close()
    client = distributed.Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


def test_a_local_cluster_leaves_the_callers_environment_alone(dask_client):
    """Dask's nannies set OMP/MKL/OPENBLAS_NUM_THREADS=1 for their workers in the parent process and
    never undo it; srcore.dask.connect must undo it, or the caller's later thread pools run on one core."""
    assert set(dask_client.run(lambda: os.environ.get("OMP_NUM_THREADS")).values()) == {"1"}
    assert {k: os.environ.get(k) for k in THREAD_VARIABLES} == ENVIRONMENT_BEFORE_THE_CLUSTER


@pytest.fixture
def as_default(dask_client):
    """The cluster as this test's default scheduler (what srcore.dask.predict and compute() use)."""
    with dask_client.as_current():
        yield dask_client


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return S.save(S.two_by_two(), tmp_path_factory.mktemp("dask") / "two.srm")


def test_predict_on_arrays_cuts_along_rows_only(as_default, model_path):
    x = np.load(S.ROOT / "examples" / "digits" / "digits_test.npz")["x"][:90]
    lazy = srcore.dask.predict(da.from_array(x, chunks=(20, 1, 4, 4)), str(S.DIGITS))
    assert isinstance(lazy, da.Array) and lazy.shape == (90, 10) and lazy.chunks[0] == (20, 20, 20, 20, 10)
    ref = srcore.StaticModule(srcore.load(str(S.DIGITS)))(x)
    np.testing.assert_allclose(lazy.compute(), ref, rtol=1e-4, atol=1e-5)
    a, b = S.data(50, seed=5)
    outs = srcore.dask.predict({"a": da.from_array(a, chunks=(7, 2)), "b": da.from_array(b, chunks=(7, 3))},
                               model_path, outputs={"output1": "z", "output0": "y"})
    assert list(outs) == ["z", "y"]
    y, z = dask.compute(outs["y"], outs["z"])
    ry, rz = S.two_by_two_reference(a, b)
    np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-6)
    assert np.array_equal(z, rz)
    with pytest.raises(srcore.SrcoreInputError, match="dask array: column 'b' holds values of shape \\(2,\\)"):
        srcore.dask.predict({"a": da.from_array(a), "b": da.from_array(b[:, :2])}, model_path)
    with pytest.raises(srcore.SrcoreError, match="takes 2 inputs"):
        srcore.dask.predict(da.from_array(a), model_path)


def test_predict_on_a_dataframe_adds_the_output_columns(as_default, model_path):
    a, b = S.data(40, seed=6)
    frame = pd.DataFrame({"id": np.arange(40), **{c: a[:, i] for i, c in enumerate(A_COLS)},
                          **{f"b{i}": b[:, i] for i in range(3)}})
    ddf = dd.from_pandas(frame, npartitions=3)
    out = srcore.dask.predict(ddf, model_path, inputs={"a": A_COLS, "b": ["b0", "b1", "b2"]},
                              outputs={"output0": ["y0", "y1", "y2"], "output1": "z"})
    assert list(out.columns) == [*frame.columns, "y0", "y1", "y2", "z"]
    got = out.compute()
    ry, rz = S.two_by_two_reference(a, b)
    assert list(got["id"]) == list(range(40))
    np.testing.assert_allclose(got[["y0", "y1", "y2"]].to_numpy(), ry, rtol=1e-5, atol=1e-6)
    assert np.array_equal(np.stack(got["z"].to_list()), rz)
    t0 = time.monotonic()
    with pytest.raises(srcore.SrcoreInputError, match="dataframe: no column 'b3' for model input 'b'"):
        srcore.dask.predict(ddf, model_path, inputs={"a": A_COLS, "b": ["b1", "b2", "b3"]})
    assert time.monotonic() - t0 < 10


def test_a_worker_killed_mid_job_and_the_cli_on_the_cluster(dask_client, model_path, tmp_path, capsys):
    from srcore.dask.jobs import DaskEngine

    a, b = S.data(200, seed=8)
    a[:, 0] = np.arange(200)
    np.savez(tmp_path / "in.npz", a=a, b=b)
    job = BatchJob.plan(model_path, [str(tmp_path / "in.npz")], str(tmp_path / "out.npz"), batch_size=5)
    engine = DaskEngine(dask_client.scheduler.address)
    killed = []

    def kill_one(n):
        if not killed:
            pid = engine.pids()[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    report = run_job(job, engine, on_rows=kill_one, timeout=120)
    z = np.load(tmp_path / "out.npz")["output1"]
    assert killed and report.rows == 200 and np.array_equal(z[:, 0], 2 * np.arange(200))
    dask_client.wait_for_workers(2, timeout=60)   # the nanny restarts the killed worker
    code = main(["batch", model_path, str(tmp_path / "in.npz"), "-o", str(tmp_path / "cli.parquet"), "--on", "dask",
                 "--address", dask_client.scheduler.address, "--batch-size", "64", "--format", "json"])
    assert code == 0
    from srcore.scaleout.shards import read_table

    np.testing.assert_allclose(read_table(str(tmp_path / "cli.parquet"))["output0"],
                               S.two_by_two_reference(a, b)[0], rtol=1e-5, atol=1e-6)


def test_bad_addresses_and_missing_models_fail_within_seconds(dask_client, model_path, tmp_path, capsys):
    from srcore.dask.jobs import DaskEngine

    a, b = S.data(6)
    np.savez(tmp_path / "in.npz", a=a, b=b)
    t0 = time.monotonic()
    code = main(["batch", model_path, str(tmp_path / "in.npz"), "-o", str(tmp_path / "o.npz"), "--on", "dask",
                 "--address", f"tcp://127.0.0.1:{S.closed_port()}"])
    err = capsys.readouterr().err
    assert code == 1 and "cannot reach the Dask cluster at tcp://127.0.0.1:" in err and err.count("hint:") == 1
    path = S.save(S.two_by_two(tag="gone"), tmp_path / "gone.srm")
    job = BatchJob.plan(path, [str(tmp_path / "in.npz")], str(tmp_path / "o.npz"))
    os.unlink(path)
    with pytest.raises(srcore.SrcoreError, match="gone.srm is missing on worker"):
        run_job(job, DaskEngine(dask_client.scheduler.address, transfer="path"), timeout=60)
    assert time.monotonic() - t0 < 30
