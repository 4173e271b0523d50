"""The PostgreSQL group commit (PostgresWriter.commit_group_pg, one round trip per group).

Same contract as commit_group: new batches stored once, retries answered with the first
record, reused keys for other content refused, totals exact with two writer processes'
worth of connections racing on the same roll-up rows and keys.
"""

import dataclasses
import threading

import numpy as np
import pytest

from ldpkit import GRR
from ldpkit.service.store import CollectorStore, IdempotencyConflict, PendingBatch, stats_digest
from ldpkit.service.writes import MERGE_STATS

SPEC = GRR(epsilon=1.0, domain_size=8)


def _item(values, key=None, rng=0):
    stats = SPEC.aggregate(SPEC.randomize(np.asarray(values), rng=rng))
    return PendingBatch(
        "c",
        stats.n,
        stats=stats,
        idempotency_key=key,
        digest=stats_digest(stats) if key else None,
    )


def _store(url):
    store = CollectorStore(url)
    store.register("c", SPEC)
    return store


def test_group_keys_duplicates_and_conflicts(fresh_postgres):
    store = _store(fresh_postgres)
    try:
        a, b = _item([1, 2, 3], key="k1", rng=1), _item([4], rng=2)
        first = store.commit_group_pg([a, b, _item([1, 2, 3], key="k1", rng=1)])
        assert not first[0].duplicate and not first[1].duplicate
        assert first[2].duplicate and first[2].batch_id == first[0].batch_id
        # Later group: the retry finds the stored row; other content under the key is refused.
        again = store.commit_group_pg([_item([1, 2, 3], key="k1", rng=1), _item([5], key="k1")])
        assert again[0].duplicate and again[0].batch_id == first[0].batch_id
        assert isinstance(again[1], IdempotencyConflict)
        stats, _ = store.merged("c", SPEC)
        expected = a.stats.merge(b.stats)
        assert stats.n == 4 and store.summary("c") == (4, 2)
        for name, arr in expected.arrays.items():
            np.testing.assert_array_equal(stats.arrays[name], arr)
        # The ORM path agrees with what the fast path wrote.
        store.commit_group([_item([6], rng=3)])
        assert store.summary("c") == (5, 3)
    finally:
        store.close()


def test_concurrent_writers_lose_nothing(fresh_postgres):
    stores = [_store(fresh_postgres) for _ in range(3)]
    errors = []

    def write(store, w):
        try:
            for g in range(15):
                # Every writer also sends keys shared with the others: exactly one stores them.
                group = [
                    _item([g % 8], rng=100 * w + g),
                    _item([g % 8, 1], key=f"shared{g}", rng=g),
                ]
                for r in store.commit_group_pg(group):
                    assert not isinstance(r, Exception), r
        except Exception as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(s, w)) for w, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    try:
        assert not errors, errors
        # 3 writers x 15 unkeyed one-report batches + 15 shared two-report batches, once each.
        assert stores[0].summary("c") == (3 * 15 + 15 * 2, 3 * 15 + 15)
    finally:
        for s in stores:
            s.close()


def test_compaction_racing_writers_and_compactors_is_exact(fresh_postgres):
    """Two compactors (one per worker process in a server) and writers at once: every
    part is folded exactly once, and readers see the same totals throughout."""
    stores = [_store(fresh_postgres) for _ in range(3)]
    errors: list[Exception] = []
    stop = threading.Event()
    everything = [_item([g % 8, (3 * g) % 8], rng=g) for g in range(40)]

    def write(store, share):
        try:
            for g in range(0, 40, 2):
                for r in store.commit_group_pg([everything[g + share]]):
                    assert not isinstance(r, Exception), r
        except Exception as exc:
            errors.append(exc)

    def compact(store):
        try:
            while not stop.is_set():
                store.compact(limit=3)
        except Exception as exc:
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(stores[i], i)) for i in (0, 1)]
    compactors = [threading.Thread(target=compact, args=(s,)) for s in stores[1:]]
    for t in writers + compactors:
        t.start()
    for t in writers:
        t.join(120)
    stop.set()
    for t in compactors:
        t.join(120)
    try:
        assert not errors, errors
        stores[0].compact()
        with stores[0].engine.connect() as conn:
            parts = conn.exec_driver_sql("SELECT count(*) FROM ldpkit_rollup_parts").scalar()
        assert parts == 0
        stats, batches = stores[0].merged("c", SPEC)
        expected = SPEC.empty_stats().merge(*(i.stats for i in everything))
        assert (stats.n, batches) == (80, 40) and stores[0].summary("c") == (80, 40)
        for name, arr in expected.arrays.items():
            np.testing.assert_array_equal(stats.arrays[name], arr)
    finally:
        for s in stores:
            s.close()


