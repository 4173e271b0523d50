"""Durable storage of per-batch Stats (SQLAlchemy Core; SQLite by default, PostgreSQL by URL).

One row per ingested batch holds that batch's :class:`~ldpkit.Stats` as JSON, its size,
arrival time and idempotency key. Rows are only ever inserted, never updated, so two
batches arriving at once cannot lose each other's counts (no read-modify-write of a running
total); an estimate merges the rows when it is asked for. ``Stats.merge`` is exact for
integer counts, so the merge order does not matter.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import StaticPool

from ..spec import Mechanism, Stats

__all__ = ["BatchRecord", "CollectorStore", "IdempotencyConflict", "stats_digest"]

metadata = MetaData()

collections_table = Table(
    "ldpkit_collections",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("mechanism", Text, nullable=False),  # spec.to_dict() as JSON
    Column("created_at", DateTime(timezone=True), nullable=False),
)

batches_table = Table(
    "ldpkit_batches",
    metadata,
    # Integer on SQLite so the column is the rowid (auto-increment); BIGINT elsewhere.
    Column(
        "id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("batch_id", String(36), nullable=False, unique=True),
    Column(
        "collection", String(128), ForeignKey("ldpkit_collections.name"), nullable=False, index=True
    ),
    Column("fingerprint", String(64), nullable=False),
    Column("idempotency_key", String(200), nullable=True),
    Column("digest", String(64), nullable=False),  # sha256 of the batch's Stats
    Column("n", BigInteger, nullable=False),
    Column("received_at", DateTime(timezone=True), nullable=False),
    Column("stats", Text, nullable=False),  # Stats.to_dict() as JSON
    UniqueConstraint("collection", "idempotency_key", name="uq_ldpkit_batches_idempotency"),
)

reports_table = Table(
    "ldpkit_reports",
    metadata,
    Column("batch_id", String(36), ForeignKey("ldpkit_batches.batch_id"), primary_key=True),
    Column("format", String(16), nullable=False),
    Column("payload", LargeBinary, nullable=False),
)


class IdempotencyConflict(ValueError):
    """An idempotency key was reused for a batch with different content."""


@dataclasses.dataclass(frozen=True)
class BatchRecord:
    """What the store knows about one stored batch."""

    batch_id: str
    collection: str
    n: int
    received_at: dt.datetime
    duplicate: bool = False


def stats_digest(stats: Stats) -> str:
    """sha256 of the canonical JSON of ``stats`` (what a retried batch must reproduce)."""
    text_ = json.dumps(stats.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text_.encode()).hexdigest()


def _utc(value: dt.datetime) -> dt.datetime:
    # SQLite returns naive datetimes; everything stored is UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def make_engine(database_url: str) -> Engine:
    """An engine for ``database_url``; SQLite gets WAL journaling and a busy timeout."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
    memory = url.database in (None, "", ":memory:")
    if memory:
        kwargs["poolclass"] = StaticPool  # one shared connection, or each would see its own DB
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        if not memory:
            # WAL: readers do not block the writer and vice versa; commits stay durable.
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


