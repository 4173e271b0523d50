import json
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from fastapi.testclient import TestClient

from ldpkit import GRR, OLH, OUE, Encoder, Reports
from ldpkit.io import reports_to_bytes, reports_to_dict
from ldpkit.service import Collection, app_from_config, create_app

COLORS = ["red", "green", "blue", "yellow", "black"]
OLH_SPEC = OLH(epsilon=2.0, domain_size=200)
OUE_SPEC = OUE(epsilon=1.0, domain_size=len(COLORS))


def _collections():
    return {
        "pages": OLH_SPEC,
        "colors": Collection(OUE_SPEC, encoder=Encoder(COLORS), description="favourite colour"),
    }


@pytest.fixture
def db_url(tmp_path):
    return f"sqlite:///{tmp_path / 'collector.db'}"


@pytest.fixture
def client(db_url):
    with TestClient(create_app(_collections(), db_url)) as c:
        yield c


def _client_batches(spec, seed, k=4):
    """A simulated client: k batches of its own users (own value distribution)."""
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.ones(spec.domain_size))
    return [
        spec.randomize(
            rng.choice(spec.domain_size, size=int(rng.integers(50, 400)), p=weights), rng=rng
        )
        for _ in range(k)
    ]


def _post(client, collection, reports, fmt, key=None):
    headers = {"Idempotency-Key": key} if key else {}
    if fmt == "json":
        return client.post(
            f"/v1/reports/{collection}", json=reports_to_dict(reports), headers=headers
        )
    media = {"npz": "application/x-npz", "parquet": "application/vnd.apache.parquet"}[fmt]
    return client.post(
        f"/v1/reports/{collection}",
        content=reports_to_bytes(reports, format=fmt),
        headers={**headers, "Content-Type": media},
    )


def _offline(spec, batches, alpha=0.05):
    est = spec.estimate(spec.aggregate(batches[0].concat(*batches[1:])))
    low, high = est.confidence_interval(alpha)
    return est, low, high


@pytest.mark.parametrize(("collection", "spec"), [("pages", OLH_SPEC), ("colors", OUE_SPEC)])
def test_estimate_from_two_clients_equals_offline_estimate_exactly(client, collection, spec):
    a, b = _client_batches(spec, seed=1), _client_batches(spec, seed=2)
    formats = ["npz", "parquet", "json", "npz"]
    for i, (ra, rb) in enumerate(zip(a, b)):
        for r in (ra, rb):
            resp = _post(client, collection, r, formats[i])
            assert resp.status_code == 201, resp.text
            assert resp.json()["n"] == len(r) and resp.json()["duplicate"] is False
    est, low, high = _offline(spec, a + b, alpha=0.1)
    resp = client.get(f"/v1/collections/{collection}/estimate", params={"alpha": 0.1})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["n"] == est.n == sum(map(len, a + b)) and body["batches"] == 8
    assert body["fingerprint"] == spec.fingerprint and body["mechanism"] == spec.to_dict()
    # Exact: JSON floats round-trip float64, and the merged integer counts are identical.
    np.testing.assert_array_equal(body["frequencies"], est.frequencies)
    np.testing.assert_array_equal(body["std_errors"], est.std_error)
    np.testing.assert_array_equal(body["ci_low"], low)
    np.testing.assert_array_equal(body["ci_high"], high)
    assert body["labels"] == (COLORS if collection == "colors" else None)
    stats = client.get(f"/v1/collections/{collection}/stats").json()
    assert stats["n"] == est.n and stats["fingerprint"] == spec.fingerprint


def test_postprocessing_and_empty_collection(client):
    body = client.get("/v1/collections/colors/estimate").json()
    assert body["n"] == 0 and body["frequencies"] is None and body["batches"] == 0
    batches = _client_batches(OUE_SPEC, seed=3)
    for r in batches:
        assert _post(client, "colors", r, "npz").status_code == 201
    body = client.get(
        "/v1/collections/colors/estimate", params={"postprocessing": "norm_sub"}
    ).json()
    assert body["postprocessing"] == ["norm_sub"]
    assert min(body["frequencies"]) >= 0 and sum(body["frequencies"]) == pytest.approx(1.0)
    # biased after Norm-Sub: no interval (JSON null), not the unbiased one around a 0
    assert set(body["ci_low"]) == {None} and set(body["ci_high"]) == {None}
    resp = client.get("/v1/collections/colors/estimate", params={"postprocessing": "magic"})
    assert resp.status_code == 422 and "postprocessing must be one of" in resp.json()["detail"]
    assert client.get("/v1/collections/colors/estimate", params={"alpha": 1.5}).status_code == 422


