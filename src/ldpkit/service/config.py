"""The collector's config file.

Read it (TOML or JSON), check its keys, and turn it into the collections and ``create_app``
keyword arguments (:func:`config_options`), or into an app
(:func:`ldpkit.service.serve.app_from_config`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._validation import check_real
from ..encoder import Encoder
from ..spec import Mechanism, spec_from_dict
from .auth import parse_tokens
from .quotas import QUOTA_KEYS, parse_quota

__all__ = ["Collection", "Limits", "config_options", "load_config"]

DEFAULT_DATABASE_URL = "sqlite:///ldpkit-collector.db"


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclasses.dataclass(frozen=True)
class Limits:
    """Abuse limits of the ingest endpoint (defaults shown; every one is configurable).

    Parameters
    ----------
    max_body_bytes : int
        Largest request body (413 above): 16 MiB.
    max_json_bytes : int
        Largest JSON body (413 above): 1 MiB. JSON is for small clients; parsing it costs
        ~30x its size in Python objects and holds the interpreter, so big batches must use
        npz or Parquet.
    max_decoded_bytes : int
        Largest size an npz/Parquet body may declare once decompressed (413 above, checked
        from the headers before decoding): 64 MiB.
    max_reports_per_batch : int
        Most reports in one batch (413 above): 1,000,000.
    max_json_depth : int
        Deepest JSON nesting accepted (422 above): 32. Valid batches nest at most 5 deep.
    aggregate_chunk : int
        Reports decoded and aggregated at a time: npz bodies are decompressed as streams
        and Parquet bodies read by row blocks, so memory stays bounded by one chunk
        whatever the batch size: 65,536.
    """

    max_body_bytes: int = 16 * 2**20
    max_json_bytes: int = 1 * 2**20
    max_decoded_bytes: int = 64 * 2**20
    max_reports_per_batch: int = 1_000_000
    max_json_depth: int = 32
    aggregate_chunk: int = 65_536

    def __post_init__(self) -> None:
        """Validate and normalize the fields."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{f.name} must be an integer >= 1, got {value!r}")


@dataclasses.dataclass(frozen=True)
class Collection:
    """One collection: the spec its reports must use, and optional item labels.

    Parameters
    ----------
    spec : Mechanism
        Every batch must be made under exactly this configuration (same fingerprint).
    encoder : Encoder or None
        Gives the estimate endpoint a label per item; its ``domain_size`` must match.
        ``GET /v1/collections/{c}`` sends its categories and unknown policy to clients.
    description : str
        Free text shown by ``GET /v1/collections``.
    """

    spec: Mechanism
    encoder: Encoder | None = None
    description: str = ""

    def __post_init__(self) -> None:
        """Validate and normalize the fields."""
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
        """The encoder's labels as plain JSON values, or None without an encoder."""
        if self.encoder is None:
            return None
        return [_plain_label(x) for x in self.encoder.labels.tolist()]


def _plain_label(x: Any) -> Any:
    return x if isinstance(x, (str, int, float, bool)) else str(x)


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


def _check_origins(origins: Any) -> None:
    """Refuse a wildcard or malformed CORS origin (``"*"`` was accepted)."""
    if isinstance(origins, str) or not all(isinstance(o, str) for o in origins):
        raise ValueError(f"cors_origins must be a list of origin strings, got {origins!r}")
    for origin in origins:
        if "*" in origin:
            raise ValueError(
                "cors_origins must list each origin allowed to call the collector (e.g. "
                f"'https://dash.example.org'), got {origin!r}: a wildcard would send "
                "'Access-Control-Allow-Origin: *' on authenticated reads, so any web page "
                "whose script holds a token could read every collection from its visitors' "
                "browsers"
            )
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s]+", origin):
            raise ValueError(
                "cors_origins must be origins written as scheme://host[:port] without a "
                f"path (e.g. 'https://dash.example.org'), got {origin!r}"
            )


#: Top-level keys passed to create_app as they are (the others are parsed first).
_PLAIN_KEYS = (
    "database_url",
    "store_reports",
    "bucket_seconds",
    "commit_window",
    "max_rollup_parts",
    "deleted_keys_seconds",
)
_TOP_KEYS = {*_PLAIN_KEYS, "cors_origins", "limits", "quotas", "auth", "collections"}
_LIMIT_KEYS = {"max_body_bytes", "max_decoded_bytes"}  # accepted at top level too (older files)


