"""kill -9 during ingest: every acknowledged batch is stored exactly once after a restart.

The collector runs as a real server process (uvicorn, group commit). Client threads POST
batches with idempotency keys (and, in the last test, keyless one-report batches: PostgreSQL's
in-loop group commit); the server's whole process group is killed with SIGKILL
mid-stream; it is restarted on the same database and the clients retry every batch they
have no answer for. Then the stored totals must equal the sum over all batches exactly:
an acknowledged batch lost, or a retried one counted twice, would change them.
"""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from ldpkit import GRR
from ldpkit.io import reports_to_bytes, reports_to_dict

SPEC = GRR(epsilon=1.0, domain_size=8)
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _batch(i):
    values = (np.arange(1 + i % 5) * 3 + i) % 8
    return SPEC.randomize(values, rng=i)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(config, port, workers):
    log = Path(config).with_suffix(f".{port}.log")
    code = (
        "from ldpkit.service import main; "
        f"main({str(config)!r}, port={port}, workers={workers}, access_log=False, "
        "log_level='error')"
    )
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(log, "wb") as err:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            start_new_session=True,  # its own process group: SIGKILL reaches every worker
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(log.read_text(errors="replace")[-3000:])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return proc
        except OSError:
            time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError("collector did not start")


def _post(port, i, timeout=10):
    r = _batch(i)
    if i % 3 == 0:
        body, ctype = reports_to_bytes(r), "application/x-npz"
    else:
        body, ctype = json.dumps(reports_to_dict(r)).encode(), "application/json"
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/reports/c",
        data=body,
        headers={"Content-Type": ctype, "Idempotency-Key": f"batch-{i}"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status


def _get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
        return json.loads(resp.read())


def _run(tmp_path, database_url, workers, kills, per_cycle=0.8):
    config = tmp_path / "collector.json"
    config.write_text(
        json.dumps(
            {
                "database_url": database_url,
                "collections": {"c": {"mechanism": "GRR", "params": SPEC.to_dict()["params"]}},
            }
        )
    )
    acked: set[int] = set()
    next_batch = [0]
    lock = threading.Lock()
    for _ in range(kills):
        port = _free_port()
        proc = _start(config, port, workers)
        stop = threading.Event()

        def client(port=port, stop=stop):
            while not stop.is_set():
                with lock:
                    i = next_batch[0]
                    next_batch[0] += 1
                try:
                    status = _post(port, i)
                # URLError, reset, refused, or an answer cut off by the kill (IncompleteRead):
                # no answer, retried later
                except (OSError, http.client.HTTPException):
                    continue
                if status in (200, 201):
                    with lock:
                        acked.add(i)

        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        time.sleep(per_cycle)
        os.killpg(proc.pid, signal.SIGKILL)  # mid-stream, no shutdown of any kind
        stop.set()
        for t in threads:
            t.join(30)
        proc.wait(10)
    sent = next_batch[0]
    assert len(acked) > 20, "the server must have acknowledged batches before the kills"
    port = _free_port()
    proc = _start(config, port, workers)
    try:
        for i in range(sent):  # every batch without an answer, with its key
            if i not in acked:
                assert _post(port, i, timeout=30) in (200, 201)
            elif i % 7 == 0:  # and some acknowledged ones: a retry must change nothing
                assert _post(port, i, timeout=30) == 200
        info = _get(port, "/v1/collections/c")
        stats = _get(port, "/v1/collections/c/stats")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    everything = _batch(0).concat(*[_batch(i) for i in range(1, sent)])
    assert info["batches"] == sent and info["n"] == len(everything)
    assert stats["arrays"]["counts"]["data"] == SPEC.aggregate(everything).counts.tolist()
    return len(acked), sent


@pytest.mark.slow
def test_kill_9_sqlite_every_acknowledged_batch_exactly_once(tmp_path):
    acked, sent = _run(tmp_path, f"sqlite:///{tmp_path / 'c.db'}", workers=1, kills=2)
    assert acked <= sent


@pytest.mark.slow
def test_kill_9_postgresql_two_workers_every_acknowledged_batch_exactly_once(
    tmp_path, fresh_postgres
):
    acked, sent = _run(tmp_path, fresh_postgres, workers=2, kills=1, per_cycle=1.5)
    assert acked <= sent


def _post_keyless(port, body, timeout=10):
    """POST one JSON batch without an idempotency key; the batch id of a 2xx, else None."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/reports/c",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())["batch_id"] if resp.status in (200, 201) else None


@pytest.mark.slow
def test_kill_9_postgresql_keyless_one_report_batches_acknowledged_are_stored(
    tmp_path, fresh_postgres
):
    """Keyless one-report POSTs (what devices send) take PostgreSQL's in-loop group commit;
    after kill -9 every acknowledged batch id is stored, and the stored totals are exactly
    the stored batches' (all batches are the same report, so totals = batches x report)."""
    config = tmp_path / "collector.json"
    config.write_text(
        json.dumps(
            {
                "database_url": fresh_postgres,
                "collections": {"c": {"mechanism": "GRR", "params": SPEC.to_dict()["params"]}},
            }
        )
    )
    one = SPEC.randomize(np.array([5]), rng=0)
    body = json.dumps(reports_to_dict(one)).encode()
    acked: set[str] = set()
    lock = threading.Lock()
    port = _free_port()
    proc = _start(config, port, workers=2)
    stop = threading.Event()

    def client():
        while not stop.is_set():
            try:
                batch_id = _post_keyless(port, body)
            # no answer, or one cut off by the kill (IncompleteRead): not acknowledged (and
            # never retried: no key)
            except (OSError, http.client.HTTPException):
                continue
            if batch_id is not None:
                with lock:
                    acked.add(batch_id)

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    os.killpg(proc.pid, signal.SIGKILL)  # mid-stream, no shutdown of any kind
    stop.set()
    for t in threads:
        t.join(30)
    proc.wait(10)
    assert len(acked) > 20, "the server must have acknowledged batches before the kill"
    port = _free_port()
    proc = _start(config, port, workers=1)
    try:
        stored: list[str] = []
        while True:
            page = _get(port, f"/v1/admin/collections/c/batches?limit=10000&offset={len(stored)}")
            stored += [b["batch_id"] for b in page["batches"]]
            if len(page["batches"]) < 10000:
                break
        info = _get(port, "/v1/collections/c")
        stats = _get(port, "/v1/collections/c/stats")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert len(set(stored)) == len(stored)
    assert acked <= set(stored), f"{len(acked - set(stored))} acknowledged batches lost"
    assert info["batches"] == len(stored) and info["n"] == len(stored)
    expected = (SPEC.aggregate(one).counts * len(stored)).tolist()
    assert stats["arrays"]["counts"]["data"] == expected
