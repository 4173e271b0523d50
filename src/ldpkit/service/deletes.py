"""Admin deletes: whole buckets of a collection's batches, and the keys they leave spent.

:class:`BatchDeletes` removes the batch rows, raw reports, roll-up rows and roll-up parts of
whole buckets in one transaction, keeps the deleted batches' idempotency keys in
``ldpkit_deleted_keys`` (a retry with one of them is refused, :class:`BatchDeleted`) for the
retry window, and forgets them after it. The store facade
(:class:`~ldpkit.service.store.CollectorStore`) makes one and hands it its engine and reader.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import DateTime, delete, func, insert, literal, select, text
from sqlalchemy.engine import Engine

from .reads import StoreReader
from .schema import (
    DEFAULT_DELETED_KEYS_SECONDS,
    batches_table,
    deleted_keys_table,
    reports_table,
    rollup_parts_table,
    rollups_table,
)
from .writes import COLLECTION_LOCK_CLASS, COMPACT_LOCK, bump_generation, collection_lock_id

__all__ = ["BatchDeletes"]


class BatchDeletes:
    """Delete batches of whole buckets, and expire the idempotency keys they leave spent.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The store's engine.
    reader : StoreReader
        The store's reader (its filters select what a delete removes).
    """

    def __init__(self, engine: Engine, reader: StoreReader) -> None:
        self.engine = engine
        self.backend = engine.dialect.name
        self.reader = reader
        # The retry window: how long a deleted batch's idempotency key stays refused
        # (BatchDeleted). A client retries an unanswered batch within minutes to days (a
        # phone offline for a while); a retry older than this is stored as a new batch.
        self.deleted_keys_seconds: float = DEFAULT_DELETED_KEYS_SECONDS

    # (an attribute, so that a test can pause a delete inside its transaction)
    _bump = staticmethod(bump_generation)

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
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": COMPACT_LOCK})
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(:c, :k)"),
                    {"c": COLLECTION_LOCK_CLASS, "k": collection_lock_id(collection)},
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
        """Forget the keys of batches deleted more than ``deleted_keys_seconds`` ago.

        Before ``now`` (default: the current time); returns how many. A retry of such a key
        is then stored as a new batch, so the retry window must outlast every client's
        retries. Runs at each delete and about once an hour from the compaction.
        """
        now = now or dt.datetime.now(dt.UTC)
        cutoff = now - dt.timedelta(seconds=self.deleted_keys_seconds)
        with self.engine.begin() as conn:
            result = conn.execute(
                delete(deleted_keys_table).where(deleted_keys_table.c.deleted_at < cutoff)
            )
        return int(result.rowcount or 0)
