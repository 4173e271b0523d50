"""Roll-ups and time windows, group commit, bearer tokens, limits, admin routes, metrics."""

import datetime as dt
import hashlib
import hmac
import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect, select
from sqlalchemy.exc import OperationalError

from ldpkit import GRR, OLH, OUE
from ldpkit.io import reports_to_bytes, reports_to_dict
from ldpkit.service import Limits, app_from_config, create_app, is_loopback, main, new_token
from ldpkit.service.auth import TokenAuth, parse_tokens
from ldpkit.service.decode import _whole_second_clock
from ldpkit.service.store import batches_table, rollups_table

SPEC = OLH(epsilon=2.0, domain_size=50)
T0 = dt.datetime(2026, 1, 5, 10, 0, 0, tzinfo=dt.UTC)
HOUR = 3600


def _tokens():
    made = {name: new_token() for name in ("devices", "analyst", "ops", "other")}
    config = [
        {"name": "devices", "scopes": ["ingest"], "sha256": made["devices"][1]},
        {"name": "analyst", "scopes": ["read"], "sha256": made["analyst"][1]},
        {"name": "ops", "scopes": ["admin"], "sha256": made["ops"][1]},
        {"name": "other", "scopes": ["ingest"], "sha256": made["other"][1]},
    ]
    return {k: {"Authorization": f"Bearer {v[0]}"} for k, v in made.items()}, config


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'c.db'}"


def _at(app, when):
    app.state.collector.decoder.clock = lambda: when


def _one(value, seed):
    return reports_to_dict(SPEC.randomize([value], rng=seed))


