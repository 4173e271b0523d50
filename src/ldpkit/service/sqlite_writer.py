"""The SQLite commit path: a group's batches in one SQLAlchemy Core transaction.

:class:`SQLiteWriter` writes a group (batch rows, raw reports, one roll-up part per
(collection, bucket, token)) in one transaction through SQLAlchemy Core: in the event
loop's thread on SQLite (:meth:`SQLiteWriter.commit_here`, see
:meth:`CollectorStore.commit_group_async <ldpkit.service.store.CollectorStore.commit_group_async>`),
or in a helper thread (:meth:`SQLiteWriter.commit_group`). The same transaction serves any
backend without the psycopg fast paths (:mod:`ldpkit.service.postgres_writer`), and takes
PostgreSQL's shared collection locks there. The store facade makes one and hands it its
engine and the writers' shared :class:`~ldpkit.service.writes.RollupWrites`.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import BigInteger, Integer, String, bindparam, insert, literal, select, union_all
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from .batch_identity import BatchRecord, GroupStats, PendingBatch
from .schema import batches_table, deleted_keys_table, reports_table, rollup_parts_table
from .writes import (
    INSERT_PART,
    MERGE_STATS,
    RollupWrites,
    batch_row,
    bump_generation,
    lock_shared_sql,
)

__all__ = ["SQLiteWriter"]

_INSERT_BATCH = (
    "INSERT INTO ldpkit_batches (batch_id, collection, token, idempotency_key, digest, n,"
    " received_at, bucket) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_WRITE_LOCK = "UPDATE ldpkit_collections SET generation = generation WHERE 0"


class SQLiteWriter:
    """Commit groups of batches in one SQLAlchemy Core transaction each.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The store's engine.
    writes : RollupWrites
        The writers' shared state: buckets, roll-up parts, the retry decision.
    """

    def __init__(self, engine: Engine, writes: RollupWrites) -> None:
        self.engine = engine
        self.backend = engine.dialect.name
        self.writes = writes
        self.reader = writes.reader
        self._key_sql: Any = None

    def commit_group(
        self,
        items: Sequence[PendingBatch],
        combine: GroupStats | None = None,
    ) -> list[BatchRecord | Exception]:
        """Store several batches in one transaction; one result per item, in order.

        A batch whose ``(token, idempotency_key)`` was already stored for its collection
        (earlier, or earlier in this group) is not stored again: the first batch's record
        comes back with ``duplicate=True``; reusing a key for different content gives an
        :class:`IdempotencyConflict` for that item only. Database errors propagate (nothing
        of the group is stored). A unique-constraint race with another writer process
        retries the whole group, which then sees the other process's rows.

        ``combine.combine(members)`` (a :class:`GroupStats`) gives the merged Stats of the
        new batches of one roll-up row (default: merge their ``stats``); the group
        committer passes one that reuses Stats it aggregated for several small batches at
        once.
        """
        for attempt in range(3):
            try:
                with self.engine.begin() as conn:
                    return self._commit_group(conn, items, combine or MERGE_STATS)
            except IntegrityError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def commit_here(
        self,
        items: Sequence[PendingBatch],
        merge: GroupStats,
    ) -> list[BatchRecord | Exception]:
        """Run :meth:`commit_group`'s transaction, COMMIT included, in the calling thread."""
        for attempt in range(3):
            conn = self.engine.connect()
            try:
                trans = conn.begin()
                try:
                    results = self._commit_group(conn, items, merge)
                    trans.commit()  # in this thread: see commit_group_async
                    return results
                except BaseException:
                    if trans.is_active:
                        trans.rollback()
                    raise
            except IntegrityError:
                if attempt == 2:
                    raise
            finally:
                conn.close()
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _sqlite_datetime(conn: Connection) -> Callable[[dt.datetime], Any]:
        dialect = conn.dialect
        column_type = batches_table.c.received_at.type
        process = column_type.dialect_impl(dialect).bind_processor(dialect)
        return process if process is not None else (lambda value: value)

    def _commit_group(
        self,
        conn: Connection,
        items: Sequence[PendingBatch],
        combine: GroupStats,
    ) -> list[BatchRecord | Exception]:
        results: list[BatchRecord | Exception | None] = [None] * len(items)
        if self.backend == "postgresql":  # as in PostgresWriter (see BatchDeletes.delete_batches)
            conn.exec_driver_sql(lock_shared_sql(frozenset(b.collection for b in items)))
        digests: dict[int, str] = {
            i: b.digest or "" for i, b in enumerate(items) if b.idempotency_key
        }
        if digests and self.backend == "sqlite":
            # Keys are looked up under the writer lock (a write that changes nothing takes
            # it), as admin deletes hold it: a retry is decided before a delete or after
            # it, never against a delete in flight (pysqlite would run the SELECT below
            # outside the transaction, on the last committed state).
            conn.exec_driver_sql(_WRITE_LOCK)
        # 1. Keys stored (or deleted) before this group.
        prior: dict[tuple[str, str, str], tuple[Any, ...]] = {}
        deleted: dict[tuple[str, str, str], tuple[str, Any]] = {}
        wanted: dict[tuple[str, str], list[str]] = defaultdict(list)
        for b in items:
            if b.idempotency_key:
                wanted[(b.collection, b.token)].append(b.idempotency_key)
        query = self._key_lookup_statement()
        for (collection, token), keys in wanted.items():
            params = {"k_collection": collection, "k_token": token, "k_keys": sorted(set(keys))}
            for row in conn.execute(query, params):
                ident = (collection, token, row.idempotency_key)
                if row.gone:
                    deleted[ident] = (row.batch_id, row.received_at)
                else:
                    prior[ident] = (row.digest, row.batch_id, row.n, row.received_at)
        # 2. Decide each item: new, duplicate, conflict or deleted.
        new, records = self.writes.decide(items, digests, prior, results, deleted)
        if new and self.backend == "sqlite":
            # One executemany of plain tuples: the ORM's per-row parameter processing cost
            # ~1/3 of a one-report batch's share of the group. received_at goes through
            # the dialect's own DateTime processor (once per distinct second), so the
            # stored text is exactly what SQLAlchemy writes and reads back elsewhere.
            to_text = self._sqlite_datetime(conn)
            when: dict[dt.datetime, Any] = {}
            conn.exec_driver_sql(
                _INSERT_BATCH,
                [
                    batch_row(
                        records[i].batch_id,
                        items[i],
                        digests.get(i),
                        when[at_]
                        if (at_ := items[i].received_at) in when
                        else when.setdefault(at_, to_text(at_)),
                        self.writes.bucket_of(items[i].collection, at_),
                    )
                    for i in new
                ],
            )
        elif new:
            conn.execute(
                insert(batches_table),
                [
                    {
                        "batch_id": records[i].batch_id,
                        "collection": items[i].collection,
                        "token": items[i].token,
                        "idempotency_key": items[i].idempotency_key,
                        "digest": digests.get(i),
                        "n": items[i].n,
                        "received_at": items[i].received_at,
                        "bucket": self.writes.bucket_of(items[i].collection, items[i].received_at),
                    }
                    for i in new
                ],
            )
        if new:
            raw = [
                {"batch_id": records[i].batch_id, "format": raw_[0], "payload": raw_[1]}
                for i in new
                if (raw_ := items[i].raw) is not None
            ]
            if raw:
                conn.execute(insert(reports_table), raw)
            # 3. The group's Stats as roll-up parts: one INSERT per (collection, bucket,
            # token), no read of the roll-up row (the compactor folds parts in later).
            parts = self.writes.parts(items, new, combine)
            if self.backend == "sqlite":
                conn.exec_driver_sql(INSERT_PART.replace("%s", "?"), parts)
            else:
                names = ("collection", "bucket", "token", "n", "batches", "arrays")
                conn.execute(insert(rollup_parts_table), [dict(zip(names, p)) for p in parts])
            groups = {(p[0], p[1], p[2]) for p in parts}
            self.writes.wrote_parts(len(parts))
            late = {c for c, bucket, _ in groups if bucket < self.reader.closed_before(c)}
            for c in sorted(late):  # a write into a bucket readers may have cached
                bump_generation(conn, c)
            for i in new:
                results[i] = records[i]
        return [r if r is not None else RuntimeError("unreachable") for r in results]

    def _key_lookup_statement(self) -> Any:
        """Return the lookup of stored and deleted batches by key, built once.

        Some keys of one (collection, token), in one statement (``gone`` tells them
        apart); built once, like the compactor's fold statements.
        """
        if self._key_sql is None:
            bc, kc = batches_table.c, deleted_keys_table.c
            keys: Any = bindparam("k_keys", expanding=True)
            self._key_sql = union_all(
                select(
                    bc.idempotency_key,
                    bc.batch_id,
                    bc.digest,
                    bc.n,
                    bc.received_at,
                    literal(0, Integer).label("gone"),
                ).where(
                    bc.collection == bindparam("k_collection"),
                    bc.token == bindparam("k_token"),
                    bc.idempotency_key.in_(keys),
                ),
                select(
                    kc.idempotency_key,
                    kc.batch_id,
                    literal(None, String),
                    literal(0, BigInteger),
                    kc.deleted_at,
                    literal(1, Integer),
                ).where(
                    kc.collection == bindparam("k_collection"),
                    kc.token == bindparam("k_token"),
                    kc.idempotency_key.in_(keys),
                ),
            )
        return self._key_sql
