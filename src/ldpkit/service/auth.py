"""Bearer tokens with scopes, configured as sha256 hashes (the server never stores a token).

Config (TOML)::

    [auth]
    tokens = [
      { name = "devices", scopes = ["ingest"], sha256 = "<hex sha256 of the token>" },
      { name = "analyst", scopes = ["read"],   sha256 = "..." },
      { name = "ops",     scopes = ["admin"],  sha256 = "..." },
    ]

``ingest`` may POST reports; ``read`` may read collections, estimates, buckets and stats;
``admin`` may use the admin routes and everything ``read`` and ``metrics`` may; ``metrics``
may read ``GET /metrics``. A token may be limited to some collections, and carry its own
quotas (:mod:`ldpkit.service.quotas`)::

    tokens = [
      { name = "web", scopes = ["ingest"], sha256 = "...", collections = ["browsers"], reports_per_minute = 60000 },
    ]

The safer form gives every token a ``collections`` list and one role: a web page holds an
``ingest`` token for its own collections only, never ``read`` (anyone can copy a token out
of a page). A token without ``collections`` may use every collection (the meaning before
collection lists existed), and for such a token ``read`` also grants ``metrics`` (as
before); a token with a list needs ``metrics`` (or ``admin``) for ``/metrics``, which
counts every collection. Make a token and its hash with :func:`new_token`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from .quotas import QUOTA_KEYS, Quota, parse_quota

__all__ = ["SCOPES", "Token", "TokenAuth", "new_token", "parse_tokens"]

SCOPES = ("ingest", "read", "admin", "metrics")
_HEX = re.compile(r"^[0-9a-f]{64}$")
_TOKEN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# What a scope grants on top of itself.
_IMPLIES = {
    "admin": {"admin", "read", "metrics"},
    "read": {"read"},
    "ingest": {"ingest"},
    "metrics": {"metrics"},
}
_TOKEN_KEYS = {"name", "scopes", "sha256", "collections", *QUOTA_KEYS}


@dataclasses.dataclass(frozen=True)
class Token:
    """One configured token: its name (stored with the batches it sends), scopes, hash.

    ``collections`` (None: all) limits the collections it may use; ``quota`` (None: the
    server's default) bounds what it may ingest.
    """

    name: str
    scopes: frozenset[str]
    sha256: bytes
    collections: frozenset[str] | None = None
    quota: Quota | None = None
    # Every scope the token's scopes grant (checked once per request: one set lookup).
    granted: frozenset[str] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Expand the scopes to those they imply and validate the fields."""
        granted = frozenset().union(*(_IMPLIES.get(s, ()) for s in self.scopes))
        if self.collections is None and "read" in granted:
            granted |= {"metrics"}  # an unscoped read token kept /metrics (backwards compatible)
        object.__setattr__(self, "granted", granted)

    def allows(self, scope: str, collection: str | None = None) -> bool:
        """Whether the token has ``scope`` (on ``collection``, when one is named)."""
        return scope in self.granted and (
            collection is None or self.collections is None or collection in self.collections
        )


def new_token() -> tuple[str, str]:
    """Return a fresh random token and the hex sha256 to put in the config: ``(token, sha256)``."""
    token = secrets.token_urlsafe(32)
    return token, hashlib.sha256(token.encode()).hexdigest()


def parse_tokens(
    entries: Any, collections: Iterable[str] | None = None, default_quota: Quota | None = None
) -> list[Token]:
    """Validate the ``[auth] tokens`` list of a config.

    ``collections`` (the config's names) lets a token's ``collections`` list be checked
    against them; ``default_quota`` is what the quota keys a token does not set default to.
    """
    known = None if collections is None else sorted(collections)
    if not isinstance(entries, list) or not entries:
        raise ValueError(
            "auth.tokens must be a non-empty list of {name, scopes, sha256} tables, "
            f"got {entries!r}"
        )
    tokens, names, hashes = [], set(), set()
    for i, entry in enumerate(entries):
        where = f"auth.tokens[{i}]"
        if not isinstance(entry, Mapping) or set(entry) - _TOKEN_KEYS:
            raise ValueError(
                f"{where} must be a table with keys name, scopes, sha256 and optionally "
                f"collections, {', '.join(QUOTA_KEYS)}, got {entry!r}"
            )
        name, scopes, digest = entry.get("name"), entry.get("scopes"), entry.get("sha256")
        if not isinstance(name, str) or not _TOKEN_NAME.match(name):
            raise ValueError(
                f"{where}.name must be 1-64 letters, digits, '_', '.', '-', got {name!r}"
            )
        if not isinstance(scopes, list) or not scopes or any(s not in SCOPES for s in scopes):
            raise ValueError(
                f"{where}.scopes must be a non-empty list of {list(SCOPES)}, got {scopes!r}"
            )
        if not isinstance(digest, str) or not _HEX.match(digest.lower()):
            raise ValueError(
                f"{where}.sha256 must be 64 hex digits (sha256 of the token), got {digest!r}"
            )
        if name in names or digest.lower() in hashes:
            raise ValueError(f"{where} must have a unique name and sha256, got {name!r} again")
        scoped = entry.get("collections")
        if scoped is not None and (
            not isinstance(scoped, list)
            or not scoped
            or not all(isinstance(c, str) for c in scoped)
            or len(set(scoped)) != len(scoped)
        ):
            raise ValueError(
                f"{where}.collections must be a non-empty list of distinct collection names "
                f"(leave it out for every collection), got {scoped!r}"
            )
        if scoped is not None and known is not None and set(scoped) - set(known):
            raise ValueError(
                f"{where}.collections must name collections among {known}, got "
                f"{sorted(set(scoped) - set(known))}"
            )
        quota = None  # the server's default (create_app's quotas), unless set here
        if default_quota is not None or any(k in entry for k in QUOTA_KEYS):
            quota = parse_quota(entry, where, default_quota)
        names.add(name)
        hashes.add(digest.lower())
        tokens.append(
            Token(
                name,
                frozenset(scopes),
                bytes.fromhex(digest),
                None if scoped is None else frozenset(scoped),
                quota,
            )
        )
    return tokens


class TokenAuth:
    """Checks ``Authorization: Bearer <token>`` headers against configured hashes."""

    def __init__(self, tokens: Iterable[Token]) -> None:
        self.tokens = list(tokens)
        self.by_name = {token.name: token for token in self.tokens}
        self._by_digest = {token.sha256: token for token in self.tokens}

    def identify(self, authorization: str | None) -> Token | None:
        """Return the token presented in the header, or None (missing, malformed or unknown).

        The presented token is hashed, and the hash looked up among the configured ones
        and confirmed with :func:`hmac.compare_digest`. The lookup is keyed by the sha256
        of what the client sent, not by the token itself: a client cannot choose hash
        prefixes, so the time taken tells nothing about how close a guess came to a valid
        token, and the cost per request stays one hash whatever the number of tokens.
        """
        if not authorization:
            return None
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return None
        value = value.strip()
        if not value:
            return None
        digest = hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()
        found = self._by_digest.get(digest)
        if found is None or not hmac.compare_digest(digest, found.sha256):
            return None
        return found
