"""Durable storage for the collector (SQLAlchemy Core; SQLite by default, PostgreSQL by URL).

Six tables (defined in :mod:`ldpkit.service.schema`):

- ``ldpkit_collections``: one row per collection (its spec as JSON, fingerprint, bucket
  length, and a generation bumped by every change to a closed bucket).
- ``ldpkit_rollups``: one row per (collection, time bucket, token) holding the merged
  :class:`~ldpkit.Stats` of every batch received in that bucket from that token (once
  compacted, below). This is what estimates read: their cost depends on the number of
  buckets, not of batches.
- ``ldpkit_rollup_parts``: append-only deltas of the roll-ups, one row per (collection,
  bucket, token) per group commit. :meth:`CollectorStore.compact` folds them into
  ``ldpkit_rollups`` and deletes them in one transaction; readers sum both tables in one
  statement, so compaction never changes what they see.
- ``ldpkit_batches``: one row of *metadata* per batch (id, token name, idempotency key, n,
  arrival time to the second, bucket). No Stats: a one-report batch's Stats would be that
  user's report, stored individually; the roll-ups keep only sums. Used for idempotency,
  the admin listing, and counting.
- ``ldpkit_reports``: raw payloads, only when the app is configured with
  ``store_reports = true``.
- ``ldpkit_deleted_keys``: idempotency keys of batches an admin deleted, so that a retry
  cannot store a deleted batch again (:class:`BatchDeleted`), kept for the retry window
  (``CollectorStore.deleted_keys_seconds``, 30 days by default) and then expired
  (:meth:`CollectorStore.expire_deleted_keys`), so the table does not grow forever.

Writes come in groups: the batch rows are inserted and the group's Stats appended as
roll-up parts in **one transaction**, so a committed batch is counted exactly once and an
uncommitted one not at all; appending reads and locks no roll-up row, so writer processes
never wait for each other; the compactor folds parts under row locks, in a fixed order.
An admin delete runs alone against the group commits of its collection (PostgreSQL: the
collection's advisory lock, shared by commits, exclusive for the delete; SQLite: the one
writer lock). :class:`CollectorStore` is the facade over the parts it builds and hands
their dependencies: :class:`~ldpkit.service.sqlite_writer.SQLiteWriter` and
:class:`~ldpkit.service.postgres_writer.PostgresWriter` (the commit paths, sharing one
:class:`~ldpkit.service.writes.RollupWrites`), :class:`~ldpkit.service.compaction.Compactor`,
:class:`~ldpkit.service.deletes.BatchDeletes` and :class:`~ldpkit.service.reads.StoreReader`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import insert, select, text
from sqlalchemy.exc import IntegrityError

from ..spec import Mechanism, Stats
from .batch_identity import (
    BatchDeleted,
    BatchRecord,
    GroupStats,
    IdempotencyConflict,
    PendingBatch,
    ReportsDigest,
    reports_digest,
    stats_digest,
)
from .compaction import Compactor
from .deletes import BatchDeletes
from .postgres_writer import PostgresWriter, compress_arrays_lz4
from .reads import StoreReader
from .schema import (
    _Layout,
    batches_table,
    check_legacy_schema,
    collections_table,
    deleted_keys_table,
    make_engine,
    metadata,
    reports_table,
    rollup_parts_table,
    rollups_table,
)
from .sqlite_writer import SQLiteWriter
from .writes import MERGE_STATS, LoopGuard, RollupWrites

__all__ = [
    "BatchDeleted",
    "BatchRecord",
    "CollectorStore",
    "GroupStats",
    "IdempotencyConflict",
    "PendingBatch",
    "ReportsDigest",
    "reports_digest",
    "stats_digest",
    # the tables, for tests and tools that read them (defined in .schema)
    "batches_table",
    "deleted_keys_table",
    "metadata",
    "reports_table",
    "rollup_parts_table",
    "rollups_table",
]


class CollectorStore:
    """Roll-ups, batch metadata and optional raw reports in a SQL database.

    Parameters
    ----------
    database_url : str
        SQLAlchemy URL: ``sqlite:///path/to/file.db`` (no server), or
        ``postgresql+psycopg://user:pass@host/db`` (the ``service`` extra installs psycopg).
    """

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.engine = make_engine(database_url)
        self.backend = self.engine.dialect.name
        check_legacy_schema(self.engine)
        metadata.create_all(self.engine)
        self.specs: dict[str, Mechanism] = {}
        self.layouts: dict[str, _Layout] = {}
        self.bucket_seconds: dict[str, int] = {}
        # Reads (estimates, listings) go through the reader; it shares these dicts.
        self.reader = StoreReader(self.engine, self.layouts, self.bucket_seconds)
        # What every write path shares: buckets, roll-up parts and their count, retries.
        self.writes = RollupWrites(self.layouts, self.bucket_seconds, self.reader)
        # SQLite group commits run in the event loop's thread unless one was slow lately
        # (commit_group_async).
        self.loop_guard = LoopGuard()
        # The PostgreSQL (psycopg) commit paths: one round trip per group.
        self.postgres = PostgresWriter(self.engine, self.writes)
        if self.backend == "postgresql":
            compress_arrays_lz4(self.engine)
        # The SQLite commit path (and any backend's plain SQLAlchemy Core transaction).
        self.sqlite = SQLiteWriter(self.engine, self.writes)
        # Admin deletes, and the retry window of the keys they leave spent.
        self.deletes = BatchDeletes(self.engine, self.reader)
        # Folds the roll-up parts into the roll-up rows (and expires spent keys hourly).
        self.compaction = Compactor(self.engine, self.writes, self.deletes, self.loop_guard)

    def close(self) -> None:
        """Drop the kept connections and the engine's pool."""
        self.postgres.close()
        self.engine.dispose()

    def ping(self) -> None:
        """Raise if the database cannot be reached."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def register(self, name: str, spec: Mechanism, bucket_seconds: int = 3600) -> None:
        """Record ``name -> (spec, bucket width)``, or check it against the database.

        Raises ValueError if the collection exists with another configuration: its stored
        Stats could not be merged with the new spec's, nor its buckets with new widths.
        """
        row = {
            "name": name,
            "fingerprint": spec.fingerprint,
            "mechanism": json.dumps(spec.to_dict(), sort_keys=True),
            "bucket_seconds": int(bucket_seconds),
            "created_at": dt.datetime.now(dt.UTC),
            "generation": 0,
        }
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(collections_table).values(**row))
        except IntegrityError:
            pass  # already registered (possibly by another process just now): check below
        with self.engine.connect() as conn:
            stored = conn.execute(
                select(
                    collections_table.c.fingerprint,
                    collections_table.c.mechanism,
                    collections_table.c.bucket_seconds,
                ).where(collections_table.c.name == name)
            ).one()
        if stored.fingerprint != spec.fingerprint:
            raise ValueError(
                f"collection {name!r} must keep its configuration {stored.mechanism} "
                f"(fingerprint {stored.fingerprint}) because the database holds its data, got "
                f"{spec!r} (fingerprint {spec.fingerprint}); use a new collection name"
            )
        if stored.bucket_seconds != bucket_seconds:
            raise ValueError(
                f"collection {name!r} must keep bucket_seconds = {stored.bucket_seconds} because "
                f"its roll-ups use it, got {bucket_seconds}; use a new collection name"
            )
        self.specs[name] = spec
        self.layouts[name] = _Layout(spec)
        self.bucket_seconds[name] = int(bucket_seconds)

    def bucket_of(self, collection: str, when: dt.datetime) -> int:
        """Return the start (Unix seconds) of the bucket of ``collection`` holding ``when``."""
        return self.writes.bucket_of(collection, when)

    @property
    def parts_written(self) -> int:
        """Roll-up parts this process wrote since its last compaction."""
        return self.writes.parts_written

    def add_batch(
        self,
        collection: str,
        stats: Stats,
        *,
        idempotency_key: str | None = None,
        raw: tuple[str, bytes] | None = None,
        token: str = "",
    ) -> BatchRecord:
        """Store one batch's Stats (a group of one); raises :class:`IdempotencyConflict`.

        The retry check of ``idempotency_key`` compares the Stats (:func:`stats_digest`).
        """
        item = PendingBatch(
            collection,
            stats.n,
            stats=stats,
            token=token,
            idempotency_key=idempotency_key,
            digest=stats_digest(stats) if idempotency_key else None,
            raw=raw,
        )
        (result,) = self.commit_group([item])
        if isinstance(result, BaseException):
            raise result
        return result

    def commit_group(
        self,
        items: Sequence[PendingBatch],
        combine: GroupStats | None = None,
    ) -> list[BatchRecord | Exception]:
        """:meth:`SQLiteWriter.commit_group <ldpkit.service.sqlite_writer.SQLiteWriter.commit_group>`."""
        return self.sqlite.commit_group(items, combine)

    async def commit_group_async(
        self,
        items: Sequence[PendingBatch],
        combine: GroupStats | None,
        run_blocking: Callable[[Callable[[], Any]], Any],
        connections: list[Any] | None = None,
    ) -> list[BatchRecord | Exception]:
        """:meth:`commit_group` for an event loop.

        SQLite: the whole transaction, COMMIT (the fsync) included, runs in the loop's
        thread. The statements only fill the transaction in-process (fast); the COMMIT
        blocks the loop for one fsync, but handing it to a helper thread cost more: the
        thread, once its fsync returned, waited for the interpreter lock while the loop
        decoded requests (up to the 5 ms switch interval), and the two threads' wake-ups
        cost CPU. Measured with ``benchmarks/collector.py`` at 16 connections (load 5-8,
        fsync ~4 ms): group-commit latency 4.7-13 ms against 8.4-13, CPU per request
        0.23-0.27 ms against 0.27-0.34; at 64 connections no worse. A database server:
        every statement is a network round trip, so the whole transaction runs through
        ``run_blocking`` (an executor) and the loop never waits for the server; except,
        on PostgreSQL when the caller passes its loop's ``connections`` list, a group
        that is one statement (``PostgresWriter._single_statement``), which the loop sends and awaits
        itself on an asyncio connection (:meth:`PostgresWriter.commit_in_loop
        <ldpkit.service.postgres_writer.PostgresWriter.commit_in_loop>`).

        But while the loop waits for SQLite, it serves nothing (``/healthz``, estimates,
        other requests' bytes): a disk that stalls an fsync for seconds stalls the whole
        process. So a SQLite group transaction that takes longer than
        ``slow_commit_seconds`` (0.1 s; ~1-15 ms is usual) moves the following ones to
        ``run_blocking`` for ``off_loop_seconds`` (3 s, renewed by every slow one there):
        the first stalled commit still holds the loop, the next ones do not. The fast path
        costs one clock read per group.
        """
        if self.backend == "postgresql" and self.engine.dialect.driver == "psycopg":
            merge = combine or MERGE_STATS
            if connections is not None and len(items) <= self.postgres.in_loop_max_group:
                try:
                    done = await self.postgres.commit_in_loop(items, merge, connections)
                except IntegrityError:  # a batch id taken (never, by design): the full path
                    done = None
                if done is not None:
                    return done
            return await run_blocking(lambda: self.postgres.commit_group_pg(items, merge))  # type: ignore[no-any-return]
        merge = combine or MERGE_STATS
        if self.backend != "sqlite":
            return await run_blocking(lambda: self.sqlite.commit_group(items, merge))  # type: ignore[no-any-return]
        if not self.loop_guard.on_loop:  # a commit stalled lately: see above
            return await run_blocking(
                lambda: self.loop_guard.timed(self.sqlite.commit_group, items, merge)
            )  # type: ignore[no-any-return]
        return self.loop_guard.timed(self.sqlite.commit_here, items, merge)

    def commit_group_pg(
        self,
        items: Sequence[PendingBatch],
        combine: GroupStats | None = None,
    ) -> list[BatchRecord | Exception]:
        """:meth:`PostgresWriter.commit_group_pg <ldpkit.service.postgres_writer.PostgresWriter.commit_group_pg>`."""
        return self.postgres.commit_group_pg(items, combine)

    @staticmethod
    async def close_loop_connections(connections: list[Any]) -> None:
        """Close the idle connections of one loop (see PostgresWriter.commit_in_loop)."""
        await PostgresWriter.close_loop_connections(connections)

    # -- reading (the reader's, under the store's names) -----------------------------------
    def summary(self, collection: str) -> tuple[int, int]:
        """``(n, batches)``: total reports and number of stored batches."""
        return self.reader.summary(collection)

    def last_received(self, collection: str) -> dt.datetime | None:
        """Arrival time of the latest stored batch."""
        return self.reader.last_received(collection)

    def last_bucket(self, collection: str) -> int | None:
        """Start of the latest bucket holding data."""
        return self.reader.last_bucket(collection)

    def merged(
        self,
        collection: str,
        spec: Mechanism,
        *,
        since: int | None = None,
        until: int | None = None,
        token: str | None = None,
    ) -> tuple[Stats, int]:
        """:meth:`StoreReader.merged <ldpkit.service.reads.StoreReader.merged>`."""
        return self.reader.merged(collection, spec, since=since, until=until, token=token)

    def buckets(
        self, collection: str, *, since: int | None = None, until: int | None = None
    ) -> list[tuple[int, int, int]]:
        """``(bucket start, n, batches)`` per bucket (all tokens summed), in time order."""
        return self.reader.buckets(collection, since=since, until=until)

    def list_batches(
        self,
        collection: str,
        *,
        token: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[BatchRecord]:
        """:meth:`StoreReader.list_batches <ldpkit.service.reads.StoreReader.list_batches>`."""
        return self.reader.list_batches(
            collection, token=token, since=since, until=until, limit=limit, offset=offset
        )

    def delete_batches(
        self,
        collection: str,
        *,
        token: str | None = None,
        since: int | None = None,
        until: int | None = None,
    ) -> tuple[int, int]:
        """:meth:`BatchDeletes.delete_batches <ldpkit.service.deletes.BatchDeletes.delete_batches>`."""
        return self.deletes.delete_batches(collection, token=token, since=since, until=until)

    def expire_deleted_keys(self, now: dt.datetime | None = None) -> int:
        """:meth:`BatchDeletes.expire_deleted_keys <ldpkit.service.deletes.BatchDeletes.expire_deleted_keys>`."""
        return self.deletes.expire_deleted_keys(now)

    def raw_reports(self, batch_id: str) -> tuple[str, bytes] | None:
        """Return the stored payload of a batch (only when the app stores raw reports)."""
        return self.reader.raw_reports(batch_id)

    # -- compaction (the compactor's, under the store's names) -------------------------------
    @property
    def needs_compaction(self) -> bool:
        """Whether this process wrote roll-up parts since its last compaction."""
        return self.compaction.needs_compaction

    @property
    def compacts_on_loop(self) -> bool:
        """:attr:`Compactor.compacts_on_loop <ldpkit.service.compaction.Compactor.compacts_on_loop>`."""
        return self.compaction.compacts_on_loop

    def try_compact_on_loop(self) -> int | None:
        """:meth:`Compactor.try_compact_on_loop <ldpkit.service.compaction.Compactor.try_compact_on_loop>`."""
        return self.compaction.try_compact_on_loop()

    def try_compact(self, *, wait: bool = True) -> int | None:
        """:meth:`Compactor.try_compact <ldpkit.service.compaction.Compactor.try_compact>`."""
        return self.compaction.try_compact(wait=wait)

    def compact(self, limit: int = 4096) -> int:
        """:meth:`Compactor.compact <ldpkit.service.compaction.Compactor.compact>`."""
        return self.compaction.compact(limit)

    def compaction_due(self) -> bool:
        """Whether a bound-triggered compaction may run now (not right after a failure)."""
        return self.compaction.compaction_due()

    def parts_over(self, collection: str, bound: int | None = None) -> bool:
        """:meth:`Compactor.parts_over <ldpkit.service.compaction.Compactor.parts_over>`."""
        return self.compaction.parts_over(collection, bound)

    def bulk_load(
        self,
        collection: str,
        rows: Iterable[dict[str, Any]],
        rollups: Iterable[tuple[int, str, Stats, int]],
    ) -> None:
        """:meth:`Compactor.bulk_load <ldpkit.service.compaction.Compactor.bulk_load>`."""
        self.compaction.bulk_load(collection, rows, rollups)
