"""ldpkit's HTTP collector: ingest report batches, store their Stats durably, serve estimates.

Needs the ``service`` extra (``pip install 'ldpkit[service]'``). Client code (randomizers)
never imports this package; clients only need :mod:`ldpkit.io` to encode their reports.

>>> from ldpkit import GRR
>>> from ldpkit.service import create_app
>>> app = create_app({"colors": GRR(epsilon=1.0, domain_size=3)}, "sqlite://")  # in memory
>>> sorted(r.path for r in app.routes if "collections" in r.path)  # doctest: +NORMALIZE_WHITESPACE
['/v1/collections', '/v1/collections/{collection}', '/v1/collections/{collection}/estimate',
 '/v1/collections/{collection}/stats']
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

try:
    import fastapi  # noqa: F401 - fail early with the install hint
    import sqlalchemy  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ldpkit.service needs the service extra: pip install 'ldpkit[service]'"
    ) from exc

from ..encoder import Encoder
from ..spec import spec_from_dict
from .app import DEFAULT_DATABASE_URL, Collection, create_app
from .store import CollectorStore

__all__ = ["Collection", "CollectorStore", "create_app", "app_from_config", "load_config", "main"]


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a collector config file (``.toml`` or ``.json``).

    The shape (TOML shown; JSON is the same structure)::

        database_url = "sqlite:///collector.db"   # optional
        store_reports = false                      # optional

        [collections.browsers]
        mechanism = "OLH"
        params = { epsilon = 1.0 }                 # domain_size defaults to len(categories)
        categories = ["chrome", "firefox", "safari"]
        unknown = "other"                          # optional: adds an "<other>" item
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
        encoder = Encoder(entry["categories"], unknown=entry.get("unknown", "error"))
        params.setdefault("domain_size", encoder.domain_size)
    spec = spec_from_dict({"mechanism": entry["mechanism"], "params": params})
    return Collection(spec, encoder=encoder, description=str(entry.get("description", "")))


def app_from_config(config: str | os.PathLike[str] | Mapping[str, Any], **overrides: Any) -> Any:
    """A collector app from a config file path or an already-parsed config mapping.

    ``overrides`` (``database_url``, ``store_reports``, ``max_body_bytes``...) win over the
    file's values.
    """
    data = dict(config) if isinstance(config, Mapping) else load_config(config)
    entries = data.get("collections")
    if not isinstance(entries, Mapping) or not entries:
        raise ValueError("config must define at least one collection under 'collections'")
    collections = {name: _collection(name, entry) for name, entry in entries.items()}
    options: dict[str, Any] = {
        k: data[k]
        for k in ("database_url", "store_reports", "max_body_bytes", "max_decoded_bytes")
        if k in data
    }
    options.update(overrides)
    return create_app(collections, options.pop("database_url", DEFAULT_DATABASE_URL), **options)


def main(
    config: str | os.PathLike[str] | Mapping[str, Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    **overrides: Any,
) -> None:
    """Serve the collector with uvicorn until interrupted (what ``ldpkit serve`` calls).

    Binds to localhost by default; put a TLS-terminating reverse proxy in front of it
    before exposing it (reports are private by design, but requests still carry metadata).
    """
    import uvicorn

    app = app_from_config(config, **overrides)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
