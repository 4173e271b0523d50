"""/metrics counters are shared by the worker processes of one server."""

import json
import multiprocessing
import os
import re
import signal
import time
import urllib.request

import pytest

from _servers import free_port, serve_two_workers
from ldpkit import GRR
from ldpkit.io import reports_to_dict
from ldpkit.service.prometheus import Metrics, _read_file


def _child(directory, k):
    m = Metrics(directory)
    for _ in range(k):
        m.accept("c", 3, duplicate=False)
    m.reject("malformed", 422)
    m.commit(0.004, k)


def _value(text, series):
    m = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    assert m is not None, (series, text)
    return float(m.group(1))


def test_counters_of_every_process_are_summed(tmp_path):
    parent = Metrics(tmp_path)
    parent.accept("c", 5, duplicate=False)
    parent.accept("c", 5, duplicate=True)
    ctx = multiprocessing.get_context("fork")  # a forked child must get its own file
    children = [ctx.Process(target=_child, args=(tmp_path, k)) for k in (7, 300)]
    for p in children:
        p.start()
    for p in children:
        p.join(60)
        assert p.exitcode == 0
    assert len(list(tmp_path.glob("ldpkit-metrics-*.bin"))) == 3
    for reader in (parent, Metrics(tmp_path)):  # any process reads the same totals
        text = reader.render({"c": (2000, 308)})
        assert _value(text, 'ldpkit_batches_total{collection="c"}') == 1 + 7 + 300
        assert _value(text, 'ldpkit_reports_total{collection="c"}') == 5 + 3 * 307
        assert _value(text, 'ldpkit_duplicate_batches_total{collection="c"}') == 1
        assert _value(text, 'ldpkit_rejects_total{reason="malformed",status="422"}') == 2
        assert _value(text, 'ldpkit_commit_seconds_bucket{le="0.005"}') == 2
        assert _value(text, 'ldpkit_commit_seconds_bucket{le="0.0025"}') == 0
        assert _value(text, "ldpkit_commit_seconds_count") == 2
        assert _value(text, "ldpkit_committed_batches_total") == 307
        assert _value(text, 'ldpkit_stored_batches{collection="c"}') == 308
    # In memory (one process): same text without files.
    alone = Metrics()
    alone.accept("c", 2, duplicate=False)
    assert _value(alone.render({}), 'ldpkit_reports_total{collection="c"}') == 2


def test_many_keys_grow_the_file(tmp_path):
    m = Metrics(tmp_path)
    for i in range(3000):  # ~100 bytes a record: past the first 64 KiB mapping
        m.reject(f"reason-{i:04d}-" + "x" * 60, 400 + i % 100)
    m.reject("reason-0000-" + "x" * 60, 400)
    totals = Metrics(tmp_path).totals()
    assert len(totals) == 3000
    assert totals[("rejects", "reason-0000-" + "x" * 60, 400)] == 2


@pytest.mark.slow
def test_metrics_agree_whichever_worker_answers(fresh_postgres, tmp_path):
    port, shared = free_port(), tmp_path / "metrics"
    shared.mkdir()
    proc = serve_two_workers(
        tmp_path, fresh_postgres, port, shared, {"epsilon": 1.0, "domain_size": 8}
    )
    try:
        spec = GRR(epsilon=1.0, domain_size=8)

        def per_process():
            return [
                _read_file(f).get('["batches","c"]', 0) for f in shared.glob("ldpkit-metrics-*.bin")
            ]

        sent = 0
        while sent < 40 or (len([v for v in per_process() if v > 0]) < 2 and sent < 400):
            i = sent  # one connection per request: the workers take turns accepting
            body = json.dumps(reports_to_dict(spec.randomize([i % 8], rng=i))).encode()
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/reports/c",
                data=body,
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(req, timeout=30) as resp:
                assert resp.status == 201
            sent += 1
        assert len([v for v in per_process() if v > 0]) == 2, per_process()
        seen = set()
        for _ in range(12):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                text = r.read().decode()
            assert _value(text, 'ldpkit_batches_total{collection="c"}') == sent
            seen.add(text.count("ldpkit_batches_total{"))
        assert seen == {1}  # one total, not one series per process
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        time.sleep(0.1)
