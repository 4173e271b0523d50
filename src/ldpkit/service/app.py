"""The FastAPI collector: ingest report batches, roll their Stats up, serve estimates.

Endpoints (OpenAPI docs at ``/docs``; scopes apply when ``[auth]`` is configured):

- ``POST /v1/reports/{collection}`` (``ingest``): one batch of reports, as the npz or
  Parquet bytes of :func:`ldpkit.io.reports_to_bytes`, or as the JSON of
  :func:`ldpkit.io.reports_to_dict` (``dtype``/``shape``/``mechanism`` optional there).
  Optional ``Idempotency-Key`` header (scoped to the token). 201 once the batch is
  committed (group commit), 200 for a retried batch already stored.
- ``GET /v1/collections``, ``GET /v1/collections/{c}`` (spec, fingerprint, encoder, report
  fields, n), ``GET /v1/collections/{c}/estimate?alpha=&since=&until=&top_k=``
  (open-domain collections: ``&candidates=a,b,c``, or ``POST`` the same path with
  ``{"candidates": [...]}``; heavy-hitter collections: ``&control=none|fwer|fdr``),
  ``GET /v1/collections/{c}/buckets``, ``GET /v1/collections/{c}/stats`` (``read``).
- ``GET /v1/admin/collections/{c}/batches``, ``DELETE`` the same (``admin``).
- ``GET /healthz`` (open), ``GET /metrics`` (``metrics``; Prometheus text).
- ``GET /`` (open): the dashboard, plain ES modules and hand-drawn SVG from
  ``ldpkit/service/static/`` (no CDN); it reads the ``read`` routes above with the bearer
  token the user enters. ``GET /docs`` (open): a plain listing of ``/openapi.json``
  (Swagger UI is off: it loads its files from a CDN).

Tokens may be limited to some collections and have ingest quotas (429 + Retry-After):
:mod:`ldpkit.service.auth`, :mod:`ldpkit.service.quotas`.
"""

import gc
import logging
from contextlib import asynccontextmanager
from pathlib import Path as Path_
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from .. import __version__
from ._stalls import LoopStalls
from .auth import Token, TokenAuth
from .collector import _Collector, _database_error
from .config import (
    DEFAULT_DATABASE_URL,
    Limits,
    _check_app_options,
    _check_origins,
    _normalize,
)
from .fast_ingest import CollectorApp
from .models import (
    _BODY_DOC,
    BatchInfo,
    BatchList,
    CollectionInfo,
    CollectionList,
    DeleteResult,
    Health,
    IngestResult,
)
from .params import CollectionName, TimeParam
from .quotas import Quota
from .read_routes import add_read_routes
from .schema import DEFAULT_DELETED_KEYS_SECONDS, DEFAULT_MAX_PARTS
from .store import CollectorStore
from .windows import add_window_routes

__all__ = ["CollectorApp", "create_app"]

log = logging.getLogger("ldpkit.service")

