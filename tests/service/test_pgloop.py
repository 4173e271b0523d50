"""Keyless PostgreSQL groups sent by the event loop through libpq (service/_pgloop.py).

The parameters carry the types psycopg would declare; a server error fails the whole group
(nothing stored, the connection kept); a connection killed with a statement in flight gives
the 503 and the next request reconnects; a group cancelled in flight drops its connection.
"""

import asyncio
import hashlib
import threading
import time

import numpy as np
import pytest

from ldpkit import GRR
from ldpkit.service.store import CollectorStore, PendingBatch
from ldpkit.service.writes import COLLECTION_LOCK_CLASS, collection_lock_id

psycopg = pytest.importorskip("psycopg")  # the service extra; CI installs it

from ldpkit.service._pgloop import encode_params, numbered_sql  # noqa: E402

SPEC = GRR(epsilon=1.0, domain_size=8)


def _item(value, rng):
    return PendingBatch("c", 1, stats=SPEC.aggregate(SPEC.randomize(np.asarray([value]), rng=rng)))


def _store(url):
    store = CollectorStore(url)
    store.register("c", SPEC)
    return store


def _pg_raw(url):
    import psycopg

    return psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True)


def _lock_sql(fn):
    return f"SELECT {fn}({COLLECTION_LOCK_CLASS}, {collection_lock_id('c')})"


async def _first_group(store):
    """Commit one group on this loop: its idle connections list (holding the connection
    the group opened), the executor hand-off, and that connection."""
    loop = asyncio.get_running_loop()
    conns: list = []

    def run_blocking(fn):
        return loop.run_in_executor(None, fn)

    await store.commit_group_async([_item(0, 0)], None, run_blocking, conns)
    (first,) = conns
    return conns, run_blocking, first


