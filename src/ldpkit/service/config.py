"""The collector's config file: read it (TOML or JSON), check its keys, and turn it into
the collections and ``create_app`` keyword arguments (:func:`config_options`), or into an
app (:func:`app_from_config`)."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..encoder import Encoder
from ..spec import spec_from_dict
from .app import DEFAULT_DATABASE_URL, Collection, Limits, _check_origins, create_app
from .auth import parse_tokens
from .quotas import QUOTA_KEYS, parse_quota

__all__ = ["app_from_config", "config_options", "load_config"]

_TOP_KEYS = {
    "database_url",
    "store_reports",
    "bucket_seconds",
    "commit_window",
    "max_rollup_parts",
    "deleted_keys_seconds",
    "cors_origins",
    "limits",
    "quotas",
    "auth",
    "collections",
}
_LIMIT_KEYS = {"max_body_bytes", "max_decoded_bytes"}  # accepted at top level too (older files)


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
    spec = spec_from_dict({"mechanism": entry["mechanism"], "params": params})
    return Collection(spec, encoder=encoder, description=str(entry.get("description", "")))


def config_options(data: Mapping[str, Any]) -> tuple[dict[str, Collection], dict[str, Any]]:
    """Collections and ``create_app`` keyword arguments from a parsed config."""
    unknown = set(data) - _TOP_KEYS - _LIMIT_KEYS
    if unknown:
        raise ValueError(f"config keys must be among {sorted(_TOP_KEYS)}, got {sorted(unknown)}")
    entries = data.get("collections")
    if not isinstance(entries, Mapping) or not entries:
        raise ValueError("config must define at least one collection under 'collections'")
    collections = {name: _collection(name, entry) for name, entry in entries.items()}
    options: dict[str, Any] = {
        k: data[k]
        for k in (
            "database_url",
            "store_reports",
            "bucket_seconds",
            "commit_window",
            "max_rollup_parts",
            "deleted_keys_seconds",
        )
        if k in data
    }
    if "cors_origins" in data:
        origins = data["cors_origins"]
        if not isinstance(origins, list) or not all(isinstance(o, str) for o in origins):
            raise ValueError(f"cors_origins must be a list of origin strings, got {origins!r}")
        _check_origins(origins)  # at load: "*" is refused with its reason (issue 27)
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


def app_from_config(config: str | os.PathLike[str] | Mapping[str, Any], **overrides: Any) -> Any:
    """A collector app from a config file path or an already-parsed config mapping.

    ``overrides`` (``database_url``, ``store_reports``, ``limits``...) win over the
    file's values.
    """
    data = dict(config) if isinstance(config, Mapping) else load_config(config)
    collections, options = config_options(data)
    options.update(overrides)
    return create_app(collections, options.pop("database_url", DEFAULT_DATABASE_URL), **options)