STATIC = Path_(__file__).with_name("static")
# The dashboard's pages load only their own files and call only this origin.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def create_app(
    collections: Any,
    database_url: str = DEFAULT_DATABASE_URL,
    *,
    store_reports: bool = False,
    limits: Limits | None = None,
    tokens: list[Token] | None = None,
    cors_origins: list[str] | None = None,
    bucket_seconds: int = 3600,
    commit_window: float = 0.003,
    metrics_dir: str | None = None,
    quotas: Quota | None = None,
    max_body_bytes: int | None = None,
    max_decoded_bytes: int | None = None,
    max_rollup_parts: int = DEFAULT_MAX_PARTS,
    freeze_gc: bool = False,
    deleted_keys_seconds: float = DEFAULT_DELETED_KEYS_SECONDS,
) -> FastAPI:
    """Build the collector app.

    Parameters
    ----------
    collections : Mechanism, Collection, or mapping of name -> Mechanism or Collection
        What to collect. A bare spec is served as collection ``"default"``. Every spec
        must give a frequency, distribution or mean estimate (ValueError otherwise).
    database_url : str
        SQLAlchemy URL of the store: SQLite file by default (created if missing), or
        ``postgresql+psycopg://user:pass@host/db`` for several worker processes. Restarting
        on the same database keeps every stored batch; a collection's spec and bucket
        width cannot change while it holds data (ValueError here).
    store_reports : bool
        Also keep each batch's raw payload. Off by default: estimates need only the Stats
        (sufficient statistics), so raw reports add storage and a per-user record to
        protect (randomized, but linkable to request metadata) without adding accuracy.
    limits : Limits or None
        Body, JSON, decoded-size, per-batch and nesting limits (:class:`Limits` defaults).
    tokens : list of Token or None
        Bearer tokens (:func:`ldpkit.service.auth.parse_tokens`); None serves everyone
        (``main`` then refuses any non-loopback address).
    cors_origins : list of str or None
        Origins browsers may call from, each written out (``"https://dash.example.org"``);
        None adds no CORS headers. ``"*"`` is refused (ValueError): it would put
        ``Access-Control-Allow-Origin: *`` on authenticated reads, so any web page holding
        a token could read every estimate from its visitors' browsers.
    bucket_seconds : int
        Width of the roll-up time buckets (estimates' ``since``/``until`` resolution).
    commit_window : float
        Longest the group committer waits before taking a group (seconds, 0 to 1), so
        clients answered by the previous commit join the next group: 3 ms by default. It
        stops waiting as soon as as many batches are queued as recent groups held (so the
        cap only matters when fewer clients come back than before).
    metrics_dir : str or None
        Directory shared by the worker processes of one server for the ``/metrics``
        counters (``ldpkit serve --workers N`` makes one); None keeps them in memory.
    quotas : Quota or None
        Ingest quota of every token that sets none of its own (:class:`Quota`'s defaults
        when None and ``tokens`` are given); without ``tokens``, None means no quota and a
        Quota one budget shared by every client (:mod:`ldpkit.service.quotas`).
    max_body_bytes, max_decoded_bytes : int or None
        Shortcuts overriding the same fields of ``limits``.
    max_rollup_parts : int
        Unfolded roll-up parts of one collection above which an estimate (or the group
        committer, for the parts its process wrote) compacts at once, and ``/healthz``
        says ``degraded`` (4096 by default; normally the committer folds them about once
        a second).
    freeze_gc : bool
        At start-up, after a full collection, move every object alive into the garbage
        collector's permanent generation (:func:`gc.freeze`), so that its full collections
        during ingest scan only what was made since. ``main`` (``ldpkit serve``) sets it: a
        full collection over the ~180,000 objects of the loaded libraries stopped the event
        loop 130-220 ms every 2-4 s at 64 connections (every request in flight waited), and
        took 1-6 ms once they were frozen. Process-wide: leave it off when the app shares its
        process with other work (tests, an embedding server).
    deleted_keys_seconds : float
        The retry window: how long the idempotency keys of batches an admin deleted stay
        refused (409) before they are forgotten (30 days by default); a retry arriving
        later is stored as a new batch.

    Returns
    -------
    FastAPI
        ``app.state.collector`` holds the collections, the store and the committer.
    """
    limits, commit_window, deleted_keys_seconds = _check_app_options(
        limits,
        max_body_bytes,
        max_decoded_bytes,
        bucket_seconds,
        commit_window,
        max_rollup_parts,
        freeze_gc,
        deleted_keys_seconds,
    )
    specs = _normalize(collections)
    store = CollectorStore(database_url)
    store.compaction.max_parts = max_rollup_parts
    store.deletes.deleted_keys_seconds = deleted_keys_seconds
    try:
        collector = _Collector(
            specs,
            store,
            store_reports=store_reports,
            limits=limits,
            auth=None if tokens is None else TokenAuth(tokens),
            bucket_seconds=bucket_seconds,
            commit_window=commit_window,
            metrics_dir=metrics_dir,
            quotas=quotas,
        )
        store.compaction.on_compaction = collector.metrics.compaction
        for name, c in specs.items():
            store.register(name, c.spec, bucket_seconds)
    except Exception:
        store.close()
        raise

    app = CollectorApp(
        title="ldpkit collector",
        version=__version__,
        description=(
            "Collects locally differentially private reports, keeps only their mergeable "
            "statistics rolled up per time bucket, and serves estimates with standard errors."
        ),
        lifespan=_lifespan(collector, store, freeze_gc),
        # Swagger UI and ReDoc load their scripts from a CDN (blank offline): GET /docs is
        # our own listing of /openapi.json instead.
        docs_url=None,
        redoc_url=None,
    )
    app.state.collector = collector
    # The routes, in the order the OpenAPI document lists them.
    _page_routes(app, cors_origins)
    _ops_routes(app, collector, store)
    _collection_routes(app, collector)
    _ingest_routes(app, collector, limits)
    add_read_routes(app, collector, store)
    _admin_routes(app, collector, store)
    add_window_routes(app, collector)  # GET .../windows: per-window estimates (windows.py)
    return app


