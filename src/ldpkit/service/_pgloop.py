"""One event loop's PostgreSQL connection for keyless group commits, driven through libpq.

:meth:`PostgresWriter.commit_in_loop <ldpkit.service.postgres_writer.PostgresWriter.commit_in_loop>` sends
a group's one statement and awaits its commit on the event loop. Through psycopg's
``AsyncConnection.execute`` that cost ~130 us of CPU per statement (a cursor, the query's
conversion, every parameter's adaptation, the prepare bookkeeping, and each wait adding
and removing the socket's reader): measured 128 us against 47 us per call in
a micro-benchmark of a 3-parameter statement with an 8 KiB bytea. Here the connection
is psycopg's (connect, authentication, TLS, close) but each statement goes through its
libpq handle (``psycopg.pq.PGconn``):

* the statement is prepared once per (connection, SQL text, parameter types) under a
  name of ours, its ``%s`` placeholders turned into ``$n`` once per text;
* the parameters are encoded once by us, with the types psycopg would declare for them
  (so the server infers the same types as before): ``str`` as UTF-8 text of unknown
  type, ``int`` as decimal text declared int2/int4/int8/numeric by its value, ``bytes``
  in binary as bytea, ``None`` as NULL;
* one reader callback per connection, registered once, consumes the server's answer and
  completes the waiting statement's future after the last result (ReadyForQuery).

Errors: an error result becomes psycopg's exception for it (``psycopg.errors``), the
connection stays usable (autocommit: nothing left open); a broken connection (EOF, a
FATAL error) is marked ``broken`` and its reader removed, and the caller drops it;
a statement cancelled while in flight leaves the connection in an unknown state, so the
caller drops it (:meth:`LoopConnection.drop`).
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import pq

__all__ = ["LoopConnection", "encode_params", "numbered_sql"]

# psycopg's dumpers' OIDs (psycopg.adapt with PyFormat.AUTO): str as "unknown" (0), so the
# server infers its type from the statement; int by its value's range; bytes as bytea.
_UNKNOWN, _INT2, _INT4, _INT8, _NUMERIC, _BYTEA = 0, 21, 23, 20, 1700, 17
_TEXT, _BINARY = 0, 1
# Plain ints: compared on every result (an IntEnum's comparison costs more).
_OK = int(pq.ConnStatus.OK)
_TUPLES_OK, _COMMAND_OK = int(pq.ExecStatus.TUPLES_OK), int(pq.ExecStatus.COMMAND_OK)
_SEVERITY = pq.DiagnosticField.SEVERITY_NONLOCALIZED
# Prepared statements kept per connection; past it, statements go unnamed (parsed each time).
MAX_PREPARED = 128

Encoded = tuple[list[bytes | None], list[int], tuple[int, ...]]


def _int_oid(v: int) -> int:
    if -0x8000 <= v < 0x8000:
        return _INT2
    if -0x80000000 <= v < 0x80000000:
        return _INT4
    if -0x8000000000000000 <= v < 0x8000000000000000:
        return _INT8
    return _NUMERIC


def encode_params(params: Sequence[Any]) -> Encoded | None:
    """``params`` (str, int, bytes or None each) as libpq values, formats and type OIDs.

    None when a value has another type, or is a str with a NUL character (PostgreSQL text
    cannot hold it; psycopg refuses it with its own error): the caller uses psycopg.
    """
    values: list[bytes | None] = []
    formats: list[int] = []
    oids: list[int] = []
    for p in params:
        t = type(p)
        if t is str:
            if "\x00" in p:
                return None
            values.append(p.encode())
            formats.append(_TEXT)
            oids.append(_UNKNOWN)
        elif t is bytes:
            values.append(p)
            formats.append(_BINARY)
            oids.append(_BYTEA)
        elif t is int:
            values.append(b"%d" % p)
            formats.append(_TEXT)
            oids.append(_int_oid(p))
        elif p is None:
            values.append(None)
            formats.append(_TEXT)
            oids.append(_UNKNOWN)
        else:  # bool, float, ...: psycopg's adapters
            return None
    return values, formats, tuple(oids)


_PLACEHOLDER = re.compile(r"(%%|%s)")


@functools.lru_cache(maxsize=256)
def numbered_sql(sql: str) -> bytes | None:
    """Return ``sql`` with its ``%s`` placeholders numbered ``$1, $2, ...`` (``%%``: ``%``).

    None when it holds another ``%`` sequence (``%(name)s``, ``%b``, ...): psycopg's job.
    """
    out = []
    count = 0
    for i, piece in enumerate(_PLACEHOLDER.split(sql)):
        if i % 2 == 0:  # between placeholders
            if "%" in piece:
                return None
            out.append(piece)
        elif piece == "%%":
            out.append("%")
        else:
            count += 1
            out.append(f"${count}")
    return "".join(out).encode()


class LoopConnection:
    """A psycopg ``AsyncConnection`` (autocommit) whose statements go through libpq.

    Use it from the event loop that made it (:meth:`connect`), one statement at a time.
    ``broken`` once the server or the socket failed; ``closed`` once closed.
    """

    __slots__ = ("broken", "conn", "error", "fd", "loop", "pg", "statements", "waiter")

    def __init__(self, conn: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.conn = conn
        self.pg = conn.pgconn
        self.pg.nonblocking = 1
        self.fd: int = self.pg.socket
        self.loop = loop
        self.statements: dict[tuple[str, tuple[int, ...]], bytes] = {}
        self.waiter: asyncio.Future[None] | None = None
        self.error: Exception | None = None  # the statement in flight's first error
        self.broken = False
        loop.add_reader(self.fd, self._readable)

    @classmethod
    async def connect(cls, *args: Any, **kwargs: Any) -> LoopConnection:
        """Open a connection (psycopg's ``AsyncConnection.connect`` arguments)."""
        conn = await psycopg.AsyncConnection.connect(*args, autocommit=True, **kwargs)
        try:
            if conn.info.encoding != "utf-8":  # encode_params sends UTF-8
                await conn.execute("SET client_encoding TO 'UTF8'")
            return cls(conn, asyncio.get_running_loop())
        except BaseException:
            await conn.close()
            raise

    @property
    def closed(self) -> bool:
        return bool(self.conn.closed)

    @property
    def info(self) -> Any:
        return self.conn.info

    def _readable(self) -> None:
        """Read the socket's data, collect results, complete the waiter at the end."""
        pg = self.pg
        try:
            pg.consume_input()
            while self.waiter is not None and not pg.is_busy():
                result = pg.get_result()
                if result is None:  # ReadyForQuery: the statement is over
                    waiter, self.waiter = self.waiter, None
                    error, self.error = self.error, None
                    if pg.status != _OK:
                        self._broke()
                    if not waiter.done():
                        if error is None:
                            waiter.set_result(None)
                        else:
                            waiter.set_exception(error)
                    return
                status = result.status
                if status != _TUPLES_OK and status != _COMMAND_OK and self.error is None:
                    error = psycopg.errors.error_from_result(result)
                    if result.error_field(_SEVERITY) in (
                        b"FATAL",
                        b"PANIC",
                    ):
                        self.broken = True  # the server ends the session
                    self.error = error
            if pg.status != _OK:
                raise psycopg.OperationalError("the connection to the server was lost")
        except psycopg.Error as exc:  # EOF, reset: nothing more will come
            self._broke()
            pending, self.waiter = self.waiter, None
            if pending is not None and not pending.done():
                pending.set_exception(self.error or exc)
            self.error = None

    def _broke(self) -> None:
        self.broken = True
        self.loop.remove_reader(self.fd)  # an fd at EOF stays readable: stop watching it

    async def _send_done(self, waiter: asyncio.Future[None]) -> None:
        """Flush what libpq still holds (waiting for the socket), then await ``waiter``."""
        pg = self.pg
        self.waiter = waiter
        try:
            while pg.flush():  # 1: the socket's buffer is full
                writable = self.loop.create_future()
                self.loop.add_writer(self.fd, _release, writable)
                try:
                    await writable
                finally:
                    self.loop.remove_writer(self.fd)
            await waiter
        finally:
            self.waiter = None

    async def execute(self, sql: str, encoded: Encoded) -> None:
        """Run ``sql`` with ``encoded`` and return once the server has answered.

        ``%s`` placeholders (:func:`numbered_sql` must accept it); ``encoded`` from
        :func:`encode_params`; autocommit: committed. Raises psycopg's error for an error
        result.
        """
        if self.broken or self.pg.status != _OK:
            raise psycopg.OperationalError("the connection is broken")
        values, formats, oids = encoded
        pg = self.pg
        key = (sql, oids)
        name = self.statements.get(key)
        if name is None:
            text_ = numbered_sql(sql)
            if text_ is None:
                raise ValueError("sql: only %s placeholders are supported here")
            if len(self.statements) >= MAX_PREPARED:
                pg.send_query_params(text_, values, oids, formats)
                await self._send_done(self.loop.create_future())
                return
            name = b"ldpk%d" % len(self.statements)
            pg.send_prepare(name, text_, oids)
            await self._send_done(self.loop.create_future())
            self.statements[key] = name
        pg.send_query_prepared(name, values, formats)
        await self._send_done(self.loop.create_future())

    def drop(self) -> None:
        """Close the connection (its state may be unknown: in flight, broken)."""
        self._broke()  # before the socket closes (its number may be reused at once)
        self.pg.finish()  # what psycopg's close() does; idempotent


def _release(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
