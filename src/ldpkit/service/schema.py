"""The collector's tables, the engine, and the packing of a roll-up's Stats.

Tables in SQLAlchemy Core, SQLite or PostgreSQL; a roll-up's Stats are packed into one
bytes column (:class:`_Layout`). What each table holds:
:mod:`ldpkit.service.store`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    inspect,
    text,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import StaticPool

from ..spec import REPORT_COUNT, Mechanism, Stats

metadata = MetaData()


collections_table = Table(
    "ldpkit_collections",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("mechanism", Text, nullable=False),  # spec.to_dict() as JSON
    Column("bucket_seconds", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Bumped by every change to a closed bucket (admin deletes, late writes): readers'
    # caches of closed buckets are valid only for the generation they were read at.
    Column("generation", BigInteger, nullable=False, default=0),
)


def _not_pg(
    ddl: Any,
    target: Any,
    bind: Any,
    tables: Any = None,
    state: Any = None,
    *,
    dialect: Any,
    compiler: Any = None,
    checkfirst: bool = False,
) -> bool:
    """``ddl_if`` callable: emit this constraint or index on every backend but PostgreSQL."""
    return bool(dialect.name != "postgresql")


# The hot tables (ldpkit_batches, ldpkit_rollup_parts) are lean on PostgreSQL, where every
# group commit is one statement and the server's CPU per group bounds throughput: no
# foreign key to ldpkit_collections (two look-ups per group; the app guarantees the
# collection row first, see CollectorStore.register), no unique index on batch_id (a
# server-made uuid4 no query looks up), the idempotency index only over keyed rows. SQLite
# keeps the original schema (its single writer is bounded by fsync, not by index upkeep).
# Databases created
# by an earlier version keep their extra indexes and keys; the code works with both.
batches_table = Table(
    "ldpkit_batches",
    metadata,
    # Integer on SQLite so the column is the rowid (auto-increment); BIGINT elsewhere.
    Column(
        "id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("batch_id", String(36), nullable=False),
    Column("collection", String(128), nullable=False),
    Column("token", String(64), nullable=False),  # token *name* ("" when auth is off)
    Column("idempotency_key", String(200), nullable=True),
    Column("digest", String(64), nullable=True),  # only for keyed batches (retry check)
    Column("n", BigInteger, nullable=False),
    Column("received_at", DateTime(timezone=True), nullable=False),  # whole seconds
    Column("bucket", BigInteger, nullable=False),  # bucket start, Unix seconds
    # (Same DDL as before on SQLite, constraints in the same order.)
    UniqueConstraint(
        "collection", "token", "idempotency_key", name="uq_ldpkit_batches_idempotency"
    ).ddl_if(callable_=_not_pg),
    UniqueConstraint("batch_id").ddl_if(callable_=_not_pg),
    ForeignKeyConstraint(["collection"], ["ldpkit_collections.name"]).ddl_if(callable_=_not_pg),
    # Admin filters: by bucket range (and last_received) and by token (a leaked token's
    # batches, with or without a range); neither index serves the other's queries.
    Index("ix_ldpkit_batches_bucket", "collection", "bucket"),
    Index("ix_ldpkit_batches_token", "collection", "token", "bucket"),
    # PostgreSQL: NULL keys never conflict, so a partial unique index enforces the same
    # rule, and keyless inserts (most of them) skip it; look-ups by key can use it.
    Index(
        "uq_ldpkit_batches_key",
        "collection",
        "token",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ).ddl_if(dialect="postgresql"),
)


def _summed_columns() -> list[Column[Any]]:
    """Return the columns a roll-up and a roll-up part share: ``n``, ``batches``, ``arrays``.

    New Column objects on every call (a Column belongs to one table).
    """
    return [
        Column("n", BigInteger, nullable=False),
        Column("batches", BigInteger, nullable=False),
        # The merged Stats' arrays, little-endian, concatenated in the spec's field order
        # (layout fixed by the collection's spec; see _Layout). Binary, so that summing
        # thousands of roll-ups is one numpy reduction instead of thousands of JSON parses.
        Column("arrays", LargeBinary, nullable=False),
    ]


rollups_table = Table(
    "ldpkit_rollups",
    metadata,
    Column("collection", String(128), ForeignKey("ldpkit_collections.name"), primary_key=True),
    Column("bucket", BigInteger, primary_key=True),  # bucket start, Unix seconds
    Column("token", String(64), primary_key=True),
    *_summed_columns(),
)


rollup_parts_table = Table(
    "ldpkit_rollup_parts",
    metadata,
    # Append-only deltas of the roll-ups: a group commit INSERTs one row per (collection,
    # bucket, token) it touched (no read-modify-write of the roll-up row, so no row lock
    # and no extra round trip), and the compactor (CollectorStore.compact) folds them into
    # ldpkit_rollups, deleting the folded parts in the same transaction. Readers sum both
    # tables in one statement (one snapshot).
    Column(
        "id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("collection", String(128), nullable=False),
    Column("bucket", BigInteger, nullable=False),
    Column("token", String(64), nullable=False),
    *_summed_columns(),
    ForeignKeyConstraint(["collection"], ["ldpkit_collections.name"]).ddl_if(callable_=_not_pg),
    Index("ix_ldpkit_rollup_parts_bucket", "collection", "bucket", "token"),
)


# How long a deleted batch's idempotency key stays refused (CollectorStore.deleted_keys_seconds).
DEFAULT_DELETED_KEYS_SECONDS = 30 * 86400


deleted_keys_table = Table(
    "ldpkit_deleted_keys",
    metadata,
    # Idempotency keys of batches an admin deleted (CollectorStore.delete_batches writes
    # them in the delete's transaction). A retry carrying one is refused (BatchDeleted)
    # rather than stored as a new batch: a client retrying after a lost answer must not
    # undo a delete (e.g. of a leaked token's batches).
    Column("collection", String(128), ForeignKey("ldpkit_collections.name"), primary_key=True),
    Column("token", String(64), primary_key=True),
    Column("idempotency_key", String(200), primary_key=True),
    Column("batch_id", String(36), nullable=False),
    Column("deleted_at", DateTime(timezone=True), nullable=False),
)


reports_table = Table(
    "ldpkit_reports",
    metadata,
    Column("batch_id", String(36), primary_key=True),
    Column("format", String(16), nullable=False),
    Column("payload", LargeBinary, nullable=False),
)


# Roll-up parts of one collection above which an estimate or the committer compacts at once
# (normally the committer folds them about once a second, a few hundred at most); readers
# sum parts one by one, so this bounds their cost when compaction falls behind.
DEFAULT_MAX_PARTS = 4096


class _Layout:
    """Byte layout of one spec's Stats arrays in a roll-up row."""

    def __init__(self, spec: Mechanism) -> None:
        self.spec = spec
        empty = spec.empty_stats()
        # A report count equal to n (spec.REPORT_COUNT) is not stored: the row's n column
        # holds it, and rows written before that field existed keep their layout.
        self.count = REPORT_COUNT if REPORT_COUNT in empty.arrays else None
        self.fields = [
            (name, arr.dtype.newbyteorder("<"), arr.shape)
            for name, arr in empty.arrays.items()
            if name != self.count
        ]
        self.sizes = [
            int(np.prod(shape, dtype=np.int64)) * dt_.itemsize for _, dt_, shape in self.fields
        ]
        self.row_bytes = sum(self.sizes)

    def pack(self, stats: Stats) -> bytes:
        return b"".join(
            np.ascontiguousarray(stats.arrays[name], dtype=dtype).tobytes()
            for name, dtype, _ in self.fields
        )

    def sum(self, payloads: Sequence[bytes], n: int) -> Stats:
        """Return the Stats of several packed rows added up (what ``Stats.merge`` computes)."""
        if any(len(p) != self.row_bytes for p in payloads):
            raise ValueError(
                f"roll-up rows must hold {self.row_bytes} bytes for {self.spec!r}, got "
                f"{sorted({len(p) for p in payloads})}"
            )
        rows = np.frombuffer(b"".join(payloads), dtype=np.uint8).reshape(len(payloads), -1)
        arrays, offset = {}, 0
        for (name, dtype, shape), size in zip(self.fields, self.sizes):
            block = np.ascontiguousarray(rows[:, offset : offset + size]).view(dtype)
            arrays[name] = block.reshape(len(payloads), *shape).sum(axis=0, dtype=dtype)
            offset += size
        native = {k: v.astype(v.dtype.newbyteorder("="), copy=False) for k, v in arrays.items()}
        if self.count is not None:
            native[self.count] = np.array(n, dtype=np.int64)
        return Stats(self.spec, n, **native)