def _lifespan(collector: _Collector, store: CollectorStore, freeze_gc: bool) -> Any:
    """Return the app's lifespan: compact and freeze at start-up, close the committer at exit."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> Any:
        stalls = LoopStalls.from_env()  # latency debugging only (LDPKIT_DEBUG_LOOP_STALLS)
        # Fold parts an earlier process left (killed before its last compaction); a failure
        # (e.g. the database is down) is logged and counted, and retried later.
        await run_in_threadpool(store.try_compact)
        if freeze_gc:  # see create_app; collect first: frozen cyclic garbage would stay
            gc.collect()
            gc.freeze()
        if stalls is not None:
            stalls.start()
        yield
        if stalls is not None:
            stalls.stop()
        await collector.committer.close()
        store.close()
        if freeze_gc:
            gc.unfreeze()

    return lifespan


def _page_routes(app: FastAPI, cors_origins: list[str] | None) -> None:
    """Add the dashboard's static files and pages, and the CORS middleware if configured."""
    # Open like /healthz: the pages hold no data; what they show comes from the read routes.
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    # HEAD too: uptime probes and `curl -I` ask for the page without its body.
    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    def dashboard() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    @app.api_route("/docs", methods=["GET", "HEAD"], include_in_schema=False)
    def api_docs() -> FileResponse:
        return FileResponse(STATIC / "docs.html", headers=PAGE_HEADERS)

    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        _check_origins(cors_origins)

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key"],
            max_age=600,
        )