def test_fingerprint_mismatch_is_rejected_with_409(client):
    other = OLH(epsilon=1.0, domain_size=200)
    r = other.randomize(np.arange(100) % 200, rng=0)
    for fmt in ("npz", "parquet", "json"):
        resp = _post(client, "pages", r, fmt)
        assert resp.status_code == 409, resp.text
        detail = resp.json()["detail"]
        assert OLH_SPEC.fingerprint in detail and other.fingerprint in detail
        assert "GET /v1/collections/pages" in detail
    small = {"fingerprint": other.fingerprint, "arrays": {"seeds": [1], "values": [0]}}
    assert client.post("/v1/reports/pages", json=small).status_code == 409
    assert client.get("/v1/collections/pages").json()["n"] == 0


def test_idempotent_retry_is_not_double_counted(client):
    r1, r2 = _client_batches(OLH_SPEC, seed=4, k=2)
    first = _post(client, "pages", r1, "npz", key="client-a/batch-0001")
    assert first.status_code == 201
    # The retry is re-encoded (a new npz file, another format): same reports, same key.
    for fmt in ("npz", "parquet"):
        again = _post(client, "pages", r1, fmt, key="client-a/batch-0001")
        assert again.status_code == 200 and again.json()["duplicate"] is True
        assert again.json()["batch_id"] == first.json()["batch_id"]
    info = client.get("/v1/collections/pages").json()
    assert (info["n"], info["batches"]) == (len(r1), 1)
    clash = _post(client, "pages", r2, "npz", key="client-a/batch-0001")
    assert (
        clash.status_code == 422
        and "Idempotency-Key 'client-a/batch-0001' must identify one batch"
        in clash.json()["detail"]
    )
    # Keys are per collection, and batches without a key are always new.
    assert (
        _post(
            client, "colors", _client_batches(OUE_SPEC, 5, k=1)[0], "npz", key="client-a/batch-0001"
        ).status_code
        == 201
    )
    assert _post(client, "pages", r2, "npz").status_code == 201
    assert _post(client, "pages", r2, "npz").status_code == 201
    assert client.get("/v1/collections/pages").json()["n"] == len(r1) + 2 * len(r2)
    bad = _post(client, "pages", r2, "npz", key="has space")
    assert bad.status_code == 422 and "Idempotency-Key must be" in bad.json()["detail"]


def test_persistence_across_restarts(db_url):
    batches = _client_batches(OLH_SPEC, seed=6)
    with TestClient(create_app(_collections(), db_url)) as c1:
        for i, r in enumerate(batches[:3]):
            assert _post(c1, "pages", r, "parquet", key=f"b{i}").status_code == 201
    with TestClient(create_app(_collections(), db_url)) as c2:
        assert _post(c2, "pages", batches[2], "npz", key="b2").json()["duplicate"] is True
        assert _post(c2, "pages", batches[3], "npz", key="b3").status_code == 201
        body = c2.get("/v1/collections/pages/estimate").json()
    est, _, _ = _offline(OLH_SPEC, batches)
    assert body["n"] == est.n and body["batches"] == 4
    np.testing.assert_array_equal(body["frequencies"], est.frequencies)
    # A collection holding data cannot silently change its spec.
    with pytest.raises(ValueError, match="collection 'pages' must keep its configuration"):
        create_app({"pages": OLH(epsilon=3.0, domain_size=200)}, db_url)


