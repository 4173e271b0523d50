"""A header read timeout for uvicorn.

Connections whose request head does not arrive in time are closed.

uvicorn (0.55) closes a connection idle *after* a response (``timeout_keep_alive``) but
waits forever for the head of a request: 200 clients that each send half a request line
held 200 connections (and their file descriptors and buffers) open indefinitely.
:class:`HeaderTimeoutProtocol` is uvicorn's own HTTP protocol (httptools when
installed, else h11) plus one timer per connection: armed when the connection opens and
whenever the bytes of a new request start arriving, cancelled once the request's head is
complete (uvicorn then starts a request cycle), firing after
``LDPKIT_HEADER_TIMEOUT`` seconds (:data:`DEFAULT_HEADER_TIMEOUT` when unset) by closing
the connection. ``ldpkit serve --header-timeout`` sets it; the environment carries it to
every worker process. Slow bodies are not timed here (the body size limits bound them).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from .serve import DEFAULT_HEADER_TIMEOUT, HEADER_TIMEOUT_ENV

__all__ = ["HeaderTimeoutProtocol", "header_timeout"]

log = logging.getLogger("ldpkit.service")

_Base: Any = AutoHTTPProtocol


def header_timeout() -> float:
    """Seconds a request's head may take (from ``LDPKIT_HEADER_TIMEOUT``)."""
    return float(os.environ.get(HEADER_TIMEOUT_ENV, DEFAULT_HEADER_TIMEOUT))


class HeaderTimeoutProtocol(_Base):  # type: ignore[misc]
    """uvicorn's HTTP protocol with a header read timeout (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timeout = header_timeout()
        self._head_timer: Any = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        # Between requests (none yet, or the last one answered): these bytes start a head.
        between = before is None or before.response_complete
        super().data_received(data)
        if self.cycle is not before:  # a head completed: uvicorn started its request
            self._disarm()
        elif between:
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is None and self._head_timeout > 0:
            self._head_timer = self.loop.call_later(self._head_timeout, self._expired)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _expired(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            log.debug("closing a connection whose request head took over %s s", self._head_timeout)
            self.transport.close()
