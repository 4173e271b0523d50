"""The FastAPI collector: ingest report batches, keep their Stats, serve estimates.

Endpoints (OpenAPI docs at ``/docs``):

- ``POST /v1/reports/{collection}``: one batch of reports, as the npz or Parquet bytes of
  :func:`ldpkit.io.reports_to_bytes`, or as the JSON of :func:`ldpkit.io.reports_to_dict`
  (``dtype``/``shape``/``mechanism`` optional there, for small clients). Optional
  ``Idempotency-Key`` header. 201 on success, 200 for a retried batch already stored.
- ``GET /v1/collections``, ``GET /v1/collections/{collection}`` (spec, fingerprint, report
  fields, n), ``GET /v1/collections/{collection}/estimate?alpha=0.05``,
  ``GET /v1/collections/{collection}/stats`` (merged Stats JSON), ``GET /healthz``.
"""

import dataclasses
import json
import re
from collections.abc import Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any

import numpy as np
from fastapi import FastAPI, Header, HTTPException, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from .. import __version__
from ..encoder import Encoder
from ..estimate import FrequencyEstimate
from ..io import _sniff, decoded_size, reports_from_bytes, reports_from_dict
from ..spec import Mechanism, Reports, spec_from_dict
from .store import CollectorStore, IdempotencyConflict

__all__ = ["Collection", "create_app", "DEFAULT_DATABASE_URL"]

DEFAULT_DATABASE_URL = "sqlite:///ldpkit-collector.db"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")  # visible ASCII, as HTTP header values allow


@dataclasses.dataclass(frozen=True)
class Collection:
    """One collection: the spec its reports must use, and optional item labels.

    Parameters
    ----------
    spec : Mechanism
        Every batch must be made under exactly this configuration (same fingerprint).
    encoder : Encoder or None
        Gives the estimate endpoint a label per item; its ``domain_size`` must match.
    description : str
        Free text shown by ``GET /v1/collections``.
    """

    spec: Mechanism
    encoder: Encoder | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.spec, Mechanism):
            raise TypeError(
                f"spec must be an ldpkit mechanism spec, got {type(self.spec).__name__}"
            )
        if self.encoder is not None:
            if not isinstance(self.encoder, Encoder):
                raise TypeError(
                    f"encoder must be an ldpkit.Encoder, got {type(self.encoder).__name__}"
                )
            size = getattr(self.spec, "domain_size", None)
            if size != self.encoder.domain_size:
                raise ValueError(
                    f"encoder must have the spec's domain_size {size}, got {self.encoder.domain_size}"
                )

    @property
    def labels(self) -> list[Any] | None:
        if self.encoder is None:
            return None
        return [
            x if isinstance(x, (str, int, float, bool)) else str(x)
            for x in self.encoder.labels.tolist()
        ]


# -- response models (they document the API in /docs) ---------------------------------------
class FieldInfo(BaseModel):
    dtype: str = Field(description="numpy dtype string of the field, e.g. '|u1', '<u8'")
    shape: list[int] = Field(description="per-user shape (empty for one number per user)")


class CollectionInfo(BaseModel):
    name: str
    description: str
    mechanism: dict[str, Any] = Field(
        description="the spec, rebuild it with ldpkit.spec.spec_from_dict"
    )
    fingerprint: str
    n: int = Field(description="reports stored so far")
    batches: int
    labels: list[Any] | None = None
    report_fields: dict[str, FieldInfo] | None = Field(
        None, description="the arrays a batch must hold (JSON clients use these dtypes)"
    )


class CollectionList(BaseModel):
    collections: list[CollectionInfo]


class IngestResult(BaseModel):
    batch_id: str
    collection: str
    n: int = Field(description="reports in this batch")
    received_at: str
    duplicate: bool = Field(
        description="true when the Idempotency-Key was seen before; nothing was added"
    )


class EstimateResult(BaseModel):
    collection: str
    mechanism: dict[str, Any]
    fingerprint: str
    n: int
    batches: int
    alpha: float
    postprocessing: list[str]
    labels: list[Any] | None
    frequencies: list[float] | None = Field(description="null while n = 0")
    std_errors: list[float] | None
    ci_low: list[float] | None = Field(description="normal-approximation (1 - alpha) interval")
    ci_high: list[float] | None


class Health(BaseModel):
    status: str
    database: str
    version: str