@pytest.fixture(autouse=True)
def _psycopg():
    pytest.importorskip("psycopg")


def test_two_groups_in_flight_store_each_key_once(fresh_postgres):
    """One process's committer keeps two groups in flight on PostgreSQL (two connections):
    retries of one key landing in both groups race on the unique index like two worker
    processes do; the loser retries its group, and every key is stored exactly once."""
    import asyncio

    from ldpkit.service.commit import GroupCommitter

    store = _store(fresh_postgres)
    committer = GroupCommitter(store, {"c": SPEC}, window=0.0, compact_interval=3600.0)
    assert committer.max_inflight == 2
    sizes: list[int] = []
    committer.on_commit = lambda _s, n: sizes.append(n)
    keys = 40
    items = [_item([k % 8, (k + 1) % 8], key=f"k{k}", rng=k) for k in range(keys)]

    async def run():
        # Each key sent three times (same content): a retry may share its group with the
        # first send, sit in the other group in flight, or come after both committed.
        waves = []
        for _rep in range(3):
            for k in range(keys):
                item = items[k]
                copy = PendingBatch(
                    "c",
                    item.n,
                    stats=item.stats,
                    idempotency_key=item.idempotency_key,
                    digest=item.digest,
                )
                waves.append(asyncio.ensure_future(committer.commit(copy)))
                if k % 5 == 4:
                    await asyncio.sleep(0.002)  # let a group go, so that groups overlap
        out = await asyncio.wait_for(asyncio.gather(*waves), 120)
        await committer.close()
        return out

    try:
        out = asyncio.run(run())
        ids: dict[str, set[str]] = {}
        for r, i in zip(out, range(len(out))):
            ids.setdefault(f"k{i % keys}", set()).add(r.batch_id)
        assert all(len(v) == 1 for v in ids.values())  # one batch_id per key
        assert sum(not r.duplicate for r in out) == keys
        assert len(sizes) > 1  # the traffic went in several groups
        assert committer.peak_inflight == 2  # and two of them were in flight at once
        expected = SPEC.empty_stats().merge(*(it.stats for it in items))
        stats, _ = store.merged("c", SPEC)
        assert store.summary("c") == (expected.n, keys)
        for name, arr in expected.arrays.items():
            np.testing.assert_array_equal(stats.arrays[name], arr)
    finally:
        store.close()


