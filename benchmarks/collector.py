"""The HTTP collector under load, against the bare stack, in one run (wrk on loopback).

Run from the repository root (needs the ``service`` extra and ``wrk``; Debian: ``apt-get
install wrk``; PostgreSQL rows need its server binaries, Debian's ``postgresql``)::

    PYTHONPATH=src nice python benchmarks/collector.py [--seconds 4] [--rounds 6]
        [--connections 16 64] [--estimate-batches 1000000] [--skip-postgres]
        [--skip-sqlite] [--workers 1 2] [--skip-batched]

1. Single-report POSTs (JSON body, one OLH d = 1024 report, the natural mode for devices)
   per second and latency percentiles, for the collector (group commit, SQLite file, one
   process) and for a bare FastAPI endpoint that only reads the body and answers 201
   (same uvicorn, same process count and, on Linux, the same one-socket-per-process
   supervisor). The two servers run side by side and wrk alternates between them in
   ``--rounds`` pairs of ``--seconds`` runs; the ratio is the median over the pairs (on a
   shared virtual machine the speed of both servers drifts by 30-40 % over tens of
   seconds, so only runs close in time compare the servers rather than the machine's
   moments). Then the same on PostgreSQL with ``--workers`` processes against a bare
   endpoint with as many processes. Every accepted request is checked to be stored:
   the collection's n after each run grew by at least wrk's count of 2xx answers.
2. Batched ingest: npz bodies of 10,000 OLH reports, in reports/s.
3. Estimate latency (p50, p99 of 30 requests) against the number of stored batches, with
   the stored state generated directly (batch rows + hourly roll-ups, one report per
   batch, all in one bulk transaction).

Both servers run with the access log off. Besides requests/s and latency, each ingest row
has the CPU time of the server's processes per request (robust on a shared machine,
where requests/s mostly measures how much CPU the server got), on PostgreSQL also that of
the database server's processes ("DB CPU ms/req": they compete for the same cores; the
ratio row gives collector + database against the bare endpoint) and, for the collector, the
mean group size and group-commit latency from /metrics, how the connections were spread
over the server's processes half-way through (``ss``), the share of the machine's cores
left idle during the run ("idle %": about 0 when a run is CPU-bound), and where its tail
comes from: in one more run of the collector alone, the event-loop stalls over 20 ms (at
64 connections one turn of the loop, ~64 requests and a commit, takes ~10 ms), the longest
one and the longest full (gen-2) garbage collection in that server's life
(``LDPKIT_DEBUG_LOOP_STALLS``, warm-up included; off in the compared runs, since its ~1 ms
timer also runs while the server waits beside the bare endpoint; a stall
with no GC pause in it is the loop's own work or the machine's); the fsync latency of the disk is
measured before and after the run (the floor under one durable commit). Prints tables and
writes benchmarks/results/collector.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from _common import print_table, write_json
from ldpkit import OLH
from ldpkit.io import reports_to_bytes, reports_to_dict

SPEC = OLH(epsilon=1.0, domain_size=1024)
SRC = str(Path(__file__).resolve().parents[1] / "src")

BARE = """
from fastapi import FastAPI, Request, Response

app = FastAPI()


@app.post("/v1/reports/{collection}")
async def post(collection: str, request: Request) -> Response:
    await request.body()
    return Response(b'{"ok":true}', status_code=201, media_type="application/json")


@app.get("/healthz")
def healthz() -> dict:
    return {"status": "ok"}


def make() -> FastAPI:
    return app
"""

LUA = """
local f = io.open("{path}", "rb")
wrk.method = "POST"
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "{ctype}"
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server did not start")