def test_bad_payloads_get_clear_4xx(db_url):
    app = create_app(_collections(), db_url, max_body_bytes=100_000, max_decoded_bytes=200_000)
    good = OLH_SPEC.randomize(np.arange(50), rng=0)
    with TestClient(app) as client:

        def post(body, ctype="application/octet-stream", collection="pages"):
            return client.post(
                f"/v1/reports/{collection}", content=body, headers={"Content-Type": ctype}
            )

        cases = [
            (post(b"\x00\x01garbage"), 415, "body must be npz or Parquet reports"),
            (post(b""), 422, "got an empty body"),
            (post(reports_to_bytes(good)[:60]), 422, "body must be"),
            (post(reports_to_bytes(good, format="parquet")[:-30]), 422, "body must be"),
            (post(b"{not json", "application/json"), 422, "body must be valid JSON"),
            (
                post(b"[1, 2]", "application/json"),
                422,
                "JSON object with 'fingerprint' and 'arrays'",
            ),
            (
                post(reports_to_bytes(good), collection="nope"),
                404,
                "collection 'nope' is not served here",
            ),
            (post(b"x" * 100_001), 413, "body must be at most 100000 bytes"),
            # 150 000 identical uint16 reports compress to a few KB but declare 300 KB decoded:
            (
                post(
                    reports_to_bytes(
                        GRR(epsilon=40.0, domain_size=300).randomize(np.zeros(150_000, int), rng=0)
                    )
                ),
                413,
                "batch must decode to at most 200000 bytes",
            ),
        ]
        for resp, status, text in cases:
            assert resp.status_code == status, (status, resp.text)
            assert text in resp.json()["detail"], resp.text

        d = reports_to_dict(good)
        wrong_fields = {**d, "arrays": {"values": d["arrays"]["values"]}}
        resp = client.post("/v1/reports/pages", json=wrong_fields)
        assert (
            resp.status_code == 422
            and "reports must have fields ['seeds', 'values']" in resp.json()["detail"]
        )
        out_of_range = {
            **d,
            "arrays": {**d["arrays"], "values": {"dtype": "uint8", "data": [250] * 50}},
        }
        resp = client.post("/v1/reports/pages", json=out_of_range)
        assert resp.status_code == 422 and resp.json()["detail"].startswith(
            "reports rejected by OLH("
        )
        lossy = {
            "fingerprint": OLH_SPEC.fingerprint,
            "arrays": {"seeds": [1, 2], "values": [0.5, 1]},
        }
        resp = client.post("/v1/reports/pages", json=lossy)
        assert (
            resp.status_code == 422
            and "reports.values must be a rectangular array of uint8" in resp.json()["detail"]
        )
        no_fp = {"arrays": d["arrays"]}
        resp = client.post("/v1/reports/pages", json=no_fp)
        assert resp.status_code == 422 and "got fingerprint None" in resp.json()["detail"]
        resp = client.post("/v1/reports/pages", content=reports_to_bytes(good[:0]))
        assert resp.status_code == 422 and "at least one report" in resp.json()["detail"]
        padded = OUE_SPEC.randomize(np.arange(5), rng=0)
        bits = np.array(padded.bits)
        bits[:, -1] |= 1  # a padding bit set: the spec's own check refuses it
        resp = client.post(
            "/v1/reports/colors", content=reports_to_bytes(Reports(OUE_SPEC, bits=bits))
        )
        assert resp.status_code == 422 and "zero padding bits" in resp.json()["detail"]
        # Nothing above was stored.
        assert [c["n"] for c in client.get("/v1/collections").json()["collections"]] == [0, 0]
        # A small JSON client: plain arrays, uint64 seeds as strings, dtypes from the server.
        fields = client.get("/v1/collections/pages").json()["report_fields"]
        assert fields == {
            "seeds": {"dtype": "<u8", "shape": []},
            "values": {"dtype": "|u1", "shape": []},
        }
        small = {
            "fingerprint": OLH_SPEC.fingerprint,
            "arrays": {
                "seeds": [str(s) for s in good.seeds.tolist()],
                "values": good.values.tolist(),
            },
        }
        assert client.post("/v1/reports/pages", json=small).status_code == 201
        stats = client.get("/v1/collections/pages/stats").json()
        assert stats["arrays"]["counts"]["data"] == OLH_SPEC.aggregate(good).counts.tolist()


def test_concurrent_batches_from_threads_are_all_merged(db_url):
    app = create_app(_collections(), db_url)
    per_thread = [_client_batches(OUE_SPEC, seed=10 + t, k=6) for t in range(2)]
    start = threading.Barrier(2)

    def run(batches):
        with TestClient(app) as c:
            start.wait()
            return [
                _post(c, "colors", r, "npz", key=f"{id(batches)}-{i}").status_code
                for i, r in enumerate(batches)
            ]

    with ThreadPoolExecutor(2) as pool:
        codes = list(pool.map(run, per_thread))
    assert codes == [[201] * 6, [201] * 6]
    everything = per_thread[0] + per_thread[1]
    with TestClient(app) as c:
        body = c.get("/v1/collections/colors/estimate").json()
    est, _, _ = _offline(OUE_SPEC, everything)
    assert body["n"] == est.n and body["batches"] == 12
    np.testing.assert_array_equal(body["frequencies"], est.frequencies)