def test_keyless_group_in_one_statement_writes_what_the_orm_path_writes(fresh_postgres, tmp_path):
    """A group without keys or raw reports is one autocommitted statement
    (commit_group_pg's single-statement path); a batch in a closed bucket sends its group
    down the pipelined path, which bumps the collection's generation. Both store exactly
    what the ORM path stores for the same groups (SQLite as the reference)."""
    import datetime as dt

    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    late = now - dt.timedelta(days=2)  # a closed bucket

    def groups():
        def one(values, rng, token, when):
            b = _item(values, rng=rng)
            b.token, b.received_at = token, when
            return b

        return [
            [one([1, 2], 1, "a", now), one([3], 2, "b", now), one([4, 4, 5], 3, "a", now)],
            [one([6], 4, "b", now), one([7, 0], 5, "a", late)],  # pipelined: late bucket
            [one([2], 6, "a", now)],
        ]

    def generation(store):
        with store.engine.connect() as conn:
            return conn.exec_driver_sql(
                "SELECT generation FROM ldpkit_collections WHERE name = 'c'"
            ).scalar()

    pg, ref = _store(fresh_postgres), _store(f"sqlite:///{tmp_path / 'ref.db'}")
    try:
        gens = []
        for group in groups():
            assert all(not isinstance(r, Exception) for r in pg.commit_group_pg(group))
            gens.append(generation(pg))
        assert gens[1] == gens[0] + 1 and gens[2] == gens[1]  # only the late group bumped
        for group in groups():
            ref.commit_group(group)
        assert pg.summary("c") == ref.summary("c") == (10, 6)
        assert pg.buckets("c") == ref.buckets("c")
        for token in ("a", "b"):
            got = sorted((r.n, r.received_at) for r in pg.list_batches("c", token=token))
            want = sorted((r.n, r.received_at) for r in ref.list_batches("c", token=token))
            assert got == want
        (s1, b1), (s2, b2) = pg.merged("c", SPEC), ref.merged("c", SPEC)
        assert b1 == b2 == 6
        for name, arr in s2.arrays.items():
            np.testing.assert_array_equal(s1.arrays[name], arr)
    finally:
        pg.close()
        ref.close()


def test_keyless_groups_commit_in_the_event_loop_and_survive_a_lost_connection(fresh_postgres):
    """Keyless groups go through the committer's asyncio connections (no executor thread:
    PostgresWriter.commit_in_loop); keyed ones, and keyless ones larger than
    ``in_loop_max_group``, through the committer's thread. A connection killed by the
    server fails only the group sent on it, with the DBAPIError the app turns into a 503,
    nothing of it stored (a loss noticed while idle: the group reconnects first); the next
    group reconnects (test_pgloop: killed with a statement in flight). close() closes the loop's
    connections."""
    import asyncio

    from sqlalchemy.exc import DBAPIError

    from ldpkit.service.commit import GroupCommitter

    store = _store(fresh_postgres)
    store.postgres.in_loop_max_group = 64  # every keyless group below in the loop, until lowered
    committer = GroupCommitter(store, {"c": SPEC}, window=0.0, compact_interval=3600.0)
    threads: list[str] = []
    real = store.postgres.commit_group_pg
    store.postgres.commit_group_pg = lambda *a, **k: threads.append("pipelined") or real(*a, **k)  # type: ignore[method-assign]
    keyless = [_item([k % 8], rng=k) for k in range(30)]
    keyed = [_item([k % 8, 1], key=f"k{k}", rng=100 + k) for k in range(5)]
    large = [_item([k % 8, 2, 3], rng=200 + k) for k in range(5)]

    async def run():
        first = await asyncio.gather(*(committer.commit(b) for b in keyless[:10]))
        state = next(iter(committer._states.values()))
        assert state.connections and not threads  # in the loop, on a kept connection
        pids = [c.info.backend_pid for c in state.connections]
        with store.engine.connect() as conn:  # the server drops the loop's connections
            for pid in pids:
                conn.exec_driver_sql(f"SELECT pg_terminate_backend({pid})")
        # The next group fails with them (or, the loss seen while idle, reconnects).
        try:
            rest = [await committer.commit(keyless[10])]
        except DBAPIError as exc:
            assert exc.connection_invalidated
            rest = []
        rest += await asyncio.gather(*(committer.commit(b) for b in keyless[11:]))
        assert state.connections and not threads  # reconnected
        rest += await asyncio.gather(*(committer.commit(b) for b in keyed))
        assert threads == ["pipelined"]  # a group with keys goes through the pipelined path
        store.postgres.in_loop_max_group = 3  # a larger keyless group: in the committer's thread
        rest += await asyncio.gather(*(committer.commit(b) for b in large))
        assert threads == ["pipelined"] * 2
        conns = list(state.connections)
        await committer.close()
        assert conns and all(c.closed for c in conns) and not state.connections
        return first + rest

    try:
        out = asyncio.run(run())
        lost = len(out) == 39  # #10 failed
        assert len({r.batch_id for r in out}) == len(out) == 40 - lost
        stored = [b for i, b in enumerate(keyless + keyed + large) if i != 10 or not lost]
        expected = SPEC.empty_stats().merge(*(b.stats for b in stored))
        stats, _ = store.merged("c", SPEC)
        assert store.summary("c") == (expected.n, 40 - lost)
        for name, arr in expected.arrays.items():
            np.testing.assert_array_equal(stats.arrays[name], arr)
    finally:
        store.close()


