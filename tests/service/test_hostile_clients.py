"""One client's bad bodies are that client's 4xx, never another client's 500."""

import asyncio
import json
import math

import numpy as np
import pytest
from fastapi.testclient import TestClient

from ldpkit import (
    GRR,
    SHE,
    HybridMechanism,
    PiecewiseMechanism,
    SquareWave,
    StochasticRounding,
)
from ldpkit.io import reports_to_dict
from ldpkit.numeric import AutoDistribution, GeneralWave
from ldpkit.service import create_app
from ldpkit.service.commit import AggregationError, GroupCommitter, ReportRows
from ldpkit.service.store import CollectorStore, PendingBatch

FLOAT_SPECS = {
    "sw": SquareWave(epsilon=1.0),
    "sr": StochasticRounding(epsilon=1.0),
    "pm": PiecewiseMechanism(epsilon=1.0),
    "hm": HybridMechanism(epsilon=1.0),
    "she": SHE(epsilon=1.0, domain_size=3),
    "gw": GeneralWave(epsilon=1.0),
    "auto": AutoDistribution(epsilon=1.0),
}


@pytest.fixture
def client(tmp_path):
    app = create_app(
        {**FLOAT_SPECS, "g": GRR(epsilon=1.0, domain_size=4)}, f"sqlite:///{tmp_path / 'c.db'}"
    )
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def _body(spec, bad):
    """A one-report JSON body of ``spec`` whose first float is the JSON token ``bad``."""
    d = reports_to_dict(spec.randomize(np.array([0.0] if spec.name != "SHE" else [0]), rng=1))
    d.pop("mechanism")
    text = json.dumps(d)
    if bad is None:
        return text
    first = d["arrays"]["values"]["data"]
    old = json.dumps(first)
    new = old.replace(repr(float(np.ravel(first)[0])), bad, 1)
    assert new != old
    return text.replace(old, new)


@pytest.mark.parametrize("name", sorted(FLOAT_SPECS))
@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("origin", [None, "http://example.org"])
def test_non_finite_report_values_are_422_on_both_ingest_paths(client, name, bad, origin):
    headers = {"Content-Type": "application/json"}
    if origin:  # the regular FastAPI route (the raw-ASGI fast path hands browsers on)
        headers["Origin"] = origin
    r = client.post(f"/v1/reports/{name}", content=_body(FLOAT_SPECS[name], bad), headers=headers)
    assert r.status_code == 422, r.text
    assert "finite" in r.json()["detail"]
    # the exact NaN body of the original report too
    fp = FLOAT_SPECS[name].fingerprint
    if name != "she":
        raw = '{"fingerprint": "FP", "arrays": {"values": [BAD]}}'.replace("FP", fp)
        raw = raw.replace("BAD", bad)
        r = client.post(f"/v1/reports/{name}", content=raw, headers=headers)
        assert r.status_code == 422, r.text
    ok = client.post(f"/v1/reports/{name}", content=_body(FLOAT_SPECS[name], None), headers=headers)
    assert ok.status_code == 201, ok.text
    assert client.get(f"/v1/collections/{name}").json()["n"] == 1


SW = FLOAT_SPECS["sw"]


GRID = SW.report_values()


def _rows(v):
    """One SquareWave report: the grid value nearest v (NaN stays NaN)."""
    if not math.isnan(v):
        v = float(GRID[np.abs(GRID - v).argmin()])
    return ReportRows({"values": [v]}, {"values": np.dtype(np.float64)})


def _run_group(store, items, window=600.0):
    """Commit ``items`` in one group; the result or exception of each, in order."""
    sizes = []
    committer = GroupCommitter(
        store, {"c": SW}, window=window, on_commit=lambda _s, n: sizes.append(n)
    )

    async def run():
        await asyncio.wait_for(committer.commit(PendingBatch("c", 1, reports=_rows(0.5))), 60)
        out = await asyncio.wait_for(
            asyncio.gather(*(committer.commit(i) for i in items), return_exceptions=True), 60
        )
        await committer.close()
        return out

    return asyncio.run(run()), sizes


def test_a_bad_batch_inside_a_group_fails_alone(tmp_path):
    """A ReportRows that slipped past the decoder (NaN) reaches the committer: the other
    batches of its group are stored, the bad one gets an AggregationError (422)."""
    store = CollectorStore(f"sqlite:///{tmp_path / 'c.db'}")
    store.register("c", SW)
    try:
        items = [PendingBatch("c", 1, reports=_rows(v)) for v in (0.1, math.nan, 0.3, 0.4)]
        out, _ = _run_group(store, items)
        assert isinstance(out[1], AggregationError)
        assert "finite" in str(out[1])
        assert [type(o).__name__ for i, o in enumerate(out) if i != 1] == ["BatchRecord"] * 3
        assert store.summary("c") == (4, 4)
    finally:
        store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'c.db'}"
    return request.getfixturevalue("fresh_postgres")


