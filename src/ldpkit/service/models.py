"""The collector's API models (pydantic).

The JSON answer of each route, which also documents the API at ``/openapi.json``, and the
ingest body's OpenAPI description.
"""

from typing import Any

from pydantic import BaseModel, Field

from .multidim import MultidimResult


# -- response models (they document the API in /docs) ---------------------------------------
class FieldInfo(BaseModel):
    """One report field of a collection: its numpy dtype and per-user shape."""

    dtype: str = Field(description="numpy dtype string of the field, e.g. '|u1', '<u8'")
    shape: list[int] = Field(description="per-user shape (empty for one number per user)")


class EncoderInfo(BaseModel):
    """The label encoder of a categorical collection, as ldpkit.Encoder takes it."""

    categories: list[Any] = Field(description="label of item i is categories[i]")
    unknown: str = Field(
        description="'error' (unseen labels are refused) or 'other' (mapped to one extra item)"
    )
    missing: str = Field(
        "error",
        description="'error' (null/NaN refused) or 'item' (mapped to an extra last item "
        "'<missing>')",
    )


class LongitudinalInfo(BaseModel):
    """The budgets of a longitudinal spec, from its realized probabilities."""

    epsilon_1: float = Field(description="loss of one report (privacy_loss())")
    epsilon_inf: float = Field(
        description="loss of any number of memoized reports of one value "
        "(longitudinal_privacy_loss(1))"
    )
    epsilon_change: float = Field(
        description="what one change to a new value costs (change_privacy_loss())"
    )
    epsilon_max: float = Field(
        description="the most a device can lose, over any number of reports and values "
        "(the memo holds at most this many permanent answers)"
    )


class CollectionInfo(BaseModel):
    """A collection: its mechanism, estimate kind, counts so far and report fields."""

    name: str
    description: str
    kind: str = Field(
        description="'frequency', 'distribution', 'mean', 'open_frequency' (CMS, HCMS, "
        "FLH over an open domain: estimates name candidates) or 'heavy_hitters' (PEM, "
        "TreeHist, SFP: estimates discover the top strings): the estimate's shape"
    )
    mechanism: dict[str, Any] = Field(
        description="the spec, rebuild it with ldpkit.spec.spec_from_dict"
    )
    fingerprint: str
    n: int = Field(description="reports stored so far")
    batches: int
    bucket_seconds: int = Field(description="width of the roll-up time buckets")
    last_bucket: str | None = Field(
        default=None, description="start of the latest bucket with data"
    )
    last_report: str | None = Field(
        None, description="arrival time of the latest stored batch (whole seconds, UTC)"
    )
    labels: list[Any] | None = None
    encoder: EncoderInfo | None = Field(
        None,
        description="rebuild with ldpkit.Encoder(categories, unknown=unknown, missing=missing)",
    )
    report_fields: dict[str, FieldInfo] | None = Field(
        None, description="the arrays a batch must hold (JSON clients use these dtypes)"
    )
    longitudinal: LongitudinalInfo | None = Field(
        None, description="repeated-report specs (ldpkit.longitudinal): their budgets"
    )


class CollectionList(BaseModel):
    """The collections the caller may see (``GET /collections``)."""

    collections: list[CollectionInfo]


class IngestResult(BaseModel):
    """The answer to one stored (or duplicate) report batch."""

    batch_id: str
    collection: str
    n: int = Field(description="reports in this batch")
    received_at: str
    duplicate: bool = Field(
        description="true when the Idempotency-Key was seen before; nothing was added"
    )


class DistributionResult(BaseModel):
    """A numerical collection's estimate: bucket masses, mean, quantiles, CDF."""

    low: float
    high: float
    probabilities: list[float] = Field(description="mass of each of the equal-width buckets")
    mean: float
    quantiles: dict[str, float] | None = Field(
        description="q -> value, for q in 0.01 ... 0.99; null while the masses are signed "
        "(an unbiased estimate with negative masses: ask with postprocessing=norm_sub or cdf)"
    )
    signed: bool = Field(False, description="true when some masses are negative (unbiased)")
    interval_method: str | None = Field(
        default=None,
        description="'analytic' (linear estimators), 'bootstrap' (EM/EMS, with bootstrap=B) "
        "or null: no intervals (interval_note says why)",
    )
    interval_note: str | None = Field(
        default=None, description="why the intervals are null, or approximate"
    )
    mean_ci: list[float] | None = Field(
        default=None, description="[low, high]: (1 - alpha) interval"
    )
    quantile_ci: dict[str, list[float]] | None = Field(
        default=None, description="q -> [low, high], for the q of quantiles"
    )
    cdf_low: list[float] | None = Field(
        default=None,
        description="pointwise (1 - alpha) band of the CDF at each bucket's right edge",
    )
    cdf_high: list[float] | None = None