def _pg_raw(url):
    import psycopg

    return psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True)


def _ingest_estimate_delete(store):
    """Keyless and keyed groups on both paths, a retry, an estimate, a delete by token."""
    a, b = _item([1, 2, 3], key="k1", rng=1), _item([4, 5], rng=2)
    first = store.commit_group_pg([a, b])
    assert store.commit_group_pg([_item([1, 2, 3], key="k1", rng=1)])[0].batch_id == (
        first[0].batch_id
    )
    store.commit_group([_item([6], rng=3)])
    store.compact()
    stats, _ = store.merged("c", SPEC)
    assert stats.n == 6 and store.summary("c") == (6, 3)
    assert len(store.list_batches("c", token="")) == 3
    store.delete_batches("c", token="")
    assert store.summary("c") == (0, 0) and store.list_batches("c") == []


def test_new_postgres_schema_is_lean_and_works(fresh_postgres):
    """New PostgreSQL databases: the batch table's primary key, a partial unique index on
    keyed rows and the two admin indexes; no foreign keys on the two
    tables every group commit writes (see the schema comment in store.py)."""
    store = _store(fresh_postgres)
    try:
        from sqlalchemy import inspect

        insp = inspect(store.engine)
        indexes = {i["name"]: i for i in insp.get_indexes("ldpkit_batches")}
        assert set(indexes) == {
            "uq_ldpkit_batches_key",
            "ix_ldpkit_batches_bucket",
            "ix_ldpkit_batches_token",
        }
        assert indexes["uq_ldpkit_batches_key"]["unique"]
        assert insp.get_unique_constraints("ldpkit_batches") == []
        assert insp.get_foreign_keys("ldpkit_batches") == []
        assert insp.get_foreign_keys("ldpkit_rollup_parts") == []
        _ingest_estimate_delete(store)
    finally:
        store.close()


def test_batches_only_for_registered_collections(fresh_postgres):
    """The invariant that replaces the dropped foreign keys: no batch row or roll-up part
    without its collection row (register writes it; a group for another name is refused
    before anything is written)."""
    store = _store(fresh_postgres)
    try:
        stray = dataclasses.replace(_item([1]), collection="unregistered")
        with pytest.raises((KeyError, ValueError)):
            store.commit_group_pg([stray])
        with pytest.raises((KeyError, ValueError)):
            store.commit_group([stray])
        with _pg_raw(fresh_postgres) as c:
            orphans = c.execute(
                "SELECT count(*) FROM ldpkit_batches b WHERE NOT EXISTS (SELECT 1 FROM"
                " ldpkit_collections c WHERE c.name = b.collection) UNION ALL"
                " SELECT count(*) FROM ldpkit_rollup_parts p WHERE NOT EXISTS (SELECT 1 FROM"
                " ldpkit_collections c WHERE c.name = p.collection)"
            ).fetchall()
        assert orphans == [(0,), (0,)]
    finally:
        store.close()


def test_database_of_the_earlier_schema_keeps_working(fresh_postgres):
    """A database created before the lean schema (foreign keys, unique batch_id, full
    idempotency constraint, two batch indexes) is used as it is: same results."""
    store = _store(fresh_postgres)
    store.close()
    with _pg_raw(fresh_postgres) as c:
        for q in [
            "DROP INDEX uq_ldpkit_batches_key",
            "ALTER TABLE ldpkit_batches ADD UNIQUE (batch_id)",
            "ALTER TABLE ldpkit_batches ADD FOREIGN KEY (collection)"
            " REFERENCES ldpkit_collections (name)",
            "ALTER TABLE ldpkit_rollup_parts ADD FOREIGN KEY (collection)"
            " REFERENCES ldpkit_collections (name)",
            "ALTER TABLE ldpkit_batches ADD CONSTRAINT uq_ldpkit_batches_idempotency"
            " UNIQUE (collection, token, idempotency_key)",
        ]:
            c.execute(q)
    store = _store(fresh_postgres)
    try:
        from sqlalchemy import inspect

        assert len(inspect(store.engine).get_foreign_keys("ldpkit_batches")) == 1
        _ingest_estimate_delete(store)
        # The earlier unique constraint still refuses another batch under a stored key.
        store.commit_group_pg([_item([1], key="k2", rng=4)])
        assert isinstance(store.commit_group_pg([_item([2], key="k2")])[0], IdempotencyConflict)
    finally:
        store.close()


