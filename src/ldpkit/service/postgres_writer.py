"""The PostgreSQL commit paths (psycopg): a group in one network round trip.

:class:`PostgresWriter` commits a group of batches in the same transaction as the SQLite
writer's, in fewer round trips: a group without idempotency keys or raw reports is one
statement in autocommit (:meth:`PostgresWriter.commit_in_loop`, sent and awaited by the
committer's event loop on a connection of its own, or
:meth:`PostgresWriter.commit_group_pg` in a helper thread); any other group goes through
psycopg's pipeline mode on a connection kept for the committer (BEGIN, the batch rows, the
roll-up parts and COMMIT in one round trip, one more to look keys up); a unique-key race
with another writer retries the group. It also switches the roll-up arrays to lz4 and
``STORAGE MAIN`` when the store opens a database. The store facade
(:class:`~ldpkit.service.store.CollectorStore`) makes one and hands it its engine and the
writers' shared :class:`~ldpkit.service.writes.RollupWrites`.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from .batch_identity import BatchRecord, GroupStats, PendingBatch, new_batch_ids
from .writes import INSERT_PART, MERGE_STATS, RollupWrites, batch_row, lock_shared_sql

logger = logging.getLogger("ldpkit.service")

__all__ = ["PostgresWriter", "compress_arrays_lz4"]

# The group's batch rows travel as one JSON array of rows (one text parameter, built by
# json.dumps in C), unpacked server-side: psycopg adapts a Python list element by
# element in Python (eight column arrays cost ~0.3 ms of client CPU per group of 16).
_INSERT_BATCHES = (
    "INSERT INTO ldpkit_batches (batch_id, collection, token, idempotency_key, digest, n,"
    " received_at, bucket) SELECT * FROM (SELECT e->>0, e->>1, e->>2, e->>3, e->>4,"
    " (e->>5)::bigint, (e->>6)::timestamptz, (e->>7)::bigint"
    " FROM json_array_elements(%s::json) AS e)"
)
_INSERT_RAW = "INSERT INTO ldpkit_reports (batch_id, format, payload) VALUES (%s, %s, %s)"
_BUMP = "UPDATE ldpkit_collections SET generation = generation + 1 WHERE name = %s"
# The roll-up arrays' TOAST settings (see compress_arrays_lz4).
_ARRAY_TABLES = ("ldpkit_rollup_parts", "ldpkit_rollups")


@functools.lru_cache(maxsize=256)
def _insert_batches_locked_sql(names: frozenset[str]) -> str:
    """Return ``_INSERT_BATCHES`` taking the shared locks of ``names`` first.

    The lock call is a volatile function in a CTE, hence evaluated (once) before the join
    yields the first row to insert; the locks are taken in the statement that writes the
    group's first row, so before its COMMIT, which is what delete_batches needs.
    """
    insert_ = _INSERT_BATCHES
    head, tail = insert_.split(" SELECT * FROM ", 1)
    return f"WITH l AS ({lock_shared_sql(names)}) {head} SELECT u.* FROM {tail} AS u, l"


@functools.lru_cache(maxsize=256)
def _group_single_sql(names: frozenset[str], parts: int) -> str:
    """Return a whole keyless group as one statement (``PostgresWriter._commit_group_pg_single``).

    Parameters: the batch rows as six array literals (text, one per column: ids,
    collections, tokens, n, ``received_at`` as Unix seconds, buckets; see
    :func:`_array_literal`), then the ``parts`` roll-up parts' columns, each part a VALUES
    row (its arrays a bytea parameter sent in binary: as JSON text they cost the server more
    than the rest of the statement). Arrays cost the server less than the pipelined path's
    one JSON array of rows (no JSON lexing, no timestamp text to parse: ``to_timestamp`` of
    whole seconds is exact). Both inserts join the shared-lock CTE ``l`` (volatile,
    evaluated once, before either yields a row).
    """
    values = ", ".join(["(%s, %s::bigint, %s, %s::bigint, %s::bigint, %s::bytea)"] * parts)
    return (
        f"WITH l AS ({lock_shared_sql(names)}),"
        " b AS (INSERT INTO ldpkit_batches (batch_id, collection, token, n, received_at, bucket)"
        " SELECT u.i, u.c, u.t, u.n, to_timestamp(u.r), u.k FROM unnest(%s::text[], %s::text[],"
        " %s::text[], %s::bigint[], %s::bigint[], %s::bigint[]) AS u(i, c, t, n, r, k), l),"
        " p AS (INSERT INTO ldpkit_rollup_parts (collection, bucket, token, n, batches, arrays)"
        f" SELECT v.* FROM (VALUES {values}) AS v, l)"
        " SELECT 1"
    )


@functools.lru_cache(maxsize=1024)
def _array_item(value: str) -> str:
    """Return ``value`` as one element of a PostgreSQL array literal.

    Double-quoted, so that empty strings, commas, braces and spaces stay text; backslash
    and quote escaped.
    """
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _array_literal(values: Iterable[str]) -> str:
    """Return a PostgreSQL array literal (``'{a,b}'``) of already quoted or numeric elements."""
    return "{" + ",".join(values) + "}"


def compress_arrays_lz4(engine: Engine) -> None:
    """Compress new roll-up arrays with lz4 and keep them in the row.

    lz4 instead of PostgreSQL's default pglz, and ``STORAGE MAIN`` instead of a TOAST
    table.

    A group commit's roll-up part (OLH d = 1024: 8 KiB of arrays) is compressed by the
    server inside the commit's statement; with pglz that took 0.21 of the statement's
    0.39 ms (``EXPLAIN (ANALYZE, WAL)``, 8 one-report batches), with lz4 0.05 of 0.19,
    for 1.6 KiB more WAL per group; every commit waits for it, and compaction and
    readers decompress faster too. Needs PostgreSQL >= 14 built with lz4 (Debian's
    is); otherwise only the storage changes. Compressed, such a part is ~2.4 KiB: over
    the 2 KiB above which the default (``EXTENDED``) moves it to the TOAST table (two
    more heap rows and an index entry per part, written by the commit and deleted by
    compaction); ``MAIN`` keeps it in the row while it fits a page (larger arrays still
    go out of line), which cut the server's CPU per group of 7 one-report batches by
    ~0.013 ms (docs/collector.md). Rows already stored keep their compression and
    place (both read the same); a database made by an earlier version is switched
    when opened. A role that may not alter the tables (not their owner), or a lock not
    granted within 5 s, leaves them as they were, with a warning: the store works
    either way.
    """
    from sqlalchemy.exc import DBAPIError

    try:
        _set_lz4(engine)
    except DBAPIError as exc:
        logger.warning(
            "roll-up arrays keep PostgreSQL's default compression and storage (%s); lz4 "
            "and STORAGE MAIN make group commits cheaper: let the tables' owner open the "
            "database once",
            str(exc.orig).strip().splitlines()[0] if exc.orig is not None else exc,
        )


def _set_lz4(engine: Engine) -> None:
    with engine.begin() as conn:
        lz4 = conn.exec_driver_sql(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        ).scalar()
        # (Without lz4, e.g. PostgreSQL < 14 and its catalog without attcompression: only
        # the storage is checked.)
        compression = "a.attcompression IS DISTINCT FROM 'l'" if lz4 else "false"
        rows = conn.exec_driver_sql(
            f"SELECT c.relname, {compression}, a.attstorage <> 'm' FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname = ANY(%(names)s)"
            " AND pg_table_is_visible(c.oid) AND a.attname = 'arrays'",
            {"names": list(_ARRAY_TABLES)},
        ).all()
        changes = {
            table: [
                *(["ALTER COLUMN arrays SET COMPRESSION lz4"] if lz4 and recompress else []),
                *(["ALTER COLUMN arrays SET STORAGE MAIN"] if out_of_line else []),
            ]
            for table, recompress, out_of_line in rows
        }
        if not any(changes.values()):
            return
        conn.exec_driver_sql("SET LOCAL lock_timeout = '5s'")  # not behind a long reader
        for table in sorted(changes):  # names from our own list: no quoting needed
            if changes[table]:
                conn.exec_driver_sql(f"ALTER TABLE {table} {', '.join(changes[table])}")


class PostgresWriter:
    """Commit groups of batches to PostgreSQL (psycopg) in one round trip each.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The store's engine (``postgresql+psycopg://``).
    writes : RollupWrites
        The writers' shared state: buckets, roll-up parts, the retry decision.
    """

    def __init__(self, engine: Engine, writes: RollupWrites) -> None:
        self.engine = engine
        self.writes = writes
        self.reader = writes.reader
        self.bucket_seconds = writes.bucket_seconds
        # PostgreSQL group commits: connections kept by the committer threads (no pool
        # checkout, no pre-ping round trip per group), one per group in flight; see
        # commit_group_pg. _pg_lock guards the list of idle ones.
        self._pg_idle: list[Any] = []
        self._pg_lock = threading.Lock()
        # Keyless groups up to this many batches are committed by the event loop itself
        # (commit_group_async); larger ones in a committer thread, where building and
        # sending their statement does not hold up the loop's reading of requests.
        self.in_loop_max_group = 12

    def close(self) -> None:
        """Drop the connections kept for group commits."""
        with self._pg_lock:
            idle, self._pg_idle = self._pg_idle, []
        for conn in idle:
            self._drop_pg_raw(conn)

    @staticmethod
    def _drop_pg_raw(conn: Any) -> None:
        try:
            conn.invalidate()  # closes it; the pool forgets it
        except Exception:  # already broken: nothing to release
            pass

    def commit_group_pg(
        self,
        items: Sequence[PendingBatch],
        combine: GroupStats | None = None,
    ) -> list[BatchRecord | Exception]:
        """:meth:`commit_group` on PostgreSQL (psycopg) in one network round trip.

        The ORM path costs one round trip per statement (BEGIN, batch insert, part insert,
        COMMIT, plus the pool's pre-ping): with the server a few hundred microseconds away
        and each trip a wake-up of both processes, that was most of a group's cost. Here
        a group without keys or raw reports is one statement in autocommit
        (:meth:`_commit_group_pg_single`); others go through psycopg's pipeline mode on one
        connection kept for the committer: BEGIN, the batch rows, the group's roll-up parts
        (appended: nothing is read back) and COMMIT travel together, one round trip; a
        group with idempotency keys first looks its keys up (one more trip). The same transaction as
        :meth:`commit_group`, so the same guarantees: a 201 means committed, and
        concurrent writers never lose counts (they touch no common roll-up row).
        """
        import psycopg
        from sqlalchemy.exc import DBAPIError

        merge = combine or MERGE_STATS
        # A kept connection of our own for this group (two groups of one process may be in
        # flight, each in its own committer thread and transaction).
        with self._pg_lock:
            kept: Any = self._pg_idle.pop() if self._pg_idle else None
        try:
            for attempt in range(3):
                # (bound before raw_connection(), which raises psycopg's own error when the
                # server is down: unbound, the error handler raised an UnboundLocalError, a 500)
                raw: Any = None
                try:
                    if kept is None:
                        kept = self.engine.raw_connection()
                    raw = kept.driver_connection
                    try:
                        single = self._commit_group_pg_single(raw, items, merge)
                        if single is not None:
                            return single
                        with raw.pipeline():
                            results = self._commit_group_pg(raw, items, merge)
                            raw.commit()
                        return results
                    except BaseException:
                        if raw.closed or raw.broken:
                            self._drop_pg_raw(kept)
                            kept = None
                        else:
                            raw.rollback()
                        raise
                except psycopg.Error as exc:
                    wrapped = DBAPIError.instance(
                        None,
                        None,
                        exc,
                        psycopg.Error,
                        connection_invalidated=raw is None or raw.broken,
                    )
                    if isinstance(wrapped, IntegrityError) and attempt < 2:
                        # Another writer (process, or this process's other group in flight)
                        # stored the same key first: look again.
                        continue
                    raise wrapped from exc
        finally:
            if kept is not None:
                with self._pg_lock:
                    self._pg_idle.append(kept)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _batch_rows_json(
        items: Sequence[PendingBatch],
        records: Mapping[int, BatchRecord],
        buckets: Mapping[int, int],
        digests: Mapping[int, str],
        order: Sequence[int],
    ) -> str:
        """Return the batch rows of ``order`` as one JSON array (see ``_INSERT_BATCHES``)."""
        return json.dumps(
            [
                batch_row(
                    records[i].batch_id,
                    items[i],
                    digests.get(i),
                    items[i].received_at.isoformat(),
                    buckets[i],
                )
                for i in order
            ],
            separators=(",", ":"),
        )

    def _single_statement(
        self,
        items: Sequence[PendingBatch],
        combine: GroupStats,
    ) -> tuple[str, tuple[Any, ...], list[BatchRecord | Exception]] | None:
        """Build a group without idempotency keys or raw reports as ONE autocommit statement.

        Nothing to look up and every batch is new, so the batch rows and the roll-up parts
        go in one statement (data-modifying CTEs), which is its own transaction: one
        Parse/Bind/Execute/Sync, no BEGIN/COMMIT nor pipeline (psycopg's pipeline costs
        client CPU per statement and per result). Both inserts join the shared-lock CTE, so
        the collections' locks are taken before any row is written, as on the pipelined
        path. Returns the statement, its parameters (str, int or bytes) and the group's
        results once it has committed, or None when the pipelined path must be used
        instead: a key to look up, raw reports to store, a batch in a closed bucket (its
        collection's generation is bumped there), or an arrival time that is not a whole
        second with a time zone (the app's clock always is; the statement sends Unix
        seconds). The text depends only on the collections and the number of parts, so
        psycopg prepares it server-side after a few executions (``prepare_threshold``).
        """
        # One pass, no per-item method calls: this runs on the event loop once per group.
        epochs, widths = self.writes.epochs, self.bucket_seconds
        closed: dict[str, int] = {}
        seconds: list[int] = []
        buckets: list[int] = []
        for b in items:
            if b.idempotency_key or b.raw is not None:
                return None
            when = b.received_at
            epoch = epochs.get(when)  # only whole seconds with a zone (see RollupWrites.epoch)
            if epoch is None:
                if when.tzinfo is None or when.microsecond:
                    return None
                epoch = self.writes.epoch(when)
            width = widths[b.collection]
            bucket = epoch // width * width
            limit = closed.get(b.collection)
            if limit is None:
                limit = closed[b.collection] = self.reader.closed_before(b.collection)
            if bucket < limit:
                return None
            seconds.append(epoch)
            buckets.append(bucket)
        ids = new_batch_ids(len(items))
        records: list[BatchRecord | Exception] = [
            BatchRecord(i, b.collection, b.n, b.received_at, token=b.token)
            for i, b in zip(ids, items)
        ]
        parts = self.writes.parts(items, range(len(items)), combine, buckets)
        self.writes.wrote_parts(len(parts))
        params = (
            _array_literal(ids),
            _array_literal([_array_item(b.collection) for b in items]),
            _array_literal([_array_item(b.token) for b in items]),
            _array_literal([str(int(b.n)) for b in items]),
            _array_literal(map(str, seconds)),
            _array_literal(map(str, buckets)),
            *(x for p in parts for x in p),
        )
        names = frozenset(b.collection for b in items)
        return _group_single_sql(names, len(parts)), params, records

    def _commit_group_pg_single(
        self,
        raw: Any,
        items: Sequence[PendingBatch],
        combine: GroupStats,
    ) -> list[BatchRecord | Exception] | None:
        """:meth:`_single_statement` run on ``raw`` (in autocommit); None: nothing sent."""
        single = self._single_statement(items, combine)
        if single is None:
            return None
        sql, params, results = single
        raw.autocommit = True
        try:
            raw.execute(sql, params)  # committed once it returns
        finally:
            if not raw.closed:
                raw.autocommit = False
        return results

    async def commit_in_loop(
        self,
        items: Sequence[PendingBatch],
        combine: GroupStats,
        connections: list[Any],
    ) -> list[BatchRecord | Exception] | None:
        """:meth:`_single_statement` on a PostgreSQL connection of the caller's loop.

        ``connections`` holds the loop's idle connections (the group committer keeps one
        list per loop and closes them in :meth:`close_loop_connections`). No thread: the
        statement is sent and its answer awaited by the event loop itself, so a group costs
        no executor hand-off, no wake-up of a committer thread, and no wait of that thread
        for the interpreter lock while the loop decodes requests. The connections are
        psycopg's, driven through libpq (:class:`~ldpkit.service._pgloop.LoopConnection`:
        the statement prepared once per connection, the parameters encoded by us, one
        permanent socket reader), which measured ~0.1 ms of CPU per group less than
        psycopg's ``AsyncConnection.execute``. Returns None (nothing sent) when the group
        needs the pipelined path. Same statement, same transaction, same locks as
        :meth:`_commit_group_pg_single`: the results come back only after it has
        committed. A server error fails the group (DBAPIError, the connection kept); a
        broken connection, or a group cancelled in flight, drops the connection (the next
        group reconnects).
        """
        import psycopg
        from sqlalchemy.exc import DBAPIError

        from ._pgloop import LoopConnection, encode_params, numbered_sql

        single = self._single_statement(items, combine)
        if single is None:
            return None
        sql, params, results = single
        encoded = encode_params(params)
        if encoded is None or numbered_sql(sql) is None:
            # Not for libpq as we drive it (never with _single_statement's parameters):
            # the pipelined path (which counts the group's parts again, a harmless
            # overcount that only brings the next compaction forward).
            return None
        conn: LoopConnection | None = None
        while connections and conn is None:
            conn = connections.pop()
            if conn.broken or conn.closed:  # lost while idle
                conn.drop()
                conn = None
        try:
            if conn is None:
                cargs, cparams = self.engine.dialect.create_connect_args(self.engine.url)
                cparams.pop("context", None)  # the sync engine's adapters
                conn = await LoopConnection.connect(*cargs, **cparams)
            await conn.execute(sql, encoded)  # committed once it returns
        except psycopg.Error as exc:
            broken = conn is None or conn.broken or conn.closed
            if conn is not None:
                if broken:
                    conn.drop()
                else:
                    connections.append(conn)  # autocommit: nothing left open on it
            raise DBAPIError.instance(
                None, None, exc, psycopg.Error, connection_invalidated=broken
            ) from exc
        except BaseException:  # cancelled mid-statement: its state is unknown, drop it
            if conn is not None:
                conn.drop()
            raise
        connections.append(conn)
        return results

    @staticmethod
    async def close_loop_connections(connections: list[Any]) -> None:
        """Close the idle connections of one loop (see commit_in_loop)."""
        while connections:
            connections.pop().drop()

    def _commit_group_pg(
        self,
        raw: Any,
        items: Sequence[PendingBatch],
        combine: GroupStats,
    ) -> list[BatchRecord | Exception]:
        results: list[BatchRecord | Exception | None] = [None] * len(items)
        digests = {i: b.digest or "" for i, b in enumerate(items) if b.idempotency_key}
        cur = raw.cursor()
        prior: dict[tuple[str, str, str], tuple[Any, ...]] = {}
        deleted: dict[tuple[str, str, str], tuple[str, Any]] = {}
        if digests:
            keyed = sorted(
                {(b.collection, b.token, b.idempotency_key) for b in items if b.idempotency_key}
            )
            # The keys are read under the collections' shared locks, taken by a statement
            # of their own before (same round trip): at READ COMMITTED a statement's
            # snapshot predates any lock it waits for, and an admin delete in flight must be
            # seen entirely (see delete_batches).
            raw.cursor().execute(lock_shared_sql(frozenset(k[0] for k in keyed)))
            where = (
                " WHERE (collection, token, idempotency_key) IN ("
                + ", ".join(["(%s, %s, %s)"] * len(keyed))
                + ")"
            )
            cur.execute(
                "SELECT collection, token, idempotency_key, digest, batch_id, n, received_at,"
                " false FROM ldpkit_batches" + where + " UNION ALL SELECT collection, token,"
                " idempotency_key, NULL, batch_id, 0, deleted_at, true FROM ldpkit_deleted_keys"
                + where,
                [x for k in keyed for x in k] * 2,
            )
            for row in cur.fetchall():
                if row[7]:
                    deleted[(row[0], row[1], row[2])] = (row[4], row[6])
                else:
                    prior[(row[0], row[1], row[2])] = row[3:7]
        new, records = self.writes.decide(items, digests, prior, results, deleted)
        if new:
            buckets = {
                i: self.writes.bucket_of(items[i].collection, items[i].received_at) for i in new
            }
            # Keyed rows in key order: two writers inserting the same keys wait for each
            # other in the same order (no deadlock on the unique index).
            order = sorted(
                new,
                key=lambda i: (items[i].collection, items[i].token, items[i].idempotency_key or ""),
            )
            # One statement for all rows (one JSON parameter unpacked server-side): one
            # Bind/Execute instead of one per batch, less CPU on both ends of the connection.
            rows = self._batch_rows_json(items, records, buckets, digests, order)
            # The insert itself takes the collections' shared locks first (no statement of
            # its own), so no admin delete of them runs while this transaction is open (see
            # delete_batches; a group with no new batch writes nothing).
            names = frozenset(items[i].collection for i in new)
            cur.execute(_insert_batches_locked_sql(names), (rows,))
            raw_rows = [
                (records[i].batch_id, raw_[0], raw_[1])
                for i in new
                if (raw_ := items[i].raw) is not None
            ]
            if raw_rows:
                cur.executemany(_INSERT_RAW, raw_rows)
            parts = self.writes.parts(items, new, combine)
            cur.executemany(INSERT_PART, parts)
            keys = [(p[0], p[1], p[2]) for p in parts]
            self.writes.wrote_parts(len(parts))
            for c in sorted({c for c, bucket, _ in keys if bucket < self.reader.closed_before(c)}):
                cur.execute(_BUMP, (c,))
            for i in new:
                results[i] = records[i]
        return [r if r is not None else RuntimeError("unreachable") for r in results]
