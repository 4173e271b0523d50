"""A collector with two worker processes in a subprocess, for the tests that need several
processes behind one port (tests/service/test_workers.py and test_metrics.py)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_two_workers(tmp_path, url, port, shared, params, extra=None) -> subprocess.Popen:
    """``main(config, port, workers=2)`` on 127.0.0.1 with one GRR collection ``c`` of
    ``params`` stored at ``url``, the processes' /metrics files in ``shared``; returns once
    /healthz answers (the process group is killed if it does not within 60 s)."""
    config = tmp_path / "collector.json"
    config.write_text(
        json.dumps(
            {
                "database_url": url,
                "collections": {"c": {"mechanism": "GRR", "params": params}},
                **(extra or {}),  # other config keys, e.g. quotas
            }
        )
    )
    code = f"from ldpkit.service import main; main({str(config)!r}, port={port}, workers=2)"
    env = {
        **os.environ,
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "LDPKIT_METRICS_DIR": str(shared),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    raise AssertionError("server did not start")