def test_groups_commit_while_a_compaction_runs(fresh_postgres):
    """On PostgreSQL the committer folds roll-up parts in a helper thread while groups keep
    committing: a group queued during a compaction that cannot finish yet is answered."""
    import asyncio

    from ldpkit.service.commit import GroupCommitter

    store = _store(fresh_postgres)
    committer = GroupCommitter(store, {"c": SPEC}, window=0.0, compact_interval=0.0)
    entered, release = threading.Event(), threading.Event()
    original = store.try_compact

    def try_compact(**kwargs):
        entered.set()
        assert release.wait(120)
        return original(**kwargs)

    store.try_compact = try_compact

    async def run():
        await asyncio.wait_for(committer.commit(_item([1])), 60)  # writes a part
        while not entered.is_set():  # the committer starts folding it
            await asyncio.sleep(0.005)
        try:  # the compaction is stuck: this group must still commit
            await asyncio.wait_for(committer.commit(_item([2], rng=1)), 60)
        finally:
            release.set()
        await committer.close()

    try:
        asyncio.run(run())
        assert store.summary("c") == (2, 2)
        assert not store.needs_compaction
    finally:
        release.set()
        store.close()  # its kept connections, before the next test's warnings check


def test_roll_up_arrays_compressed_with_lz4_and_old_rows_still_read(fresh_postgres):
    """The roll-up tables' arrays use lz4 (cheaper for the group commit's statement than
    pglz) where the server has it; a database made with pglz is switched when opened, and
    its rows stored before read the same."""
    from sqlalchemy import text

    store = _store(fresh_postgres)
    try:
        with store.engine.begin() as conn:
            lz4 = conn.execute(
                text(
                    "SELECT 'lz4' = ANY(enumvals) FROM pg_settings"
                    " WHERE name = 'default_toast_compression'"
                )
            ).scalar()
            if not lz4:
                pytest.skip("PostgreSQL without lz4")
            for table in ("ldpkit_rollup_parts", "ldpkit_rollups"):  # as an earlier version
                conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN arrays SET COMPRESSION pglz"))
        big = GRR(epsilon=1.0, domain_size=4096)  # arrays large enough to be compressed
        store.register("big", big)
        before = [
            big.aggregate(big.randomize(np.arange(k, 4096 + k) % 4096, rng=k)) for k in (1, 2)
        ]
        store.commit_group([PendingBatch("big", s.n, stats=s) for s in before[:1]])
        store.compact()
        store.commit_group([PendingBatch("big", s.n, stats=s) for s in before[1:]])
    finally:
        store.close()

    def methods(store):
        with store.engine.connect() as conn:
            return {
                table: conn.execute(
                    text(f"SELECT DISTINCT pg_column_compression(arrays) FROM {table}")
                )
                .scalars()
                .all()
                for table in ("ldpkit_rollup_parts", "ldpkit_rollups")
            }

    store = _store(fresh_postgres)  # reopened: switched to lz4
    try:
        assert methods(store) == {"ldpkit_rollup_parts": ["pglz"], "ldpkit_rollups": ["pglz"]}
        store.register("big", big)
        after = big.aggregate(big.randomize(np.arange(4096) % 4096, rng=3))
        store.commit_group([PendingBatch("big", after.n, stats=after)])
        with store.engine.connect() as conn:
            new = conn.execute(
                text(
                    "SELECT pg_column_compression(arrays) FROM ldpkit_rollup_parts"
                    " ORDER BY id DESC LIMIT 1"
                )
            ).scalar()
        assert new == "lz4"
        expected = big.empty_stats().merge(*before, after)
        stats, _ = store.merged("big", big)
        assert stats.n == expected.n == 3 * 4096
        for name, arr in expected.arrays.items():
            np.testing.assert_array_equal(stats.arrays[name], arr)
        store.compact()  # folded into the roll-up row, rewritten with lz4
        assert methods(store)["ldpkit_rollups"] == ["lz4"]
        stats, _ = store.merged("big", big)
        for name, arr in expected.arrays.items():
            np.testing.assert_array_equal(stats.arrays[name], arr)
    finally:
        store.close()