_BODY_DOC = {
    "requestBody": {
        "required": True,
        "description": (
            "One batch of reports. Binary bodies are recognized by content (npz starts with "
            "'PK', Parquet with 'PAR1'); any other body is read as JSON."
        ),
        "content": {
            "application/x-npz": {"schema": {"type": "string", "format": "binary"}},
            "application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["fingerprint", "arrays"],
                    "properties": {
                        "fingerprint": {"type": "string"},
                        "mechanism": {"type": "object"},
                        "arrays": {
                            "type": "object",
                            "additionalProperties": {
                                "oneOf": [
                                    {"type": "array"},
                                    {
                                        "type": "object",
                                        "properties": {
                                            "dtype": {"type": "string"},
                                            "shape": {
                                                "type": "array",
                                                "items": {"type": "integer"},
                                            },
                                            "data": {"type": "array"},
                                        },
                                        "required": ["data"],
                                    },
                                ]
                            },
                        },
                    },
                },
                "example": {"fingerprint": "0123456789abcdef", "arrays": {"values": [3, 0, 1]}},
            },
        },
    }
}


def _template(spec: Mechanism) -> dict[str, tuple[np.dtype, tuple[int, ...]]] | None:
    """Field names, dtypes and per-user shapes of the spec's reports (one dummy user)."""
    try:
        sample = spec.randomize(np.zeros(1, dtype=np.int64), rng=0)
    except Exception:  # a spec whose inputs are not items: no template, no field check
        return None
    return {k: (v.dtype, v.shape[1:]) for k, v in sample.arrays.items()}


def _normalize(collections: Any) -> dict[str, Collection]:
    if isinstance(collections, (Mechanism, Collection)):
        collections = {"default": collections}
    if not isinstance(collections, Mapping) or not collections:
        raise TypeError(
            "collections must be a spec, a Collection, or a non-empty mapping name -> spec or "
            f"Collection, got {type(collections).__name__}"
        )
    out = {}
    for name, value in collections.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(
                f"collection names must be 1-128 letters, digits, '_', '.', '-' (not first), got {name!r}"
            )
        out[name] = value if isinstance(value, Collection) else Collection(value)
    return out


