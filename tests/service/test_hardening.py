"""Issue 27, the collector's findings 5, 6 and 9: CORS wildcard, header timeout, TLS, what an
ingest token's 404 reveals, two Authorization headers, the "[auth]" message, metrics
directories left by kill -9, and the deleted-keys table's expiry."""

import datetime as dt

import numpy as np
import pytest
from fastapi.testclient import TestClient

from ldpkit import GRR
from ldpkit.io import reports_to_dict
from ldpkit.service import app_from_config, create_app, new_token, parse_tokens
from ldpkit.service.store import BatchDeleted, CollectorStore, PendingBatch, reports_digest

SPEC = GRR(epsilon=1.0, domain_size=8)


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'c.db'}"


def _tokens():
    made = {name: new_token() for name in ("devices", "analyst")}
    config = [
        {"name": "devices", "scopes": ["ingest"], "sha256": made["devices"][1]},
        {"name": "analyst", "scopes": ["read"], "sha256": made["analyst"][1]},
    ]
    return {k: f"Bearer {v[0]}" for k, v in made.items()}, parse_tokens(config)


def _body(seed=0):
    return reports_to_dict(SPEC.randomize(np.array([seed % 8]), rng=seed))


# -- CORS ---------------------------------------------------------------------------------
@pytest.mark.parametrize("origins", [["*"], ["https://ok.example", "*"], ["https://*.example"]])
def test_a_wildcard_cors_origin_is_refused_at_config_load(db, origins):
    config = {"database_url": db, "cors_origins": origins, "collections": {"c": SPEC.to_dict()}}
    with pytest.raises(ValueError, match=r"cors_origins must list each origin .* wildcard"):
        app_from_config(config)
    with pytest.raises(ValueError, match="Access-Control-Allow-Origin: \\*"):
        create_app({"c": SPEC}, db, cors_origins=origins)


def test_malformed_cors_origins_are_refused_and_explicit_ones_served(db):
    for bad in (["https://ok.example/path"], ["ok.example"], "https://ok.example"):
        with pytest.raises(ValueError, match="cors_origins must be"):
            create_app({"c": SPEC}, db, cors_origins=bad)
    auth, tokens = _tokens()
    app = create_app({"c": SPEC}, db, cors_origins=["https://ok.example"], tokens=tokens)
    with TestClient(app) as c:
        r = c.get(
            "/v1/collections/c",
            headers={"Origin": "https://ok.example", "Authorization": auth["analyst"]},
        )
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://ok.example"
        r = c.get(
            "/v1/collections/c",
            headers={"Origin": "https://evil.example", "Authorization": auth["analyst"]},
        )
        assert "access-control-allow-origin" not in r.headers


# -- what an ingest token learns; two Authorization headers -------------------------------
@pytest.mark.parametrize("origin", [None, "https://ok.example"])
def test_an_ingest_tokens_404_does_not_list_the_collections(db, origin):
    auth, tokens = _tokens()
    app = create_app(
        {"c": SPEC, "secret-survey": SPEC}, db, tokens=tokens, cors_origins=["https://ok.example"]
    )
    headers = {"Authorization": auth["devices"]}
    if origin:  # the FastAPI route (browsers); without: the raw-ASGI fast path
        headers["Origin"] = origin
    with TestClient(app) as c:
        r = c.post("/v1/reports/nope", json=_body(), headers=headers)
        assert r.status_code == 404
        assert r.json()["detail"] == "collection 'nope' is not served here"
        assert "secret-survey" not in r.text
        # a reader may still be told what exists
        r = c.get("/v1/collections/nope", headers={"Authorization": auth["analyst"]})
        assert r.status_code == 404 and "secret-survey" in r.json()["detail"]


@pytest.mark.parametrize("origin", [None, "https://ok.example"])
@pytest.mark.parametrize("order", ["good-first", "bad-first"])
def test_two_authorization_headers_are_refused_on_both_paths(db, origin, order):
    auth, tokens = _tokens()
    app = create_app({"c": SPEC}, db, tokens=tokens, cors_origins=["https://ok.example"])
    pair = [auth["devices"], "Bearer not-a-token"]
    if order == "bad-first":
        pair.reverse()
    headers = [("Authorization", pair[0]), ("Authorization", pair[1])]
    headers += [("Content-Type", "application/json")]
    if origin:
        headers.append(("Origin", origin))
    import json

    with TestClient(app) as c:
        r = c.post("/v1/reports/c", content=json.dumps(_body()), headers=headers)
        assert r.status_code == 400, r.text
        assert r.json()["detail"] == "Authorization must be sent once, got 2 headers"
        r = c.get("/v1/collections/c", headers=[("Authorization", auth["analyst"])] * 2)
        assert r.status_code == 400
        assert c.get("/v1/collections/c/stats").status_code == 401  # (none: as before)
        assert c.get("/v1/collections/c").status_code == 401
        assert (
            c.get("/v1/collections/c", headers={"Authorization": auth["analyst"]}).status_code
            == 200
        )


# -- the deleted-keys table expires -------------------------------------------------------
def _keyed(key, seed):
    r = SPEC.randomize([seed % 8, (seed + 3) % 8], rng=seed)
    return PendingBatch(
        "c", len(r), stats=SPEC.aggregate(r), idempotency_key=key, digest=reports_digest(r)
    )


def _deleted_keys(store):
    from sqlalchemy import func, select

    from ldpkit.service.store import deleted_keys_table

    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(deleted_keys_table)).scalar_one()


def test_deleted_keys_expire_after_the_retry_window(db):
    store = CollectorStore(db)
    store.register("c", SPEC, 3600)
    try:
        assert store.deleted_keys_seconds == 30 * 86400  # the documented default
        store.commit_group([_keyed(f"k{i}", i) for i in range(5)])
        store.delete_batches("c", token="")
        assert _deleted_keys(store) == 5
        (again,) = store.commit_group([_keyed("k1", 1)])
        assert isinstance(again, BatchDeleted)  # within the window: refused
        now = dt.datetime.now(dt.UTC)
        assert store.expire_deleted_keys(now + dt.timedelta(days=29)) == 0
        assert _deleted_keys(store) == 5
        assert store.expire_deleted_keys(now + dt.timedelta(days=31)) == 5
        assert _deleted_keys(store) == 0
        (later,) = store.commit_group([_keyed("k1", 1)])  # past the window: a new batch
        assert not isinstance(later, Exception) and not later.duplicate
        # each delete expires what is older than the window
        store.deleted_keys_seconds = 0.0
        store.commit_group([_keyed("k9", 9)])
        store.delete_batches("c", token="")
        assert _deleted_keys(store) == 0
    finally:
        store.close()


def test_the_compaction_expires_deleted_keys_about_once_an_hour(db, monkeypatch):
    store = CollectorStore(db)
    store.register("c", SPEC, 3600)
    calls = []
    monkeypatch.setattr(store, "expire_deleted_keys", lambda: calls.append(1) or 0)
    try:
        for i in range(3):
            store.commit_group([_keyed(f"k{i}", i)])
            store.try_compact()
        assert calls == [1]  # the first compaction, not the next ones within the hour
        store._last_expire -= 3600
        store.try_compact()
        assert calls == [1, 1]
    finally:
        store.close()