def test_a_role_that_may_not_alter_the_tables_opens_the_store_with_a_warning(
    fresh_postgres, caplog
):
    """Switching the arrays to lz4 needs the tables' owner; another role (granted only
    what the collector needs) still opens the store and ingests, with a warning."""
    from sqlalchemy import text

    owner = _store(fresh_postgres)
    try:
        with owner.engine.begin() as conn:
            if not conn.execute(
                text(
                    "SELECT 'lz4' = ANY(enumvals) FROM pg_settings"
                    " WHERE name = 'default_toast_compression'"
                )
            ).scalar():
                pytest.skip("PostgreSQL without lz4")
            conn.execute(text("DROP ROLE IF EXISTS ldpkit_limited"))
            conn.execute(text("CREATE ROLE ldpkit_limited LOGIN"))
            conn.execute(
                text(
                    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public"
                    " TO ldpkit_limited"
                )
            )
            conn.execute(text("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO ldpkit_limited"))
            conn.execute(
                text("ALTER TABLE ldpkit_rollup_parts ALTER COLUMN arrays SET COMPRESSION pglz")
            )
    finally:
        owner.close()
    limited_url = fresh_postgres.replace("//ldpkit@", "//ldpkit_limited@")
    assert limited_url != fresh_postgres
    with caplog.at_level("WARNING", logger="ldpkit.service"):
        store = _store(limited_url)
    try:
        assert "keep PostgreSQL's default compression" in caplog.text
        stored = store.commit_group_pg([_item([1, 2], rng=5)])
        assert not stored[0].duplicate and store.summary("c") == (2, 1)
    finally:
        store.close()
        with _pg_raw(fresh_postgres) as raw:
            raw.execute("DROP OWNED BY ldpkit_limited")
            raw.execute("DROP ROLE ldpkit_limited")


def test_one_statement_rows_are_exact_for_any_names_and_times(fresh_postgres):
    """The one-statement path sends the batch rows as array literals and arrival times as
    Unix seconds: names with quotes, backslashes, commas, braces or spaces and the empty
    token are stored as given, received_at and bucket exactly; a time with microseconds
    (never from the app's clock) takes the pipelined path and is stored exactly too."""
    import datetime as dt

    from sqlalchemy import text

    odd = 'we"ird\\, {c} x'
    store = _store(fresh_postgres)
    try:
        store.register(odd, SPEC, 600)
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        shifted = now.astimezone(dt.timezone(dt.timedelta(hours=-5)))  # same instant
        fine = now.replace(microsecond=123457)

        def batch(collection, token, when, rng):
            b = _item([rng % 8, 3], rng=rng)
            b.collection, b.token, b.received_at = collection, token, when
            return b

        group = [
            batch(odd, "", now, 1),
            batch("c", 'to"k\\en,{}', shifted, 2),
            batch(odd, "a b", shifted, 3),
        ]
        assert store.postgres._single_statement(group, MERGE_STATS) is not None
        records = store.commit_group_pg(group)
        late = [batch(odd, "", fine, 4)]
        assert store.postgres._single_statement(late, MERGE_STATS) is None
        records += store.commit_group_pg(late)
        with store.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT batch_id, collection, token, idempotency_key, digest, n,"
                    " received_at, bucket FROM ldpkit_batches ORDER BY id"
                )
            ).all()
        want = [
            (r.batch_id, b.collection, b.token, None, None, b.n, b.received_at)
            for r, b in zip(records, group + late)
        ]
        assert [tuple(row[:7]) for row in rows] == want
        assert [row[6].tzinfo is not None for row in rows] == [True] * 4
        width = {odd: 600, "c": 3600}
        assert [row[7] for row in rows] == [
            int(b.received_at.timestamp()) // width[b.collection] * width[b.collection]
            for b in group + late
        ]
        for name, members in ((odd, [group[0], group[2], late[0]]), ("c", [group[1]])):
            stats, count = store.merged(name, SPEC)
            expected = SPEC.empty_stats().merge(*[m.stats for m in members])
            assert count == len(members) and stats.n == expected.n
            for field, arr in expected.arrays.items():
                np.testing.assert_array_equal(stats.arrays[field], arr)
    finally:
        store.close()