def test_a_failing_group_transaction_is_retried_batch_by_batch(any_db, monkeypatch):
    """Whatever makes a group's transaction fail (here: one batch's roll-up part cannot be
    built, on every commit path: SQLite, PostgreSQL in the loop or pipelined), only the
    batch that causes it fails; the others are committed in halves (a few transactions,
    not one per batch)."""
    store = CollectorStore(any_db)
    store.register("c", SW)
    poison = SW.aggregate(SW.randomize(np.array([0.5]), rng=0))
    original = store.writes.parts
    attempts = []

    def parts(items, new, combine, *args):
        attempts.append(len(new))
        if any(items[i].stats is poison for i in new):
            raise RuntimeError("something in this batch breaks the transaction")
        return original(items, new, combine, *args)

    try:
        good = [SW.aggregate(SW.randomize(np.array([0.5]), rng=s)) for s in range(1, 16)]
        stats = [*good[:5], poison, *good[5:]]
        items = [PendingBatch("c", 1, stats=s) for s in stats]
        monkeypatch.setattr(store.writes, "parts", parts)
        out, sizes = _run_group(store, items)
        assert isinstance(out[5], RuntimeError)
        assert [type(o).__name__ for i, o in enumerate(out) if i != 5] == ["BatchRecord"] * 15
        assert sizes[-1] == 16  # one group (split inside), not sixteen
        assert store.summary("c") == (16, 16)  # the lone first batch and the 15 good ones
        # 16 at once; the failing half of each failing part split again: 9 transactions
        # (2 log2(16) + 1), depth first (the first batch's own group came before)
        assert attempts[-9:] == [16, 8, 4, 4, 2, 1, 1, 2, 8]
    finally:
        store.close()


def test_a_database_outage_still_fails_the_whole_group_at_once(tmp_path, monkeypatch):
    from sqlalchemy.exc import OperationalError

    store = CollectorStore(f"sqlite:///{tmp_path / 'c.db'}")
    store.register("c", SW)
    calls = []

    def commit_group(conn, items, combine):
        calls.append(len(items))
        raise OperationalError("COMMIT", {}, Exception("disk I/O error"))

    try:
        items = [PendingBatch("c", 1, reports=_rows(0.1 * i)) for i in range(4)]
        committer = GroupCommitter(store, {"c": SW}, window=600.0)

        async def run():
            await asyncio.wait_for(committer.commit(PendingBatch("c", 1, reports=_rows(0.5))), 60)
            monkeypatch.setattr(store.sqlite, "_commit_group", commit_group)
            out = await asyncio.wait_for(
                asyncio.gather(*(committer.commit(i) for i in items), return_exceptions=True), 60
            )
            await committer.close()
            return out

        out = asyncio.run(run())
        assert all(isinstance(o, OperationalError) for o in out)
        assert calls == [4]  # not retried batch by batch: every one would fail alike
    finally:
        store.close()