class Server:
    """A server subprocess in its own process group (so its workers stop with it)."""

    def __init__(
        self, argv: list[str], port: int, cwd: Path, extra_env: dict[str, str] | None = None
    ) -> None:
        env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
        env.update(extra_env or {})
        self.port = port
        self.log = cwd / f"server-{port}.log"  # stderr: warnings, the loop-stall summaries
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        try:
            _wait(port, self.proc)
        except Exception:
            self.stop()
            raise

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by every process of the server's group."""
        total = 0
        for _, fields in _proc_stats():
            if int(fields[2]) == self.proc.pid:  # process group id
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def loop_stalls(log: Path) -> dict[str, float]:
    """The collector's loop-stall summaries (``LDPKIT_DEBUG_LOOP_STALLS``, one line per
    process at shutdown; see ``ldpkit/service/_stalls.py``): stalls over the threshold,
    the longest, and the longest full (gen-2) garbage collection, over all processes."""
    text = log.read_text(errors="replace")
    found = re.findall(
        r"loop stalls > \S+ ms: (\d+) \(max ([\d.]+) ms.*?(\d+) with a GC.*gen2 \d+ \(max ([\d.]+) ms",
        text,
    )
    if not found:
        return {}
    return {
        "stalls": sum(int(n) for n, _, _, _ in found),
        "stall_max_ms": max(float(m) for _, m, _, _ in found),
        "stalls_gc": sum(int(n) for _, _, n, _ in found),
        "gc2_max_ms": max(float(g) for _, _, _, g in found),
    }


def _proc_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/<pid>/stat after the command name) of every live process."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                text = f.read()
        except OSError:  # exited meanwhile
            continue
        yield int(entry.name), text.rsplit(")", 1)[1].split()


def tree_cpu_seconds(root: int) -> float:
    """CPU time (user + system) of process ``root`` and its descendants, live or reaped.

    For the PostgreSQL server: its backends compete with the collector for the same cores,
    but are not in the collector's process group. A live process's ``cutime``/``cstime``
    hold its reaped children (the postmaster's exited backends), so nothing is counted
    twice.
    """
    parent: dict[int, int] = {}
    times: dict[int, int] = {}
    for pid, fields in _proc_stats():
        parent[pid] = int(fields[1])
        times[pid] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    total = 0
    for pid, ticks in times.items():
        p = pid
        while p > 1 and p != root:
            p = parent.get(p, 0)
        if p == root:
            total += ticks
    return total / os.sysconf("SC_CLK_TCK")