def test_roll_up_arrays_stay_in_the_row_and_earlier_databases_are_switched(fresh_postgres):
    """STORAGE MAIN on the roll-up arrays: a compressed part is kept in its row (no TOAST
    rows to write and delete per group); a database made with the default (EXTENDED) is
    switched when opened; arrays too large for a page still go out of line and every row,
    old or new, reads the same."""
    from sqlalchemy import text

    def storage(store):
        with store.engine.connect() as conn:
            return dict(
                conn.execute(
                    text(
                        "SELECT c.relname, a.attstorage FROM pg_attribute a JOIN pg_class c"
                        " ON c.oid = a.attrelid WHERE a.attname = 'arrays'"
                        " AND c.relname IN ('ldpkit_rollup_parts', 'ldpkit_rollups')"
                    )
                ).all()
            )

    def toasted(store):
        with store.engine.connect() as conn:
            toast = conn.execute(
                text(
                    "SELECT reltoastrelid::regclass::text FROM pg_class"
                    " WHERE relname = 'ldpkit_rollup_parts'"
                )
            ).scalar()
            return conn.execute(text(f"SELECT count(*) FROM {toast}")).scalar()

    mid = GRR(epsilon=1.0, domain_size=1024)  # 8 KiB of counts: ~2-3 KiB compressed
    big = GRR(epsilon=1.0, domain_size=65536)  # 512 KiB: does not fit a page compressed

    def stats(spec, k):
        return spec.aggregate(spec.randomize(np.arange(4 * k, 4 * k + 4000) % 1024, rng=k))

    store = _store(fresh_postgres)
    try:
        assert storage(store) == {"ldpkit_rollup_parts": "m", "ldpkit_rollups": "m"}
        with store.engine.begin() as conn:  # as an earlier version made them
            for table in ("ldpkit_rollup_parts", "ldpkit_rollups"):
                conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN arrays SET STORAGE EXTENDED"))
        store.register("mid", mid)
        old = stats(mid, 1)
        store.commit_group([PendingBatch("mid", old.n, stats=old)])
        assert toasted(store) > 0  # out of line, as before
    finally:
        store.close()
    store = _store(fresh_postgres)  # reopened: switched
    try:
        assert storage(store) == {"ldpkit_rollup_parts": "m", "ldpkit_rollups": "m"}
        store.register("mid", mid)
        store.register("big", big)
        before = toasted(store)
        new = [stats(mid, k) for k in (2, 3)]
        for s in new:  # one-statement path, then the pipelined one
            store.commit_group_pg([PendingBatch("mid", s.n, stats=s)])
        assert toasted(store) == before  # in the row
        huge = stats(big, 4)
        store.commit_group_pg([PendingBatch("big", huge.n, stats=huge)])
        assert toasted(store) > before  # too large for a page: out of line all the same
        for compact in (False, True):
            if compact:
                store.compact()
            for spec, members in ((mid, [old, *new]), (big, [huge])):
                got, _ = store.merged("mid" if spec is mid else "big", spec)
                expected = spec.empty_stats().merge(*members)
                assert got.n == expected.n
                for field, arr in expected.arrays.items():
                    np.testing.assert_array_equal(got.arrays[field], arr)
    finally:
        store.close()
