"""The path and query parameter types the collector's routes share.

Declared once, so every route describes ``collection``, ``since``/``until`` and ``top_k`` the
same way in the OpenAPI document.
"""

from typing import Annotated

from fastapi import Path, Query

from .kinds import MAX_CANDIDATES

__all__ = ["CollectionName", "TimeParam", "TopK"]

CollectionName = Annotated[str, Path(description="collection name")]
TimeParam = Annotated[
    str | None,
    Query(description="ISO 8601 time (UTC if no offset) or Unix seconds; whole buckets only"),
]
TopK = Annotated[
    int | None,
    Query(
        ge=1,
        le=MAX_CANDIDATES,
        description="frequencies: also answer the k most frequent items (of the domain, "
        "or of the candidates for an open-domain collection) with their intervals",
    ),
]
