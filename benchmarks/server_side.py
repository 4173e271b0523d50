"""Throughput of the server side: report I/O (npz, Parquet), Dask aggregation, the HTTP collector.

Run from the repository root (needs the ``distributed`` and ``service`` extras)::

    PYTHONPATH=src python benchmarks/server_side.py [--n 1000000] [--batches 100] [--repeat 2]

1. I/O: bytes on disk and write / read / read-and-aggregate-by-row-group times of
   ``n`` OUE (d = 1024, bit-packed) and OLH (d = 1024) reports in npz and Parquet (zstd,
   snappy, none).
2. Dask: ``aggregate_dask`` over 8 Parquet files (threads and synchronous schedulers)
   against one in-process ``spec.aggregate`` of the same reports (the results are checked
   equal).
3. Collector: POST ``--batches`` batches of 10 000 OLH reports through FastAPI's
   TestClient (in process, SQLite file), reports/s and requests/s; then the latency of the
   estimate endpoint (it sums the roll-up rows, one per hour and token here).

Prints tables and writes benchmarks/results/server_side.json.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from _common import print_table, timed, write_json
from ldpkit import OLH, OUE
from ldpkit.distributed import aggregate_dask
from ldpkit.io import (
    iter_reports_parquet,
    load_reports,
    reports_to_bytes,
    save_reports,
    save_reports_parquet,
)


def _one_format(
    spec: Any, reports: Any, path: Path, fmt: str, codec: str | None, repeat: int
) -> dict[str, Any]:
    if fmt == "npz":
        t_write, _ = timed(lambda: save_reports(reports, path), repeat)
    else:
        t_write, _ = timed(lambda: save_reports_parquet(reports, path, compression=codec), repeat)
    t_read, back = timed(lambda: load_reports(path, expected=spec), repeat)
    assert back.equals(reports)
    t_agg = None
    if fmt == "parquet":

        def stream_aggregate() -> Any:
            stats = spec.empty_stats()
            for batch in iter_reports_parquet(path, expected=spec, batch_size=100_000):
                stats = stats.merge(spec.aggregate(batch))
            return stats

        t_agg, stats = timed(stream_aggregate, repeat)
        assert stats == spec.aggregate(reports)
    raw = sum(a.nbytes for a in reports.arrays.values())
    return {
        "spec": repr(spec),
        "n": len(reports),
        "format": fmt,
        "codec": codec or "none",
        "raw_MB": raw / 1e6,
        "file_MB": path.stat().st_size / 1e6,
        "write_s": t_write,
        "read_s": t_read,
        "read_MBps": raw / 1e6 / t_read,
        "stream_aggregate_s": t_agg,
    }


def bench_io(spec: Any, n: int, repeat: int, tmp: Path) -> list[dict[str, Any]]:
    reports = spec.randomize(np.random.default_rng(0).integers(0, spec.domain_size, n), rng=0)
    formats = [("npz", "deflate"), ("parquet", "zstd"), ("parquet", "snappy"), ("parquet", None)]
    return [
        _one_format(spec, reports, tmp / f"r.{fmt}", fmt, codec, repeat) for fmt, codec in formats
    ]


def bench_dask(n: int, repeat: int, tmp: Path) -> list[dict[str, Any]]:
    spec = OLH(epsilon=1.0, domain_size=1024)
    parts = [
        spec.randomize(np.random.default_rng(i).integers(0, 1024, n // 8), rng=i) for i in range(8)
    ]
    paths = [save_reports_parquet(p, tmp / f"part{i}.parquet") for i, p in enumerate(parts)]
    everything = parts[0].concat(*parts[1:])
    t_single, expected = timed(lambda: spec.aggregate(everything), repeat)
    rows = [{"method": "spec.aggregate (in memory, one call)", "n": n, "seconds": t_single}]
    for scheduler in ("synchronous", "threads"):
        for label, source in (("Parquet paths", paths), ("in-memory Reports", parts)):
            t, stats = timed(
                lambda s=source, sch=scheduler: aggregate_dask(spec, s, scheduler=sch), repeat
            )
            assert stats == expected
            rows.append({"method": f"aggregate_dask({label}, {scheduler})", "n": n, "seconds": t})
    for row in rows:
        row["reports_per_s"] = n / row["seconds"]
    return rows


def bench_collector(batches: int, tmp: Path) -> list[dict[str, Any]]:
    from fastapi.testclient import TestClient

    from ldpkit.service import create_app

    spec = OLH(epsilon=1.0, domain_size=1024)
    size = 10_000
    bodies = {
        fmt: [
            reports_to_bytes(
                spec.randomize(np.random.default_rng(i).integers(0, 1024, size), rng=i), format=fmt
            )
            for i in range(batches)
        ]
        for fmt in ("npz", "parquet")
    }
    rows = []
    for fmt, payloads in bodies.items():
        app = create_app({"c": spec}, f"sqlite:///{tmp / f'collector-{fmt}.db'}")
        with TestClient(app) as client:

            def post_all(client: Any = client, payloads: list[bytes] = payloads) -> None:
                for i, body in enumerate(payloads):
                    r = client.post(
                        "/v1/reports/c", content=body, headers={"Idempotency-Key": f"b{i}"}
                    )
                    assert r.status_code == 201, r.text

            t_post, _ = timed(post_all)
            t_est, resp = timed(lambda client=client: client.get("/v1/collections/c/estimate"), 3)
            assert resp.json()["n"] == batches * size
        rows.append(
            {
                "format": fmt,
                "batches": batches,
                "batch_size": size,
                "body_KB": np.mean([len(b) for b in payloads]) / 1e3,
                "ingest_s": t_post,
                "requests_per_s": batches / t_post,
                "reports_per_s": batches * size / t_post,
                "estimate_s": t_est,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        io_rows = []
        for spec in (OUE(epsilon=1.0, domain_size=1024), OLH(epsilon=1.0, domain_size=1024)):
            io_rows += bench_io(spec, args.n, args.repeat, tmp)
        print_table(
            "Report files",
            io_rows,
            [
                ("spec", "spec"),
                ("format", "format"),
                ("codec", "codec"),
                ("raw_MB", "raw MB"),
                ("file_MB", "file MB"),
                ("write_s", "write s"),
                ("read_s", "read s"),
                ("read_MBps", "read MB/s"),
                ("stream_aggregate_s", "row-group aggregate s"),
            ],
        )
        dask_rows = bench_dask(args.n, args.repeat, tmp)
        print_table(
            f"Dask aggregation, OLH d=1024, 8 partitions, n={args.n:,}",
            dask_rows,
            [("method", "method"), ("seconds", "seconds"), ("reports_per_s", "reports/s")],
        )
        service_rows = bench_collector(args.batches, tmp)
        print_table(
            "Collector (TestClient, SQLite), OLH d=1024",
            service_rows,
            [
                ("format", "format"),
                ("batches", "batches"),
                ("batch_size", "reports/batch"),
                ("body_KB", "body KB"),
                ("ingest_s", "ingest s"),
                ("requests_per_s", "requests/s"),
                ("reports_per_s", "reports/s"),
                ("estimate_s", "estimate s (roll-ups)"),
            ],
        )
    path = write_json(
        "server_side", [], {"io": io_rows, "dask": dask_rows, "collector": service_rows}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