def _server_helpers():
    """test_durability's helpers that start a real server process (tests/service is no package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).with_name("test_durability.py")
    spec = importlib.util.spec_from_file_location("_durability_helpers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._free_port, module._start


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_nan_client_beside_eight_honest_ones_fails_none_of_theirs(tmp_path, request, backend):
    """The reported load: one client sending NaN bodies as fast as it can beside 8 honest
    clients (one report per POST, keep-alive), on a real server on 127.0.0.1 (SQLite, one
    process; PostgreSQL, 2 worker processes), for a few seconds (at most 400 requests per
    client). Before the fix, 28 % of the honest requests failed with 500 (the NaN batch
    failed every group it joined)."""
    import http.client
    import threading
    import time

    _free_port, _start = _server_helpers()

    config = tmp_path / "collector.json"
    config.write_text(
        json.dumps(
            {
                "database_url": f"sqlite:///{tmp_path / 'c.db'}"
                if backend == "sqlite"
                else request.getfixturevalue("fresh_postgres"),
                "collections": {"sw": SW.to_dict()},
            }
        )
    )
    port = _free_port()
    proc = _start(config, port, 1 if backend == "sqlite" else 2)
    good = [json.dumps(reports_to_dict(SW.randomize(np.array([i / 8]), rng=i))) for i in range(8)]
    nan = '{"fingerprint": "FP", "arrays": {"values": [NaN]}}'.replace("FP", SW.fingerprint)
    statuses: dict[str, list[int]] = {"honest": [], "nan": []}
    lock = threading.Lock()
    deadline = time.monotonic() + 3.0

    def client(kind, body):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        got = []
        try:
            for _ in range(400):
                if time.monotonic() > deadline:
                    break
                try:
                    conn.request(
                        "POST",
                        "/v1/reports/sw",
                        body=body,
                        headers={"Content-Type": "application/json"},
                    )
                    resp = conn.getresponse()
                    resp.read()
                    got.append(resp.status)
                except (OSError, http.client.HTTPException):
                    got.append(-1)
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        finally:
            conn.close()
            with lock:
                statuses[kind] += got

    try:
        threads = [threading.Thread(target=client, args=("honest", b)) for b in good]
        threads.append(threading.Thread(target=client, args=("nan", nan)))
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        import os
        import signal

        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    failed = [s for s in statuses["honest"] if s != 201]
    codes = sorted(set(statuses["nan"]))
    print(
        f"{backend}: honest requests {len(statuses['honest'])}, failed {len(failed)}; "
        f"NaN requests {len(statuses['nan'])}, status codes {codes}"
    )
    assert len(statuses["honest"]) >= 8 and statuses["nan"]
    assert failed == []
    assert codes == [422]


@pytest.mark.parametrize(
    "value", ["1e300", "9999-12-31T23:59:59", "1e12", "-1e18", "inf", "-inf", "nan"]
)
@pytest.mark.parametrize("route", ["estimate", "buckets", "stats"])
@pytest.mark.parametrize("param", ["since", "until"])
def test_times_outside_the_representable_range_are_422(client, value, route, param):
    g = GRR(epsilon=1.0, domain_size=4)
    r = client.post("/v1/reports/g", json=reports_to_dict(g.randomize(np.arange(4), rng=0)))
    assert r.status_code == 201
    r = client.get(f"/v1/collections/g/{route}", params={param: value})
    if param == "until" and value == "9999-12-31T23:59:59":  # a whole bucket ends before it
        assert r.status_code == 200, r.text
        return
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail.startswith(f"{param} must ") and repr(value) in detail
    assert "9999-12-31T23:59:59" in detail


def test_the_extreme_representable_times_are_served(client):
    g = GRR(epsilon=1.0, domain_size=4)
    assert (
        client.post(
            "/v1/reports/g", json=reports_to_dict(g.randomize(np.arange(4), rng=0))
        ).status_code
        == 201
    )
    for route in ["estimate", "buckets", "stats"]:
        r = client.get(
            f"/v1/collections/g/{route}",
            params={"since": "0001-01-01T00:00:00", "until": "9999-12-31T23:00:00Z"},
        )
        assert r.status_code == 200, r.text
    r = client.get("/v1/collections/g/estimate", params={"since": "-62135596800"})
    assert r.json()["n"] == 4 and r.json()["since"].startswith("0001-01-01")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_values_in_an_npz_body_are_422(client, bad):
    """The binary path refuses them too (Reports' check while the body is decoded)."""
    import io
    import zipfile

    from ldpkit.io import _digest, reports_to_bytes

    def npy(array):
        buf = io.BytesIO()
        np.save(buf, array)
        return buf.getvalue()

    body = reports_to_bytes(SW.randomize(np.array([0.1, 0.2, 0.3]), rng=0))
    src = zipfile.ZipFile(io.BytesIO(body))
    values = np.load(io.BytesIO(src.read("values.npy")))
    values[1] = bad
    # a hostile client recomputes the integrity digest: the content check must still hold
    meta = json.loads(bytes(np.load(io.BytesIO(src.read("__ldpkit_meta__.npy")))))
    meta["digest"] = _digest({"values": values})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        dst.writestr("values.npy", npy(values))
        dst.writestr("__ldpkit_meta__.npy", npy(np.frombuffer(json.dumps(meta).encode(), np.uint8)))
    r = client.post(
        "/v1/reports/sw", content=out.getvalue(), headers={"Content-Type": "application/x-npz"}
    )
    assert r.status_code == 422, r.text
    assert "finite" in r.json()["detail"]
    assert client.get("/v1/collections/sw").json()["n"] == 0


@pytest.mark.parametrize("origin", [None, "http://example.org"])
def test_an_integer_beyond_any_float_in_a_float_field_is_422(client, origin):
    headers = {"Content-Type": "application/json", **({"Origin": origin} if origin else {})}
    body = '{"fingerprint": "FP", "arrays": {"values": [0.5, 1%s]}}' % ("0" * 400)
    r = client.post("/v1/reports/sw", content=body.replace("FP", SW.fingerprint), headers=headers)
    assert r.status_code == 422, r.text


def test_an_outage_while_a_failed_group_is_split_answers_each_half_truly(tmp_path, monkeypatch):
    """The first half committed, then the database went away: the first half's requests
    get their records (stored), the others the outage (503), not all of them the error."""
    from sqlalchemy.exc import OperationalError

    store = CollectorStore(f"sqlite:///{tmp_path / 'c.db'}")
    store.register("c", SW)
    poison = SW.aggregate(SW.randomize(np.array([0.5]), rng=0))
    original = store.writes.parts
    attempts = []

    def parts(items, new, combine, *args):
        attempts.append(len(new))
        if any(items[i].stats is poison for i in new):
            if len(new) == 4:  # the second half's transaction: the database is gone
                raise OperationalError("INSERT", {}, Exception("server closed the connection"))
            raise RuntimeError("something in this batch breaks the transaction")
        return original(items, new, combine, *args)

    try:
        good = [SW.aggregate(SW.randomize(np.array([0.5]), rng=s)) for s in range(1, 8)]
        items = [PendingBatch("c", 1, stats=s) for s in [*good, poison]]
        monkeypatch.setattr(store.writes, "parts", parts)
        out, _ = _run_group(store, items)
        assert attempts == [1, 8, 4, 4]  # the lone first batch, the group, its halves
        assert [type(o).__name__ for o in out] == ["BatchRecord"] * 4 + ["OperationalError"] * 4
        assert store.summary("c") == (5, 5)  # the lone first batch and the first half
    finally:
        store.close()