def cpu_jiffies() -> tuple[int, int]:
    """(idle + iowait, total) jiffies of the whole machine so far (/proc/stat; zeros
    elsewhere): their change over a run gives the share of the cores nobody used, i.e.
    whether a run was CPU-bound (about 0) or waited (for commits, the disk)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0, 0
    return fields[3] + fields[4], sum(fields[:8])


def idle_pct(before: tuple[int, int]) -> float:
    idle, total = cpu_jiffies()
    return 100.0 * (idle - before[0]) / max(total - before[1], 1)


def bare_server(tmp: Path, workers: int) -> Server:
    (tmp / "bare_app.py").write_text(BARE)
    port = _free_port()
    argv = [sys.executable, "-m", "uvicorn", "bare_app:app", "--port", str(port)]
    argv += ["--host", "127.0.0.1", "--no-access-log", "--log-level", "warning"]
    if workers > 1:
        from ldpkit.service.supervisor import reuse_port_supported

        if reuse_port_supported():
            # The collector's process model (one SO_REUSEPORT socket per process, see
            # ldpkit.service.supervisor): with uvicorn's shared socket the bare endpoint's
            # connections were as unevenly spread (16/0 ... 9/7), so the ratio would
            # measure the accept lottery rather than the collector's work.
            code = (
                "from ldpkit.service.supervisor import serve_workers; "
                f"serve_workers('bare_app:make', {workers}, '127.0.0.1', {port}, "
                "log_level='warning', access_log=False)"
            )
            return Server([sys.executable, "-c", code], port, tmp)
        argv += ["--workers", str(workers)]
    return Server(argv, port, tmp)


def collector_server(
    tmp: Path,
    database_url: str,
    workers: int,
    commit_window: float | None = None,
    stall_log: bool = False,
) -> Server:
    """The collector on ``database_url``; ``stall_log``: with the loop-stall watcher
    (``LDPKIT_DEBUG_LOOP_STALLS=20``, summed up at shutdown), whose ~1 ms timer runs even
    while the server is idle, so the compared runs leave it off (it would tax the bare
    endpoint running beside it)."""
    config = tmp / "collector.json"
    settings: dict[str, Any] = {
        "database_url": database_url,
        "collections": {"olh": {"mechanism": "OLH", "params": SPEC.to_dict()["params"]}},
    }
    if commit_window is not None:
        settings["commit_window"] = commit_window
    config.write_text(json.dumps(settings))
    port = _free_port()
    code = (
        "import logging, sys; logging.basicConfig(level=logging.ERROR); "
        "logging.getLogger('ldpkit.service.stalls').setLevel(logging.WARNING); "
        "from ldpkit.service import main; "
        f"main({str(config)!r}, port={port}, workers={workers}, access_log=False, "
        "log_level='warning')"
    )
    env = {"LDPKIT_DEBUG_LOOP_STALLS": "20"} if stall_log else {}
    return Server([sys.executable, "-c", code], port, tmp, env)


def connection_split(port: int) -> str:
    """How the established connections to ``port`` are spread over the server's processes
    (e.g. "9/7"; from ``ss``, empty without it): with several processes, one taking most
    connections makes a "2 process" run measure one."""
    if shutil.which("ss") is None:
        return ""
    out = subprocess.run(
        ["ss", "-tnpH", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    counts: dict[str, int] = {}
    for pid in re.findall(r"pid=(\d+)", out):
        counts[pid] = counts.get(pid, 0) + 1
    return "/".join(str(c) for c in sorted(counts.values(), reverse=True))


def wrk(port: int, body: Path, ctype: str, seconds: int, connections: int) -> dict[str, Any]:
    script = body.with_suffix(".lua")
    script.write_text(LUA.replace("{path}", str(body)).replace("{ctype}", ctype))
    split: list[str] = []
    timer = threading.Timer(seconds / 2, lambda: split.append(connection_split(port)))
    timer.start()
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            str(script),
            f"http://127.0.0.1:{port}/v1/reports/olh",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
    ).stdout
    timer.cancel()
    timer.join()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)

    def pct(p: str) -> float:
        m = re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)", out)
        if m is None:
            return float("nan")
        return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]

    return {
        "requests_per_s": rps,
        "requests": total,
        "ok": total - (int(non2xx.group(1)) if non2xx else 0),
        "socket_errors": errors.group(1) if errors else "",
        "p50_ms": pct("50"),
        "p99_ms": pct("99"),
        "split": split[0] if split else "",
    }


def commit_counters(port: int) -> tuple[float, float, float]:
    """(groups, batches, seconds) committed since the server started (/metrics): the
    difference over a run gives its mean group size and mean group-commit latency."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()

    def value(name: str) -> float:
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        return float(m.group(1)) if m else float("nan")

    return (
        value("ldpkit_commit_seconds_count"),
        value("ldpkit_committed_batches_total"),
        value("ldpkit_commit_seconds_sum"),
    )


def commit_stats(before: tuple[float, float, float], port: int) -> dict[str, float]:
    """Mean group size and group-commit latency since ``before`` (``commit_counters``)."""
    after = commit_counters(port)
    groups = max(after[0] - before[0], 1)
    return {
        "mean_group": (after[1] - before[1]) / groups,
        "mean_commit_ms": (after[2] - before[2]) * 1e3 / groups,
    }


