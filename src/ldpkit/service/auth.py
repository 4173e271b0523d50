"""Bearer tokens with scopes, configured as sha256 hashes (the server never stores a token).

Config (TOML)::

    [auth]
    tokens = [
      { name = "devices", scopes = ["ingest"], sha256 = "<hex sha256 of the token>" },
      { name = "analyst", scopes = ["read"],   sha256 = "..." },
      { name = "ops",     scopes = ["admin"],  sha256 = "..." },
    ]

``ingest`` may POST reports; ``read`` may read collections, estimates, stats and metrics;
``admin`` may use the admin routes and everything ``read`` may. Make a token and its hash
with :func:`new_token`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SCOPES", "Token", "TokenAuth", "new_token", "parse_tokens"]

SCOPES = ("ingest", "read", "admin")
_HEX = re.compile(r"^[0-9a-f]{64}$")
_TOKEN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# What a scope grants on top of itself.
_IMPLIES = {"admin": {"admin", "read"}, "read": {"read"}, "ingest": {"ingest"}}


@dataclasses.dataclass(frozen=True)
class Token:
    """One configured token: its name (stored with the batches it sends), scopes, hash."""

    name: str
    scopes: frozenset[str]
    sha256: bytes
    # Every scope the token's scopes grant (checked once per request: one set lookup).
    granted: frozenset[str] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "granted", frozenset().union(*(_IMPLIES.get(s, ()) for s in self.scopes))
        )

    def allows(self, scope: str) -> bool:
        return scope in self.granted


def new_token() -> tuple[str, str]:
    """A fresh random token and the hex sha256 to put in the config: ``(token, sha256)``."""
    token = secrets.token_urlsafe(32)
    return token, hashlib.sha256(token.encode()).hexdigest()


def parse_tokens(entries: Any) -> list[Token]:
    """Validate the ``[auth] tokens`` list of a config."""
    if not isinstance(entries, list) or not entries:
        raise ValueError(
            "auth.tokens must be a non-empty list of {name, scopes, sha256} tables, "
            f"got {entries!r}"
        )
    tokens, names, hashes = [], set(), set()
    for i, entry in enumerate(entries):
        where = f"auth.tokens[{i}]"
        if not isinstance(entry, Mapping) or set(entry) - {"name", "scopes", "sha256"}:
            raise ValueError(
                f"{where} must be a table with keys name, scopes, sha256, got {entry!r}"
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
        names.add(name)
        hashes.add(digest.lower())
        tokens.append(Token(name, frozenset(scopes), bytes.fromhex(digest)))
    return tokens


class TokenAuth:
    """Checks ``Authorization: Bearer <token>`` headers against configured hashes."""

    def __init__(self, tokens: Iterable[Token]) -> None:
        self.tokens = list(tokens)
        self._by_digest = {token.sha256: token for token in self.tokens}

    def identify(self, authorization: str | None) -> Token | None:
        """The token presented in the header, or None (missing, malformed or unknown).

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