def test_raw_reports_are_stored_only_when_asked(tmp_path):
    r = GRR(epsilon=1.0, domain_size=4).randomize([0, 1, 2, 3], rng=0)
    for store_reports in (False, True):
        app = create_app(
            GRR(epsilon=1.0, domain_size=4),
            f"sqlite:///{tmp_path}/{store_reports}.db",
            store_reports=store_reports,
        )
        with TestClient(app) as c:
            body = reports_to_bytes(r, format="parquet")
            batch_id = c.post("/v1/reports/default", content=body).json()["batch_id"]
            raw = app.state.collector.store.raw_reports(batch_id)
            assert raw == (("parquet", body) if store_reports else None)


def test_health_listing_openapi_and_config(tmp_path):
    config = tmp_path / "collector.toml"
    config.write_text(
        f'database_url = "sqlite:///{tmp_path / "c.db"}"\n'
        "[collections.browsers]\n"
        'mechanism = "GRR"\n'
        "params = { epsilon = 1.5 }\n"
        'categories = ["chrome", "firefox", "safari"]\n'
        'unknown = "other"\n'
        'description = "main browser"\n'
    )
    with TestClient(app_from_config(config)) as c:
        assert c.get("/healthz").json() == {
            "status": "ok",
            "database": "ok",
            "version": "0.1.0",
            "compaction": "ok",
        }
        (info,) = c.get("/v1/collections").json()["collections"]
        assert info["name"] == "browsers" and info["description"] == "main browser"
        assert info["mechanism"] == GRR(epsilon=1.5, domain_size=4).to_dict()
        assert info["labels"] == ["chrome", "firefox", "safari", "<other>"]
        paths = c.get("/openapi.json").json()["paths"]
        assert {
            "/v1/reports/{collection}",
            "/v1/collections/{collection}/estimate",
            "/healthz",
        } <= set(paths)
        assert (
            "application/vnd.apache.parquet"
            in paths["/v1/reports/{collection}"]["post"]["requestBody"]["content"]
        )
    (tmp_path / "bad.json").write_text(json.dumps({"collections": {}}))
    with pytest.raises(ValueError, match="at least one collection"):
        app_from_config(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="encoder must have the spec's domain_size 9, got 3"):
        Collection(GRR(epsilon=1.0, domain_size=9), encoder=Encoder(["a", "b", "c"]))
    with pytest.raises(ValueError, match="collection names must be"):
        create_app({"no spaces": GRR(epsilon=1.0, domain_size=3)}, "sqlite://")


def test_schema_compiles_for_postgresql_without_a_server():
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateIndex, CreateTable

    from ldpkit.service.store import metadata

    ddl = "\n".join(
        str(CreateTable(t).compile(dialect=postgresql.dialect())) for t in metadata.sorted_tables
    )
    assert "id BIGSERIAL NOT NULL" in ddl
    # The lean PostgreSQL schema (store.py): the idempotency rule as a partial unique index,
    # no foreign keys on the two tables every group commit writes.
    assert "uq_ldpkit_batches_idempotency" not in ddl
    batches = ddl.split("CREATE TABLE ldpkit_batches", 1)[1].split("CREATE TABLE", 1)[0]
    parts = ddl.split("CREATE TABLE ldpkit_rollup_parts", 1)[1].split("CREATE TABLE", 1)[0]
    assert "FOREIGN KEY" not in batches and "FOREIGN KEY" not in parts
    assert "FOREIGN KEY" in ddl.split("CREATE TABLE ldpkit_rollups ", 1)[1]
    index = str(
        CreateIndex(next(i for i in metadata.tables["ldpkit_batches"].indexes if i.unique)).compile(
            dialect=postgresql.dialect()
        )
    )
    assert index.startswith("CREATE UNIQUE INDEX uq_ldpkit_batches_key")
    assert "WHERE idempotency_key IS NOT NULL" in index
    assert "received_at TIMESTAMP WITH TIME ZONE" in ddl and "payload BYTEA" in ddl