def test_single_reports_roll_up_per_bucket_and_windows_use_whole_buckets(db):
    app = create_app({"x": SPEC}, db)
    rng = np.random.default_rng(0)
    values = rng.integers(0, 50, size=90)
    reports = SPEC.randomize(values, rng=1)
    with TestClient(app) as c:
        for i in range(90):  # 30 one-report batches in each of three hours
            _at(app, T0 + dt.timedelta(seconds=HOUR * (i // 30) + i % 30))
            r = c.post("/v1/reports/x", json=reports_to_dict(reports[i : i + 1]))
            assert r.status_code == 201, r.text
        whole = c.get("/v1/collections/x/estimate").json()
        assert (whole["n"], whole["batches"]) == (90, 90)
        np.testing.assert_array_equal(
            whole["frequencies"], SPEC.estimate(SPEC.aggregate(reports)).frequencies
        )
        # [10:00, 12:00) holds the first two buckets exactly.
        two = c.get(
            "/v1/collections/x/estimate",
            params={"since": T0.isoformat(), "until": (T0 + dt.timedelta(hours=2)).isoformat()},
        ).json()
        assert two["n"] == 60 and two["since"] == T0.isoformat()
        np.testing.assert_array_equal(
            two["frequencies"], SPEC.estimate(SPEC.aggregate(reports[:60])).frequencies
        )
        # Partial buckets are left out: [10:30, 12:30) is the 11:00 bucket only.
        mid = c.get(
            "/v1/collections/x/estimate",
            params={"since": int(T0.timestamp()) + 1800, "until": int(T0.timestamp()) + 9000},
        ).json()
        assert mid["n"] == 30 and mid["since"] == (T0 + dt.timedelta(hours=1)).isoformat()
        buckets = c.get("/v1/collections/x/buckets").json()
        assert [(b["n"], b["batches"]) for b in buckets["buckets"]] == [(30, 30)] * 3
        assert buckets["buckets"][1]["start"] == (T0 + dt.timedelta(hours=1)).isoformat()
        bad = c.get("/v1/collections/x/estimate", params={"since": "yesterday"})
        assert bad.status_code == 422 and "since must be an ISO 8601 time" in bad.text
    store = app.state.collector.store
    with store.engine.connect() as conn:
        assert conn.execute(select(rollups_table.c.bucket)).all().__len__() == 3
        columns = {col["name"] for col in inspect(conn).get_columns("ldpkit_batches")}
        stamps = conn.execute(select(batches_table.c.received_at)).scalars().all()
    # No per-batch Stats (a one-report batch's Stats would be that user's report) and
    # arrival times to the second only.
    assert "stats" not in columns and "arrays" not in columns
    assert all(s.microsecond == 0 for s in stamps)


def test_group_commit_of_concurrent_small_batches_is_exact(db):
    app = create_app({"x": SPEC}, db)
    batches = [SPEC.randomize([i % 50] * (1 + i % 3), rng=i) for i in range(120)]
    bad = _one(3, 0)
    bad["arrays"]["values"]["data"] = [200]  # out of the hash range: the spec refuses it
    with TestClient(app) as c:
        bodies = [reports_to_dict(b) for b in batches]
        bodies.insert(60, bad)

        def post(i):
            return c.post("/v1/reports/x", json=bodies[i]).status_code

        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(post, range(121)))
        assert codes.count(201) == 120 and codes[60] == 422
        body = c.get("/v1/collections/x/estimate").json()
        metrics = c.get("/metrics").text
    everything = batches[0].concat(*batches[1:])
    assert body["n"] == len(everything) and body["batches"] == 120
    np.testing.assert_array_equal(
        body["frequencies"], SPEC.estimate(SPEC.aggregate(everything)).frequencies
    )
    assert 'ldpkit_rejects_total{reason="rejected_by_spec",status="422"' in metrics
    assert 'ldpkit_batches_total{collection="x"' in metrics
    assert (
        "ldpkit_commit_seconds_count" in metrics
        and f'ldpkit_stored_reports{{collection="x"}} {len(everything)}' in metrics
    )


def test_tokens_scopes_and_per_token_idempotency(db):
    headers, config = _tokens()
    app = create_app({"x": SPEC}, db, tokens=parse_tokens(config))
    r1 = _one(1, 1)
    with TestClient(app) as c:
        assert c.post("/v1/reports/x", json=r1).status_code == 401
        wrong = {"Authorization": "Bearer not-a-token"}
        resp = c.post("/v1/reports/x", json=r1, headers=wrong)
        assert resp.status_code == 401 and resp.headers["www-authenticate"] == "Bearer"
        assert c.post("/v1/reports/x", json=r1, headers=headers["analyst"]).status_code == 403
        assert c.get("/v1/collections/x", headers=headers["devices"]).status_code == 403
        assert c.get("/v1/collections/x").status_code == 401
        assert c.get("/metrics").status_code == 401
        assert c.get("/healthz").status_code == 200  # liveness stays open
        key = {"Idempotency-Key": "batch-1"}
        first = c.post("/v1/reports/x", json=r1, headers={**headers["devices"], **key})
        assert first.status_code == 201
        again = c.post("/v1/reports/x", json=r1, headers={**headers["devices"], **key})
        assert again.status_code == 200 and again.json()["batch_id"] == first.json()["batch_id"]
        # Another token's key space is its own: the same key is a new batch there.
        other = c.post("/v1/reports/x", json=_one(2, 2), headers={**headers["other"], **key})
        assert other.status_code == 201
        assert c.get("/v1/collections/x", headers=headers["analyst"]).json()["n"] == 2
        assert c.get("/v1/collections/x", headers=headers["ops"]).status_code == 200  # admin reads
        listed = c.get("/v1/admin/collections/x/batches", headers=headers["ops"]).json()
        assert sorted(b["token"] for b in listed["batches"]) == ["devices", "other"]
        assert (
            c.get("/v1/admin/collections/x/batches", headers=headers["analyst"]).status_code == 403
        )


def test_token_config_is_validated():
    _, good = _tokens()
    with pytest.raises(ValueError, match=r"auth.tokens\[0\].scopes must be a non-empty list"):
        parse_tokens([{**good[0], "scopes": ["write"]}])
    with pytest.raises(ValueError, match=r"auth.tokens\[0\].sha256 must be 64 hex digits"):
        parse_tokens([{**good[0], "sha256": "abc"}])
    with pytest.raises(ValueError, match="unique name and sha256"):
        parse_tokens([good[0], good[0]])
    with pytest.raises(ValueError, match="auth.tokens must be a non-empty list"):
        parse_tokens([])
    token, digest = new_token()
    assert hashlib.sha256(token.encode()).hexdigest() == digest and len(token) >= 40


def test_token_lookup_identifies_each_configured_token_and_nothing_else(monkeypatch):
    made = [new_token() for _ in range(4)]
    scopes = [["ingest"], ["read"], ["admin"], ["ingest", "read"]]
    auth = TokenAuth(
        parse_tokens(
            [
                {"name": f"t{i}", "scopes": s, "sha256": h.upper() if i == 3 else h}
                for i, ((_, h), s) in enumerate(zip(made, scopes))
            ]
        )
    )
    for i, (token, _) in enumerate(made):
        for header in (f"Bearer {token}", f"bearer {token}", f"Bearer   {token}  "):
            found = auth.identify(header)
            assert found is not None and found.name == f"t{i}"
    other, _ = new_token()
    for header in (
        None,
        "",
        "Bearer",
        "Bearer  ",
        f"Basic {made[0][0]}",
        f"Bearer {other}",
        f"Bearer {made[0][0]}x",
        f"Bearer {made[0][0][:-1]}",
        made[0][0],
    ):
        assert auth.identify(header) is None, header
    # what scopes grant: admin implies read, nothing implies ingest
    allowed = {(t.name, s) for t in auth.tokens for s in ("ingest", "read", "admin") if t.allows(s)}
    assert allowed == {
        ("t0", "ingest"),
        ("t1", "read"),
        ("t2", "admin"),
        ("t2", "read"),
        ("t3", "ingest"),
        ("t3", "read"),
    }
    # the hash found is still confirmed with a constant-time comparison
    calls = []
    real = hmac.compare_digest
    monkeypatch.setattr(
        "ldpkit.service.auth.hmac.compare_digest", lambda a, b: calls.append(1) or real(a, b)
    )
    assert auth.identify(f"Bearer {made[1][0]}").name == "t1" and calls == [1]


def test_receive_time_is_whole_seconds_utc():
    clock = _whole_second_clock()
    before = dt.datetime.now(dt.UTC)
    got = clock()
    after = dt.datetime.now(dt.UTC)
    assert got.tzinfo is dt.UTC and got.microsecond == 0
    assert before.replace(microsecond=0) <= got <= after
    assert clock() is got or clock() > got  # the same object until the second changes


def test_open_server_only_on_loopback(tmp_path):
    config = {
        "database_url": f"sqlite:///{tmp_path / 'c.db'}",
        "collections": {"x": {"mechanism": "GRR", "params": {"epsilon": 1.0, "domain_size": 3}}},
    }
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    with pytest.raises(ValueError, match="host must be a loopback address"):
        main(config, host="0.0.0.0")
    with pytest.raises(ValueError, match="workers must be 1 with SQLite"):
        main(config, workers=2)


def test_admin_delete_by_token_and_whole_buckets_recomputes_exactly(db):
    headers, config = _tokens()
    app = create_app({"x": SPEC}, db, tokens=parse_tokens(config))
    sent = {"devices": [], "other": []}
    with TestClient(app) as c:
        for i in range(24):
            who = "devices" if i % 3 else "other"
            hour = i // 8  # three buckets
            _at(app, T0 + dt.timedelta(hours=hour, minutes=i))
            r = SPEC.randomize([i % 50, (7 * i) % 50], rng=100 + i)
            sent[who].append((hour, r))
            assert (
                c.post("/v1/reports/x", json=reports_to_dict(r), headers=headers[who]).status_code
                == 201
            )
        ops = headers["ops"]
        resp = c.delete(
            "/v1/admin/collections/x/batches",
            params={"since": int(T0.timestamp()) + 60},
            headers=ops,
        )
        assert resp.status_code == 422 and "must be a bucket boundary" in resp.text
        assert c.delete("/v1/admin/collections/x/batches", headers=ops).status_code == 422
        gone = c.delete("/v1/admin/collections/x/batches", params={"token": "other"}, headers=ops)
        assert gone.json() == {"collection": "x", "deleted_batches": 8, "deleted_reports": 16}
        gone = c.delete(
            "/v1/admin/collections/x/batches",
            params={"since": T0.isoformat(), "until": (T0 + dt.timedelta(hours=1)).isoformat()},
            headers=ops,
        )
        assert gone.json()["deleted_batches"] == 5  # the first hour's 'devices' batches
        body = c.get("/v1/collections/x/estimate", headers=ops).json()
        listed = c.get("/v1/admin/collections/x/batches", headers=ops).json()["batches"]
    kept = [r for hour, r in sent["devices"] if hour >= 1]
    expected = SPEC.estimate(SPEC.aggregate(kept[0].concat(*kept[1:])))
    assert body["n"] == expected.n == 2 * len(kept) and body["batches"] == len(kept)
    np.testing.assert_array_equal(body["frequencies"], expected.frequencies)
    assert len(listed) == len(kept) and {b["token"] for b in listed} == {"devices"}


def test_limits_give_json_errors(db):
    limits = Limits(max_json_bytes=2_000, max_reports_per_batch=100, max_json_depth=8)
    app = create_app({"x": SPEC, "o": OUE(epsilon=1.0, domain_size=20)}, db, limits=limits)
    with TestClient(app) as c:
        big = reports_to_dict(SPEC.randomize(np.arange(90) % 50, rng=0))
        resp = c.post("/v1/reports/x", json=big)
        assert resp.status_code == 413 and "JSON body must be at most 2000 bytes" in resp.text
        many = reports_to_bytes(SPEC.randomize(np.arange(101) % 50, rng=0))
        resp = c.post("/v1/reports/x", content=many)
        assert (
            resp.status_code == 413 and "batch must hold at most 100 reports, got 101" in resp.text
        )
        parquet = reports_to_bytes(SPEC.randomize(np.arange(101) % 50, rng=0), format="parquet")
        assert c.post("/v1/reports/x", content=parquet).status_code == 413
        deep = b'{"fingerprint": "x", "arrays": ' + b"[" * 9 + b"]" * 9 + b"}"
        resp = c.post("/v1/reports/x", content=deep, headers={"Content-Type": "application/json"})
        assert resp.status_code == 422 and "nest at most 8 levels" in resp.text
        deeper = b"[" * 100_000 + b"]" * 100_000  # would exhaust the parser's recursion
        resp = c.post(
            "/v1/reports/x",
            content=deeper,
            headers={"Content-Type": "application/json"},
        )
        assert resp.status_code in (413, 422) and resp.headers["content-type"] == "application/json"
        bits = reports_to_dict(OUE(epsilon=1.0, domain_size=20).randomize(np.arange(5), rng=0))
        assert c.post("/v1/reports/o", json=bits).status_code == 201  # 2-D field: depth 5 is fine
        assert c.get("/v1/collections/x").json()["n"] == 0
    assert Limits().max_decoded_bytes == 64 * 2**20 and Limits().max_body_bytes == 16 * 2**20
    with pytest.raises(ValueError, match="max_json_depth must be an integer >= 1"):
        Limits(max_json_depth=0)


def test_database_outage_is_a_json_503(db, monkeypatch):
    app = create_app({"x": SPEC}, db)
    store = app.state.collector.store

    def down(*args, **kwargs):
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    with TestClient(app) as c:
        monkeypatch.setattr(store.sqlite, "_commit_group", down)
        monkeypatch.setattr(store, "merged", down)
        monkeypatch.setattr(store, "ping", down)
        resp = c.post("/v1/reports/x", json=_one(1, 1))
        assert resp.status_code == 503 and resp.json()["detail"].startswith("database unavailable")
        assert resp.headers["retry-after"] == "5"
        assert c.get("/v1/collections/x/estimate").status_code == 503
        assert c.get("/healthz").status_code == 503
        monkeypatch.undo()
        assert c.post("/v1/reports/x", json=_one(1, 1)).status_code == 201


def test_cors_and_config_file(tmp_path):
    token, digest = new_token()
    config = tmp_path / "collector.toml"
    config.write_text(
        f'database_url = "sqlite:///{tmp_path / "c.db"}"\n'
        "bucket_seconds = 600\n"
        'cors_origins = ["https://dash.example"]\n'
        "[limits]\nmax_reports_per_batch = 10\n"
        f'[auth]\ntokens = [{{ name = "web", scopes = ["ingest", "read"], sha256 = "{digest}" }}]\n'
        "[collections.colors]\n"
        'mechanism = "GRR"\nparams = { epsilon = 1.0 }\n'
        'categories = ["red", "green"]\nunknown = "other"\n'
    )
    app = app_from_config(config)
    assert app.state.collector.limits.max_reports_per_batch == 10
    with TestClient(app) as c:
        pre = c.options(
            "/v1/reports/colors",
            headers={
                "Origin": "https://dash.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert pre.status_code == 200
        assert pre.headers["access-control-allow-origin"] == "https://dash.example"
        info = c.get(
            "/v1/collections/colors",
            headers={"Authorization": f"Bearer {token}", "Origin": "https://evil.example"},
        )
        assert "access-control-allow-origin" not in info.headers
        assert info.json()["bucket_seconds"] == 600
    with pytest.raises(ValueError, match="config keys must be among"):
        app_from_config({"collections": {"a": {"mechanism": "GRR"}}, "max_batch": 3})
    with pytest.raises(ValueError, match="limits must only set fields"):
        app_from_config(
            {
                "collections": {
                    "a": {"mechanism": "GRR", "params": {"epsilon": 1, "domain_size": 2}}
                },
                "limits": {"nope": 1},
            }
        )


def test_store_reports_keeps_payloads_per_batch(tmp_path):
    spec = GRR(epsilon=1.0, domain_size=4)
    app = create_app(spec, f"sqlite:///{tmp_path}/raw.db", store_reports=True)
    with TestClient(app) as c:
        body = json.dumps(reports_to_dict(spec.randomize([0], rng=0))).encode()
        batch_id = c.post(
            "/v1/reports/default", content=body, headers={"Content-Type": "application/json"}
        ).json()["batch_id"]
    assert app.state.collector.store.raw_reports(batch_id) == ("json", body)


def test_closed_bucket_cache_follows_deletes_and_late_writes_across_processes(db):
    # Two apps on one database stand for two worker processes.
    headers, config = _tokens()
    a = create_app({"x": SPEC}, db, tokens=parse_tokens(config))
    b = create_app({"x": SPEC}, db, tokens=parse_tokens(config))
    old = SPEC.randomize(np.arange(40) % 50, rng=3)
    with TestClient(a) as ca, TestClient(b) as cb:
        for i in range(40):  # closed buckets (months ago), two tokens
            _at(a, T0 + dt.timedelta(hours=i % 4))
            who = headers["devices" if i % 2 else "other"]
            assert (
                ca.post(
                    "/v1/reports/x", json=reports_to_dict(old[i : i + 1]), headers=who
                ).status_code
                == 201
            )
        _at(a, dt.datetime.now(dt.UTC).replace(microsecond=0))  # an open bucket too
        fresh = SPEC.randomize([1, 2, 3], rng=4)
        assert (
            ca.post(
                "/v1/reports/x", json=reports_to_dict(fresh), headers=headers["devices"]
            ).status_code
            == 201
        )

        def n_seen(client):
            return client.get("/v1/collections/x/estimate", headers=headers["analyst"]).json()["n"]

        assert n_seen(ca) == n_seen(cb) == 43  # both now cache the closed buckets
        gone = cb.delete(
            "/v1/admin/collections/x/batches", params={"token": "other"}, headers=headers["ops"]
        )
        assert gone.json()["deleted_reports"] == 20
        assert n_seen(ca) == 23  # the other process's delete is seen
        _at(b, T0 + dt.timedelta(minutes=5))  # a late write into a closed bucket
        assert (
            cb.post("/v1/reports/x", json=_one(9, 9), headers=headers["devices"]).status_code == 201
        )
        body = ca.get(
            "/v1/collections/x/estimate",
            params={"until": (T0 + dt.timedelta(hours=2)).isoformat()},
            headers=headers["analyst"],
        ).json()
    # hours 0 and 1: hour 0 held only 'other' batches (deleted), hour 1 only 'devices' ones
    kept = [old[i : i + 1] for i in range(40) if i % 4 == 1]
    expected = SPEC.aggregate(kept[0].concat(*kept[1:], SPEC.randomize([9], rng=9)))
    assert body["n"] == expected.n == 11
    np.testing.assert_array_equal(body["frequencies"], SPEC.estimate(expected).frequencies)


def test_access_log_format_leaves_client_addresses_out():
    from ldpkit.service.serve import _log_config

    assert "client_addr" not in _log_config(False)["formatters"]["access"]["fmt"]
    assert "client_addr" in _log_config(True)["formatters"]["access"]["fmt"]


def test_roll_up_parts_compaction_and_deletes_are_exact(db):
    """Group commits append roll-up parts; compaction folds them into the roll-up rows
    without changing any total; deletes take both; a database made before the parts table
    existed gets it on open."""
    from sqlalchemy import create_engine

    from ldpkit.service.store import CollectorStore, PendingBatch, metadata, rollup_parts_table

    engine = create_engine(db)  # the previous schema: everything but the parts table
    metadata.create_all(
        engine, tables=[t for t in metadata.sorted_tables if t is not rollup_parts_table]
    )
    engine.dispose()
    store = CollectorStore(db)
    store.register("x", SPEC, 3600)
    sent = []

    def write(i, token):
        r = SPEC.randomize([i % 50, (3 * i) % 50, 7], rng=500 + i)
        sent.append((i, token, r))
        item = PendingBatch(
            "x",
            len(r),
            stats=SPEC.aggregate(r),
            token=token,
            received_at=T0 + dt.timedelta(hours=i % 3, minutes=i),
        )
        (record,) = store.commit_group([item])
        assert not isinstance(record, Exception)

    def count(table):
        with store.engine.connect() as conn:
            return len(conn.execute(select(table.c.bucket)).all())

    def check(keep):
        kept = [r for i, t, r in sent if keep(i, t)]
        expected = SPEC.aggregate(kept[0].concat(*kept[1:]))
        stats, batches = store.merged("x", SPEC)
        assert (stats.n, batches) == (expected.n, len(kept)) == store.summary("x")
        for name, arr in expected.arrays.items():
            np.testing.assert_array_equal(stats.arrays[name], arr)
        per_bucket = [
            sum(len(r) for i, t, r in sent if keep(i, t) and i % 3 == h) for h in range(3)
        ]
        assert [n for _, n, _ in store.buckets("x")] == [n for n in per_bucket if n]

    try:
        for i in range(12):
            write(i, "a" if i % 2 else "b")
        assert count(rollup_parts_table) == 12 and count(rollups_table) == 0
        check(lambda i, t: True)
        assert store.compact(limit=5) == 12  # three rounds of at most five parts
        assert count(rollup_parts_table) == 0 and count(rollups_table) == 6  # 3 buckets x 2 tokens
        check(lambda i, t: True)
        for i in range(12, 18):  # new parts on top of folded roll-ups
            write(i, "a" if i % 2 else "b")
        check(lambda i, t: True)
        assert store.delete_batches("x", token="b") == (9, 27)  # from roll-ups and parts alike
        check(lambda i, t: t == "a")
        since = int((T0 + dt.timedelta(hours=1)).timestamp())
        assert store.delete_batches("x", since=since, until=since + 3600) == (3, 9)
        check(lambda i, t: t == "a" and i % 3 != 1)
        store.compact()
        check(lambda i, t: t == "a" and i % 3 != 1)
        assert count(rollup_parts_table) == 0
    finally:
        store.close()


def test_batch_ids_are_unique_time_ordered_uuid7():
    import uuid

    from ldpkit.service import batch_identity as store  # batch ids live there

    ids = [store.new_batch_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)  # counter within the millisecond
    parsed = [uuid.UUID(i) for i in ids]
    assert all(
        u.version == 7 and u.variant == uuid.RFC_4122 and str(u) == i for u, i in zip(parsed, ids)
    )
    # A new process (here: a changed pid) draws a new random base.
    pid, base, counter = store._id_state
    store._id_state = (pid - 1, base, counter)
    other = store.new_batch_id()
    assert store._id_state[1] != base and other not in ids

    # A group's ids formatted together: RFC 9562's layout (rand_a, variant, rand_b after
    # the 48-bit time), across carries into the digits formatted once per call (48 and 62
    # bits of the counter) and the 74-bit wrap.
    import itertools
    import os

    for start in (2**48 - 3, 2**62 - 2, 2**74 - 2):
        store._id_state = (os.getpid(), start, itertools.count())
        group = store.new_batch_ids(5)
        rands = [(start + k) % 2**74 for k in range(5)]
        want = [
            uuid.UUID(int=(7 << 76) | (r >> 62) << 64 | (0b10 << 62) | (r % 2**62)) for r in rands
        ]
        assert [g[14:] for g in group] == [str(w)[14:] for w in want]  # after the time
        assert all(
            uuid.UUID(g).version == 7 and uuid.UUID(g).variant == uuid.RFC_4122 for g in group
        )


def test_parts_left_by_a_killed_process_are_folded_at_start(db):
    from ldpkit.service.store import CollectorStore, PendingBatch, rollup_parts_table

    store = CollectorStore(db)
    store.register("x", SPEC, 3600)
    r = SPEC.randomize([1, 2, 3], rng=7)
    store.commit_group([PendingBatch("x", 3, stats=SPEC.aggregate(r), received_at=T0)])
    store.engine.dispose()  # gone without compacting (as after kill -9)
    app = create_app({"x": SPEC}, db)
    with TestClient(app) as c:
        with app.state.collector.store.engine.connect() as conn:
            assert conn.execute(select(rollup_parts_table.c.id)).all() == []
        body = c.get("/v1/collections/x/estimate").json()
    assert (body["n"], body["batches"]) == (3, 1)
    np.testing.assert_array_equal(body["frequencies"], SPEC.estimate(SPEC.aggregate(r)).frequencies)


def test_bucket_of_is_the_same_for_every_kind_of_time():
    """bucket_of caches Unix seconds of whole-second times with a zone (the app's clock);
    other times (microseconds, naive) are computed each time and never cached, and every
    answer is floor(timestamp / width) * width."""

    from ldpkit.service.store import CollectorStore

    store = CollectorStore("sqlite://")
    try:
        store.register("x", SPEC, 600)
        now = dt.datetime(2026, 11, 24, 9, 59, 59, tzinfo=dt.UTC)
        times = [
            now,
            now.astimezone(dt.timezone(dt.timedelta(hours=3))),  # same instant
            now + dt.timedelta(seconds=1),  # the next bucket
            now.replace(microsecond=999_999),
            now.replace(tzinfo=None),
        ]
        for _ in range(2):  # the second pass from the cache
            assert [store.bucket_of("x", t) for t in times] == [
                int(t.timestamp()) // 600 * 600 for t in times
            ]
        assert all(t.tzinfo is not None and not t.microsecond for t in store.writes.epochs)
        assert len(store.writes.epochs) == 2
    finally:
        store.close()