def make_engine(database_url: str) -> Engine:
    """Return an engine for ``database_url``; SQLite gets WAL journaling and a busy timeout."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, pool_size=8, max_overflow=8)
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
    memory = url.database in (None, "", ":memory:")
    if memory:
        kwargs["poolclass"] = StaticPool  # one shared connection, or each would see its own DB
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        if not memory:
            # WAL: readers do not block the writer and vice versa. synchronous=FULL syncs
            # the WAL at every commit, so an acknowledged batch survives a power cut.
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            # Checkpoint the WAL into the database every ~40 MB instead of every ~4 MB:
            # fewer extra fsyncs on the ingest path (a crash replays the WAL either way).
            cursor.execute("PRAGMA wal_autocheckpoint=10000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


def _utc(value: dt.datetime) -> dt.datetime:
    # SQLite returns naive datetimes; everything stored is UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def check_legacy_schema(engine: Engine) -> None:
    """Refuse a database holding the per-batch schema of an earlier collector."""
    names = inspect(engine).get_table_names()
    if "ldpkit_batches" in names:
        columns = {c["name"] for c in inspect(engine).get_columns("ldpkit_batches")}
        if "stats" in columns:
            raise ValueError(
                f"database {engine.url.render_as_string()} must use the roll-up schema, "
                "got the per-batch schema of an earlier ldpkit collector (table "
                "ldpkit_batches has a stats column); export its Stats with the earlier "
                "version (GET .../stats) and start on a new database"
            )
