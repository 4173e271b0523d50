"""End to end: clients randomize on device, POST to the collector, the analyst asks for estimates.

Run with ``python examples/collector.py`` (needs ``pip install 'ldpkit[service]'``). It starts
the collector with uvicorn in a background thread on 127.0.0.1 (a free port, a temporary
SQLite file), runs three simulated clients, prints the estimate next to the truth, and
stops the server by itself (at the latest after ``--timeout`` seconds).

Clients use only the standard library (urllib) plus ``ldpkit`` and ``ldpkit.io``: the
client never needs the server code.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import numpy as np

import ldpkit
from ldpkit.io import reports_to_bytes
from ldpkit.spec import spec_from_dict

FRUITS = ["apple", "banana", "cherry", "durian", "elderberry", "fig", "grape", "honeydew"]


# -- the server side -------------------------------------------------------------------------
def start_server(db_path: Path, token_sha256: str) -> tuple[Any, threading.Thread, str]:
    import uvicorn

    from ldpkit.service import Collection, create_app
    from ldpkit.service.auth import parse_tokens

    encoder = ldpkit.Encoder(FRUITS, unknown="other")  # unseen fruit count as "<other>"
    spec = ldpkit.OLH(epsilon=2.0, domain_size=encoder.domain_size)
    app = create_app(
        {"fruit": Collection(spec, encoder=encoder, description="favourite fruit")},
        f"sqlite:///{db_path}",
        # One token for everything here; a deployment gives devices an "ingest"-only token.
        tokens=parse_tokens(
            [{"name": "demo", "scopes": ["ingest", "admin"], "sha256": token_sha256}]
        ),
    )
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the collector did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, thread, f"http://127.0.0.1:{port}"


# -- the client side -------------------------------------------------------------------------
def http(
    method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def run_client(
    base: str, token: str, name: str, true_values: np.ndarray, batch: int, rng: np.random.Generator
) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    # 1. Ask the collector which protocol to use: spec and encoder travel as data, not code.
    _, info = http("GET", f"{base}/v1/collections/fruit", headers=auth)
    spec = spec_from_dict(info["mechanism"])
    encoder = ldpkit.Encoder(info["encoder"]["categories"], unknown=info["encoder"]["unknown"])
    assert spec.fingerprint == info["fingerprint"]
    items = encoder.encode(true_values)
    # 2. Randomize on the device (a real client randomizes one user's value; here, a batch).
    for start in range(0, items.size, batch):
        reports = spec.randomize(items[start : start + batch], rng=rng)
        body = reports_to_bytes(reports, format="parquet")
        # 3. POST with an idempotency key; a retry after a timeout is not counted twice.
        key = f"{name}-{uuid.uuid4()}"
        status, reply = http(
            "POST",
            f"{base}/v1/reports/fruit",
            body,
            {"Content-Type": "application/vnd.apache.parquet", "Idempotency-Key": key, **auth},
        )
        assert status == 201, reply
        status, reply = http(
            "POST",
            f"{base}/v1/reports/fruit",
            body,
            {"Content-Type": "application/vnd.apache.parquet", "Idempotency-Key": key, **auth},
        )
        assert status == 200 and reply["duplicate"], reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=60_000, help="users per client")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="stop the server after this many seconds"
    )
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    weights = np.array([30, 20, 15, 10, 10, 8, 5, 2], dtype=float)
    weights /= weights.sum()
    populations = {f"client-{i}": rng.choice(FRUITS, size=args.users, p=weights) for i in range(3)}

    from ldpkit.service import new_token

    token, token_sha256 = new_token()  # the config holds only the hash
    with tempfile.TemporaryDirectory() as tmp:
        server, thread, base = start_server(Path(tmp) / "collector.db", token_sha256)
        watchdog = threading.Timer(args.timeout, lambda: setattr(server, "should_exit", True))
        watchdog.start()
        try:
            print(f"collector on {base} (OpenAPI docs at {base}/docs)")
            for name, values in populations.items():
                run_client(base, token, name, values, batch=10_000, rng=rng)
            # 4. The analyst: merged estimate with 95% confidence intervals.
            _, est = http(
                "GET",
                f"{base}/v1/collections/fruit/estimate?alpha=0.05",
                headers={"Authorization": f"Bearer {token}"},
            )
        finally:
            watchdog.cancel()
            server.should_exit = True
            thread.join(timeout=10)

    truth = np.mean(
        [
            ldpkit.Encoder(FRUITS, unknown="other").encode(v)[:, None] == np.arange(len(FRUITS) + 1)
            for v in populations.values()
        ],
        axis=(0, 1),
    )
    print(f"n = {est['n']:,} reports in {est['batches']} batches; {est['mechanism']}")
    print(f"{'fruit':>10} {'estimate':>9} {'95% CI':>19} {'truth':>7}")
    for label, f, lo, hi, t in zip(
        est["labels"], est["frequencies"], est["ci_low"], est["ci_high"], truth
    ):
        print(f"{label:>10} {f:9.4f} [{lo:8.4f}, {hi:7.4f}] {t:7.4f}")
    inside = np.mean((np.array(est["ci_low"]) <= truth) & (truth <= np.array(est["ci_high"])))
    print(f"truth inside the 95% interval for {inside:.0%} of the items")


if __name__ == "__main__":
    main()