def _blocked_pid(raw, timeout=30.0):
    """The backend whose group statement waits for the collection's lock."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        row = raw.execute(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE '%ldpkit_rollup_parts%'"
        ).fetchone()
        if row is not None:
            return row[0]
        time.sleep(0.01)
    raise AssertionError("no group statement waited for the lock")


def test_parameters_get_psycopgs_types_and_placeholders_are_numbered():
    from psycopg.adapt import PyFormat, Transformer

    params = ("[1]", "\u00e9", 0, -(2**15), 2**15, 2**31, -(2**63), 2**63, b"\x00\xff", None, "")
    values, formats, oids = encode_params(params)
    t = Transformer()
    t.dump_sequence(params, [PyFormat.AUTO] * len(params))
    assert oids == tuple(t.types)  # what the server was told before: same inferred types
    assert formats == [0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]
    big = [b"2147483648", b"-9223372036854775808", b"9223372036854775808"]
    assert values[:8] == [b"[1]", "\u00e9".encode(), b"0", b"-32768", b"32768", *big]
    assert values[8:] == [b"\x00\xff", None, b""]
    # Anything else is left to psycopg (the caller takes the pipelined path).
    for odd in (True, 1.5, "a\x00b", bytearray(b"x")):
        assert encode_params(("x", odd)) is None
    assert numbered_sql("SELECT %s, %s::bigint, '100%%'") == b"SELECT $1, $2::bigint, '100%'"
    for odd in ("SELECT %(a)s", "SELECT %b", "SELECT 5 %"):
        assert numbered_sql(odd) is None


def test_a_server_error_fails_the_whole_group_and_keeps_the_connection(fresh_postgres):
    from sqlalchemy.exc import DBAPIError

    from ldpkit.service.commit import GroupCommitter

    store = _store(fresh_postgres)
    committer = GroupCommitter(store, {"c": SPEC}, window=0.05, compact_interval=3600.0)
    threads: list[str] = []
    real = store.postgres.commit_group_pg
    store.postgres.commit_group_pg = lambda *a, **k: threads.append("pipelined") or real(*a, **k)  # type: ignore[method-assign]
    raw = _pg_raw(fresh_postgres)

    async def run():
        await committer.commit(_item(1, 0))
        state = next(iter(committer._states.values()))
        (pid,) = [c.info.backend_pid for c in state.connections]
        raw.execute(
            "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS"
            " $$BEGIN RAISE EXCEPTION 'boom %', NEW.n; END$$"
        )
        raw.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON ldpkit_rollup_parts"
            " FOR EACH ROW EXECUTE FUNCTION boom()"
        )
        group = [_item(k % 8, 10 + k) for k in range(5)]
        out = await asyncio.gather(*(committer.commit(b) for b in group), return_exceptions=True)
        for r in out:  # one group, one error for each of its requests
            assert isinstance(r, DBAPIError) and not r.connection_invalidated
            assert isinstance(r.orig, psycopg.errors.RaiseException) and "boom" in str(r)
        assert [c.info.backend_pid for c in state.connections] == [pid]  # kept
        raw.execute("DROP TRIGGER boom ON ldpkit_rollup_parts")
        await asyncio.gather(*(committer.commit(b) for b in group))
        assert [c.info.backend_pid for c in state.connections] == [pid]
        await committer.close()

    try:
        asyncio.run(run())
        assert not threads  # every group in the loop
        assert store.summary("c") == (6, 6)  # the failed group left nothing
        assert len(store.list_batches("c")) == 6
    finally:
        raw.close()
        store.close()


def test_a_connection_killed_in_flight_is_a_503_then_the_next_request_reconnects(
    fresh_postgres,
):
    from fastapi.testclient import TestClient

    from ldpkit.io import reports_to_dict
    from ldpkit.service import create_app

    app = create_app({"c": SPEC}, fresh_postgres)

    def one(seed):
        return reports_to_dict(SPEC.randomize([seed % 8], rng=seed))

    raw = _pg_raw(fresh_postgres)
    try:
        with TestClient(app) as c:
            assert c.post("/v1/reports/c", json=one(1)).status_code == 201
            raw.execute(_lock_sql("pg_advisory_lock"))  # the next group waits for it
            answer = {}
            sender = threading.Thread(
                target=lambda: answer.update(resp=c.post("/v1/reports/c", json=one(2)))
            )
            sender.start()
            try:
                raw.execute("SELECT pg_terminate_backend(%s)", (_blocked_pid(raw),))
            finally:
                raw.execute(_lock_sql("pg_advisory_unlock"))
                sender.join(60)
            resp = answer["resp"]
            assert resp.status_code == 503 and resp.headers["retry-after"] == "5"
            assert resp.json()["detail"].startswith("database unavailable")
            assert c.post("/v1/reports/c", json=one(3)).status_code == 201
            assert c.get("/v1/collections/c").json()["n"] == 2
    finally:
        raw.close()


def test_a_group_cancelled_in_flight_drops_its_connection(fresh_postgres):
    store = _store(fresh_postgres)
    raw = _pg_raw(fresh_postgres)

    async def run():
        loop = asyncio.get_running_loop()
        conns, run_blocking, first = await _first_group(store)
        pid = first.info.backend_pid
        raw.execute(_lock_sql("pg_advisory_lock"))
        try:
            group = [_item(k, 1 + k) for k in range(3)]
            task = loop.create_task(store.commit_group_async(group, None, run_blocking, conns))
            await loop.run_in_executor(None, _blocked_pid, raw)
            assert conns == []  # in flight
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert conns == [] and first.closed and first.broken  # dropped, not kept
        finally:
            raw.execute(_lock_sql("pg_advisory_unlock"))
        # The next group opens another connection.
        await store.commit_group_async([_item(5, 9)], None, run_blocking, conns)
        (second,) = conns
        assert second is not first and second.info.backend_pid != pid
        await store.close_loop_connections(conns)
        assert second.closed and conns == []
        return pid

    try:
        pid = asyncio.run(run())
        # The cancelled statement's fate is the server's (it may still commit once the
        # lock is granted), but it is one statement: all of its group or nothing.
        end = time.monotonic() + 30
        while raw.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()[0]:
            assert time.monotonic() < end
            time.sleep(0.01)
        assert store.summary("c") in ((2, 2), (5, 5))
    finally:
        raw.close()
        store.close()


def test_a_connection_lost_while_idle_is_replaced_without_failing_a_group(fresh_postgres):
    store = _store(fresh_postgres)
    raw = _pg_raw(fresh_postgres)

    async def run():
        conns, run_blocking, first = await _first_group(store)
        pid = first.info.backend_pid
        raw.execute("SELECT pg_terminate_backend(%s)", (pid,))
        end = time.monotonic() + 30
        while not first.broken:  # its reader sees the end of the stream
            assert time.monotonic() < end
            await asyncio.sleep(0.01)
        # ... and stops watching the socket (at EOF it stays readable: no busy loop).
        cpu = time.process_time()
        await asyncio.sleep(0.3)
        assert time.process_time() - cpu < 0.15
        await store.commit_group_async([_item(1, 1)], None, run_blocking, conns)
        (second,) = conns
        assert first.closed and second.info.backend_pid != pid
        await store.close_loop_connections(conns)

    try:
        asyncio.run(run())
        assert store.summary("c") == (2, 2)
    finally:
        raw.close()
        store.close()


def test_a_statement_larger_than_the_socket_buffer_waits_for_it(fresh_postgres):
    """libpq keeps what the socket does not take (flush() == 1): sent as it drains."""
    from ldpkit.service._pgloop import LoopConnection

    url = fresh_postgres.replace("postgresql+psycopg", "postgresql")
    raw = _pg_raw(fresh_postgres)
    raw.execute("CREATE TABLE big (b bytea)")
    blob = np.random.default_rng(0).bytes(24 * 2**20)

    async def run():
        conn = await LoopConnection.connect(url)
        try:
            flushes = []
            real = conn.pg.flush

            class Spy:  # PGconn's methods cannot be patched: wrap the handle
                def __getattr__(self, name):
                    return getattr(real.__self__, name)

                def flush(self):
                    flushes.append(real())
                    return flushes[-1]

            conn.pg = Spy()
            for _ in range(2):  # prepared, then the prepared statement
                await conn.execute("INSERT INTO big VALUES (%s)", encode_params((blob,)))
            assert 1 in flushes  # it did have to wait for the socket
        finally:
            conn.drop()

    try:
        asyncio.run(run())
        digest = hashlib.md5(blob).hexdigest()
        assert raw.execute("SELECT count(*), min(md5(b)) FROM big").fetchone() == (2, digest)
    finally:
        raw.close()