class TopItem(BaseModel):
    """One of the most frequent items, with its estimate and interval."""

    item: Any = Field(description="the item: its label, index, or the candidate as given")
    frequency: float
    std_error: float
    ci_low: float | None
    ci_high: float | None


class EstimateResult(BaseModel):
    """The estimate of a collection over whole roll-up buckets."""

    collection: str
    kind: str
    mechanism: dict[str, Any]
    fingerprint: str
    n: int
    batches: int
    since: str | None = Field(description="start of the first whole bucket included")
    until: str | None = Field(description="end of the last whole bucket included")
    alpha: float
    postprocessing: list[str]
    labels: list[Any] | None
    frequencies: list[float] | None = Field(
        default=None, description="frequency oracles; null while n = 0"
    )
    std_errors: list[float] | None = None
    ci_low: list[float] | None = Field(
        None, description="normal-approximation (1 - alpha) interval (frequencies or the mean)"
    )
    ci_high: list[float] | None = None
    distribution: DistributionResult | None = Field(
        default=None, description="numerical collections"
    )
    mean: float | None = Field(
        default=None, description="mean collections (and distributions' mean)"
    )
    std_error: float | None = None
    top: list[TopItem] | None = Field(
        default=None,
        description="with top_k: the k most frequent items (of the domain, or of the "
        "candidates of an open-domain collection), most frequent first; heavy-hitter "
        "collections: the discovered strings",
    )
    control: str | None = Field(
        default=None,
        description="heavy-hitter collections: the error control of the list (null, 'fwer' "
        "or 'fdr'), over the 'tested' candidates the search estimated",
    )
    tested: int | None = Field(
        default=None, description="heavy-hitter collections: candidates the search estimated"
    )
    longitudinal: LongitudinalInfo | None = Field(
        None, description="repeated-report specs (ldpkit.longitudinal): their budgets"
    )
    multidim: MultidimResult | None = Field(
        default=None,
        description="multi-attribute collections (ldpkit.multidim): marginals, a range "
        "query's answer or group means, per cell with intervals",
    )
    means: list[float] | None = Field(
        default=None, description="key-value collections: each key's mean value (in [-1, 1])"
    )
    mean_std_errors: list[float] | None = None
    mean_ci_low: list[float | None] | None = Field(
        default=None,
        description="(1 - alpha) interval of each key's mean; null where none is valid",
    )
    mean_ci_high: list[float | None] | None = None
    debiased_means: list[float] | None = Field(
        default=None,
        description="PrivKV(M): each key's mean among its holders with the paper's "
        "shrinkage undone by the estimated frequency (the mean interval is around these)",
    )
    debiased_mean_std_errors: list[float] | None = None
    long_share: float | None = Field(
        default=None, description="PCKV: estimated share of users with at least `padding` pairs"
    )


class CandidatesBody(BaseModel):
    """The candidates to estimate in an open-domain collection (request body)."""

    candidates: list[Any] = Field(
        description="the items to estimate (open-domain collections): JSON strings and "
        'integers, distinct; "7" and 7 are different items'
    )


class BucketInfo(BaseModel):
    """One roll-up bucket: its time span, reports and batches."""

    start: str
    end: str
    n: int
    batches: int


class BucketList(BaseModel):
    """The roll-up buckets of a collection with data, oldest first."""

    collection: str
    bucket_seconds: int
    buckets: list[BucketInfo]


class BatchInfo(BaseModel):
    """One stored batch: id, token name, size and arrival time."""

    batch_id: str
    token: str
    n: int
    received_at: str


class BatchList(BaseModel):
    """The stored batches of a collection, oldest first."""

    collection: str
    batches: list[BatchInfo]


class DeleteResult(BaseModel):
    """What a delete removed: batches and reports."""

    collection: str
    deleted_batches: int
    deleted_reports: int


class Health(BaseModel):
    """The collector's health: status, database, version, compaction."""

    status: str = Field(description="ok, degraded (compaction failing or behind) or unavailable")
    database: str
    version: str
    compaction: str = Field(
        default="ok", description="ok, or why roll-up compaction is failing or behind (degraded)"
    )


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