def stored_n(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/collections/olh", timeout=30) as r:
        return int(json.loads(r.read())["n"])


def _measure(
    srv: Server,
    body: Path,
    connections: int,
    seconds: int,
    db_pid: int | None,
    collector: bool,
) -> dict[str, Any]:
    """One wrk run against ``srv`` with its CPU, the database's, the idle share and, for
    the collector, the stored count (every acknowledged report stored) and its groups."""
    db = (lambda: tree_cpu_seconds(db_pid)) if db_pid is not None else (lambda: 0.0)
    before = stored_n(srv.port) if collector else 0
    counters = commit_counters(srv.port) if collector else None
    cpu, db_cpu, jiffies = srv.cpu_seconds(), db(), cpu_jiffies()
    load = os.getloadavg()[0]
    res = wrk(srv.port, body, "application/json", seconds, connections)
    res["cpu_ms_per_request"] = (srv.cpu_seconds() - cpu) * 1e3 / res["requests"]
    res["idle_pct"] = idle_pct(jiffies)
    if db_pid is not None:
        res["db_cpu_ms_per_request"] = (db() - db_cpu) * 1e3 / res["requests"]
    res["load"] = load
    if counters is not None:
        res["stored"] = stored_n(srv.port) - before
        res.update(commit_stats(counters, srv.port))
        assert res["stored"] >= res["ok"], res  # every acknowledged report is stored
    return res


def _summary(runs: list[dict[str, Any]], **common: Any) -> dict[str, Any]:
    """Medians over a server's runs (p99: the largest); ``rounds``: how many."""
    row: dict[str, Any] = {**common, "rounds": len(runs)}
    for key in (
        "requests_per_s",
        "p50_ms",
        "cpu_ms_per_request",
        "db_cpu_ms_per_request",
        "mean_group",
        "mean_commit_ms",
        "idle_pct",
        "load",
    ):
        values = [r[key] for r in runs if key in r]
        if values:
            row[key] = statistics.median(values)
    row["p99_ms"] = max(r["p99_ms"] for r in runs)
    row["requests_per_s_range"] = "{:.0f}-{:.0f}".format(
        min(r["requests_per_s"] for r in runs),
        max(r["requests_per_s"] for r in runs),
    )
    for key in ("ok", "stored"):
        if all(key in r for r in runs):
            row[key] = sum(r[key] for r in runs)
    row["split"] = " ".join(sorted({r["split"] for r in runs if r.get("split")}))
    return row


def ingest_rows(
    args: Any,
    tmp: Path,
    database_url: str,
    backend: str,
    workers: int,
    db_pid: int | None = None,
) -> list[dict[str, Any]]:
    """The collector against the bare endpoint, side by side, at each connection count.

    Both servers run at once (the idle one waits in epoll and costs nothing) and wrk
    alternates between them in ``args.rounds`` pairs of ``args.seconds`` runs (bare
    first in odd pairs, collector first in even ones). The ratio is the median over the
    pairs of collector / bare: on a shared virtual machine the CPU time per request of
    *both* servers swings 30-40 % over tens of seconds (the host's, not the code's), so
    runs far apart in time compare states of the machine as much as servers. A last run
    of the collector alone, with the loop-stall watcher on, gives the tail table.

    ``db_pid``: the database server's process (PostgreSQL), whose CPU per request is
    reported too (``db_cpu_ms_per_request``; the bare endpoint's row: the idle server's).
    """
    one = tmp / "one.json"
    one.write_text(json.dumps(reports_to_dict(SPEC.randomize([7], rng=0))))
    batch = tmp / "batch.npz"
    batch.write_bytes(reports_to_bytes(SPEC.randomize(np.arange(10_000) % 1024, rng=1)))

    rows = []
    for connections in args.connections:
        common = {"backend": backend, "workers": workers, "connections": connections}
        bare_runs: list[dict[str, Any]] = []
        coll_runs: list[dict[str, Any]] = []
        bare = bare_server(tmp, workers)
        try:
            coll = collector_server(tmp, database_url, workers, args.commit_window)
            try:
                for srv in (bare, coll):  # warm-up (caches, connections), not counted
                    wrk(srv.port, one, "application/json", 2, connections)
                for i in range(args.rounds):
                    order = [(bare, bare_runs), (coll, coll_runs)]
                    for srv, runs in order if i % 2 == 0 else order[::-1]:
                        runs.append(
                            _measure(srv, one, connections, args.seconds, db_pid, srv is coll)
                        )
            finally:
                coll.stop()
        finally:
            bare.stop()
        rows.append(_summary(bare_runs, **common, server="bare FastAPI", body="1 report, JSON"))
        rows.append(_summary(coll_runs, **common, server="collector", body="1 report, JSON"))
        pairs = [c["requests_per_s"] / b["requests_per_s"] for b, c in zip(bare_runs, coll_runs)]
        cpu_pairs = [
            c["cpu_ms_per_request"] / b["cpu_ms_per_request"] for b, c in zip(bare_runs, coll_runs)
        ]
        ratio = {
            **common,
            "server": "collector / bare",
            "body": "median of pairs",
            "rounds": len(pairs),
            "requests_per_s": statistics.median(pairs),
            "requests_per_s_range": f"{min(pairs):.2f}-{max(pairs):.2f}",
            "cpu_ms_per_request": statistics.median(cpu_pairs),
            "pairs": pairs,
        }
        if db_pid is not None:  # collector + its database against the bare endpoint alone
            ratio["cpu_with_db_vs_bare"] = statistics.median(
                (c["cpu_ms_per_request"] + c["db_cpu_ms_per_request"]) / b["cpu_ms_per_request"]
                for b, c in zip(bare_runs, coll_runs)
            )
        rows.append(ratio)
        # The tail: the collector alone with the loop-stall watcher, one run.
        srv = collector_server(tmp, database_url, workers, args.commit_window, stall_log=True)
        try:
            wrk(srv.port, one, "application/json", 2, connections)
            tail = _measure(srv, one, connections, args.seconds, db_pid, True)
        finally:
            srv.stop()
        tail.update(loop_stalls(srv.log))  # warm-up included
        rows.append({**common, "server": "collector (stall watcher on)", **tail, "tail": True})
        for server, runs in (("bare FastAPI", bare_runs), ("collector", coll_runs)):
            for i, r in enumerate(runs):  # every run, for the JSON file
                rows.append({**common, "server": server, "round": i + 1, "slice": True, **r})
    if args.skip_batched:
        return rows
    srv = collector_server(tmp, database_url, workers, args.commit_window)
    try:
        before = stored_n(srv.port)
        wrk(srv.port, batch, "application/x-npz", 2, 4)  # warm-up
        res = wrk(srv.port, batch, "application/x-npz", args.seconds, 4)
        res["stored"] = stored_n(srv.port) - before
        assert res["stored"] >= 10_000 * res["ok"], res
        res["reports_per_s"] = res["requests_per_s"] * 10_000
        rows.append(
            {
                "backend": backend,
                "workers": workers,
                "connections": 4,
                "server": "collector",
                "body": "10,000 reports, npz",
                **res,
            }
        )
    finally:
        srv.stop()
    return rows


def estimate_rows(args: Any, tmp: Path) -> list[dict[str, Any]]:
    from fastapi.testclient import TestClient

    from ldpkit.service import create_app

    rows = []
    rng = np.random.default_rng(3)
    for batches in sorted({100, 10_000, args.estimate_batches}):
        db = tmp / f"est-{batches}.db"
        app = create_app({"olh": SPEC}, f"sqlite:///{db}")
        store = app.state.collector.store
        t0 = time.perf_counter()
        # One report per batch, spread over hourly buckets (at most 720: a month).
        hours = min(720, batches)
        start = 1_700_000_000 // 3600 * 3600
        bucket_of = start + 3600 * (np.arange(batches) % hours)
        reports = SPEC.randomize(rng.integers(0, 1024, size=batches), rng=rng)
        rollups = []
        for h in range(hours):
            idx = np.flatnonzero(bucket_of == start + 3600 * h)
            rollups.append((start + 3600 * h, "", SPEC.aggregate(reports[idx]), idx.size))
        import datetime as dt

        def rows_iter(batches: int = batches, bucket_of: Any = bucket_of) -> Any:
            for i in range(batches):
                b = int(bucket_of[i])
                yield {
                    "batch_id": f"{i:036d}",
                    "token": "",
                    "idempotency_key": None,
                    "n": 1,
                    "received_at": dt.datetime.fromtimestamp(b, dt.UTC),
                    "bucket": b,
                }

        store.bulk_load("olh", rows_iter(), rollups)
        load_s = time.perf_counter() - t0
        with TestClient(app) as client:
            times = []
            for _ in range(30):
                t = time.perf_counter()
                body = client.get("/v1/collections/olh/estimate").json()
                times.append(time.perf_counter() - t)
            assert body["n"] == batches and body["batches"] == batches
            t = time.perf_counter()
            window = client.get(
                "/v1/collections/olh/estimate",
                params={"since": start, "until": start + 24 * 3600},
            ).json()
            window_ms = (time.perf_counter() - t) * 1e3
        rows.append(
            {
                "stored batches": batches,
                "roll-up rows": hours,
                "generate s": load_s,
                "estimate p50 ms": float(np.percentile(times, 50)) * 1e3,
                "estimate p99 ms": float(np.percentile(times, 99)) * 1e3,
                "one-day window ms": window_ms,
                "window n": window["n"],
            }
        )
    return rows


def fsync_ms(directory: Path, count: int = 50) -> dict[str, float]:
    """Latency of appending 8 KiB and fsyncing, in the database's directory (the floor
    under one durable commit on this disk, right now)."""
    path = directory / "fsync.probe"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    times = []
    try:
        for _ in range(count):
            os.write(fd, b"x" * 8192)
            t = time.perf_counter()
            os.fsync(fd)
            times.append((time.perf_counter() - t) * 1e3)
    finally:
        os.close(fd)
        path.unlink()
    return {
        "fsync_p50_ms": float(np.median(times)),
        "fsync_p90_ms": float(np.percentile(times, 90)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=4, help="length of one wrk run")
    parser.add_argument("--connections", type=int, nargs="+", default=[16, 64])
    parser.add_argument(
        "--rounds", type=int, default=6, help="alternated pairs of runs (bare, collector)"
    )
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[2], help="processes on PostgreSQL (each)"
    )
    parser.add_argument("--estimate-batches", type=int, default=1_000_000)
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--skip-batched", action="store_true", help="no 10,000-report npz row")
    parser.add_argument(
        "--commit-window",
        type=float,
        default=None,
        help="the collector's commit_window in seconds (default: the collector's own)",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk must be installed (Debian: apt-get install wrk)")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        machine = {**fsync_ms(tmp), "load_average_1min": os.getloadavg()[0]}
        print(f"machine before the run: {machine}")
        if not args.skip_sqlite:
            rows += ingest_rows(args, tmp, f"sqlite:///{tmp / 'bench.db'}", "SQLite", 1)
        from ldpkit.service.pgtemp import TemporaryPostgres, find_pg_bin

        if not args.skip_postgres and find_pg_bin() is not None:
            with TemporaryPostgres() as pg:
                for workers in args.workers:
                    assert pg.proc is not None
                    rows += ingest_rows(args, tmp, pg.url, "PostgreSQL", workers, pg.proc.pid)
        columns = [
            ("backend", "database"),
            ("workers", "processes"),
            ("connections", "conns"),
            ("server", "server"),
            ("body", "body"),
            ("rounds", "runs"),
            ("requests_per_s", "requests/s (median)"),
            ("requests_per_s_range", "range"),
            ("reports_per_s", "reports/s"),
            ("p50_ms", "p50 ms"),
            ("p99_ms", "p99 ms (max)"),
            ("cpu_ms_per_request", "CPU ms/req"),
            ("db_cpu_ms_per_request", "DB CPU ms/req"),
            ("cpu_with_db_vs_bare", "(CPU + DB) / bare"),
            ("mean_group", "group"),
            ("mean_commit_ms", "commit ms"),
            ("ok", "2xx"),
            ("stored", "stored"),
            ("split", "conns per process"),
            ("idle_pct", "idle %"),
            ("load", "load"),
        ]
        print_table(
            f"Ingest, wrk -c{args.connections} on 127.0.0.1: {args.rounds} alternated pairs "
            f"of {args.seconds} s runs, collector and bare endpoint side by side",
            [r for r in rows if not r.get("slice") and not r.get("tail")],
            columns,
        )
        print_table(
            "Where the collector's tail comes from: its event loop (LDPKIT_DEBUG_LOOP_STALLS=20;"
            " one run, the collector alone)",
            [r for r in rows if r.get("tail")],
            [
                ("backend", "database"),
                ("workers", "processes"),
                ("connections", "conns"),
                ("requests_per_s", "requests/s"),
                ("p99_ms", "p99 ms"),
                ("stalls", "loop stalls > 20 ms"),
                ("stall_max_ms", "longest stall ms"),
                ("stalls_gc", "stalls mostly GC"),
                ("gc2_max_ms", "longest gen-2 GC ms"),
            ],
        )
        est = estimate_rows(args, tmp)
        print_table(
            "Estimate latency (OLH d = 1024, SQLite, in process)",
            est,
            [(k, k) for k in est[0]],
        )
    machine_after = {
        **fsync_ms(Path(tempfile.gettempdir())),
        "load_average_1min": os.getloadavg()[0],
    }
    print(f"machine after the run: {machine_after}")
    path = write_json(
        "collector",
        rows + est,
        {"args": vars(args), "machine_before": machine, "machine_after": machine_after},
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