class CollectorStore:
    """Per-batch Stats in a SQL database.

    Parameters
    ----------
    database_url : str
        SQLAlchemy URL: ``sqlite:///path/to/file.db`` (default driver, no server), or
        e.g. ``postgresql+psycopg://user:pass@host/db`` (install the driver yourself).
    """

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.engine = make_engine(database_url)
        metadata.create_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def ping(self) -> None:
        """Raise if the database cannot be reached."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def register(self, name: str, spec: Mechanism) -> None:
        """Record ``name -> spec``, or check it against what the database already holds.

        Raises ValueError if the collection exists with another configuration: its stored
        Stats could not be merged with the new spec's.
        """
        row = {
            "name": name,
            "fingerprint": spec.fingerprint,
            "mechanism": json.dumps(spec.to_dict(), sort_keys=True),
            "created_at": dt.datetime.now(dt.UTC),
        }
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(collections_table).values(**row))
        except IntegrityError:
            pass  # already registered (possibly by another process just now): check below
        with self.engine.connect() as conn:
            stored = conn.execute(
                select(collections_table.c.fingerprint, collections_table.c.mechanism).where(
                    collections_table.c.name == name
                )
            ).one()
        if stored.fingerprint != spec.fingerprint:
            raise ValueError(
                f"collection {name!r} must keep its configuration {stored.mechanism} "
                f"(fingerprint {stored.fingerprint}) because the database holds its data, got "
                f"{spec!r} (fingerprint {spec.fingerprint}); use a new collection name"
            )

    def add_batch(
        self,
        collection: str,
        stats: Stats,
        *,
        idempotency_key: str | None = None,
        raw: tuple[str, bytes] | None = None,
    ) -> BatchRecord:
        """Store one batch's Stats (and optionally its raw payload) in one transaction.

        A batch whose ``idempotency_key`` was already stored for ``collection`` is not
        stored again: the first batch's record comes back with ``duplicate=True``. Reusing
        a key for different content raises :class:`IdempotencyConflict`. The unique
        constraint, not a prior read, decides, so concurrent retries are safe too.
        """
        digest = stats_digest(stats)
        record = BatchRecord(str(uuid.uuid4()), collection, stats.n, dt.datetime.now(dt.UTC))
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(batches_table).values(
                        batch_id=record.batch_id,
                        collection=collection,
                        fingerprint=stats.fingerprint,
                        idempotency_key=idempotency_key,
                        digest=digest,
                        n=stats.n,
                        received_at=record.received_at,
                        stats=json.dumps(stats.to_dict()),
                    )
                )
                if raw is not None:
                    conn.execute(
                        insert(reports_table).values(
                            batch_id=record.batch_id, format=raw[0], payload=raw[1]
                        )
                    )
        except IntegrityError:
            if idempotency_key is None:
                raise
            with self.engine.connect() as conn:
                prior = conn.execute(
                    select(batches_table).where(
                        batches_table.c.collection == collection,
                        batches_table.c.idempotency_key == idempotency_key,
                    )
                ).one_or_none()
            if prior is None:
                raise
            if prior.digest != digest:
                raise IdempotencyConflict(
                    f"Idempotency-Key {idempotency_key!r} must identify one batch, but it was used "
                    f"for batch {prior.batch_id} with different reports; use a new key for new data"
                ) from None
            return BatchRecord(
                prior.batch_id, collection, int(prior.n), _utc(prior.received_at), duplicate=True
            )
        return record

    def summary(self, collection: str) -> tuple[int, int]:
        """``(n, batches)``: total reports and number of stored batches."""
        with self.engine.connect() as conn:
            n, count = conn.execute(
                select(func.coalesce(func.sum(batches_table.c.n), 0), func.count()).where(
                    batches_table.c.collection == collection
                )
            ).one()
        return int(n), int(count)

    def iter_stats(self, collection: str, spec: Mechanism, *, chunk: int = 500) -> Iterator[Stats]:
        """Every stored batch's Stats (checked against ``spec``), streamed from the database."""
        query = select(batches_table.c.stats).where(batches_table.c.collection == collection)
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=chunk).execute(query)
            for (payload,) in result:
                yield spec.check_stats(Stats.from_dict(json.loads(payload)))

    def merged(self, collection: str, spec: Mechanism) -> tuple[Stats, int]:
        """All stored batches merged into one Stats, and how many batches there were."""
        total, count, pending = spec.empty_stats(), 0, []
        for stats in self.iter_stats(collection, spec):
            pending.append(stats)
            count += 1
            if len(pending) == 256:  # merge in chunks: fewer intermediate arrays
                total, pending = total.merge(*pending), []
        return total.merge(*pending), count

    def raw_reports(self, batch_id: str) -> tuple[str, bytes] | None:
        """The stored payload of a batch (only when the app stores raw reports)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(reports_table.c.format, reports_table.c.payload).where(
                    reports_table.c.batch_id == batch_id
                )
            ).one_or_none()
        return None if row is None else (row.format, bytes(row.payload))