def _check_app_options(
    limits: Limits | None,
    max_body_bytes: int | None,
    max_decoded_bytes: int | None,
    bucket_seconds: Any,
    commit_window: Any,
    max_rollup_parts: Any,
    freeze_gc: Any,
    deleted_keys_seconds: Any,
) -> tuple[Limits, float, float]:
    """Check ``create_app``'s options; return the limits, commit window and retry window."""
    limits = limits or Limits()
    overrides = {
        k: v
        for k, v in (("max_body_bytes", max_body_bytes), ("max_decoded_bytes", max_decoded_bytes))
        if v is not None
    }
    if overrides:
        limits = dataclasses.replace(limits, **overrides)
    if (
        isinstance(bucket_seconds, bool)
        or not isinstance(bucket_seconds, int)
        or bucket_seconds < 1
    ):
        raise ValueError(f"bucket_seconds must be an integer >= 1, got {bucket_seconds!r}")
    commit_window = check_real(commit_window, "commit_window", low=0, high=1)
    if (
        isinstance(max_rollup_parts, bool)
        or not isinstance(max_rollup_parts, int)
        or max_rollup_parts < 1
    ):
        raise ValueError(f"max_rollup_parts must be an integer >= 1, got {max_rollup_parts!r}")
    if not isinstance(freeze_gc, bool):
        raise TypeError(f"freeze_gc must be True or False, got {freeze_gc!r}")
    deleted_keys_seconds = check_real(deleted_keys_seconds, "deleted_keys_seconds", low=0)
    return limits, commit_window, deleted_keys_seconds


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a collector config file (``.toml`` or ``.json``).

    The shape (TOML shown; JSON is the same structure)::

        database_url = "sqlite:///collector.db"   # optional
        store_reports = false                      # optional
        bucket_seconds = 3600                      # optional: roll-up bucket width
        commit_window = 0.003                      # optional: group-commit wait, seconds
        max_rollup_parts = 4096                    # optional: unfolded parts -> compact now
        deleted_keys_seconds = 2592000             # optional: deleted batches' keys kept 30 days
        cors_origins = ["https://example.org"]     # optional: browsers allowed to call

        [limits]                                   # optional: see ldpkit.service.Limits
        max_reports_per_batch = 100000

        [quotas]                                   # optional: per-token ingest quotas
        reports_per_minute = 1000000               # (see ldpkit.service.quotas)
        batches_per_second = 1000

        [auth]                                     # optional: bearer tokens, by sha256
        tokens = [{ name = "devices", scopes = ["ingest"], sha256 = "...", collections = ["browsers"] }]

        [collections.browsers]
        mechanism = "OLH"
        params = { epsilon = 1.0 }                 # domain_size defaults to len(categories)
        categories = ["chrome", "firefox", "safari"]
        unknown = "other"                          # optional: adds an "<other>" item
        missing = "item"                           # optional: adds a "<missing>" item
        description = "main browser"               # optional
    """
    path = Path(path)
    text = path.read_text()
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise ValueError(
            f"config {os.fspath(path)!r} must be valid {path.suffix or 'JSON'}: {exc}"
        ) from exc
    if not isinstance(data, dict):
        raise ValueError(f"config must be a table/object, got {type(data).__name__}")
    return data


def _collection(name: str, entry: Any) -> Collection:
    if not isinstance(entry, Mapping) or "mechanism" not in entry:
        raise ValueError(
            f"collections.{name} must have a 'mechanism' (and 'params'), got {entry!r}"
        )
    params = dict(entry.get("params", {}))
    encoder = None
    if entry.get("categories") is not None:
        encoder = Encoder(
            entry["categories"],
            unknown=entry.get("unknown", "error"),
            missing=entry.get("missing", "error"),
        )
        params.setdefault("domain_size", encoder.domain_size)
    _longitudinal_aliases(entry["mechanism"], params)
    spec = spec_from_dict({"mechanism": entry["mechanism"], "params": params})
    return Collection(spec, encoder=encoder, description=str(entry.get("description", "")))


def _longitudinal_aliases(mechanism: Any, params: dict[str, Any]) -> None:
    """Accept ``epsilon_1`` for the longitudinal specs, and only for them.

    ``epsilon_1`` is their papers' name of the field ``epsilon``
    (:class:`ldpkit.longitudinal.LongitudinalOracle`).
    """
    from ..spec import mechanism_registry

    cls = mechanism_registry().get(mechanism) if isinstance(mechanism, str) else None
    if "epsilon_1" in params and isinstance(getattr(cls, "epsilon_1", None), property):
        if "epsilon" in params:
            raise ValueError(
                f"params must give one of epsilon_1 and epsilon (one parameter of {mechanism}), "
                "got both"
            )
        params["epsilon"] = params.pop("epsilon_1")


def config_options(data: Mapping[str, Any]) -> tuple[dict[str, Collection], dict[str, Any]]:
    """Return the collections and ``create_app`` keyword arguments from a parsed config."""
    unknown = set(data) - _TOP_KEYS - _LIMIT_KEYS
    if unknown:
        raise ValueError(f"config keys must be among {sorted(_TOP_KEYS)}, got {sorted(unknown)}")
    entries = data.get("collections")
    if not isinstance(entries, Mapping) or not entries:
        raise ValueError("config must define at least one collection under 'collections'")
    collections = {name: _collection(name, entry) for name, entry in entries.items()}
    options: dict[str, Any] = {k: data[k] for k in _PLAIN_KEYS if k in data}
    if "cors_origins" in data:
        origins = data["cors_origins"]
        if not isinstance(origins, list) or not all(isinstance(o, str) for o in origins):
            raise ValueError(f"cors_origins must be a list of origin strings, got {origins!r}")
        _check_origins(origins)  # at load: "*" is refused with its reason
        options["cors_origins"] = origins
    limits = dict(data.get("limits", {}))
    limits.update({k: data[k] for k in _LIMIT_KEYS if k in data})
    if limits:
        try:
            options["limits"] = Limits(**limits)
        except TypeError as exc:
            raise ValueError(
                f"limits must only set fields of ldpkit.service.Limits, got {sorted(limits)}"
            ) from exc
    if "quotas" in data:
        quotas = data["quotas"]
        if not isinstance(quotas, Mapping) or set(quotas) - set(QUOTA_KEYS):
            raise ValueError(
                f"quotas must be a table with keys among {list(QUOTA_KEYS)}, got {quotas!r}"
            )
        options["quotas"] = parse_quota(quotas, "quotas")
    if "auth" in data:
        auth = data["auth"]
        if not isinstance(auth, Mapping) or set(auth) != {"tokens"}:
            raise ValueError(f"auth must be a table with one key, tokens, got {auth!r}")
        options["tokens"] = parse_tokens(auth["tokens"], collections, options.get("quotas"))
    return collections, options
