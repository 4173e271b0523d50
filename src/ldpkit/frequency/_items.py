"""Open-domain items: a portable 64-bit key per item, and the sketches' public row hashes.

Item keys (format ``ldpkit.item/1``)
------------------------------------
An item is a string or an integer of any size (Python ints beyond int64 included). Its key
is the first 8 bytes, read little-endian as an unsigned 64-bit integer, of the BLAKE2b
digest (``digest_size=8``, ``person=b"ldpkit.item.v1"``, no key, no salt) of:

* a string: ``b"s"`` followed by its UTF-8 bytes;
* an integer x: ``b"i"`` followed by x in two's complement, big-endian, in the fewest
  whole bytes that hold its sign (``x.to_bytes((x.bit_length() + 8) // 8, "big",
  signed=True)``: 0 is ``00``, 255 is ``00 ff``, -1 is ``ff``).

So the string ``"1"`` and the integer ``1`` are different items, ``np.int64(7)`` and ``7``
the same one, and any client with BLAKE2b (the JS client included) reproduces the keys.
Two distinct items share a key with probability 2^-64 (then they are one item to every
sketch).

Row hashes
----------
Row ``j`` of a sketch (and hash function ``j`` of FLH's public family) maps a key into
``[0, width)`` with the 64-bit seed ``j`` of :mod:`ldpkit.frequency.hashing` (its ``a``,
``b``), followed by the splitmix64 finalizer and a range reduction::

    x = mix64(a_j * key + b_j mod 2^64)
    h_j(key) = ((x >> 32) * width) >> 32

For distinct keys the values of ``x`` are distinct (an odd multiplier and a bijective
mixer); the range reduction gives each bucket ``floor(2^32 / width)`` or
``ceil(2^32 / width)`` of the 2^32 top words, exactly uniform when ``width`` is a power of
two. As for OLH, this family's effect on privacy is nil (the row index is drawn
independently of the item); the estimators treat ``h_j`` as a random function, which is
what their unbiasedness (over the family) rests on.

Vectorized over users: the distinct items are found once (integer arrays: a dense presence
table when their span is small, else ``np.unique``; strings and Python sequences: a dict and
one ``itemgetter`` call, C loops) and only those are hashed.
"""

from __future__ import annotations

import hashlib
import numbers
import operator
from typing import Any

import numpy as np

from .._validation import _show, check_categorical_values, check_not_masked
from .hashing import _mix64, hash_parameters

__all__ = [
    "ITEM_KEY_FORMAT",
    "item_key",
    "item_keys",
    "keys_of",
    "row_hash",
    "candidate_list",
]

#: Version of the item-key format (documented above; the JS client mirrors it).
ITEM_KEY_FORMAT = "ldpkit.item/1"
_PERSON = b"ldpkit.item.v1"
_blake = hashlib.blake2b
_REQUIREMENT = "strings or integers (a 1-D sequence of items)"


