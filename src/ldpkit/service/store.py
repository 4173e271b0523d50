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

Writes come in groups (:meth:`CollectorStore.commit_group`): the batch rows are inserted
and the group's Stats appended as roll-up parts in **one transaction**, so a committed
batch is counted exactly once and an uncommitted one not at all. Appending needs no read
of the roll-up row and no row lock, so concurrent writer processes never wait for each
other on roll-ups; the compactor updates roll-up rows under a row lock (``SELECT ... FOR
UPDATE`` on PostgreSQL, the single writer lock on SQLite), in a fixed order. On PostgreSQL
the group committer uses :meth:`CollectorStore.commit_group_pg`: the same transaction in one
network round trip (psycopg pipeline mode; two when the group has idempotency keys)
instead of one per statement; a keyless group is one statement, which the committer's
event loop awaits itself on an asyncio connection (``commit_group_async``). ``Stats.merge`` is exact for integer counts, so the merge
order does not matter. An admin delete (:meth:`CollectorStore.delete_batches`) runs alone
against the group commits of its collection: on PostgreSQL they take the collection's
advisory lock in shared mode and the delete takes it exclusively; on SQLite the single
writer lock serializes them.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    DateTime,
    Integer,
    String,
    and_,
    bindparam,
    delete,
    func,
    insert,
    inspect,
    literal,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from ..spec import Mechanism, Stats
from .batch_identity import (
    BatchDeleted,
    BatchRecord,
    IdempotencyConflict,
    PendingBatch,
    ReportsDigest,
    new_batch_ids,
    reports_digest,
    stats_digest,
)
from .reads import StoreReader
from .schema import (
    DEFAULT_DELETED_KEYS_SECONDS,
    DEFAULT_MAX_PARTS,
    _Layout,
    _utc,
    batches_table,
    collections_table,
    deleted_keys_table,
    make_engine,
    metadata,
    reports_table,
    rollup_parts_table,
    rollups_table,
)

logger = logging.getLogger("ldpkit.service")

