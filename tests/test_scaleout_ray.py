"""srcore on a local Ray cluster (started once for this module's tests, 2 CPUs, on 127.0.0.1):
batch jobs that survive a killed worker, Ray Data's ``predict``, Ray Serve, and bad input failing fast."""
from __future__ import annotations

import io
import json
import os
import signal
import socket
import threading
import time
import urllib.error
import urllib.request

import jsonschema
import numpy as np
import pytest
import ray
import ray.data

import srcore
from srcore.cli import main
from srcore.cli.output import load_schema
from srcore.scaleout.job import BatchJob, run_job
from srcore.scaleout.shards import read_table

import _scaleout as S

# one worker runs them all, so the module's cluster starts once: test.sh's --dist loadscope keeps a
# module on one worker; xdist_group does the same under --dist loadgroup
pytestmark = [pytest.mark.one_pass, pytest.mark.timeout(240), pytest.mark.xdist_group("ray")]
A_COLS = ["a0", "a1", "a2", "a3"]


# module scope: the cluster stops when this module ends. Session scope kept it running idle on its xdist
# worker for the rest of the pass: idle, Ray's 11 processes (Serve's controller, proxy and replica among
# them) used ~6 CPU-s a minute (AMD 2 vCPUs, 2026-11-29), of the cores the other tests need
@pytest.fixture(scope="module")
def ray_cluster():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")   # nothing leaves the machine
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1",
             configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray.get_runtime_context().gcs_address
    from ray import serve

    serve.shutdown()
    ray.shutdown()


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return S.save(S.two_by_two(), tmp_path_factory.mktemp("ray") / "two.srm")


@pytest.fixture(scope="module")
def serve_port():
    return S.free_port()


def _npz(path, a, b):
    np.savez(path, a=a, b=b)
    return str(path)


