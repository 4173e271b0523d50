"""What a stalled disk does to the collector: /healthz latency while fsync hangs (SQLite).

A small LD_PRELOAD library (compiled here with the system C compiler) makes ``fsync`` and
``fdatasync`` sleep ``--stall-ms`` while a flag file exists. The collector runs on SQLite
(one process, as deployed) under a steady one-report POST load from a few client threads,
while a prober asks ``GET /healthz`` every 50 ms. Three phases: normal, stalled (flag
present: every commit's fsync takes ``--stall-ms``), normal again. Printed per phase: the
probes' latency (p50 / p90 / max), POSTs answered and their max latency. At the end every
acknowledged batch must be stored.

``--src`` picks the ldpkit sources the server runs (default: this checkout's ``src``), so
two versions can be compared in one sitting::

    python studies/collector_stall.py                      # this checkout
    python studies/collector_stall.py --src /path/to/other/src

Light on CPU (a few client threads, ~10 s); Linux with a C compiler only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

static void stall(void) {
    const char *flag = getenv("LDPKIT_SLOW_FSYNC_FLAG");
    const char *ms = getenv("LDPKIT_SLOW_FSYNC_MS");
    if (flag && ms && access(flag, F_OK) == 0) usleep((useconds_t)atoi(ms) * 1000);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    stall();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    stall();
    return real(fd);
}
"""

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(tmp: Path, src: str, stall_ms: int) -> tuple[subprocess.Popen[bytes], int, Path]:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("needs a C compiler (cc or gcc) for the slow-fsync library")
    (tmp / "slow_fsync.c").write_text(SHIM)
    lib = tmp / "slow_fsync.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(tmp / "slow_fsync.c"), "-ldl"],
        check=True,
    )
    flag = tmp / "stall"
    config = tmp / "collector.json"
    config.write_text(
        json.dumps(
            {
                "database_url": f"sqlite:///{tmp / 'c.db'}",
                "collections": {
                    "g": {"mechanism": "GRR", "params": {"epsilon": 1.0, "domain_size": 8}}
                },
            }
        )
    )
    port = _free_port()
    code = (
        "import logging; logging.basicConfig(level=logging.WARNING); "
        "from ldpkit.service import main; "
        f"main({str(config)!r}, port={port}, access_log=False, log_level='warning')"
    )
    env = {
        **os.environ,
        "PYTHONPATH": src,
        "LD_PRELOAD": str(lib),
        "LDPKIT_SLOW_FSYNC_FLAG": str(flag),
        "LDPKIT_SLOW_FSYNC_MS": str(stall_ms),
    }
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return proc, port, flag
        except OSError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(ROOT / "src"))
    parser.add_argument("--stall-ms", type=int, default=500)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--phases", type=float, nargs=3, default=[2.0, 4.0, 2.0])
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="ldpkit-stall-"))
    proc, port, flag = _start(tmp, args.src, args.stall_ms)
    phase = ["normal"]
    stop = threading.Event()
    probes: list[tuple[str, float]] = []
    posts: list[tuple[str, float]] = []

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        info = json.loads(
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/collections/g").read()
        )
        payload = json.dumps({"arrays": {"values": [3]}, "fingerprint": info["fingerprint"]})
        while not stop.is_set():
            at, start = phase[0], time.perf_counter()
            conn.request("POST", "/v1/reports/g", payload, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            if resp.status == 201:
                posts.append((at, time.perf_counter() - start))

    def prober() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while not stop.is_set():
            at, start = phase[0], time.perf_counter()
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            probes.append((at, time.perf_counter() - start))
            time.sleep(0.05)

    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    threads.append(threading.Thread(target=prober))
    try:
        for t in threads:
            t.start()
        for name, seconds in zip(("normal", "stalled", "after"), args.phases):
            phase[0] = name
            if name == "stalled":
                flag.touch()
            elif flag.exists():
                flag.unlink()
            time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join(60)
        info = json.loads(
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/collections/g").read()
        )
    finally:
        stop.set()
        if flag.exists():
            flag.unlink()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"src={args.src} stall={args.stall_ms} ms per fsync, {args.clients} POST clients")
    print("| phase | /healthz probes | p50 ms | p90 ms | max ms | POSTs answered | POST max ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in ("normal", "stalled", "after"):
        lat = np.array([s for p, s in probes if p == name]) * 1e3
        post = np.array([s for p, s in posts if p == name]) * 1e3
        if not len(lat):
            lat = np.array([np.nan])
        print(
            f"| {name} | {len(lat)} | {np.median(lat):.1f} | {np.percentile(lat, 90):.1f} | "
            f"{lat.max():.0f} | {len(post)} | {post.max() if len(post) else float('nan'):.0f} |"
        )
    assert info["n"] == len(posts), (info["n"], len(posts))  # every 201 stored
    print(f"stored n = {info['n']} = acknowledged POSTs")


if __name__ == "__main__":
    main()
