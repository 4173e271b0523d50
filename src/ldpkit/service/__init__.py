"""ldpkit's HTTP collector: ingest report batches, roll their Stats up durably, serve estimates.

Needs the ``service`` extra (``pip install 'ldpkit[service]'``). Client code (randomizers)
never imports this package; clients only need :mod:`ldpkit.io` to encode their reports.

>>> from ldpkit import GRR
>>> from ldpkit.service import create_app
>>> app = create_app({"colors": GRR(epsilon=1.0, domain_size=3)}, "sqlite://")  # in memory
>>> sorted({r.path for r in app.routes if "collections" in r.path})  # doctest: +NORMALIZE_WHITESPACE
['/v1/admin/collections/{collection}/batches', '/v1/collections',
 '/v1/collections/{collection}', '/v1/collections/{collection}/buckets',
 '/v1/collections/{collection}/estimate', '/v1/collections/{collection}/stats',
 '/v1/collections/{collection}/windows']
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401 - fail early with the install hint
    import sqlalchemy  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ldpkit.service needs the service extra: pip install 'ldpkit[service]'"
    ) from exc

from .app import create_app
from .auth import Token, new_token
from .config import Collection, Limits, load_config
from .quotas import Quota
from .serve import app_from_config, is_loopback, main
from .store import CollectorStore

__all__ = [
    "Collection",
    "CollectorStore",
    "Limits",
    "Quota",
    "Token",
    "app_from_config",
    "create_app",
    "is_loopback",
    "load_config",
    "main",
    "new_token",
]