def test_a_worker_killed_mid_job_costs_a_retry_and_every_row_is_written_once(ray_cluster, model_path, tmp_path):
    from srcore.ray.jobs import RayEngine

    a, b = S.data(240, seed=1)
    a[:, 0] = np.arange(240)
    files = [_npz(tmp_path / "x0.npz", a[:130], b[:130]), _npz(tmp_path / "x1.npz", a[130:], b[130:])]
    job = BatchJob.plan(model_path, files, str(tmp_path / "out.parquet"), batch_size=6)
    engine = RayEngine(workers=2)
    killed = []

    def kill_one(n):
        if not killed:
            pid = engine.pids()[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    report = run_job(job, engine, on_rows=kill_one, timeout=120)
    assert killed and report.rows == 240 and report.units == 41
    got = read_table(str(tmp_path / "out.parquet"))
    assert np.array_equal(got["output1"][:, 0], 2 * np.arange(240))   # each row once, in order
    np.testing.assert_allclose(got["output0"], S.two_by_two_reference(a, b)[0], rtol=1e-5, atol=1e-6)


def test_a_bad_batch_or_a_missing_model_fails_the_job_with_a_srcore_error(ray_cluster, tmp_path):
    from srcore.ray.jobs import RayEngine

    path = S.save(S.two_by_two(tag="gone"), tmp_path / "gone.srm")
    a, b = S.data(10)
    src = _npz(tmp_path / "in.npz", a, b)
    job = BatchJob.plan(path, [src], str(tmp_path / "o.npz"), batch_size=5)
    os.unlink(path)   # planned on the driver; then the file disappears: workers reading the path cannot find it
    t0 = time.monotonic()
    with pytest.raises(srcore.SrcoreError, match=r"model file .*gone.srm is missing on worker .*transfer='path'"):
        run_job(job, RayEngine(workers=1, transfer="path"), timeout=60)
    assert time.monotonic() - t0 < 60
    path = S.save(S.two_by_two(), tmp_path / "m.srm")
    src = _npz(tmp_path / "ok.npz", a, b)
    job = BatchJob.plan(path, [src], str(tmp_path / "o.npz"), batch_size=5)
    _npz(src, a, b[:, :2])   # the file changes after planning: its batches fail the input check on the worker
    with pytest.raises(srcore.SrcoreInputError, match=r"ok.npz rows 0-4: input 'b': dimension 1 must be 3") as err:
        run_job(job, RayEngine(workers=1), timeout=60)
    assert "Traceback" not in str(err.value) and not isinstance(err.value, ray.exceptions.RayError)


def test_ray_data_predict_adds_the_outputs_after_the_existing_columns(ray_cluster, model_path):
    import srcore.ray

    a, b = S.data(64, seed=2)
    ds = ray.data.from_items([{"id": i, **{c: float(a[i, k]) for k, c in enumerate(A_COLS)}, "b": b[i]}
                              for i in range(64)])
    out = srcore.ray.predict(ds, model_path, inputs={"a": A_COLS}, outputs={"output0": "pred", "output1": "z"},
                             batch_size=16, concurrency=1)
    rows = sorted(out.take_all(), key=lambda r: r["id"])
    assert list(rows[0]) == ["id", *A_COLS, "b", "pred", "z"] and [r["id"] for r in rows] == list(range(64))
    ry, rz = S.two_by_two_reference(a, b)
    np.testing.assert_allclose(np.stack([r["pred"] for r in rows]), ry, rtol=1e-5, atol=1e-6)
    assert np.array_equal(np.stack([r["z"] for r in rows]), rz)
    t0 = time.monotonic()   # checked on the driver, before anything runs
    with pytest.raises(srcore.SrcoreInputError, match="dataset: column 'a0' holds values of rank 0 \\(shape \\(\\)\\); model input 'b'"):
        srcore.ray.predict(ds, model_path, inputs={"a": A_COLS, "b": "a0"})
    with pytest.raises(srcore.SrcoreError, match="output column 'b' already exists"):
        srcore.ray.predict(ds, model_path, inputs={"a": A_COLS}, outputs={"output0": "b"})
    assert time.monotonic() - t0 < 10


def _post(url, body, ctype="application/json"):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read(), r.headers["Content-Type"]
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers["Content-Type"]


def test_srcore_serve_batches_requests_and_a_bad_one_fails_alone(ray_cluster, model_path, serve_port, capsys):
    from ray import serve

    # the command on the running cluster, detached: it returns once the replica answers
    assert main(["serve", model_path, "--address", ray_cluster, "--detach", "--name", "two", "--route-prefix",
                 "/two", "--port", str(serve_port), "--max-batch-size", "8", "--batch-wait-timeout-s", "0.5",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, load_schema("serve"))
    url = doc["url"]
    assert url == f"http://127.0.0.1:{serve_port}/two"
    with urllib.request.urlopen(url + "/health", timeout=30) as r:
        assert json.loads(r.read())["outputs"] == ["output0", "output1"]
    a, b = S.data(12, seed=4)
    results = {}

    def send(i, body):
        results[i] = _post(url, json.dumps(body).encode())

    threads = [threading.Thread(target=send, args=(i, {"inputs": {"a": a[2 * i:2 * i + 2].tolist(),
                                                                  "b": b[2 * i:2 * i + 2].tolist()}}))
               for i in range(6)]
    threads.append(threading.Thread(target=send, args=(9, {"inputs": {"a": a[:1].tolist(), "b": [[1.0]]}})))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ry, _ = S.two_by_two_reference(a, b)
    for i in range(6):
        status, body, _ = results[i]
        assert status == 200
        np.testing.assert_allclose(json.loads(body)["outputs"]["output0"], ry[2 * i:2 * i + 2], rtol=1e-5, atol=1e-6)
    status, body, _ = results[9]
    assert status == 400 and "input 'b': dimension 1 must be 3" in json.loads(body)["error"]
    with urllib.request.urlopen(url + "/health", timeout=30) as r:
        health = json.loads(r.read())
    assert health["requests"] == 6 and health["model_calls"] < 6   # batched: fewer calls than requests
    buf = io.BytesIO()
    np.savez(buf, a=a, b=b)
    status, body, ctype = _post(url + "/predict", buf.getvalue(), "application/x-npz")
    assert status == 200 and ctype == "application/x-npz"
    np.testing.assert_allclose(np.load(io.BytesIO(body))["output0"], ry, rtol=1e-5, atol=1e-6)
    serve.delete("two")
    assert main(["serve", model_path, "--detach"]) == 2
    assert "give its --address" in capsys.readouterr().err
    import srcore.ray

    t0 = time.monotonic()   # a model that cannot load on a worker fails before Serve retries replicas
    with pytest.raises(srcore.UnknownBackendError, match="nope"):
        srcore.ray.serve(model_path, name="never", options=srcore.Options(backends=("nope",)))
    assert time.monotonic() - t0 < 30


def test_an_unreachable_or_wrong_address_fails_within_seconds(capsys, tmp_path, model_path):
    a, b = S.data(4)
    src = _npz(tmp_path / "in.npz", a, b)
    t0 = time.monotonic()
    code = main(["batch", model_path, src, "-o", str(tmp_path / "o.npz"), "--on", "ray",
                 "--address", f"127.0.0.1:{S.closed_port()}"])
    err = capsys.readouterr().err
    assert code == 1 and "cannot reach the Ray cluster at 127.0.0.1:" in err and err.count("hint:") == 1
    with socket.socket() as listener:   # something that accepts connections but is not Ray
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        threading.Thread(target=lambda: listener.accept()[0].sendall(b"HTTP/1.0 400 nope\r\n\r\n"), daemon=True).start()
        from srcore.ray.cluster import connect

        with pytest.raises(srcore.ClusterError, match="accepts connections but is not a Ray cluster"):
            connect(f"127.0.0.1:{listener.getsockname()[1]}")
    assert time.monotonic() - t0 < 20
