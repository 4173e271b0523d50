"""Admin deletes racing group commits and compaction into the same bucket.

Writers commit one-report batches (tokens "a" and "b", one time bucket) while another
connection deletes by token and by time range in a loop and a third compacts. At the end,
for every remaining batch row its Stats are in roll-ups + parts exactly once (the merged
Stats equal the merge of exactly the remaining batches' Stats), the roll-up totals per
token equal the batch rows' totals, and what the deletes returned plus what remains is
everything written (the counts a delete returns are exact too).
"""

import datetime as dt
import threading
import time

import numpy as np
import pytest
from sqlalchemy import func, select

from ldpkit import GRR
from ldpkit.service.store import CollectorStore, PendingBatch, batches_table

SPEC = GRR(epsilon=1.0, domain_size=8)
WIDTH = 3600


def _store(url):
    store = CollectorStore(url)
    store.register("c", SPEC, WIDTH)
    return store


def _race(url, commit_name, *, writers=2, groups=60, seconds=20.0):
    """Run the race; returns (written stats by batch id, deleted (batches, reports), stores)."""
    stores = [_store(url) for _ in range(writers + 2)]
    deleter, compactor = stores[writers], stores[writers + 1]
    # One bucket for everything (a fixed arrival time inside the current, open bucket).
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    bucket = deleter.bucket_of("c", now)
    written: dict[str, tuple[str, object]] = {}  # batch id -> (token, Stats)
    deleted = [0, 0]
    errors: list[BaseException] = []
    done = threading.Event()
    lock = threading.Lock()

    def write(w):
        store = stores[w]
        rng = np.random.default_rng(w)
        try:
            for g in range(groups):
                items = []
                for k in range(4):
                    stats = SPEC.aggregate(SPEC.randomize(rng.integers(0, 8, k % 2 + 1), rng=rng))
                    token = "ab"[(g + k) % 2]
                    items.append(PendingBatch("c", stats.n, stats=stats, token=token))
                    items[-1].received_at = now
                results = getattr(store, commit_name)(items)
                with lock:
                    for item, r in zip(items, results):
                        assert not isinstance(r, BaseException), r
                        written[r.batch_id] = (item.token, item.stats)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def delete():
        i = 0
        try:
            while not done.is_set():
                if i % 2:
                    got = deleter.delete_batches("c", token="a")
                else:
                    got = deleter.delete_batches("c", token="b", since=bucket, until=bucket + WIDTH)
                deleted[0] += got[0]
                deleted[1] += got[1]
                i += 1
                time.sleep(0.002)
        except BaseException as exc:
            errors.append(exc)

    def compact():
        try:
            while not done.is_set():
                compactor.compact(limit=2)
                time.sleep(0.001)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    helpers = [threading.Thread(target=delete), threading.Thread(target=compact)]
    for t in threads + helpers:
        t.start()
    for t in threads:
        t.join(seconds)
    done.set()
    for t in helpers:
        t.join(seconds)
    return written, deleted, stores, errors


def _check(written, deleted, store):
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(batches_table.c.batch_id, batches_table.c.token, batches_table.c.n).where(
                batches_table.c.collection == "c"
            )
        ).all()
    remaining = {r.batch_id for r in rows}
    assert remaining <= set(written)
    # Every remaining batch's Stats counted once, nothing of a deleted batch left.
    stats, batches = store.merged("c", SPEC)
    expected = SPEC.empty_stats().merge(*(written[b][1] for b in remaining))
    assert (stats.n, batches) == (expected.n, len(remaining))
    for name, arr in expected.arrays.items():
        np.testing.assert_array_equal(stats.arrays[name], arr)
    for token in "ab":
        mine = [r for r in rows if r.token == token]
        got, count = store.merged("c", SPEC, token=token)
        assert (got.n, count) == (sum(int(r.n) for r in mine), len(mine))
    # What the deletes said they removed, plus what remains, is everything written.
    total_n = sum(s.n for _, s in written.values())
    assert deleted == [len(written) - len(remaining), total_n - expected.n]
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(batches_table)).scalar() == len(rows)


def test_delete_racing_group_commits_is_exact_postgres(fresh_postgres):
    pytest.importorskip("psycopg")
    written, deleted, stores, errors = _race(fresh_postgres, "commit_group_pg")
    try:
        assert not errors, errors
        assert len(written) == 2 * 60 * 4
        _check(written, deleted, stores[0])
        stores[0].compact()
        _check(written, deleted, stores[0])
    finally:
        for s in stores:
            s.close()


def test_delete_racing_orm_group_commits_is_exact_postgres(fresh_postgres):
    pytest.importorskip("psycopg")
    written, deleted, stores, errors = _race(fresh_postgres, "commit_group", groups=30)
    try:
        assert not errors, errors
        _check(written, deleted, stores[0])
    finally:
        for s in stores:
            s.close()


def test_delete_racing_group_commits_is_exact_sqlite(tmp_path):
    written, deleted, stores, errors = _race(
        f"sqlite:///{tmp_path / 'c.db'}", "commit_group", groups=25
    )
    try:
        assert not errors, errors
        _check(written, deleted, stores[0])
    finally:
        for s in stores:
            s.close()