class _Collector:
    """The app's state: collections, their report templates and the store."""

    def __init__(
        self,
        collections: dict[str, Collection],
        store: CollectorStore,
        *,
        store_reports: bool,
        max_body_bytes: int,
        max_decoded_bytes: int,
    ) -> None:
        self.collections = collections
        self.templates = {name: _template(c.spec) for name, c in collections.items()}
        self.store = store
        self.store_reports = store_reports
        self.max_body_bytes = max_body_bytes
        self.max_decoded_bytes = max_decoded_bytes

    def get(self, name: str) -> Collection:
        try:
            return self.collections[name]
        except KeyError:
            raise HTTPException(
                404, f"collection must be one of {sorted(self.collections)}, got {name!r}"
            ) from None

    def info(self, name: str) -> CollectionInfo:
        c = self.collections[name]
        n, batches = self.store.summary(name)
        template = self.templates[name]
        return CollectionInfo(
            name=name,
            description=c.description,
            mechanism=c.spec.to_dict(),
            fingerprint=c.spec.fingerprint,
            n=n,
            batches=batches,
            labels=c.labels,
            report_fields=None
            if template is None
            else {
                k: FieldInfo(dtype=dtype.str, shape=list(shape))
                for k, (dtype, shape) in template.items()
            },
        )

    # -- ingestion (runs in a worker thread: decoding and aggregation are CPU work) --------
    def decode(self, name: str, body: bytes, content_type: str) -> tuple[Reports, str]:
        collection = self.collections[name]
        spec = collection.spec
        kind = _sniff(body[:4])
        if kind is not None:
            try:
                size = decoded_size(body)
            except ValueError as exc:
                raise HTTPException(
                    422, f"body must be a readable {kind} reports payload: {exc}"
                ) from exc
            if size is not None and size > self.max_decoded_bytes:
                raise HTTPException(
                    413,
                    f"batch must decode to at most {self.max_decoded_bytes} bytes, got {size}; send smaller batches",
                )
            try:
                reports = reports_from_bytes(body)
            except (ValueError, TypeError) as exc:
                raise HTTPException(422, f"body must be valid {kind} reports: {exc}") from exc
            self._check_spec(name, reports.spec)
            return reports, kind
        if "json" not in content_type and not body.lstrip().startswith(b"{"):
            raise HTTPException(
                415,
                "body must be npz or Parquet reports (ldpkit.io.reports_to_bytes) or a JSON object "
                f"(ldpkit.io.reports_to_dict), got Content-Type {content_type or 'none'!r} and "
                f"bytes starting with {body[:8]!r}",
            )
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise HTTPException(422, f"body must be valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise HTTPException(
                422,
                f"body must be a JSON object with 'fingerprint' and 'arrays', got {type(data).__name__}",
            )
        if "mechanism" in data:
            try:
                claimed = spec_from_dict(data["mechanism"])
            except (KeyError, TypeError, ValueError) as exc:
                raise HTTPException(
                    422, f"mechanism must be a spec dict (spec.to_dict()): {exc}"
                ) from exc
            self._check_spec(name, claimed)
        fingerprint = data.get("fingerprint")
        if fingerprint != spec.fingerprint:
            raise HTTPException(
                409 if isinstance(fingerprint, str) else 422,
                f"reports must be made under collection {name!r}'s {spec!r} (fingerprint "
                f"{spec.fingerprint}), got fingerprint {fingerprint!r}; fetch the spec from "
                f"GET /v1/collections/{name}",
            )
        template = self.templates[name] or {}
        try:
            reports = reports_from_dict(
                data, expected=spec, dtypes={k: v[0] for k, v in template.items()}
            )
        except (ValueError, TypeError) as exc:
            raise HTTPException(422, str(exc)) from exc
        return reports, "json"

    def _check_spec(self, name: str, got: Mechanism) -> None:
        spec = self.collections[name].spec
        if got != spec:
            raise HTTPException(
                409,
                f"reports must be made under collection {name!r}'s {spec!r} (fingerprint "
                f"{spec.fingerprint}), got reports made under {got!r} (fingerprint {got.fingerprint}); "
                f"fetch the spec from GET /v1/collections/{name}",
            )

    def ingest(self, name: str, body: bytes, content_type: str, key: str | None) -> IngestResult:
        spec = self.collections[name].spec
        reports, kind = self.decode(name, body, content_type)
        template = self.templates[name]
        if template is not None and set(reports.fields) != set(template):
            raise HTTPException(
                422,
                f"reports must have fields {sorted(template)} for {spec!r}, got {sorted(reports.fields)}",
            )
        if len(reports) == 0:
            raise HTTPException(422, "batch must hold at least one report, got 0")
        try:
            stats = spec.aggregate(reports)  # the spec's own checks: dtypes, shapes, ranges
        except (ValueError, TypeError, AttributeError) as exc:
            raise HTTPException(422, f"reports rejected by {spec!r}: {exc}") from exc
        raw = (kind, body) if self.store_reports else None
        try:
            record = self.store.add_batch(name, stats, idempotency_key=key, raw=raw)
        except IdempotencyConflict as exc:
            raise HTTPException(422, str(exc)) from exc
        return IngestResult(
            batch_id=record.batch_id,
            collection=name,
            n=record.n,
            received_at=record.received_at.isoformat(),
            duplicate=record.duplicate,
        )

    def estimate(self, name: str, alpha: float, postprocessing: str | None) -> EstimateResult:
        from ..consistency import METHODS

        collection = self.collections[name]
        spec = collection.spec
        stats, batches = self.store.merged(name, spec)
        base: dict[str, Any] = {
            "collection": name,
            "mechanism": spec.to_dict(),
            "fingerprint": spec.fingerprint,
            "n": stats.n,
            "batches": batches,
            "alpha": alpha,
            "labels": collection.labels,
        }
        if postprocessing is not None and postprocessing not in METHODS:
            raise HTTPException(
                422, f"postprocessing must be one of {sorted(METHODS)}, got {postprocessing!r}"
            )
        if stats.n == 0:
            return EstimateResult(
                **base,
                postprocessing=[],
                frequencies=None,
                std_errors=None,
                ci_low=None,
                ci_high=None,
            )
        est = spec.estimate(stats)
        if not isinstance(est, FrequencyEstimate):
            raise HTTPException(
                501,
                f"the estimate endpoint serves frequency oracles; use /v1/collections/{name}/stats for {spec!r}",
            )
        if postprocessing is not None:
            est = METHODS[postprocessing](est)
        low, high = est.confidence_interval(alpha)
        return EstimateResult(
            **base,
            postprocessing=list(est.postprocessing),
            frequencies=est.frequencies.tolist(),
            std_errors=est.std_error.tolist(),
            ci_low=low.tolist(),
            ci_high=high.tolist(),
        )


