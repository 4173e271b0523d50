"""Collector robustness: retries racing admin deletes, roll-up parts piling up, slow commits."""

import threading

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from ldpkit import GRR, Stats
from ldpkit.io import reports_to_dict
from ldpkit.service import create_app
from ldpkit.service.store import (
    BatchDeleted,
    BatchRecord,
    CollectorStore,
    PendingBatch,
    reports_digest,
    rollup_parts_table,
)

SPEC = GRR(epsilon=1.0, domain_size=8)


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'c.db'}"


def _keyed(key, seed, token="t"):
    r = SPEC.randomize([seed % 8, (seed + 3) % 8], rng=seed)
    return PendingBatch(
        "c",
        len(r),
        stats=SPEC.aggregate(r),
        token=token,
        idempotency_key=key,
        digest=reports_digest(r),
    )


def _store(url):
    store = CollectorStore(url)
    store.register("c", SPEC, 3600)
    return store


# -- (1) a retry racing an admin delete of its batch ---------------------------------------


def test_retry_after_delete_is_refused_not_stored_again(db):
    """A deleted batch stays deleted: its key answers 409, whatever retries arrive."""
    app = create_app({"c": SPEC}, db)
    body = reports_to_dict(SPEC.randomize([1, 2, 3], rng=0))
    key = {"Idempotency-Key": "k-1"}
    with TestClient(app) as c:
        first = c.post("/v1/reports/c", json=body, headers=key)
        assert first.status_code == 201, first.text
        gone = c.delete("/v1/admin/collections/c/batches", params={"token": ""})
        assert gone.json()["deleted_batches"] == 1
        again = c.post("/v1/reports/c", json=body, headers=key)
        assert again.status_code == 409, again.text
        detail = again.json()["detail"]
        assert "k-1" in detail and first.json()["batch_id"] in detail and "deleted" in detail
        # Other content under the same key: refused the same way (the key is spent).
        other = reports_to_dict(SPEC.randomize([5], rng=1))
        assert c.post("/v1/reports/c", json=other, headers=key).status_code == 409
        assert c.get("/v1/collections/c").json()["n"] == 0
        fresh = c.post("/v1/reports/c", json=body, headers={"Idempotency-Key": "k-2"})
        assert fresh.status_code == 201
        assert c.get("/v1/collections/c").json()["n"] == 3
        metrics = c.get("/metrics").text
    assert 'ldpkit_rejects_total{reason="deleted_batch",status="409"} 2' in metrics


def _race_retry_with_delete(writer, deleter, commit):
    """Pause an admin delete inside its transaction, send a retry of a batch it deletes,
    then let the delete finish: returns the retry's result."""
    (stored,) = commit([_keyed("k", 1)])
    assert isinstance(stored, BatchRecord) and not stored.duplicate
    paused, release = threading.Event(), threading.Event()
    bump = deleter.deletes._bump

    def slow_bump(conn, collection):  # the delete holds its locks from here to its COMMIT
        bump(conn, collection)
        paused.set()
        release.wait(20)

    deleter.deletes._bump = slow_bump
    deleted = []
    t = threading.Thread(target=lambda: deleted.append(deleter.delete_batches("c", token="t")))
    t.start()
    assert paused.wait(20)
    got = []
    retry = threading.Thread(target=lambda: got.append(commit([_keyed("k", 1)])[0]))
    retry.start()
    retry.join(0.5)  # long enough for the retry to read the key if nothing stops it
    release.set()
    t.join(20)
    retry.join(20)
    assert deleted == [(1, 2)]
    return stored, got[0]


def test_retry_racing_a_delete_waits_for_it_sqlite(db):
    writer, deleter = _store(db), _store(db)
    try:
        stored, result = _race_retry_with_delete(writer, deleter, writer.commit_group)
        # Not "duplicate" of a batch that the delete in flight removes: the retry is
        # decided after the delete, under the same lock, and the key is spent.
        assert isinstance(result, BatchDeleted), result
        assert stored.batch_id in str(result)
        assert writer.summary("c") == (0, 0)
    finally:
        writer.close()
        deleter.close()


