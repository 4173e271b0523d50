"""``main(..., workers=2)`` on Linux: one SO_REUSEPORT socket per process (service.supervisor)."""

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _servers import SRC, free_port, serve_two_workers
from ldpkit import GRR
from ldpkit.io import reports_to_dict
from ldpkit.service.prometheus import _read_file
from ldpkit.service.supervisor import RestartBackoff, reuse_port_supported

SPEC = GRR(epsilon=1.0, domain_size=8)

pytestmark = pytest.mark.skipif(not reuse_port_supported(), reason="SO_REUSEPORT (Linux) only")


def _post_on(conns, start):
    for k, conn in enumerate(conns):
        body = json.dumps(reports_to_dict(SPEC.randomize([k % 8], rng=start + k)))
        conn.request("POST", "/v1/reports/c", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 201


def _per_process(shared):
    return [_read_file(f).get('["batches","c"]', 0) for f in shared.glob("ldpkit-metrics-*.bin")]


def _workers(pid):
    """The server processes started by the supervisor ``pid`` (not multiprocessing's
    resource tracker)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    found = []
    for child in out.split():
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:  # exited meanwhile
            continue
        if b"spawn_main" in cmdline:
            found.append(int(child))
    return found


def test_two_workers_each_accept_their_share_and_a_dead_worker_is_replaced(
    tmp_path, fresh_postgres
):
    """16 keep-alive connections opened at once (a proxy's pool, a load generator) reach
    both processes: with uvicorn's one shared socket, one process often took all 16. The
    kernel hashes each connection to one of the two sockets, so this fails by chance with
    probability 2 / 2**16. A second server on the same port is refused (no silent
    sharing), and a worker killed with SIGKILL is replaced on the same socket."""
    port, shared = free_port(), tmp_path / "metrics"
    shared.mkdir()
    proc = serve_two_workers(tmp_path, fresh_postgres, port, shared, SPEC.to_dict()["params"])
    try:
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(16)]
        for conn in conns:
            conn.connect()
        _post_on(conns, 0)
        counts = _per_process(shared)
        assert len(counts) == 2 and min(counts) > 0 and sum(counts) == 16, counts

        second = subprocess.run(
            [
                sys.executable,
                "-c",
                "from ldpkit.service.supervisor import serve_workers; "
                f"serve_workers('ldpkit.service.worker_app:app', 2, '127.0.0.1', {port})",
            ],
            env={**os.environ, "PYTHONPATH": SRC},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode != 0 and "Address already in use" in second.stderr

        children = _workers(proc.pid)
        assert len(children) == 2, children
        os.kill(children[0], signal.SIGKILL)
        for conn in conns:
            conn.close()
        deadline = time.monotonic() + 60
        while len(set(_workers(proc.pid)) - {children[0]}) < 2:
            assert time.monotonic() < deadline, "the dead worker must be replaced"
            time.sleep(0.1)
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(16)]
        _post_on(conns, 100)  # every connection answered, whichever socket it hashed to
        for conn in conns:
            conn.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0


def test_restart_backoff_doubles_after_early_exits_and_resets_after_a_healthy_run():
    backoff = RestartBackoff(initial=0.5, maximum=4.0, healthy_after=10.0)
    assert [backoff.delay(1.0) for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert backoff.delay(10.0) == 0.0  # served a while: replaced at once, doubling reset
    assert backoff.delay(0.1) == 0.5


def test_a_worker_failing_at_start_up_is_restarted_with_a_growing_delay(tmp_path):
    """An app factory that raises: the supervisor keeps trying, but waits 0.5 s, then 1 s
    (on the old code it started the process again every 0.2 s, forever)."""
    (tmp_path / "bad_app.py").write_text("def make():\n    raise RuntimeError('boom')\n")
    code = (
        "import logging; logging.basicConfig(level=logging.WARNING); "
        "from ldpkit.service.supervisor import serve_workers; "
        f"serve_workers('bad_app:make', 1, '127.0.0.1', {free_port()}, log_level='critical')"
    )
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        assert proc.stderr is not None
        while sum("exited" in line for line in lines) < 2:
            assert time.monotonic() < deadline, lines
            lines.append(proc.stderr.readline())
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=30)  # and closes the pipe
    exits = [line for line in lines if "exited" in line]
    assert exits[0].rstrip().endswith("starting another in 0.5 s"), exits
    assert exits[1].rstrip().endswith("starting another in 1.0 s"), exits