def item_key(item: Any) -> int:
    """Return the 64-bit key of one item (a str or an int; format ``ldpkit.item/1``).

    Examples
    --------
    >>> item_key("hello") == item_key("hello"), item_key(1) == item_key("1")
    (True, False)
    """
    if type(item) is str:  # the common case first: no UnicodeError, one concatenation
        try:
            data = b"s" + item.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return int.from_bytes(_blake(data, digest_size=8, person=_PERSON).digest(), "little")
    if isinstance(item, str):
        try:
            data = b"s" + item.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"values must be strings encodable as UTF-8, got {_show(item)}"
            ) from None
    elif isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
        x = int(item)
        data = b"i" + x.to_bytes((x.bit_length() + 8) // 8, "big", signed=True)
    else:
        raise TypeError(f"values must be {_REQUIREMENT}, got {_show(item)}")
    digest = hashlib.blake2b(data, digest_size=8, person=_PERSON).digest()
    return int.from_bytes(digest, "little")


def keys_of(uniques: Any) -> np.ndarray:
    """Keys of a list of (checked) items, one BLAKE2b call each."""
    # one BLAKE2b call per *distinct* item
    if len(uniques) and set(map(type, uniques)) == {str}:
        try:  # the digests joined and read at once: ~25% faster than item_key per item
            digests = b"".join(
                [
                    _blake(b"s" + s.encode("utf-8"), digest_size=8, person=_PERSON).digest()
                    for s in uniques
                ]
            )
        except UnicodeEncodeError:
            pass  # item_key below names the string
        else:
            return np.frombuffer(digests, dtype="<u8").astype(np.uint64)
    return np.fromiter(map(item_key, uniques), dtype=np.uint64, count=len(uniques))


def _check_types(types: set[type]) -> None:
    for t in types:
        if issubclass(t, (bool, np.bool_)) or not issubclass(t, (str, int, np.integer)):
            raise TypeError(f"values must be {_REQUIREMENT}, got an item of type {t.__name__}")


def item_keys(values: Any, name: str = "values", domain_size: int | None = None) -> np.ndarray:
    """One uint64 key per user for a 1-D sequence of items (see the module docstring).

    With ``domain_size`` the items must be integers in ``[0, domain_size)`` (a closed
    domain, checked as the categorical oracles check theirs).

    Raises
    ------
    TypeError
        For floats, booleans, bytes, None or other objects (naming ``name``).
    ValueError
        For a 2-D input, a string that is not valid Unicode, or an integer outside a
        closed domain.
    """
    if domain_size is not None:
        return _integer_keys(check_categorical_values(values, domain_size, name))
    check_not_masked(values, name)
    if isinstance(values, np.ndarray):
        arr = values
    elif isinstance(values, (str, numbers.Integral)):
        arr = np.array([values], dtype=object)
    else:
        try:
            arr = np.array(values, dtype=object)
        except (ValueError, TypeError):  # ragged nesting
            raise ValueError(f"{name} must be {_REQUIREMENT}, got {_show(values)}") from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be {_REQUIREMENT}, got {_show(arr)}")
    kind = arr.dtype.kind
    if kind in "iu":  # numpy integers
        return _integer_keys(arr)
    if kind not in "OU":
        raise TypeError(f"{name} must be {_REQUIREMENT}, got {_show(arr)}")
    items = arr.tolist()  # (numpy strings too: a dict finds distinct ones ~3x faster)
    if kind == "O":
        try:
            _check_types(set(map(type, items)))
        except TypeError as exc:
            raise TypeError(str(exc).replace("values must", f"{name} must", 1)) from None
    # distinct items in first-seen order (dict: hashes, so 1 and "1" stay apart; bools
    # were refused above, since True == 1 would merge them)
    position: dict[Any, Any] = dict.fromkeys(items)
    for i, x in enumerate(position):  # a loop over distinct items, not users
        position[x] = i
    if len(items) < 2:
        codes = np.array([position[x] for x in items], dtype=np.int64)
    else:  # one C call for all users (itemgetter: ~30% faster than map + fromiter)
        codes = np.array(operator.itemgetter(*items)(position), dtype=np.int64)
    return keys_of(list(position))[codes]


#: Integer inputs spanning at most this many values times n are deduplicated by a dense
#: table (O(n + span)) instead of a sort.
_DENSE_SPAN = 4


def _integer_keys(arr: np.ndarray) -> np.ndarray:
    """Keys of a 1-D numpy integer array, each distinct value hashed once."""
    arr = arr.reshape(-1)
    if arr.size == 0:
        return np.empty(0, dtype=np.uint64)
    low, high = int(arr.min()), int(arr.max())
    span = high - low + 1
    if span <= _DENSE_SPAN * arr.size + 1024:  # dense: one pass, no sort (~10x at n = 1e6)
        offset = (arr - low).astype(np.intp) if low else arr.astype(np.intp, copy=False)
        present = np.zeros(span, dtype=bool)
        present[offset] = True
        values = np.flatnonzero(present)
        lookup = np.empty(span, dtype=np.uint64)
        lookup[values] = keys_of((values.astype(arr.dtype) + arr.dtype.type(low)).tolist())
        return lookup[offset]
    uniques, inverse = np.unique(arr, return_inverse=True)
    return keys_of(uniques.tolist())[inverse.reshape(-1)]


def candidate_list(candidates: Any, domain_size: int | None = None) -> list[Any]:
    """Candidates as a list of distinct items (ValueError/TypeError naming ``candidates``)."""
    if candidates is None:
        if domain_size is None:
            raise ValueError(
                "candidates must be given (a list of strings or integers) for an open-domain "
                "spec (domain_size=None), got None"
            )
        return list(range(domain_size))
    check_not_masked(candidates, "candidates")
    if isinstance(candidates, (str, bytes, numbers.Number)):
        raise TypeError(
            f"candidates must be a 1-D sequence of strings or integers, got {_show(candidates)}"
        )
    arr = np.asarray(candidates) if isinstance(candidates, np.ndarray) else None
    try:
        items = arr.tolist() if arr is not None else list(candidates)
    except TypeError:  # not iterable
        raise TypeError(
            f"candidates must be a 1-D sequence of strings or integers, got {_show(candidates)}"
        ) from None
    if arr is not None and arr.ndim != 1:
        raise ValueError(f"candidates must be a 1-D sequence of items, got {_show(arr)}")
    if not items:
        raise ValueError("candidates must hold at least one item, got none")
    _check_candidate_types(items)
    if len(set(items)) != len(items):
        raise ValueError("candidates must be distinct items, got duplicates")
    return items


def _check_candidate_types(items: list[Any]) -> None:
    for t in set(map(type, items)):
        if issubclass(t, (bool, np.bool_)) or not issubclass(t, (str, int, np.integer)):
            raise TypeError(
                f"candidates must be a 1-D sequence of strings or integers, got an item of "
                f"type {t.__name__}"
            )


def row_hash(rows: Any, keys: Any, width: int) -> np.ndarray:
    """``h_row(key)`` in ``[0, width)`` (broadcasting ``rows`` against ``keys``; int64).

    Examples
    --------
    >>> k = np.array([item_key("a"), item_key("b")], dtype=np.uint64)
    >>> row_hash(np.arange(3)[:, None], k[None, :], 16).shape
    (3, 2)
    """
    r = np.atleast_1d(np.asarray(rows).astype(np.uint64))
    k = np.asarray(keys, dtype=np.uint64)
    shape = np.broadcast_shapes(r.shape, k.shape)
    a, b = hash_parameters(r)

    def flat(arr: np.ndarray) -> np.ndarray:
        # 1-d arrays: numpy scalar arithmetic would warn on the intended wrap-around
        return np.broadcast_to(arr, shape).reshape(-1)

    x = _mix64(flat(a) * flat(k) + flat(b))
    h = ((x >> np.uint64(32)) * np.uint64(width)) >> np.uint64(32)
    return h.astype(np.int64).reshape(shape)