def test_retry_racing_a_delete_waits_for_it_postgres(fresh_postgres):
    writer, deleter = _store(fresh_postgres), _store(fresh_postgres)
    try:
        stored, result = _race_retry_with_delete(writer, deleter, writer.commit_group_pg)
        assert isinstance(result, BatchDeleted) and stored.batch_id in str(result), result
        assert writer.summary("c") == (0, 0)
        (orm,) = writer.commit_group([_keyed("k", 1)])  # the ORM path agrees
        assert isinstance(orm, BatchDeleted)
    finally:
        writer.close()
        deleter.close()


def test_deleted_keys_are_per_token_and_new_keys_still_work(db):
    store = _store(db)
    try:
        store.commit_group([_keyed("k", 1, token="a"), _keyed("k", 2, token="b")])
        assert store.delete_batches("c", token="a") == (1, 2)
        a, b, new = store.commit_group(
            [_keyed("k", 1, token="a"), _keyed("k", 2, token="b"), _keyed("k2", 3, token="a")]
        )
        assert isinstance(a, BatchDeleted)
        assert isinstance(b, BatchRecord) and b.duplicate
        assert isinstance(new, BatchRecord) and not new.duplicate
        assert store.summary("c") == (4, 2)
    finally:
        store.close()


# -- (2) roll-up parts piling up, compaction failing -----------------------------------------


def _parts(store):
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(rollup_parts_table)).scalar()


def _write_parts(url, count, seed=0):
    """``count`` roll-up parts written by another process's store (one batch each)."""
    other = _store(url)
    try:
        sent = []
        for i in range(count):
            r = SPEC.randomize([(seed + i) % 8], rng=seed + i)
            sent.append(r)
            other.commit_group([PendingBatch("c", 1, stats=SPEC.aggregate(r))])
        return sent
    finally:
        other.close()


def test_estimate_compacts_when_parts_pile_up(db):
    app = create_app({"c": SPEC}, db, max_rollup_parts=5)
    with TestClient(app) as c:
        store = app.state.collector.store
        app.state.collector.parts_check_interval = 0.0  # count at every estimate
        sent = _write_parts(db, 5)
        assert c.get("/v1/collections/c/estimate").json()["n"] == 5
        assert _parts(store) == 5  # at the bound: nothing to do
        sent += _write_parts(db, 3, seed=5)
        assert c.get("/healthz").json()["compaction"].startswith("behind: more than 5")
        body = c.get("/v1/collections/c/estimate").json()
        assert _parts(store) == 0  # the estimate folded them first
        health = c.get("/healthz").json()
        assert (health["status"], health["compaction"]) == ("ok", "ok")
        stats = c.get("/v1/collections/c/stats").json()
        metrics = c.get("/metrics").text
    expected = SPEC.aggregate(sent[0].concat(*sent[1:]))
    assert body["n"] == 8 and body["batches"] == 8
    np.testing.assert_allclose(body["frequencies"], SPEC.estimate(expected).frequencies)
    got = Stats.from_dict(stats)
    for name, arr in expected.arrays.items():
        np.testing.assert_array_equal(got.arrays[name], arr)
    assert "ldpkit_compacted_parts_total 8" in metrics


def test_committer_compacts_when_its_parts_exceed_the_bound(db):
    app = create_app({"c": SPEC}, db, max_rollup_parts=3)
    with TestClient(app) as c:
        collector = app.state.collector
        collector.committer.compact_interval = 3600.0  # only the bound can trigger it
        for i in range(7):
            body = reports_to_dict(SPEC.randomize([i % 8], rng=i))
            assert c.post("/v1/reports/c", json=body).status_code == 201
        # Parts 1-4 were folded when the fifth batch arrived (4 > 3), before its group.
        assert _parts(collector.store) == 3
        assert c.get("/v1/collections/c").json()["n"] == 7


