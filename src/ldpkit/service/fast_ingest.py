"""The fast ingest path.

``POST /v1/reports/{c}`` served from the raw ASGI messages (:class:`CollectorApp`), with the
same answers as the FastAPI route it stands in for.
"""

import json
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, HTTPException
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from .collector import _Collector, _database_error

__all__ = ["CollectorApp"]

_INGEST_PREFIX = "/v1/reports/"


_JSON_CONTENT_TYPE = (b"content-type", b"application/json")


_FAST_HEADERS = {
    b"authorization": "authorization",
    b"idempotency-key": "key",
    b"content-length": "length",
    b"content-type": "type",
    b"origin": "origin",
}


class CollectorApp(FastAPI):
    """FastAPI with a lean path for ``POST /v1/reports/{c}``, the one route under load.

    Devices send one small batch per request, so the per-request cost of the framework
    (middleware stack, dependency solving, parameter validation, response classes) is
    most of the CPU the collector spends on one report; the fast path reads the raw ASGI
    messages and answers with the same status codes, bodies and metrics as the FastAPI
    route, which stays registered (OpenAPI docs) and serves what the fast path hands on:
    requests with an ``Origin`` header (browsers: CORS middleware), a ``root_path``, or
    a path that is not a collection name.
    """

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve one ASGI request: report batches on the fast path, others to the app."""
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"].startswith(_INGEST_PREFIX)
            and not scope.get("root_path")
        ):
            name = scope["path"][len(_INGEST_PREFIX) :]
            if name and "/" not in name and await _fast_ingest(self, name, scope, receive, send):
                return
        await super().__call__(scope, receive, send)


async def _fast_ingest(app: FastAPI, name: str, scope: Any, receive: Any, send: Any) -> bool:
    """Serve one ingest request from raw ASGI messages; False hands it to FastAPI."""
    found: dict[str, str] = {}
    authorizations = 0
    for raw_name, raw_value in scope["headers"]:
        field = _FAST_HEADERS.get(raw_name)
        if field is not None:
            if field == "authorization":
                authorizations += 1
                if authorizations > 1:
                    continue  # the first, as Starlette reads it (two: refused below)
            found[field] = raw_value.decode("latin-1")
    if "origin" in found:
        return False
    collector: _Collector = app.state.collector
    headers: Mapping[str, str] = {}
    try:
        token = collector.authorize_header(
            found.get("authorization"), "ingest", name, count=authorizations
        )
        collector.get(name, listing=False)
        key = found.get("key")
        collector.check_ingest_headers(key, found.get("length"))
        chunks, size, limit = [], 0, collector.limits.max_body_bytes
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return True
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise collector.body_too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        status, payload = await collector.ingest(name, body, found.get("type", ""), token, key)
    except HTTPException as exc:
        status, headers = exc.status_code, exc.headers or {}
        payload = json.dumps({"detail": exc.detail}).encode()
    except (DBAPIError, PoolTimeout) as exc:
        status, detail, headers = _database_error(collector, exc)
        payload = json.dumps(detail).encode()
    response_headers = [_JSON_CONTENT_TYPE, (b"content-length", b"%d" % len(payload))]
    if headers:
        response_headers += [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
        ]
    await send({"type": "http.response.start", "status": status, "headers": response_headers})
    await send({"type": "http.response.body", "body": payload})
    return True