__all__ = [
    "BatchDeleted",
    "BatchRecord",
    "CollectorStore",
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


def _merge_members(members: Sequence[PendingBatch]) -> Stats:
    stats = [m.stats for m in members]
    if any(s is None for s in stats):
        raise ValueError("every batch must carry its Stats when no combine function is given")
    first, *rest = stats
    return first.merge(*rest)  # type: ignore[union-attr, arg-type]


# Per-collection advisory locks (PostgreSQL), keyed (class, collection) in the two-int4 key
# space, apart from the one-bigint compaction lock: every group commit takes its collections'
# locks in shared mode, an admin delete takes its collection's exclusively (delete_batches).
_COLLECTION_LOCK_CLASS = 0x6C64706B  # "ldpk"


def _collection_lock_id(collection: str) -> int:
    """Return the collection's int4 advisory-lock key.

    31 bits of sha256 of its name (non-negative, so the inlined literal is an int4; a
    collision only makes two collections' deletes wait for each other's writers).
    """
    return int.from_bytes(hashlib.sha256(collection.encode()).digest()[:4], "big") & 0x7FFFFFFF


@functools.lru_cache(maxsize=256)
def _lock_shared_sql(names: frozenset[str]) -> str:
    """Return one statement taking the shared lock of each collection in ``names``.

    On the PostgreSQL group-commit path: one more statement in the same pipelined round
    trip.
    """
    # Sorted: the same order in every transaction. Integer keys inlined and the text built
    # once per set of names: nothing to adapt or hash per group commit.
    calls = ", ".join(
        f"pg_advisory_xact_lock_shared({_COLLECTION_LOCK_CLASS}, {_collection_lock_id(c)})"
        for c in sorted(names)
    )
    return f"SELECT {calls}"


@functools.lru_cache(maxsize=256)
def _insert_batches_locked_sql(names: frozenset[str]) -> str:
    """``CollectorStore._PG_INSERT_BATCHES`` taking the shared locks of ``names`` first.

    The lock call is a volatile function in a CTE, hence evaluated (once) before the join
    yields the first row to insert; the locks are taken in the statement that writes the
    group's first row, so before its COMMIT, which is what delete_batches needs.
    """
    insert_ = CollectorStore._PG_INSERT_BATCHES
    head, tail = insert_.split(" SELECT * FROM ", 1)
    return f"WITH l AS ({_lock_shared_sql(names)}) {head} SELECT u.* FROM {tail} AS u, l"


@functools.lru_cache(maxsize=256)
def _group_single_sql(names: frozenset[str], parts: int) -> str:
    """Return the SQL of ``CollectorStore._commit_group_pg_single`` (one keyless group).

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
        f"WITH l AS ({_lock_shared_sql(names)}),"
        " b AS (INSERT INTO ldpkit_batches (batch_id, collection, token, n, received_at, bucket)"
        " SELECT u.i, u.c, u.t, u.n, to_timestamp(u.r), u.k FROM unnest(%s::text[], %s::text[],"
        " %s::text[], %s::bigint[], %s::bigint[], %s::bigint[]) AS u(i, c, t, n, r, k), l),"
        " p AS (INSERT INTO ldpkit_rollup_parts (collection, bucket, token, n, batches, arrays)"
        f" SELECT v.* FROM (VALUES {values}) AS v, l)"
        " SELECT 1"
    )


@functools.lru_cache(maxsize=1024)
def _array_item(value: str) -> str:
    """Quote ``value`` as one element of a PostgreSQL array literal.

    Double-quoted, so that empty strings, commas, braces and spaces stay text; backslash
    and quote escaped.
    """
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _array_literal(values: Iterable[str]) -> str:
    """Return a PostgreSQL array literal (``'{a,b}'``) of already quoted or numeric elements."""
    return "{" + ",".join(values) + "}"


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
        self._check_legacy_schema()
        metadata.create_all(self.engine)
        if self.backend == "postgresql":
            self._compress_arrays_lz4()
        self.specs: dict[str, Mechanism] = {}
        self.layouts: dict[str, _Layout] = {}
        self.bucket_seconds: dict[str, int] = {}
        # Reads (estimates, listings) go through the reader; it shares these dicts.
        self.reader = StoreReader(self.engine, self.layouts, self.bucket_seconds)
        self._fold_sql: tuple[Any, Any, Any] | None = None
        self._key_sql: Any = None
        # Roll-up parts may exist (written since the last compaction, or left by an earlier
        # process): the committer compacts soon after it starts.
        self._dirty = True
        # Compaction's bound and health (this process; see try_compact): more than
        # `max_parts` unfolded parts in a collection make an estimate or the committer
        # compact at once; failures are counted and reported by /healthz and /metrics.
        self.max_parts = DEFAULT_MAX_PARTS
        self.compact_retry_seconds = 1.0  # after a failure, no bound-triggered retry sooner
        self.compaction_failures = 0  # consecutive
        self.last_compaction_error: str | None = None
        self.on_compaction: Callable[[int | None], None] | None = None
        self.parts_written = 0  # by this process since its last compaction
        self._part_writes = 0  # group commits that wrote parts, ever (see compact)
        self._last_failure = -float("inf")
        self._compact_lock = threading.Lock()
        self._count_lock = threading.Lock()  # PostgreSQL commits groups from two threads
        # SQLite group commits run in the event loop's thread unless one was slow lately
        # (commit_group_async).
        self.slow_commit_seconds = 0.1
        self.off_loop_seconds = 3.0
        self._off_loop_until = -float("inf")
        # PostgreSQL group commits: connections kept by the committer threads (no pool
        # checkout, no pre-ping round trip per group), one per group in flight; see
        # commit_group_pg. _pg_lock guards the list of idle ones.
        self._pg_idle: list[Any] = []
        self._pg_lock = threading.Lock()
        # Keyless groups up to this many batches are committed by the event loop itself
        # (commit_group_async); larger ones in a committer thread, where building and
        # sending their statement does not hold up the loop's reading of requests.
        self.in_loop_max_group = 12
        # received_at -> Unix seconds (the app's clock hands out one datetime per second).
        self._epochs: dict[dt.datetime, int] = {}
        # The retry window: how long a deleted batch's idempotency key stays refused
        # (BatchDeleted). A client retries an unanswered batch within minutes to days (a
        # phone offline for a while); a retry older than this is stored as a new batch.
        self.deleted_keys_seconds: float = DEFAULT_DELETED_KEYS_SECONDS
        self.expire_interval = 3600.0  # expire_deleted_keys from try_compact at most this often
        self._last_expire = -float("inf")

    # The roll-up arrays' TOAST settings on PostgreSQL (see _compress_arrays_lz4).
    _ARRAY_TABLES = ("ldpkit_rollup_parts", "ldpkit_rollups")

    def _compress_arrays_lz4(self) -> None:
        """Compress new roll-up arrays with lz4 and keep them in the row.

        lz4 instead of PostgreSQL's default pglz; in the row (``STORAGE MAIN``) instead of
        a TOAST table.

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
            self._set_lz4()
        except DBAPIError as exc:
            logger.warning(
                "roll-up arrays keep PostgreSQL's default compression and storage (%s); lz4 "
                "and STORAGE MAIN make group commits cheaper: let the tables' owner open the "
                "database once",
                str(exc.orig).strip().splitlines()[0] if exc.orig is not None else exc,
            )

    def _set_lz4(self) -> None:
        with self.engine.begin() as conn:
            lz4 = conn.exec_driver_sql(
                "SELECT 'lz4' = ANY(enumvals) FROM pg_settings"
                " WHERE name = 'default_toast_compression'"
            ).scalar()
            # (Without lz4, e.g. PostgreSQL < 14 and its catalog without attcompression: only
            # the storage is checked.)
            compression = "a.attcompression IS DISTINCT FROM 'l'" if lz4 else "false"
            rows = conn.exec_driver_sql(
                f"SELECT c.relname, {compression}, a.attstorage <> 'm' FROM pg_attribute a"
                " JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname = ANY(%(names)s)"
                " AND pg_table_is_visible(c.oid) AND a.attname = 'arrays'",
                {"names": list(self._ARRAY_TABLES)},
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

    def _check_legacy_schema(self) -> None:
        names = inspect(self.engine).get_table_names()
        if "ldpkit_batches" in names:
            columns = {c["name"] for c in inspect(self.engine).get_columns("ldpkit_batches")}
            if "stats" in columns:
                raise ValueError(
                    f"database {self.engine.url.render_as_string()} must use the roll-up schema, "
                    "got the per-batch schema of an earlier ldpkit collector (table "
                    "ldpkit_batches has a stats column); export its Stats with the earlier "
                    "version (GET .../stats) and start on a new database"
                )

    def close(self) -> None:
        """Close the pooled PostgreSQL connections and dispose of the engine."""
        with self._pg_lock:
            idle, self._pg_idle = self._pg_idle, []
        for conn in idle:
            self._drop_pg_raw(conn)
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

    # -- writing -----------------------------------------------------------------------------
    def bucket_of(self, collection: str, when: dt.datetime) -> int:
        """Return the start (Unix seconds) of the roll-up bucket holding ``when``."""
        width = self.bucket_seconds[collection]
        epoch = self._epochs.get(when)
        if epoch is None:
            epoch = self._epoch(when)
        return epoch // width * width

    def _epoch(self, when: dt.datetime) -> int:
        """Return ``int(when.timestamp())``, cached for whole-second times with a zone.

        The app's clock hands out one such datetime per second; ``_single_statement`` relies
        on the cache holding only those.
        """
        epoch = int(when.timestamp())
        if when.tzinfo is not None and not when.microsecond:
            if len(self._epochs) >= 256:  # one new second per second under load
                self._epochs.clear()
            self._epochs[when] = epoch
        return epoch

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
        combine: Callable[[Sequence[PendingBatch]], Stats] | None = None,
    ) -> list[BatchRecord | Exception]:
        """Store several batches in one transaction; one result per item, in order.

        A batch whose ``(token, idempotency_key)`` was already stored for its collection
        (earlier, or earlier in this group) is not stored again: the first batch's record
        comes back with ``duplicate=True``; reusing a key for different content gives an
        :class:`IdempotencyConflict` for that item only. Database errors propagate (nothing
        of the group is stored). A unique-constraint race with another writer process
        retries the whole group, which then sees the other process's rows.

        ``combine(members)`` gives the merged Stats of the new batches of one roll-up row
        (default: merge their ``stats``); the group committer passes one that reuses Stats
        it aggregated for several small batches at once.
        """
        for attempt in range(3):
            try:
                with self.engine.begin() as conn:
                    return self._commit_group(conn, items, combine or _merge_members)
            except IntegrityError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def commit_group_async(
        self,
        items: Sequence[PendingBatch],
        combine: Callable[[Sequence[PendingBatch]], Stats] | None,
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
        that is one statement (:meth:`_single_statement`), which the loop sends and awaits
        itself on an asyncio connection (:meth:`_commit_group_pg_in_loop`).

        But while the loop waits for SQLite, it serves nothing (``/healthz``, estimates,
        other requests' bytes): a disk that stalls an fsync for seconds stalls the whole
        process. So a SQLite group transaction that takes longer than
        ``slow_commit_seconds`` (0.1 s; ~1-15 ms is usual) moves the following ones to
        ``run_blocking`` for ``off_loop_seconds`` (3 s, renewed by every slow one there):
        the first stalled commit still holds the loop, the next ones do not. The fast path
        costs one clock read per group.
        """
        if self.backend == "postgresql" and self.engine.dialect.driver == "psycopg":
            merge = combine or _merge_members
            if connections is not None and len(items) <= self.in_loop_max_group:
                try:
                    done = await self._commit_group_pg_in_loop(items, merge, connections)
                except IntegrityError:  # a batch id taken (never, by design): the full path
                    done = None
                if done is not None:
                    return done
            return await run_blocking(lambda: self.commit_group_pg(items, merge))  # type: ignore[no-any-return]
        merge = combine or _merge_members
        if self.backend != "sqlite":
            return await run_blocking(lambda: self.commit_group(items, merge))  # type: ignore[no-any-return]
        if time.monotonic() < self._off_loop_until:  # a commit stalled lately: see above
            return await run_blocking(lambda: self._timed(self.commit_group, items, merge))  # type: ignore[no-any-return]
        return self._timed(self._commit_sqlite_here, items, merge)

    def _timed(
        self,
        commit: Callable[..., list[BatchRecord | Exception]],
        items: Sequence[PendingBatch],
        merge: Callable[[Sequence[PendingBatch]], Stats],
    ) -> list[BatchRecord | Exception]:
        """``commit(items, merge)``, noting a slow one (see :meth:`commit_group_async`)."""
        start = time.perf_counter()
        try:
            return commit(items, merge)
        finally:
            self._note_loop_time(time.perf_counter() - start, "group commit")

    def _note_loop_time(self, took: float, what: str) -> None:
        """Note a SQLite transaction that took ``took`` s.

        Past ``slow_commit_seconds``, the next commits and compactions run off the event
        loop for ``off_loop_seconds``.
        """
        if took > self.slow_commit_seconds:
            if time.monotonic() >= self._off_loop_until:
                logger.warning(
                    "a SQLite %s took %.3f s (> %.3f s): the next ones run off the event "
                    "loop for %.0f s",
                    what,
                    took,
                    self.slow_commit_seconds,
                    self.off_loop_seconds,
                )
            self._off_loop_until = time.monotonic() + self.off_loop_seconds

    @property
    def compacts_on_loop(self) -> bool:
        """Tell whether the committer folds roll-up parts in its event loop's thread.

        SQLite with no slow transaction lately; see :meth:`try_compact_on_loop`.
        """
        return self.backend == "sqlite" and time.monotonic() >= self._off_loop_until

    def try_compact_on_loop(self) -> int | None:
        """Run :meth:`try_compact` in the calling (event loop's) thread.

        Without waiting for another thread's compaction (None then: the committer tries
        again later).

        SQLite has one writer, so no group can commit while a compaction runs, wherever it
        runs. In a helper thread a fold of ~100 parts (one second of one-report POSTs at
        64 connections) took 9-30 ms of wall time for 3-9 ms of CPU, switching the
        interpreter lock with the busy loop thread, and every request of the next group
        waited that long (the p99 of ``benchmarks/collector.py``); in the loop's thread it
        takes its CPU time. A slow one (a stalled disk) moves the next ones off the loop,
        as for commits (:meth:`commit_group_async`).
        """
        start = time.perf_counter()
        try:
            return self.try_compact(wait=False)
        finally:
            self._note_loop_time(time.perf_counter() - start, "roll-up compaction")

    def _commit_sqlite_here(
        self,
        items: Sequence[PendingBatch],
        merge: Callable[[Sequence[PendingBatch]], Stats],
    ) -> list[BatchRecord | Exception]:
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

    # -- PostgreSQL: one round trip per group -------------------------------------------
    _PG_INSERT_BATCH = (
        "INSERT INTO ldpkit_batches (batch_id, collection, token, idempotency_key, digest, n,"
        " received_at, bucket) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
    )
    # The group's batch rows travel as one JSON array of rows (one text parameter, built by
    # json.dumps in C), unpacked server-side: psycopg adapts a Python list element by
    # element in Python (eight column arrays cost ~0.3 ms of client CPU per group of 16).
    _PG_INSERT_BATCHES = (
        "INSERT INTO ldpkit_batches (batch_id, collection, token, idempotency_key, digest, n,"
        " received_at, bucket) SELECT * FROM (SELECT e->>0, e->>1, e->>2, e->>3, e->>4,"
        " (e->>5)::bigint, (e->>6)::timestamptz, (e->>7)::bigint"
        " FROM json_array_elements(%s::json) AS e)"
    )
    _PG_INSERT_RAW = "INSERT INTO ldpkit_reports (batch_id, format, payload) VALUES (%s, %s, %s)"
    _PG_BUMP = "UPDATE ldpkit_collections SET generation = generation + 1 WHERE name = %s"
    _SQLITE_WRITE_LOCK = "UPDATE ldpkit_collections SET generation = generation WHERE 0"

    _INSERT_PART = (
        "INSERT INTO ldpkit_rollup_parts (collection, bucket, token, n, batches, arrays)"
        " VALUES (%s, %s, %s, %s, %s, %s)"
    )

    def _wrote_parts(self, count: int) -> None:
        """Count a group's roll-up parts (for the bound and for compact's done check)."""
        with self._count_lock:
            self._dirty = True
            self.parts_written += count
            self._part_writes += 1

    def _parts(
        self,
        items: Sequence[PendingBatch],
        new: Sequence[int],
        combine: Callable[[Sequence[PendingBatch]], Stats],
        buckets: Mapping[int, int] | Sequence[int] | None = None,
    ) -> list[tuple[str, int, str, int, int, bytes]]:
        """Return one roll-up part per (collection, bucket, token) of the new batches.

        In key order; ``buckets``: the batches' buckets by index, when the caller has them.
        """
        groups: dict[tuple[str, int, str], list[PendingBatch]] = defaultdict(list)
        for i in new:
            b = items[i]
            bucket = (
                buckets[i] if buckets is not None else self.bucket_of(b.collection, b.received_at)
            )
            groups[(b.collection, bucket, b.token)].append(b)
        out = []
        for key in sorted(groups):
            members = groups[key]
            stats = combine(members)
            out.append((*key, stats.n, len(members), self.layouts[key[0]].pack(stats)))
        return out

    @staticmethod
    def _drop_pg_raw(conn: Any) -> None:
        try:
            conn.invalidate()  # closes it; the pool forgets it
        except Exception:  # already broken: nothing to release
            pass

    def commit_group_pg(
        self,
        items: Sequence[PendingBatch],
        combine: Callable[[Sequence[PendingBatch]], Stats] | None = None,
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

        merge = combine or _merge_members
        # A kept connection of our own for this group (two groups of one process may be in
        # flight, each in its own committer thread and transaction).
        with self._pg_lock:
            kept: Any = self._pg_idle.pop() if self._pg_idle else None
        try:
            for attempt in range(3):
                # (bound before raw_connection(), which raises psycopg's own error when the
                # server is down; unbound, an UnboundLocalError made that a 500)
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

    def _decide(
        self,
        items: Sequence[PendingBatch],
        digests: Mapping[int, str],
        prior: Mapping[tuple[str, str, str], tuple[Any, ...]],
        results: list[BatchRecord | Exception | None],
        deleted: Mapping[tuple[str, str, str], tuple[str, Any]] | None = None,
    ) -> tuple[list[int], dict[int, BatchRecord]]:
        """Sort a group's items into new batches and retries (both commit paths).

        ``prior`` maps ``(collection, token, idempotency_key)`` of keys stored before this
        group to ``(digest, batch_id, n, received_at)``, ``deleted`` those of deleted
        batches to ``(batch_id, deleted_at)``. A retry of a stored key, or of a key seen
        earlier in the group, gets its result (the first batch's record, or an
        :class:`IdempotencyConflict`) in ``results``, a key of a deleted batch a
        :class:`BatchDeleted`; returns the indices of the new batches and their records.
        """
        new: list[int] = []
        first_in_group: dict[tuple[str, str, str], int] = {}
        records: dict[int, BatchRecord] = {}
        ids = new_batch_ids(len(items))  # one each (a retry's goes unused)
        for i, b in enumerate(items):
            if b.idempotency_key:
                ident = (b.collection, b.token, b.idempotency_key)
                if deleted and ident in deleted:
                    gone_id, gone_at = deleted[ident]
                    results[i] = BatchDeleted(
                        f"Idempotency-Key {b.idempotency_key!r} must name a stored batch, but "
                        f"its batch {gone_id} was deleted by an administrator at "
                        f"{_utc(gone_at).isoformat()}; a deleted batch is not stored again "
                        "(a retry must not undo a delete): send new data with a new key"
                    )
                    continue
                if ident in prior:
                    digest, batch_id, n, received_at = prior[ident]
                    results[i] = self._retry(
                        b, digests[i], digest, batch_id, int(n), _utc(received_at)
                    )
                    continue
                if ident in first_in_group:
                    j = first_in_group[ident]
                    r = records[j]
                    results[i] = self._retry(
                        b, digests[i], digests[j], r.batch_id, r.n, r.received_at
                    )
                    continue
                first_in_group[ident] = i
            records[i] = BatchRecord(ids[i], b.collection, b.n, b.received_at, token=b.token)
            new.append(i)
        return new, records

    @staticmethod
    def _batch_rows_json(
        items: Sequence[PendingBatch],
        records: Mapping[int, BatchRecord],
        buckets: Mapping[int, int],
        digests: Mapping[int, str],
        order: Sequence[int],
    ) -> str:
        """Return the batch rows of ``order`` as one JSON array (see ``_PG_INSERT_BATCHES``)."""
        return json.dumps(
            [
                (
                    records[i].batch_id,
                    items[i].collection,
                    items[i].token,
                    items[i].idempotency_key,
                    digests.get(i),
                    items[i].n,
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
        combine: Callable[[Sequence[PendingBatch]], Stats],
    ) -> tuple[str, tuple[Any, ...], list[BatchRecord | Exception]] | None:
        """Build ONE autocommitted statement for a group without idempotency keys or raw reports.

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
        epochs, widths = self._epochs, self.bucket_seconds
        closed: dict[str, int] = {}
        seconds: list[int] = []
        buckets: list[int] = []
        for b in items:
            if b.idempotency_key or b.raw is not None:
                return None
            when = b.received_at
            epoch = epochs.get(when)  # only whole seconds with a zone (see _epoch)
            if epoch is None:
                if when.tzinfo is None or when.microsecond:
                    return None
                epoch = self._epoch(when)
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
        parts = self._parts(items, range(len(items)), combine, buckets)
        self._wrote_parts(len(parts))
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
        combine: Callable[[Sequence[PendingBatch]], Stats],
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

    async def _commit_group_pg_in_loop(
        self,
        items: Sequence[PendingBatch],
        combine: Callable[[Sequence[PendingBatch]], Stats],
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
        """Close the idle connections of one loop (see _commit_group_pg_in_loop)."""
        while connections:
            connections.pop().drop()

    def _commit_group_pg(
        self,
        raw: Any,
        items: Sequence[PendingBatch],
        combine: Callable[[Sequence[PendingBatch]], Stats],
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
            raw.cursor().execute(_lock_shared_sql(frozenset(k[0] for k in keyed)))
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
        new, records = self._decide(items, digests, prior, results, deleted)
        if new:
            buckets = {i: self.bucket_of(items[i].collection, items[i].received_at) for i in new}
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
                cur.executemany(self._PG_INSERT_RAW, raw_rows)
            parts = self._parts(items, new, combine)
            cur.executemany(self._INSERT_PART, parts)
            keys = [(p[0], p[1], p[2]) for p in parts]
            self._wrote_parts(len(parts))
            for c in sorted({c for c, bucket, _ in keys if bucket < self.reader.closed_before(c)}):
                cur.execute(self._PG_BUMP, (c,))
            for i in new:
                results[i] = records[i]
        return [r if r is not None else RuntimeError("unreachable") for r in results]

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
        combine: Callable[[Sequence[PendingBatch]], Stats],
    ) -> list[BatchRecord | Exception]:
        results: list[BatchRecord | Exception | None] = [None] * len(items)
        if self.backend == "postgresql":  # as in _commit_group_pg (see delete_batches)
            conn.exec_driver_sql(_lock_shared_sql(frozenset(b.collection for b in items)))
        digests: dict[int, str] = {
            i: b.digest or "" for i, b in enumerate(items) if b.idempotency_key
        }
        if digests and self.backend == "sqlite":
            # Keys are looked up under the writer lock (a write that changes nothing takes
            # it), as admin deletes hold it: a retry is decided before a delete or after
            # it, never against a delete in flight (pysqlite would run the SELECT below
            # outside the transaction, on the last committed state).
            conn.exec_driver_sql(self._SQLITE_WRITE_LOCK)
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
        new, records = self._decide(items, digests, prior, results, deleted)
        if new and self.backend == "sqlite":
            # One executemany of plain tuples: the ORM's per-row parameter processing cost
            # ~1/3 of a one-report batch's share of the group. received_at goes through
            # the dialect's own DateTime processor (once per distinct second), so the
            # stored text is exactly what SQLAlchemy writes and reads back elsewhere.
            to_text = self._sqlite_datetime(conn)
            when: dict[dt.datetime, Any] = {}
            conn.exec_driver_sql(
                self._PG_INSERT_BATCH.replace("%s", "?"),
                [
                    (
                        records[i].batch_id,
                        items[i].collection,
                        items[i].token,
                        items[i].idempotency_key,
                        digests.get(i),
                        items[i].n,
                        when[at_]
                        if (at_ := items[i].received_at) in when
                        else when.setdefault(at_, to_text(at_)),
                        self.bucket_of(items[i].collection, at_),
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
                        "bucket": self.bucket_of(items[i].collection, items[i].received_at),
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
            parts = self._parts(items, new, combine)
            if self.backend == "sqlite":
                conn.exec_driver_sql(self._INSERT_PART.replace("%s", "?"), parts)
            else:
                names = ("collection", "bucket", "token", "n", "batches", "arrays")
                conn.execute(insert(rollup_parts_table), [dict(zip(names, p)) for p in parts])
            groups = {(p[0], p[1], p[2]) for p in parts}
            self._wrote_parts(len(parts))
            late = {c for c, bucket, _ in groups if bucket < self.reader.closed_before(c)}
            for c in sorted(late):  # a write into a bucket readers may have cached
                self._bump(conn, c)
            for i in new:
                results[i] = records[i]
        return [r if r is not None else RuntimeError("unreachable") for r in results]

    @staticmethod
    def _retry(
        b: PendingBatch,
        digest: str,
        stored_digest: str | None,
        batch_id: str,
        n: int,
        received_at: dt.datetime,
    ) -> BatchRecord | Exception:
        if stored_digest != digest:
            return IdempotencyConflict(
                f"Idempotency-Key {b.idempotency_key!r} must identify one batch, but it was used "
                f"for batch {batch_id} with different reports; use a new key for new data"
            )
        return BatchRecord(batch_id, b.collection, n, received_at, duplicate=True, token=b.token)

    def _key_lookup_statement(self) -> Any:
        """Return the statement looking up the batches of some keys of one collection.

        Stored and deleted batches of one (collection, token), in one statement (``gone``
        tells them apart); built once, like :meth:`_fold_statements`.
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

    def _fold_statements(self) -> tuple[Any, Any, Any]:
        """Return the three statements of :meth:`_fold`, built once.

        They run once per roll-up row per group: building and cache-keying them anew cost
        more than executing them.
        """
        if self._fold_sql is None:
            c = rollups_table.c
            where = and_(
                c.collection == bindparam("w_collection"),
                c.bucket == bindparam("w_bucket"),
                c.token == bindparam("w_token"),
            )
            first: Any = None
            if self.backend in ("postgresql", "sqlite"):
                from sqlalchemy.dialects import postgresql, sqlite

                dialect_insert: Any = (
                    postgresql.insert if self.backend == "postgresql" else sqlite.insert
                )
                # RETURNING tells reliably whether the row was inserted (rowcount may be -1).
                first = dialect_insert(rollups_table).on_conflict_do_nothing().returning(c.bucket)
            read = select(c.arrays, c.n, c.batches).where(where).with_for_update()
            write = (
                update(rollups_table)
                .where(where)
                .values(
                    n=bindparam("v_n"), batches=bindparam("v_batches"), arrays=bindparam("v_arrays")
                )
            )
            self._fold_sql = (first, read, write)
        return self._fold_sql

    def _fold(
        self,
        conn: Connection,
        key: tuple[str, int, str],
        payloads: list[bytes],
        n: int,
        batches: int,
    ) -> None:
        """Add packed Stats into one roll-up row, under its row lock.

        ``payloads``, ``n`` reports, ``batches`` batches; the one fold of every write path
        (compaction, bulk loads).
        """
        collection, bucket, token = key
        layout = self.layouts[collection]
        packed = payloads[0] if len(payloads) == 1 else layout.pack(layout.sum(payloads, n))
        values: dict[str, Any] = {
            "collection": collection,
            "bucket": bucket,
            "token": token,
            "n": n,
            "batches": batches,
            "arrays": packed,
        }
        first, read, write = self._fold_statements()
        where = {"w_collection": collection, "w_bucket": bucket, "w_token": token}
        # Usually the row exists (one insert per bucket and token): read it under its row
        # lock first, which saves the insert attempt on every later fold.
        row = conn.execute(read, where).one_or_none()
        if row is None:
            if first is None:  # other backends: plain insert (a race: IntegrityError, retried)
                conn.execute(insert(rollups_table), values)
                return
            if conn.execute(first, values).first() is not None:
                return  # a new roll-up row
            # Another writer inserted it since (its transaction has committed: the insert
            # waited for it); read it again, now locked.
            row = conn.execute(read, where).one()
        merged = layout.sum([bytes(row.arrays), packed], int(row.n) + n)
        conn.execute(
            write,
            {
                **where,
                "v_n": merged.n,
                "v_batches": int(row.batches) + batches,
                "v_arrays": layout.pack(merged),
            },
        )

    @property
    def needs_compaction(self) -> bool:
        """Whether this process wrote roll-up parts since its last compaction."""
        return self._dirty

    def try_compact(self, *, wait: bool = True) -> int | None:
        """:meth:`compact` that records its outcome instead of raising.

        Returns the number of parts folded, or None when it failed (logged; counted in
        ``compaction_failures``, consecutive, reset by the next success) or when another
        thread of this process was compacting and ``wait`` is false. ``on_compaction`` (the
        app's metrics) gets the parts folded, or None for a failure.
        """
        if not self._compact_lock.acquire(blocking=wait):
            return None
        try:
            before = self.parts_written
            try:
                folded = self.compact()
            except Exception as exc:  # the parts stay, and every total with them
                self.compaction_failures += 1
                self.last_compaction_error = f"{type(exc).__name__}: {exc}"[:300]
                self._last_failure = time.monotonic()
                logger.exception(
                    "roll-up compaction failed (%d in a row; parts kept, retried later)",
                    self.compaction_failures,
                )
                if self.on_compaction is not None:
                    self.on_compaction(None)
                return None
            self.compaction_failures = 0
            self.last_compaction_error = None
            with self._count_lock:
                self.parts_written = max(0, self.parts_written - before)
            if time.monotonic() - self._last_expire >= self.expire_interval:
                self._last_expire = time.monotonic()
                try:  # (rarely anything: admins delete rarely)
                    self.expire_deleted_keys()
                except Exception:  # retried at the next interval; the keys stay meanwhile
                    logger.exception("expiring deleted idempotency keys failed")
            if self.on_compaction is not None:
                self.on_compaction(folded)
            return folded
        finally:
            self._compact_lock.release()

    def compaction_due(self) -> bool:
        """Whether a bound-triggered compaction may run now (not right after a failure)."""
        return (
            self.compaction_failures == 0
            or time.monotonic() - self._last_failure >= self.compact_retry_seconds
        )

    def parts_over(self, collection: str, bound: int | None = None) -> bool:
        """Tell whether more than ``bound`` roll-up parts of ``collection`` wait.

        ``bound`` defaults to ``max_parts``; an index range read of at most bound + 1 rows,
        whatever the number of parts.
        """
        bound = self.max_parts if bound is None else bound
        p = rollup_parts_table.c
        query = select(p.bucket).where(p.collection == collection).limit(1).offset(bound)
        with self.engine.connect() as conn:
            return conn.execute(query).first() is not None

    # A PostgreSQL advisory lock key ("ldpkit compact"): one compactor at a time across
    # worker processes, and admin deletes wait for it.
    _COMPACT_LOCK = 0x6C64706B6974

    def compact(self, limit: int = 4096) -> int:
        """Fold roll-up parts into the roll-up rows; returns the number of parts folded.

        Each round is one transaction that DELETEs up to ``limit`` parts (``RETURNING``
        their contents: only rows this transaction really deleted, so two compactors can
        never fold the same part twice) and adds them into their roll-up rows. The sums
        readers see (roll-ups + parts, read in one statement) are the same before and
        after: an acknowledged batch is never lost or counted twice. On PostgreSQL, a
        compactor that finds another one running returns at once.
        """
        names = sorted(self.layouts)
        if not names:
            return 0
        p = rollup_parts_table.c
        oldest = select(p.id).where(p.collection.in_(names)).order_by(p.id).limit(limit)
        take = (
            delete(rollup_parts_table)
            .where(p.id.in_(oldest.scalar_subquery()))
            .returning(p.collection, p.bucket, p.token, p.n, p.batches, p.arrays)
        )
        total = 0
        while True:
            # A part another thread of this process writes meanwhile (a group commit while
            # an estimate compacts) may be missed by this round: then stay dirty.
            writes = self._part_writes
            with self.engine.begin() as conn:
                if (
                    self.backend == "postgresql"
                    and not conn.execute(
                        text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": self._COMPACT_LOCK}
                    ).scalar()
                ):
                    return total
                rows = self._take_parts(conn, take, names, limit)
                by_key: dict[tuple[str, int, str], list[Any]] = defaultdict(list)
                for r in rows:  # (collection, bucket, token, n, batches, arrays)
                    by_key[(r[0], int(r[1]), r[2])].append(r)
                for key in sorted(by_key):  # fixed order: no deadlock between writers
                    part = by_key[key]
                    self._fold(
                        conn,
                        key,
                        [bytes(r[5]) for r in part],
                        sum(int(r[3]) for r in part),
                        sum(int(r[4]) for r in part),
                    )
            if len(rows) < limit and writes == self._part_writes:
                self._dirty = False
            total += len(rows)
            if len(rows) < limit:
                return total

    _PG_TAKE_PARTS = (
        "DELETE FROM ldpkit_rollup_parts WHERE id IN (SELECT id FROM ldpkit_rollup_parts"
        " WHERE collection = ANY(%s) ORDER BY id LIMIT %s)"
        " RETURNING collection, bucket, token, n, batches, arrays"
    )

    def _take_parts(
        self, conn: Connection, take: Any, names: list[str], limit: int
    ) -> Sequence[Sequence[Any]]:
        """Delete up to ``limit`` of the oldest parts of ``names`` and return their rows.

        On PostgreSQL the rows come back in binary: in text, every part's arrays travel as
        hex (8 KiB of OLH d = 1024 arrays: 16 KiB of text), which cost the server a
        hex_encode and this process ~40 us of decoding per part, about one part per group
        commit (``compact_bench``, docs/collector.md).
        """
        if self.backend != "postgresql":
            return conn.execute(take).all()
        raw: Any = conn.connection.driver_connection  # this transaction's connection
        with raw.cursor(binary=True) as cur:
            cur.execute(self._PG_TAKE_PARTS, (names, limit))
            return cur.fetchall()

    # -- reading (the reader's, under the store's names) -----------------------------------
    def summary(self, collection: str) -> tuple[int, int]:
        """``(n, batches)``: total reports and number of stored batches."""
        return self.reader.summary(collection)

    def last_received(self, collection: str) -> dt.datetime | None:
        """Arrival time of the latest stored batch."""
        return self.reader.last_received(collection)

    def last_bucket(self, collection: str) -> int | None:
        """Return the start of the latest bucket with data, or None."""
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

    @staticmethod
    def _bump(conn: Connection, collection: str) -> None:
        conn.execute(
            update(collections_table)
            .where(collections_table.c.name == collection)
            .values(generation=collections_table.c.generation + 1)
        )

    def delete_batches(
        self,
        collection: str,
        *,
        token: str | None = None,
        since: int | None = None,
        until: int | None = None,
    ) -> tuple[int, int]:
        """Delete every batch of whole buckets in ``[since, until)`` (and of ``token``).

        Roll-ups are per (bucket, token), so removing whole roll-up rows removes exactly
        those batches' Stats: nothing is subtracted or approximated. Returns
        ``(batches, reports)`` deleted.

        Exact under concurrent writers: the count and the deletes below are separate
        statements, and at PostgreSQL's READ COMMITTED each sees the commits made before
        it started, so a group commit landing between ``DELETE batches`` and ``DELETE
        parts`` would leave batch rows without their Stats (and the count would miss
        them). Hence every group commit takes its collections' advisory lock in shared
        mode and this transaction takes it exclusively, after the compaction lock (one
        compactor or delete at a time: both rewrite roll-up rows): it waits for the
        commits in flight, new ones wait for it, and every statement here sees the same
        rows. On SQLite the first statement is a write, which takes the database's single
        writer lock for the whole transaction (a read first would run on an older
        snapshot: pysqlite begins the transaction only at the first write).

        The idempotency keys of the deleted batches are kept (``ldpkit_deleted_keys``): a
        retry with one of them gets :class:`BatchDeleted` (HTTP 409) instead of being
        stored as a new batch. Group commits read keys under the same locks, so a retry
        racing this delete is decided either before it (a duplicate of a batch this delete
        then removes) or after it (refused), never against a delete half done.
        """
        rollup_cond = self.reader.rollup_filter(collection, since, until, token)
        part_cond = self.reader.rollup_filter(
            collection, since, until, token, table=rollup_parts_table
        )
        batch_cond = self.reader.batch_filter(collection, token, since, until)
        u = self.reader.sums(collection, since, until, token)
        with self.engine.begin() as conn:
            if self.backend == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": self._COMPACT_LOCK})
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(:c, :k)"),
                    {"c": _COLLECTION_LOCK_CLASS, "k": _collection_lock_id(collection)},
                )
            # Readers' caches of closed buckets are stale from now on; on SQLite, this
            # write comes first to take the writer lock (see above).
            self._bump(conn, collection)
            n, count = conn.execute(
                select(func.coalesce(func.sum(u.c.n), 0), func.coalesce(func.sum(u.c.batches), 0))
            ).one()
            conn.execute(
                delete(reports_table).where(
                    reports_table.c.batch_id.in_(select(batches_table.c.batch_id).where(batch_cond))
                )
            )
            b = batches_table.c
            conn.execute(  # the deleted batches' keys stay spent (see deleted_keys_table)
                insert(deleted_keys_table).from_select(
                    ["collection", "token", "idempotency_key", "batch_id", "deleted_at"],
                    select(
                        b.collection,
                        b.token,
                        b.idempotency_key,
                        b.batch_id,
                        literal(dt.datetime.now(dt.UTC), DateTime(timezone=True)),
                    ).where(batch_cond, b.idempotency_key.is_not(None)),
                )
            )
            conn.execute(delete(batches_table).where(batch_cond))
            conn.execute(delete(rollups_table).where(rollup_cond))
            conn.execute(delete(rollup_parts_table).where(part_cond))
        self.expire_deleted_keys()  # past the retry window: see expire_deleted_keys
        return int(count), int(n)

    def expire_deleted_keys(self, now: dt.datetime | None = None) -> int:
        """Forget the idempotency keys of batches deleted long enough ago.

        More than ``deleted_keys_seconds`` before ``now`` (default: the current time);
        returns how many. A retry of such a key is then stored as a new batch, so the retry
        window must outlast every client's retries. Runs at each delete and about once an
        hour from the compaction.
        """
        now = now or dt.datetime.now(dt.UTC)
        cutoff = now - dt.timedelta(seconds=self.deleted_keys_seconds)
        with self.engine.begin() as conn:
            result = conn.execute(
                delete(deleted_keys_table).where(deleted_keys_table.c.deleted_at < cutoff)
            )
        return int(result.rowcount or 0)

    def raw_reports(self, batch_id: str) -> tuple[str, bytes] | None:
        """Return the stored payload of a batch (only when the app stores raw reports)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(reports_table.c.format, reports_table.c.payload).where(
                    reports_table.c.batch_id == batch_id
                )
            ).one_or_none()
        return None if row is None else (row.format, bytes(row.payload))

    def bulk_load(
        self,
        collection: str,
        rows: Iterable[dict[str, Any]],
        rollups: Iterable[tuple[int, str, Stats, int]],
    ) -> None:
        """Insert prepared batch rows and roll-ups as is (benchmarks and migrations only).

        Rows go through the DB-API's ``executemany`` with values converted by the column
        types' own bind processors (what Core would do, without its per-row overhead).
        """
        names = ["batch_id", "collection", "token", "idempotency_key", "digest", "n"]
        names += ["received_at", "bucket"]
        process = batches_table.c.received_at.type.bind_processor(self.engine.dialect)
        mark = "?" if self.engine.dialect.paramstyle == "qmark" else "%s"
        sql = (
            f"INSERT INTO {batches_table.name} ({', '.join(names)}) "
            f"VALUES ({', '.join([mark] * len(names))})"
        )
        with self.engine.begin() as conn:
            chunk: list[tuple[Any, ...]] = []
            for row in rows:
                when = row["received_at"]
                chunk.append(
                    (
                        row["batch_id"],
                        collection,
                        row.get("token", ""),
                        row.get("idempotency_key"),
                        None,
                        int(row["n"]),
                        process(when) if process is not None else when,
                        int(row["bucket"]),
                    )
                )
                if len(chunk) == 50_000:
                    conn.exec_driver_sql(sql, chunk)
                    chunk = []
            if chunk:
                conn.exec_driver_sql(sql, chunk)
            layout = self.layouts[collection]
            for bucket, token, stats, batches in rollups:
                self._fold(
                    conn, (collection, bucket, token), [layout.pack(stats)], stats.n, batches
                )
