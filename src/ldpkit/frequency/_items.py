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
table when their span is small, else ``np.unique``; numpy ``U`` arrays: their fixed-width
rows, fingerprinted and sorted (:func:`distinct_rows`), no Python object per user; a large
list of ``str``: its joined UTF-8 bytes, grouped by a compiled pass on two threads (:func:`grouped_strings`);
other strings and Python sequences: a dict and one ``itemgetter`` call, C loops) and only
those are hashed (many distinct strings by a compiled BLAKE2b, :mod:`._kernels_blake`, the
same keys as :mod:`hashlib`'s).
"""

from __future__ import annotations

import hashlib
import numbers
import operator
from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import _parallel
from .._validation import _show, check_categorical_values, check_not_masked
from .hashing import _mix64, hash_parameters

__all__ = [
    "ITEM_KEY_FORMAT",
    "item_key",
    "item_keys",
    "item_codes",
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
    # one BLAKE2b call per *distinct* item; a hasher holding the type prefix (b"s" or
    # b"i") is copied per item, ~2x cheaper than a new one with its keyword parameters,
    # and the digests are joined and read at once (the same bytes as item_key's)
    kinds = set(map(type, uniques)) if len(uniques) else set()
    if kinds == {str}:
        if _parallel.use_compiled(len(uniques), COMPILED_MIN_KEYS):
            compiled = _compiled_string_keys(uniques)
            if compiled is not None:
                return compiled
        try:
            return _prefixed_digests(b"s", (s.encode("utf-8") for s in uniques))
        except UnicodeEncodeError:
            pass  # item_key below names the string
    if kinds == {int}:
        return _prefixed_digests(
            b"i", (x.to_bytes((x.bit_length() + 8) // 8, "big", signed=True) for x in uniques)
        )
    return np.fromiter(map(item_key, uniques), dtype=np.uint64, count=len(uniques))


def _compiled_string_keys(strings: list[str]) -> np.ndarray | None:
    """Keys of many strings by the compiled BLAKE2b (:mod:`._kernels_blake`), or None.

    None when a string is not valid UTF-8 or holds a NUL (the separator of the joined
    bytes): :func:`_prefixed_digests` then hashes each string.
    """
    try:
        raw = "\x00".join(strings).encode("utf-8")
    except UnicodeEncodeError:
        return None
    buf = np.frombuffer(raw, dtype=np.uint8)
    seps = np.flatnonzero(buf == 0)
    if seps.size != len(strings) - 1:
        return None
    from ._kernels_blake import string_keys_compiled  # numba: loaded on first use

    starts = np.concatenate(([0], seps + 1))
    ends = np.concatenate((seps, [buf.size]))
    return string_keys_compiled(buf, starts, ends, _PERSON)


def _prefixed_digests(prefix: bytes, payloads: Iterable[bytes]) -> np.ndarray:
    """Keys of ``prefix + payload`` for each payload, as :func:`item_key` computes them."""
    fresh = _blake(prefix, digest_size=8, person=_PERSON).copy
    out: list[bytes] = []
    for payload in payloads:
        h = fresh()
        h.update(payload)
        out.append(h.digest())
    return np.frombuffer(b"".join(out), dtype="<u8").astype(np.uint64)


def _check_types(types: set[type]) -> None:
    for t in types:
        if issubclass(t, (bool, np.bool_)) or not issubclass(t, (str, int, np.integer)):
            raise TypeError(f"values must be {_REQUIREMENT}, got an item of type {t.__name__}")


def batch_length(values: Any) -> int | None:
    """Return the number of users of a list or a 1-D array, else None.

    These are the inputs :func:`item_keys` and :func:`item_codes` key one item per user
    without a per-user Python step; the open-domain clients overlap their draws with
    keying only for them.
    """
    if type(values) is list:
        return len(values)
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values.shape[0]
    return None


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
    keys, inverse = item_codes(values, name, domain_size)
    return keys[inverse]


def item_codes(
    values: Any, name: str = "values", domain_size: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Return :func:`item_keys` as a table and an index: ``keys[inverse]`` is item_keys.

    ``keys`` (uint64) holds the key of each distinct item (entries no user points at may
    be left unset), ``inverse`` (an integer array, one entry per user) each user's row
    in it; a client that hashes the keys per user reads them through ``inverse`` in its
    own pass instead of a gathered copy. Same checks and errors as :func:`item_keys`.
    """
    if domain_size is not None:
        return _integer_codes(check_categorical_values(values, domain_size, name))
    if type(values) is list and (grouped := grouped_strings(values)) is not None:
        buf, _, starts, ends, inverse = grouped  # every item a str: no other check applies
        from ._kernels_blake import string_keys_compiled  # numba: loaded already

        return string_keys_compiled(buf, starts, ends, _PERSON), inverse
    check_not_masked(values, name)
    if isinstance(values, np.ndarray):
        arr = values
    elif (exposed := exposed_text_array(values)) is not None:
        arr = exposed
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
        return _integer_codes(arr)
    if kind == "U":
        codes = unicode_codes(arr)  # (refuses code points past U+10FFFF: no str holds one)
        if arr.size >= _ROWS_MIN:  # fixed-width text: no str object per user
            first, inverse = distinct_rows(codes)
            return _unicode_row_keys(arr, first), inverse
    if kind not in "OU":
        raise TypeError(f"{name} must be {_REQUIREMENT}, got {_show(arr)}")
    items = arr.tolist()  # (numpy strings too: a dict finds distinct ones ~3x faster)
    if kind == "O":
        try:
            _check_types(set(map(type, items)))
        except TypeError as exc:
            raise TypeError(str(exc).replace("values must", f"{name} must", 1)) from None
    # (bools were refused above: True == 1 would merge them with 1 in the dict)
    uniques, codes = distinct_in_order(items)
    return keys_of(uniques), codes


def _unicode_row_keys(arr: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Keys of the strings ``arr[first]`` of a ``U`` array (what :func:`keys_of` gives them).

    Many distinct strings are keyed from their code points by a compiled pass
    (:func:`._kernels_strings.code_point_keys`: UTF-8 made on the fly, no ``str`` each);
    a surrogate, which has no UTF-8, sends them to :func:`keys_of`, which names it.
    """
    if _parallel.use_compiled(first.size, COMPILED_MIN_KEYS):
        from ._kernels_strings import code_point_keys  # numba: loaded on first use

        native = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
        width = max(1, arr.dtype.itemsize // 4)
        codes = native.view(np.uint32).reshape(arr.shape[0], width) if arr.dtype.itemsize else None
        if codes is not None:
            keys = code_point_keys(codes, first, _PERSON)
            if keys is not None:
                return keys
    return keys_of(arr[first].tolist())


def distinct_in_order(items: list[Any]) -> tuple[list[Any], np.ndarray]:
    """Return the distinct items of a list (first-seen order) and each item's index in them.

    A dict finds them (hashes, so ``1`` and ``"1"`` stay apart, but ``True`` and ``1``
    merge: the callers refuse bools first); the indices come from one C call for all
    users (``itemgetter``: ~30% faster than ``map`` + ``fromiter``). Raises ``TypeError``
    for an unhashable item.
    """
    position: dict[Any, Any] = dict.fromkeys(items)
    for i, x in enumerate(position):  # a loop over distinct items, not users
        position[x] = i
    if len(items) < 2:
        codes = np.array([position[x] for x in items], dtype=np.int64)
    else:
        codes = np.array(operator.itemgetter(*items)(position), dtype=np.int64)
    return list(position), codes


def distinct_strings(items: list[Any]) -> tuple[list[Any], np.ndarray] | None:
    """Return :func:`distinct_in_order` of a large list of ``str``, compiled, or None.

    The strings are joined with NUL separators and UTF-8 encoded in two C calls (``join``
    refuses any item that is not a ``str``), then a compiled pass on two threads finds
    the segments and groups them by their bytes (:func:`grouped_strings`). Equal strings
    are equal bytes, so the groups, their first-seen order and the indices are
    :func:`distinct_in_order`'s. None (the caller takes its general path, which names
    what is wrong) below ``COMPILED_MIN_STRINGS`` users or without numba, when an item
    is not a ``str``, a string is not valid UTF-8 or holds a NUL itself.
    """
    grouped = grouped_strings(items)
    if grouped is None:
        return None
    _, first, _, _, inverse = grouped
    index = first.tolist()
    uniques = list(operator.itemgetter(*index)(items)) if len(index) > 1 else [items[index[0]]]
    return uniques, inverse


def grouped_strings(
    items: list[Any],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Group a large list of ``str`` by their UTF-8 bytes without a Python step per item.

    Returns ``(buf, first, starts, ends, inverse)``: the joined bytes, the first item of
    each distinct string (first-seen order), its bytes' span in ``buf`` and each item's
    group (:func:`._kernels_strings.group_segments`), or None as :func:`distinct_strings`.
    """
    n = len(items)
    if n < _ROWS_MIN or not _parallel.use_compiled(n, COMPILED_MIN_STRINGS):
        return None
    try:
        raw = "\x00".join(items).encode("utf-8")
    except (TypeError, UnicodeEncodeError):
        return None
    from ._kernels_strings import group_segments  # numba: loaded on first use

    buf = np.frombuffer(raw, dtype=np.uint8)
    grouped = group_segments(buf, n)
    if grouped is None:  # a string holds a NUL: one separator too many
        return None
    return (buf, *grouped)


#: Fewer users than this take the dict path (the sort's fixed costs dominate below).
_ROWS_MIN = 1024
#: At least this many distinct strings are hashed by the compiled BLAKE2b when numba is
#: installed (~2x faster than hashlib per string, ~0.3 s to load numba's cached code).
COMPILED_MIN_KEYS = 1 << 14
#: Lists of at least this many strings are grouped by the compiled pass when numba is
#: installed (below, loading numba would cost more than it saves).
COMPILED_MIN_STRINGS = 1 << 16
#: Rows of at least this many 64-bit words in all are grouped by the compiled one-pass
#: table when numba is installed (below, loading numba would cost more than it saves).
COMPILED_MIN_WORDS = 1 << 18
_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def exposed_text_array(values: Any) -> np.ndarray | None:
    """Return the numpy ``U``/``S`` array that a non-numpy column exposes, else None.

    Columns of other libraries (pandas, pyarrow, ...) are read through ``__array__``
    without importing them; only a fixed-width text array is taken (anything else goes
    through the generic path, unchanged).
    """
    if isinstance(values, (np.ndarray, list, tuple, str, bytes)) or not hasattr(
        values, "__array__"
    ):
        return None
    try:
        arr = np.asarray(values)
    except Exception:  # a failing __array__: the generic path gives its message
        return None
    return arr if arr.dtype.kind in "US" and arr.ndim == 1 else None


def check_code_points(top: int) -> None:
    """Refuse a ``U`` array whose largest code point ``top`` is past U+10FFFF.

    Only a view of other memory puts one there (no ``str`` holds it); every string path
    (item keys, the discovery encodings) refuses it with this one message.
    """
    if top > 0x10FFFF:
        raise ValueError(
            f"values must be strings of Unicode code points (at most U+10FFFF), got U+{top:X}"
        )


def unicode_codes(arr: np.ndarray) -> np.ndarray:
    """Code points of a 1-D ``U`` array as an (n, width) array of the narrowest unsigned type.

    Narrowing (uint8 for Latin-1 text, uint16 for the BMP) is injective, so rows stay
    distinct exactly when the strings are; trailing zeros are the array's padding (a
    narrowed row is zero-padded to whole 64-bit words, which :func:`distinct_rows` then
    reads in place, without a copy).
    """
    n = arr.shape[0]
    width = arr.dtype.itemsize // 4
    # native byte order first: the code points are read as uint32 (a '>U' array too)
    native = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    codes = native.view(np.uint32).reshape(n, width)
    if codes.size == 0:
        return np.zeros((n, 1), dtype=np.uint8)
    top = int(codes.max())
    check_code_points(top)
    if top < 1 << 16:
        narrow = np.uint8 if top < 1 << 8 else np.uint16
        per_word = 8 // np.dtype(narrow).itemsize
        out = np.zeros((n, -(-width // per_word) * per_word), dtype=narrow)
        out[:, :width] = codes  # one converting pass, into rows of whole words
        return out
    return codes


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Find the distinct rows of a 2-D unsigned array, vectorized (no Python work per row).

    Returns
    -------
    first : ndarray of intp
        The index of one row of each distinct value (in no particular order).
    inverse : ndarray of intp, shape (n,)
        For each row, the position in ``first`` of its value: ``rows[first][inverse]``
        equals ``rows``.

    Each row's bytes are read as 64-bit words; one word is its own key, longer rows are
    folded into a 64-bit fingerprint (splitmix64 rounds). The keys go into an open-addressing
    table (linear probing, 2n to 4n slots) filled in vectorized rounds: every copy of a key
    probes the same slots in the same round, so each distinct key ends in one slot, in a
    few rounds and without a sort (~5x faster than ``np.unique`` at n = 1e6). A
    fingerprint is trusted only after every row is compared with its group's
    representative: a collision (probability ~u^2 / 2^64 for u distinct rows) falls back
    to an exact row sort, so the result never depends on the hash. Large inputs, when numba
    is installed, take the one-pass table of :mod:`._kernels_rows` instead (whole rows
    compared there too: the same grouping, so the same keys; ~5x faster).
    """
    n = rows.shape[0]
    size = rows.shape[1] * rows.dtype.itemsize if rows.ndim == 2 else 0
    if n == 0:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    n_words = max(1, -(-size // 8))
    if size and size % 8 == 0 and rows.flags.c_contiguous:  # whole words: read in place
        words = rows.view(np.uint8).reshape(n, size).view(np.uint64)
    else:
        buf = np.zeros((n, 8 * n_words), dtype=np.uint8)
        buf[:, :size] = np.ascontiguousarray(rows).view(np.uint8).reshape(n, size)
        words = buf.view(np.uint64)
    if _parallel.use_compiled(n * n_words, COMPILED_MIN_WORDS):
        from ._kernels_rows import distinct_rows_compiled  # numba: loaded on first use

        return distinct_rows_compiled(words)
    key = words[:, 0].copy()
    for j in range(1, n_words):  # a loop over the row's words, not over rows
        key = _mix64(key + _GAMMA)
        key ^= words[:, j]
    slot = _table_slots(key)
    used = np.zeros(int(slot.max()) + 1, dtype=bool)
    used[slot] = True
    group = np.cumsum(used) - 1
    inverse = group[slot]
    first = np.empty(int(group[-1]) + 1, dtype=np.intp)
    first[inverse] = np.arange(n)  # any row of each group (the last one)
    if n_words > 1 and not np.array_equal(words[first][inverse], words):
        _, first, inverse = np.unique(words, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    return first, inverse


def _table_slots(key: np.ndarray) -> np.ndarray:
    """Slot of each key in a linear-probing table (equal keys share a slot, others never).

    The table starts at 4x a guess of the distinct keys (those of a sample of ~4096 keys,
    times the square root of how much larger n is: heavy-tailed data have many rare keys)
    and is rebuilt 4x larger whenever it gets half full, up to 2n slots, which always hold
    every key. A table that stays in cache is ~5x faster to fill than one of 2n slots.
    """
    n = key.shape[0]
    most = max(4, int(2 * n - 1).bit_length())
    step = max(1, n // 4096)
    guess = np.unique(key[::step]).size * np.sqrt(step)
    bits = min(most, max(10, int(4 * guess).bit_length()))
    while True:
        slot = _fill_table(key, bits, limit=None if bits >= most else (1 << bits) // 2)
        if slot is not None:
            return slot
        bits = min(most, bits + 2)


def _fill_table(key: np.ndarray, bits: int, limit: int | None) -> np.ndarray | None:
    """Return the slots of a linear-probing fill, or None once more than ``limit`` are used."""
    mask = (1 << bits) - 1
    table = np.zeros(mask + 1, dtype=np.uint64)
    filled = np.zeros(mask + 1, dtype=bool)
    slot = (_mix64(key) >> np.uint64(64 - bits)).astype(np.intp)
    todo = np.arange(key.shape[0])
    out = np.empty(key.shape[0], dtype=np.intp)
    while todo.size:  # probing rounds: each settles the keys that find their own slot
        s, k = slot[todo], key[todo]
        free = ~filled[s]
        table[s[free]] = k[free]  # among keys racing for a free slot, one wins
        filled[s] = True
        if limit is not None and np.count_nonzero(filled) > limit:
            return None
        mine = table[s] == k
        out[todo[mine]] = s[mine]
        todo = todo[~mine]
        slot[todo] = (slot[todo] + 1) & mask
    return out


#: Integer inputs spanning at most this many values times n are deduplicated by a dense
#: table (O(n + span)) instead of a sort.
_DENSE_SPAN = 4


def _integer_keys(arr: np.ndarray) -> np.ndarray:
    """Keys of a 1-D numpy integer array, each distinct value hashed once."""
    keys, inverse = _integer_codes(arr)
    return keys[inverse]


def _integer_codes(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`item_codes` of a numpy integer array (each distinct value hashed once)."""
    arr = arr.reshape(-1)
    if arr.size == 0:
        return np.empty(0, dtype=np.uint64), np.zeros(0, dtype=np.intp)
    low, high = int(arr.min()), int(arr.max())
    span = high - low + 1
    if span <= _DENSE_SPAN * arr.size + 1024:  # dense: one pass, no sort (~10x at n = 1e6)
        offset = (arr - low).astype(np.intp) if low else arr.astype(np.intp, copy=False)
        present = np.zeros(span, dtype=bool)
        present[offset] = True
        values = np.flatnonzero(present)
        lookup = np.empty(span, dtype=np.uint64)
        lookup[values] = _distinct_integer_keys(values.astype(arr.dtype) + arr.dtype.type(low))
        return lookup, offset
    if arr.size >= _ROWS_MIN:  # a hash table of the 64-bit words: no sort
        first, inverse = distinct_rows(arr.astype(np.int64, copy=False).view(np.uint64)[:, None])
        return _distinct_integer_keys(arr[first]), inverse
    uniques, inverse = np.unique(arr, return_inverse=True)
    return keys_of(uniques.tolist()), inverse.reshape(-1)


def _distinct_integer_keys(values: np.ndarray) -> np.ndarray:
    """Keys of a numpy integer array's (distinct) values: compiled for many int64 values."""
    if np.can_cast(values.dtype, np.int64) and _parallel.use_compiled(
        values.size, COMPILED_MIN_KEYS
    ):
        from ._kernels_blake import integer_keys_compiled  # numba: loaded on first use

        return integer_keys_compiled(values, _PERSON)
    return keys_of(values.tolist())


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
    if r.shape == k.shape and r.ndim == 1 and _parallel.use_compiled(r.size, COMPILED_MIN_WORDS):
        from ._kernels_hashing import row_hash_users  # numba: one pass per user

        return row_hash_users(r.view(np.int64), k, width)
    shape = np.broadcast_shapes(r.shape, k.shape)
    top = int(r.max()) + 1 if r.size >= _ROWS_MIN else r.size
    if 4 * top <= r.size:  # users' rows from a small family: each row's (a, b) once
        every = np.arange(top, dtype=np.uint64)
        table_a, table_b = hash_parameters(every)
        a, b = table_a[r], table_b[r]
    else:
        a, b = hash_parameters(r)

    def flat(arr: np.ndarray) -> np.ndarray:
        # 1-d arrays: numpy scalar arithmetic would warn on the intended wrap-around
        return np.broadcast_to(arr, shape).reshape(-1)

    x = _mix64(flat(a) * flat(k) + flat(b))
    h = ((x >> np.uint64(32)) * np.uint64(width)) >> np.uint64(32)
    return h.astype(np.int64).reshape(shape)
