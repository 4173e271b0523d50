"""Collector robustness: retries racing admin deletes, roll-up parts piling up, slow commits."""

import threading

import pytest
from fastapi.testclient import TestClient

from ldpkit import GRR
from ldpkit.io import reports_to_dict
from ldpkit.service import create_app
from ldpkit.service.store import (
    BatchDeleted,
    BatchRecord,
    CollectorStore,
    PendingBatch,
    reports_digest,
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
    bump = deleter._bump

    def slow_bump(conn, collection):  # the delete holds its locks from here to its COMMIT
        bump(conn, collection)
        paused.set()
        release.wait(20)

    deleter._bump = slow_bump
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
