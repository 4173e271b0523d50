"""Compaction: fold the roll-up parts group commits append into the roll-up rows.

Group commits append one roll-up part per (collection, bucket, token) and never read or
lock a roll-up row; :class:`Compactor` folds the parts into ``ldpkit_rollups`` and deletes
them in one transaction per round (readers sum both tables in one statement, so a fold
never changes what they see). The group committer calls it about once a second while parts
were written, or at once past ``max_parts`` unfolded parts; failures are counted for
``/healthz`` and ``/metrics``. The one fold of a roll-up row (:meth:`Compactor.fold`) also
serves bulk loads. The store facade (:class:`~ldpkit.service.store.CollectorStore`) makes
one and hands it its engine, the writers' shared :class:`~ldpkit.service.writes.RollupWrites`
(the parts count), its :class:`~ldpkit.service.deletes.BatchDeletes` (spent keys expire from
here about once an hour) and its :class:`~ldpkit.service.writes.LoopGuard`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, delete, insert, select, text, update
from sqlalchemy.engine import Connection, Engine

from ..spec import Stats
from .deletes import BatchDeletes
from .schema import DEFAULT_MAX_PARTS, batches_table, rollup_parts_table, rollups_table
from .writes import COMPACT_LOCK, LoopGuard, RollupWrites

logger = logging.getLogger("ldpkit.service")

__all__ = ["Compactor"]


class Compactor:
    """Fold roll-up parts into roll-up rows, and keep count of how that goes.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The store's engine.
    writes : RollupWrites
        The writers' shared state: the layouts and the count of parts written.
    deletes : BatchDeletes
        Expires the keys of deleted batches (from :meth:`try_compact`, hourly).
    loop_guard : LoopGuard
        Whether SQLite folds may run in the event loop's thread.
    """

    def __init__(
        self,
        engine: Engine,
        writes: RollupWrites,
        deletes: BatchDeletes,
        loop_guard: LoopGuard,
    ) -> None:
        self.engine = engine
        self.backend = engine.dialect.name
        self.writes = writes
        self.layouts = writes.layouts
        self.deletes = deletes
        self.loop_guard = loop_guard
        self._fold_sql: tuple[Any, Any, Any] | None = None
        # Compaction's bound and health (this process; see try_compact): more than
        # `max_parts` unfolded parts in a collection make an estimate or the committer
        # compact at once; failures are counted and reported by /healthz and /metrics.
        self.max_parts = DEFAULT_MAX_PARTS
        self.compact_retry_seconds = 1.0  # after a failure, no bound-triggered retry sooner
        self.compaction_failures = 0  # consecutive
        self.last_compaction_error: str | None = None
        self.on_compaction: Callable[[int | None], None] | None = None
        self._last_failure = -float("inf")
        self._compact_lock = threading.Lock()
        self.expire_interval = 3600.0  # expire_deleted_keys from try_compact at most this often
        self._last_expire = -float("inf")

    @property
    def compacts_on_loop(self) -> bool:
        """Whether the committer folds roll-up parts in its event loop's thread.

        SQLite, no slow transaction lately: see :meth:`try_compact_on_loop`.
        """
        return self.backend == "sqlite" and self.loop_guard.on_loop

    def try_compact_on_loop(self) -> int | None:
        """Run :meth:`try_compact` in the calling (event loop's) thread.

        It does not wait for another thread's compaction (None then: the committer tries
        again later).

        SQLite has one writer, so no group can commit while a compaction runs, wherever it
        runs. In a helper thread a fold of ~100 parts (one second of one-report POSTs at
        64 connections) took 9-30 ms of wall time for 3-9 ms of CPU, switching the
        interpreter lock with the busy loop thread, and every request of the next group
        waited that long (the p99 of ``benchmarks/collector.py``); in the loop's thread it
        takes its CPU time. A slow one (a stalled disk) moves the next ones off the loop,
        as for commits (:meth:`CollectorStore.commit_group_async
        <ldpkit.service.store.CollectorStore.commit_group_async>`).
        """
        start = time.perf_counter()
        try:
            return self.try_compact(wait=False)
        finally:
            self.loop_guard.note(time.perf_counter() - start, "roll-up compaction")

    def _fold_statements(self) -> tuple[Any, Any, Any]:
        """Return the three statements of :meth:`fold`, built once.

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

    def fold(
        self,
        conn: Connection,
        key: tuple[str, int, str],
        payloads: list[bytes],
        n: int,
        batches: int,
    ) -> None:
        """Add packed Stats into one roll-up row, under its row lock.

        ``payloads`` hold ``n`` reports of ``batches`` batches. The one fold of every write
        path (compaction, bulk loads).
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
        return self.writes.dirty

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
            before = self.writes.parts_written
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
            with self.writes.count_lock:
                self.writes.parts_written = max(0, self.writes.parts_written - before)
            if time.monotonic() - self._last_expire >= self.expire_interval:
                self._last_expire = time.monotonic()
                try:  # (rarely anything: admins delete rarely)
                    self.deletes.expire_deleted_keys()
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
        """Whether more than ``bound`` (default ``max_parts``) parts of ``collection`` wait.

        An index range read of at most bound + 1 rows, whatever the number of parts.
        """
        bound = self.max_parts if bound is None else bound
        p = rollup_parts_table.c
        query = select(p.bucket).where(p.collection == collection).limit(1).offset(bound)
        with self.engine.connect() as conn:
            return conn.execute(query).first() is not None

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
            writes = self.writes.part_writes
            with self.engine.begin() as conn:
                if (
                    self.backend == "postgresql"
                    and not conn.execute(
                        text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": COMPACT_LOCK}
                    ).scalar()
                ):
                    return total
                rows = self._take_parts(conn, take, names, limit)
                by_key: dict[tuple[str, int, str], list[Any]] = defaultdict(list)
                for r in rows:  # (collection, bucket, token, n, batches, arrays)
                    by_key[(r[0], int(r[1]), r[2])].append(r)
                for key in sorted(by_key):  # fixed order: no deadlock between writers
                    part = by_key[key]
                    self.fold(
                        conn,
                        key,
                        [bytes(r[5]) for r in part],
                        sum(int(r[3]) for r in part),
                        sum(int(r[4]) for r in part),
                    )
            if len(rows) < limit and writes == self.writes.part_writes:
                self.writes.dirty = False
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
                self.fold(conn, (collection, bucket, token), [layout.pack(stats)], stats.n, batches)
