"""CPU per single-report POST through the collector's ASGI app, in process (no network).

Run from the repository root (needs the ``service`` extra)::

    PYTHONPATH=src python benchmarks/collector_asgi.py [--requests 4000] [--concurrency 16]
        [--profile OLH]

A raw ASGI driver calls the app directly (``await app(scope, receive, send)``) with
``--concurrency`` client tasks sending one-report JSON bodies, and measures the process's
CPU time (``time.process_time``: every thread, so the group committer's too) per request.
Rows, all in one run:

* ``bare``: a FastAPI endpoint that only reads the body and answers 201 (the same one
  ``benchmarks/collector.py`` runs under wrk);
* the collector for GRR (d = 64), OLH (d = 1024) and OUE (d = 1024), open and with a
  bearer token, each twice: ``request`` with the group committer replaced by a stub
  that answers at once (the request path alone: headers, auth, JSON decoding and
  checks, response), and ``commit`` with the real group commit to a SQLite file
  (``--postgres``: also ``commit-pg``, to a throwaway PostgreSQL server; its own
  processes' CPU is not counted).

The loop thread's share is printed too (the rest is the committer's helper thread:
COMMIT, fsync). CPU time is what the request costs wherever it runs; on a shared machine it is far
steadier than requests/s (which mostly measures how much CPU the process got). ``--profile
NAME`` prints the cProfile top of the ``request`` row of that mechanism (no auth;
``--profile-mode commit`` for the ``commit`` row).
Writes benchmarks/results/collector_asgi.json.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime as dt
import gc
import json
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response

from _common import print_table, write_json
from ldpkit import GRR, OLH, OUE
from ldpkit.io import reports_to_dict
from ldpkit.service import Quota, create_app, new_token
from ldpkit.service.auth import parse_tokens
from ldpkit.service.store import BatchRecord

SPECS = {
    "GRR": GRR(epsilon=1.0, domain_size=64),
    "OLH": OLH(epsilon=1.0, domain_size=1024),
    "OUE": OUE(epsilon=1.0, domain_size=1024),
}


def bare_app() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/reports/{collection}")
    async def post(collection: str, request: Request) -> Response:
        await request.body()
        return Response(b'{"ok":true}', status_code=201, media_type="application/json")

    return app


def _scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    # What uvicorn hands the app for one HTTP/1.1 request.
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


async def drive(
    app: Any,
    path: str,
    bodies: list[bytes],
    headers: list[tuple[bytes, bytes]],
    concurrency: int,
    prof: cProfile.Profile | None = None,
) -> tuple[float, float, float, dict[int, int]]:
    """Send every body (``concurrency`` clients in parallel).

    Returns the process's CPU seconds, the event loop thread's, wall seconds and the
    count of each answer status."""
    statuses: dict[int, int] = {}
    per_client = [bodies[i::concurrency] for i in range(concurrency)]

    async def client(mine: list[bytes]) -> None:
        for body in mine:
            scope = _scope(
                path, [*headers, (b"content-length", str(len(body)).encode())]
            )  # a new list per request, as a server builds
            sent = False

            async def receive(body: bytes = body) -> dict[str, Any]:
                nonlocal sent
                if sent:
                    await asyncio.sleep(3600)  # a server would wait for the disconnect
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            async def send(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    statuses[message["status"]] = statuses.get(message["status"], 0) + 1

            await app(scope, receive, send)

    gc.collect()
    if prof is not None:
        prof.enable()
    cpu, loop, wall = time.process_time(), time.thread_time(), time.perf_counter()
    await asyncio.gather(*(client(m) for m in per_client))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    loop = time.thread_time() - loop
    if prof is not None:
        prof.disable()
    return cpu, loop, wall, statuses


def _stub_commit(app: Any) -> None:
    """Answer every batch at once: the request path without the database."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    count = 0

    async def commit(item: Any) -> BatchRecord:
        nonlocal count
        count += 1
        return BatchRecord(f"00000000-0000-4000-8000-{count:012d}", item.collection, item.n, now)

    app.state.collector.committer.commit = commit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--profile", choices=sorted(SPECS), default=None)
    parser.add_argument(
        "--profile-mode", choices=["request", "commit", "commit-pg"], default="request"
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="also commit to a throwaway PostgreSQL server (needs its binaries)",
    )
    args = parser.parse_args()
    token, digest = new_token()
    tokens = parse_tokens([{"name": "devices", "scopes": ["ingest"], "sha256": digest}])
    json_type = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json")]
    auth = [(b"authorization", f"Bearer {token}".encode())]
    rows: list[dict[str, Any]] = []

    async def run() -> None:
        pg = None
        if args.postgres:
            from ldpkit.service.pgtemp import TemporaryPostgres

            pg = TemporaryPostgres().start()
        try:
            await measure(pg)
        finally:
            if pg is not None:
                pg.stop()

    async def measure(pg: Any) -> None:
        n = args.requests
        sample = [json.dumps(reports_to_dict(SPECS["OLH"].randomize([1], rng=0))).encode()] * n
        cpu, loop, wall, st = await drive(
            bare_app(), "/v1/reports/x", sample, json_type, args.concurrency
        )
        bare_us = cpu / n * 1e6
        rows.append(
            {
                "app": "bare",
                "mode": "-",
                "auth": "-",
                "cpu_us": round(bare_us, 1),
                "loop_us": round(loop / n * 1e6, 1),
                "x_bare": 1.0,
                "req_s": round(n / wall),
                "statuses": json.dumps(st),
            }
        )
        modes = ["request", "commit"] + (["commit-pg"] if pg is not None else [])
        with tempfile.TemporaryDirectory() as tmp:
            for mech, spec in SPECS.items():
                reports = spec.randomize([i % 7 for i in range(n)], rng=1)
                bodies = [
                    json.dumps(reports_to_dict(reports[i : i + 1])).encode() for i in range(n)
                ]
                for mode in modes:
                    for with_auth in (False, True):
                        db = f"sqlite:///{tmp}/{mech}-{mode}-{with_auth}.db"
                        if mode == "commit-pg":
                            db = pg.url
                        name = f"{mech.lower()}_{'bearer' if with_auth else 'open'}"
                        # quotas counted, never reached: their cost, not 429s, in the numbers
                        app = create_app(
                            {name: spec},
                            db,
                            tokens=tokens if with_auth else None,
                            quotas=Quota(reports_per_minute=10**12, batches_per_second=10**12),
                        )
                        if mode == "request":
                            _stub_commit(app)
                        headers = json_type + (auth if with_auth else [])
                        profile = (
                            args.profile == mech and mode == args.profile_mode and not with_auth
                        )
                        prof = cProfile.Profile(time.thread_time) if profile else None
                        cpu, loop, wall, st = await drive(
                            app, f"/v1/reports/{name}", bodies, headers, args.concurrency, prof
                        )
                        if prof is not None:
                            prof.disable()
                            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
                        await app.state.collector.committer.close()
                        app.state.collector.store.close()
                        us = cpu / n * 1e6
                        rows.append(
                            {
                                "app": f"collector {mech}",
                                "mode": mode,
                                "auth": "bearer" if with_auth else "open",
                                "cpu_us": round(us, 1),
                                "loop_us": round(loop / n * 1e6, 1),
                                "x_bare": round(us / bare_us, 2),
                                "req_s": round(n / wall),
                                "statuses": json.dumps(st),
                            }
                        )

    asyncio.run(run())
    print_table(
        f"Single-report POSTs through the ASGI app ({args.requests} requests, "
        f"{args.concurrency} clients): CPU per request",
        rows,
        [
            ("app", "app"),
            ("mode", "mode"),
            ("auth", "auth"),
            ("cpu_us", "CPU us/req"),
            ("loop_us", "of it loop thread"),
            ("x_bare", "x bare"),
            ("req_s", "req/s"),
            ("statuses", "statuses"),
        ],
    )
    write_json("collector_asgi", rows, {"requests": args.requests, "concurrency": args.concurrency})
    print(f"(written to {Path('benchmarks/results/collector_asgi.json')})")


if __name__ == "__main__":
    main()