def _ops_routes(app: FastAPI, collector: _Collector, store: CollectorStore) -> None:
    """Add the error handlers, ``/healthz`` and ``/metrics``."""

    @app.exception_handler(DBAPIError)
    @app.exception_handler(PoolTimeout)
    async def database_down(_request: Request, exc: Exception) -> JSONResponse:
        status, detail, headers = _database_error(collector, exc)
        return JSONResponse(detail, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        collector.metrics.reject("bad_parameters", 422)
        return JSONResponse({"detail": jsonable_errors(exc)}, status_code=422)

    @app.get("/healthz", response_model=Health, tags=["ops"])
    def healthz(response: Response) -> Health:
        """Report the collector's health: 200 ``ok``.

        200 ``degraded`` when roll-up compaction keeps failing or falls behind (ingest and
        estimates still work, estimates get slower); 503 when the database does not answer.
        """
        try:
            store.ping()
            compaction = collector.compaction_health()
        except Exception as exc:  # any database failure means unhealthy
            response.status_code = 503
            return Health(
                status="unavailable", database=f"error: {type(exc).__name__}", version=__version__
            )
        status = "ok" if compaction == "ok" else "degraded"
        return Health(status=status, database="ok", version=__version__, compaction=compaction)

    @app.get("/metrics", response_class=PlainTextResponse, tags=["ops"])
    def metrics(request: Request) -> PlainTextResponse:
        """Prometheus text format: stored totals, accepted batches, rejects, commit latency."""
        collector.authorize(request, "metrics")
        stored = {name: store.summary(name) for name in collector.collections}
        return PlainTextResponse(
            collector.metrics.render(stored), media_type="text/plain; version=0.0.4"
        )


def _collection_routes(app: FastAPI, collector: _Collector) -> None:
    """Add the listing of collections and the description of one."""

    @app.get("/v1/collections", response_model=CollectionList, tags=["collections"])
    def list_collections(request: Request) -> CollectionList:
        who = collector.authorize(request, "read")
        return CollectionList(collections=[collector.info(name) for name in collector.visible(who)])

    @app.get("/v1/collections/{collection}", response_model=CollectionInfo, tags=["collections"])
    def get_collection(collection: CollectionName, request: Request) -> CollectionInfo:
        collector.authorize(request, "read")
        collector.get(collection)
        return collector.info(collection)


def _ingest_routes(app: FastAPI, collector: _Collector, limits: Limits) -> None:
    """Add ``POST /v1/reports/{collection}`` (the fast path serves most requests)."""

    @app.post(
        "/v1/reports/{collection}",
        response_model=IngestResult,
        status_code=201,
        tags=["reports"],
        openapi_extra=_BODY_DOC,
        responses={
            200: {"description": "retried batch (same Idempotency-Key and token): already stored"},
            401: {"description": "no valid bearer token (when [auth] is configured)"},
            403: {"description": "the token lacks the ingest scope or this collection"},
            409: {
                "description": "reports made under another spec (fingerprint mismatch), or an "
                "Idempotency-Key whose batch an admin deleted (not stored again)"
            },
            413: {"description": "body, JSON, decoded size or report count over the limits"},
            415: {"description": "body is neither npz, Parquet nor JSON"},
            422: {"description": "malformed reports, or Idempotency-Key reused for other data"},
            429: {
                "description": "over the token's quota (batches per second, reports per "
                "minute): nothing was stored, retry after Retry-After seconds"
            },
            503: {"description": "database unavailable; nothing was stored, retry"},
        },
    )
    async def post_reports(collection: CollectionName, request: Request) -> Response:
        # Served by _fast_ingest below for most requests; this route documents the endpoint
        # and serves requests the fast path hands on (browsers' CORS requests, root_path).
        headers = request.headers
        token = collector.authorize(request, "ingest")
        collector.get(collection, listing=False)
        key = headers.get("idempotency-key")
        collector.check_ingest_headers(key, headers.get("content-length"))
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limits.max_body_bytes:
                raise collector.body_too_large()
            chunks.append(chunk)
        status, payload = await collector.ingest(
            collection, b"".join(chunks), headers.get("content-type", ""), token, key
        )
        return Response(payload, status_code=status, media_type="application/json")


def _admin_routes(app: FastAPI, collector: _Collector, store: CollectorStore) -> None:
    """Add the admin listing and deletion of a collection's batches."""

    @app.get("/v1/admin/collections/{collection}/batches", response_model=BatchList, tags=["admin"])
    def list_batches(
        collection: CollectionName,
        request: Request,
        token: Annotated[
            str | None, Query(description="only batches sent with this token name")
        ] = None,
        since: TimeParam = None,
        until: TimeParam = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> BatchList:
        """List the stored batches (oldest first): id, token name, size, arrival time."""
        collector.authorize(request, "admin")
        collector.get(collection)
        s, u = collector.window(since, until)
        rows = store.list_batches(
            collection, token=token, since=s, until=u, limit=limit, offset=offset
        )
        return BatchList(
            collection=collection,
            batches=[
                BatchInfo(
                    batch_id=r.batch_id, token=r.token, n=r.n, received_at=r.received_at.isoformat()
                )
                for r in rows
            ],
        )

    @app.delete(
        "/v1/admin/collections/{collection}/batches", response_model=DeleteResult, tags=["admin"]
    )
    def delete_batches(
        collection: CollectionName,
        request: Request,
        token: Annotated[
            str | None, Query(description="only batches sent with this token name")
        ] = None,
        since: TimeParam = None,
        until: TimeParam = None,
    ) -> DeleteResult:
        """Delete the batches of a token and/or of whole buckets in ``[since, until)``.

        The roll-ups are per (bucket, token), so the estimate afterwards is exactly the one
        of the remaining batches.
        """
        collector.authorize(request, "admin")
        collector.get(collection)
        if token is None and since is None and until is None:
            raise HTTPException(
                422, "delete must name a token, a since/until range, or both, got none"
            )
        s, u = collector.admin_window(since, until)
        batches, reports = store.delete_batches(collection, token=token, since=s, until=u)
        return DeleteResult(collection=collection, deleted_batches=batches, deleted_reports=reports)


def jsonable_errors(exc: RequestValidationError) -> Any:
    from fastapi.encoders import jsonable_encoder

    return jsonable_encoder(exc.errors())