def test_failing_compaction_degrades_healthz_and_is_counted(db, monkeypatch):
    app = create_app({"c": SPEC}, db, max_rollup_parts=2)
    with TestClient(app) as c:
        store = app.state.collector.store
        store.compaction.compact_retry_seconds = 0.0
        app.state.collector.parts_check_interval = 0.0
        sent = _write_parts(db, 4)
        real = store.compaction.compact

        def broken(*args, **kwargs):
            raise RuntimeError("disk full")

        monkeypatch.setattr(store.compaction, "compact", broken)
        for k in range(3):
            body = c.get("/v1/collections/c/estimate").json()  # each tries and fails
            assert body["n"] == 4  # still exact: readers sum the parts
            health = c.get("/healthz")
            assert health.status_code == 200 and health.json()["status"] == "degraded"
            # Behind (4 parts > 2) at once; failing from the third failure in a row.
            assert health.json()["compaction"].startswith("behind" if k < 2 else "failing")
        health = c.get("/healthz").json()
        assert health["compaction"].startswith("failing: 3 consecutive failures")
        assert health["compaction"].endswith("behind: more than 2 roll-up parts wait in ['c']")
        assert "RuntimeError: disk full" in health["compaction"]
        assert "ldpkit_compaction_failures_total 3" in c.get("/metrics").text
        monkeypatch.setattr(store.compaction, "compact", real)
        assert c.get("/v1/collections/c/estimate").json()["n"] == 4
        assert _parts(store) == 0
        assert c.get("/healthz").json()["status"] == "ok"
        metrics = c.get("/metrics").text
    assert "ldpkit_compaction_failures_total 3" in metrics
    assert "ldpkit_compactions_total 2" in metrics  # at start, and the last estimate's
    assert len(sent) == 4


# -- (3) a stalled SQLite commit must not stall the event loop for long ----------------------


def test_a_stalled_sqlite_commit_moves_the_next_ones_off_the_event_loop(db):
    """The COMMIT of a group runs in the loop's thread (cheaper), so a disk that stalls
    stalls every request; after one slow commit, the next ones run in the helper thread
    and /healthz answers while a commit is stuck."""
    import asyncio

    import httpx
    from sqlalchemy import event

    app = create_app({"c": SPEC}, db)
    collector = app.state.collector
    collector.committer.compact_interval = 3600.0  # only group commits below
    stuck, release, returned = threading.Event(), threading.Event(), threading.Event()
    plan = ["slow", "stuck"]

    @event.listens_for(collector.store.engine, "commit")
    def stall(_conn):  # before the DB-API COMMIT, in the committing thread (a slow fsync)
        step = plan.pop(0) if plan else None
        if step == "slow":
            threading.Event().wait(0.3)
        elif step == "stuck":
            stuck.set()
            release.wait(5)
            returned.set()

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            body = reports_to_dict(SPEC.randomize([1], rng=0))
            first = await client.post("/v1/reports/c", json=body)  # held the loop 0.3 s
            assert first.status_code == 201
            second = asyncio.create_task(client.post("/v1/reports/c", json=body))
            while not stuck.is_set():
                await asyncio.sleep(0.01)
            health = await asyncio.wait_for(client.get("/healthz"), 30)
            answered_while_stuck = not returned.is_set()
            release.set()
            assert (await second).status_code == 201
            n = (await client.get("/v1/collections/c")).json()["n"]
        await collector.committer.close()
        return health, answered_while_stuck, n

    try:
        health, answered_while_stuck, n = asyncio.run(scenario())
    finally:
        release.set()
        collector.store.close()
    assert health.status_code == 200
    assert answered_while_stuck  # before: /healthz waited for the stuck COMMIT
    assert n == 2 and plan == []


def test_max_rollup_parts_is_validated_and_read_from_the_config(db):
    from ldpkit.service import app_from_config

    for bad in (0, -1, 2.5, True, "10"):
        with pytest.raises(ValueError, match=r"max_rollup_parts must be an integer >= 1, got"):
            create_app({"c": SPEC}, db, max_rollup_parts=bad)
    config = {
        "database_url": db,
        "max_rollup_parts": 7,
        "collections": {"c": {"mechanism": "GRR", "params": {"epsilon": 1.0, "domain_size": 8}}},
    }
    app = app_from_config(config)
    try:
        assert app.state.collector.store.compaction.max_parts == 7
    finally:
        app.state.collector.store.close()