def create_app(
    collections: Any,
    database_url: str = DEFAULT_DATABASE_URL,
    *,
    store_reports: bool = False,
    max_body_bytes: int = 64 * 2**20,
    max_decoded_bytes: int = 1 * 2**30,
) -> FastAPI:
    """Build the collector app.

    Parameters
    ----------
    collections : Mechanism, Collection, or mapping of name -> Mechanism or Collection
        What to collect. A bare spec is served as collection ``"default"``.
    database_url : str
        SQLAlchemy URL of the store: SQLite file by default (created if missing), or e.g.
        ``postgresql+psycopg://user:pass@host/db``. Restarting on the same database keeps
        every stored batch; a collection's spec cannot change while it holds data
        (ValueError here).
    store_reports : bool
        Also keep each batch's raw payload. Off by default: estimates need only the Stats
        (sufficient statistics), so raw reports add storage and a per-user record to
        protect (randomized, but linkable to request metadata) without adding accuracy.
        Turn it on only to audit or re-process with a future aggregator.
    max_body_bytes : int
        Largest request body accepted (413 above).
    max_decoded_bytes : int
        Largest uncompressed size an npz/Parquet body may declare (413 above), so a small
        compressed body cannot expand into gigabytes.

    Returns
    -------
    FastAPI
        ``app.state.collector`` holds the collections and the store.
    """
    specs = _normalize(collections)
    store = CollectorStore(database_url)
    try:
        for name, c in specs.items():
            store.register(name, c.spec)
    except Exception:
        store.close()
        raise
    collector = _Collector(
        specs,
        store,
        store_reports=store_reports,
        max_body_bytes=max_body_bytes,
        max_decoded_bytes=max_decoded_bytes,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> Any:
        yield
        store.close()

    app = FastAPI(
        title="ldpkit collector",
        version=__version__,
        description=(
            "Collects locally differentially private reports, keeps only their mergeable "
            "statistics, and serves frequency estimates with standard errors."
        ),
        lifespan=lifespan,
    )
    app.state.collector = collector

    CollectionName = Annotated[str, Path(description="collection name")]

    @app.get("/healthz", response_model=Health, tags=["ops"])
    def healthz(response: Response) -> Health:
        try:
            store.ping()
        except Exception as exc:  # any database failure means unhealthy
            response.status_code = 503
            return Health(
                status="unavailable", database=f"error: {type(exc).__name__}", version=__version__
            )
        return Health(status="ok", database="ok", version=__version__)

    @app.get("/v1/collections", response_model=CollectionList, tags=["collections"])
    def list_collections() -> CollectionList:
        return CollectionList(collections=[collector.info(name) for name in collector.collections])

    @app.get("/v1/collections/{collection}", response_model=CollectionInfo, tags=["collections"])
    def get_collection(collection: CollectionName) -> CollectionInfo:
        collector.get(collection)
        return collector.info(collection)

    @app.post(
        "/v1/reports/{collection}",
        response_model=IngestResult,
        status_code=201,
        tags=["reports"],
        openapi_extra=_BODY_DOC,
        responses={
            200: {
                "description": "retried batch (same Idempotency-Key): already stored, not counted again"
            },
            409: {"description": "reports made under another spec (fingerprint mismatch)"},
            413: {"description": "body too large"},
            415: {"description": "body is neither npz, Parquet nor JSON"},
            422: {"description": "malformed reports, or Idempotency-Key reused for other data"},
        },
    )
    async def post_reports(
        collection: CollectionName,
        request: Request,
        response: Response,
        idempotency_key: Annotated[
            str | None,
            Header(
                alias="Idempotency-Key",
                description="client-chosen id of this batch; a retry with the same key is not counted twice",
            ),
        ] = None,
    ) -> IngestResult:
        collector.get(collection)
        if idempotency_key is not None and not _KEY.match(idempotency_key):
            raise HTTPException(
                422,
                f"Idempotency-Key must be 1-200 visible ASCII characters, got {idempotency_key!r}",
            )
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body_bytes:
            raise HTTPException(413, f"body must be at most {max_body_bytes} bytes, got {declared}")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body_bytes:
                raise HTTPException(413, f"body must be at most {max_body_bytes} bytes")
            chunks.append(chunk)
        body = b"".join(chunks)
        if not body:
            raise HTTPException(422, "body must hold a batch of reports, got an empty body")
        result = await run_in_threadpool(
            collector.ingest,
            collection,
            body,
            request.headers.get("content-type", ""),
            idempotency_key,
        )
        if result.duplicate:
            response.status_code = 200
        return result

    @app.get(
        "/v1/collections/{collection}/estimate", response_model=EstimateResult, tags=["collections"]
    )
    def get_estimate(
        collection: CollectionName,
        alpha: Annotated[
            float, Query(gt=0, lt=1, description="1 - confidence level of the intervals")
        ] = 0.05,
        postprocessing: Annotated[
            str | None,
            Query(description="a method of ldpkit.consistency.METHODS, e.g. norm_sub (biased)"),
        ] = None,
    ) -> EstimateResult:
        collector.get(collection)
        return collector.estimate(collection, alpha, postprocessing)

    @app.get("/v1/collections/{collection}/stats", tags=["collections"])
    def get_stats(collection: CollectionName) -> dict[str, Any]:
        """All batches merged: ``Stats.to_dict()`` (merge it with ``Stats.from_dict`` elsewhere)."""
        c = collector.get(collection)
        stats, _ = store.merged(collection, c.spec)
        return stats.to_dict()

    return app
