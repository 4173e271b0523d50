"""Strings to symbol grids and prefix keys: the client side of :mod:`ldpkit.discovery`.

A string becomes a row of ``max_length`` symbols:

* bytes alphabet (default): its UTF-8 bytes, cut at ``max_length`` bytes (at the last whole
  character that fits: a multi-byte character is never split) and padded with the symbol 0
  (the NUL byte ends a string; a string with an embedded NUL is counted as its part before it
  would be, which the server cannot tell apart);
* a given alphabet of ``A - 1`` characters: symbol ``1 + index`` of each character, cut at
  ``max_length`` characters and padded with 0; a character outside the alphabet is refused.

A prefix of ``l`` symbols is named by a 64-bit key, chained through the splitmix64
finalizer (a bijection of 64-bit words): ``key_0 = K``, ``key_l = mix(key_{l-1} + (s_l +
1) * gamma)``. Two different prefixes share a key with probability ~2^-64 per pair. Group
``l`` hashes keys into ``[g]`` with the ``H`` public functions ``h_{l,j}(key) = ((mix(key
^ seed_{l,j}) >> 32) * g) >> 32``, ``seed_{l,j} = mix((l H + j) gamma + F)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import _parallel
from .._constraints import Check
from .._validation import _show, check_not_masked
from ..frequency._items import (
    COMPILED_MIN_WORDS,
    check_code_points,
    distinct_in_order,
    distinct_rows,
    distinct_strings,
    exposed_text_array,
    unicode_codes,
)

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_KEY0 = np.uint64(0x6C64706B69742D70)  # "ldpkit-p": the key of the empty prefix
_FAMILY = np.uint64(0x6C64706B69742D68)  # "ldpkit-h": offset of the hash family's seeds


def mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer on a uint64 array (arithmetic wraps modulo 2^64)."""
    z = (z ^ (z >> np.uint64(30))) * _MUL1
    z ^= z >> np.uint64(27)  # in place from here: the server mixes millions of keys
    z *= _MUL2
    z ^= z >> np.uint64(31)
    return z


def extend_keys(keys: np.ndarray, symbols: np.ndarray) -> np.ndarray:
    """Keys of the prefixes ``keys`` extended by one symbol each (broadcasting)."""
    return mix64(keys + (symbols.astype(np.uint64) + np.uint64(1)) * _GAMMA)


def empty_key(shape: Any = ()) -> np.ndarray:
    return np.full(shape, _KEY0, dtype=np.uint64)


def family_seeds(level: int, hash_functions: int) -> np.ndarray:
    """Return the ``H`` public seeds of group ``level`` (0-based)."""
    j = np.arange(hash_functions, dtype=np.uint64) + np.uint64(level * hash_functions)
    return mix64(j * _GAMMA + _FAMILY)


def hash_keys(keys: np.ndarray, seeds: np.ndarray, hash_range: int) -> np.ndarray:
    """``h(key)`` in ``[0, g)`` for broadcast keys and seeds (int64)."""
    if (
        keys.ndim == 1
        and keys.shape == seeds.shape
        and _parallel.use_compiled(keys.shape[0], COMPILED_MIN_WORDS)
    ):
        from ..frequency._kernels_hashing import xor_seed_hashes  # one pass per user

        return xor_seed_hashes(keys, seeds, hash_range)
    return hash_keys_u64(keys, seeds, hash_range).astype(np.int64)


def prefix_hashes(
    key_table: np.ndarray,
    inverse: np.ndarray,
    levels: np.ndarray,
    seed_table: np.ndarray,
    hashes: np.ndarray,
    hash_range: int,
) -> np.ndarray:
    """Each user's hash of her distinct string's prefix key at her level (int64).

    ``hash_keys(key_table[inverse, levels], seed_table[levels * H + hashes], g)`` with
    ``H = len(seed_table) // key_table.shape[1]``; large batches with numba in one
    compiled pass (the same values, no gathered temporaries).
    """
    if _parallel.use_compiled(inverse.shape[0], COMPILED_MIN_WORDS):
        from ..frequency._kernels_hashing import gathered_xor_seed_hashes

        return gathered_xor_seed_hashes(key_table, inverse, levels, seed_table, hashes, hash_range)
    length = key_table.shape[1]
    keys = key_table.reshape(-1)[inverse * length + levels]
    seeds = seed_table[levels * (seed_table.shape[0] // length) + hashes]
    return hash_keys(keys, seeds, hash_range)


def hash_keys_u64(keys: np.ndarray, seeds: np.ndarray, hash_range: int) -> np.ndarray:
    """:func:`hash_keys` as uint64 (no conversion pass: the server's hot path)."""
    x = mix64(keys ^ seeds)
    x >>= np.uint64(32)
    x *= np.uint64(hash_range)
    x >>= np.uint64(32)
    return x


def _as_list(values: Any) -> list[Any] | np.ndarray:
    check_not_masked(values, "values")
    exposed = exposed_text_array(values)  # a pandas/pyarrow column of fixed-width text
    if exposed is not None:
        values = exposed
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"values must be a sequence of strings, got {_show(values)}")
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"values must be a 1-D sequence of strings, got shape {values.shape}")
        if values.dtype.kind in "US":
            return values
        if values.dtype.kind != "O":
            raise TypeError(f"values must be a sequence of strings, got {_show(values)}")
        return values.tolist()  # the same objects, ~2x faster than list()
    return list(values)


def encode_strings(values: Any, max_length: int, alphabet: str | None) -> np.ndarray:
    """Each user's string as ``max_length`` symbols (see the module docstring).

    Returns
    -------
    ndarray of shape (n, max_length)
        uint8 (bytes alphabet) or uint16 symbols; 0 is the padding.
    """
    items = _as_list(values)
    n = len(items)
    if alphabet is not None:
        return _encode_alphabet(items, n, max_length, alphabet)
    width = max_length + 1  # one byte more: a cut inside a character shows there
    if isinstance(items, np.ndarray) and items.dtype.kind == "U":
        joined: tuple[np.ndarray, bool] | None = _unicode_grid(items, width)
    else:
        joined = _utf8_grid(items, n, width)
    grid = _grid_per_item(items, n, width) if joined is None else joined[0]
    out = grid[:, :max_length].copy()
    # A character cut at max_length leaves 1-3 bytes of it: drop them (back to its lead byte).
    cut = (grid[:, max_length] & 0xC0) == 0x80
    if cut.any():
        rows = np.flatnonzero(cut)
        cont = (grid[rows] & 0xC0) == 0x80
        start = np.full(rows.size, max_length, dtype=np.int64)
        for back in range(1, 4):  # at most 3 continuation bytes precede a lead byte
            pos = max_length - back
            if pos < 0:
                break
            still = cont[:, pos] & (start == pos + 1)
            start[still] = pos
        start = np.maximum(start - 1, 0)  # the lead byte itself goes too
        cols = np.arange(max_length)
        out[rows] = np.where(cols[None, :] < start[:, None], out[rows], 0)
    if joined is not None and not joined[1]:
        return out  # no string holds a NUL: each row already ends at its first 0
    return _end_at_nul(out)


def encode_distinct(
    values: Any, max_length: int, alphabet: str | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Encode each distinct string of a large numpy ``U`` array or list of strings once.

    Returns
    -------
    symbols : ndarray
        The rows of :func:`encode_strings`: one per distinct string when ``inverse`` is
        given, else one per user.
    inverse : ndarray of intp or None
        Each user's row in ``symbols`` (``symbols[inverse]`` is ``encode_strings(values)``),
        or None unless the values are a ``U`` array or a list of ``str``/``bytes`` of at
        least ``_DISTINCT_MIN`` users holding each string twice on average (elsewhere
        grouping would not pay).
    """
    if type(values) is list and (grouped := distinct_strings(values)) is not None:
        if len(grouped[0]) * 2 <= len(values):  # a list of str: grouped by a compiled pass
            return encode_strings(grouped[0], max_length, alphabet), grouped[1]
    items = _as_list(values)
    if len(items) < _DISTINCT_MIN:
        return encode_strings(items, max_length, alphabet), None
    if isinstance(items, np.ndarray):
        if items.dtype.kind == "U":
            first, inverse = distinct_rows(unicode_codes(items))
            if first.size * 2 <= len(items):
                return encode_strings(items[first], max_length, alphabet), inverse
        return encode_strings(items, max_length, alphabet), None
    grouped = _distinct_in_list(items)
    if grouped is not None:
        uniques, inverse = grouped
        return encode_strings(uniques, max_length, alphabet), inverse
    return encode_strings(items, max_length, alphabet), None


def _distinct_in_list(items: list[Any]) -> tuple[list[Any], np.ndarray] | None:
    """Return a list's distinct strings and each user's index into them, or None.

    A dict finds them in C loops (:func:`distinct_in_order`: ~0.1 s per 10^6 users,
    against ~0.2 s to encode every string and build every user's prefix keys). None when
    an item is unhashable or not exactly ``str``/``bytes`` (the per-user path then says what
    is wrong with it), or when under two users share a string on average. ``str`` and
    ``bytes`` never compare equal, so a distinct item encodes as each of its users' would.
    """
    try:
        uniques, codes = distinct_in_order(items)
    except TypeError:  # e.g. a bytearray or a list among the items
        return None
    if len(uniques) * 2 > len(items) or not set(map(type, uniques)) <= {str, bytes}:
        return None
    return uniques, codes


def prefix_key_table(symbols: np.ndarray) -> np.ndarray:
    """Keys of every prefix of every row: column ``p`` is the key of the first ``p + 1``.

    Row ``i``, column ``p`` equals ``level_keys(symbols, levels)[i]`` for ``levels[i] = p``
    (the same chain of :func:`extend_keys`).
    """
    n, length = symbols.shape
    table = np.empty((n, length), dtype=np.uint64)
    key = empty_key(n)
    for pos in range(length):  # a loop over prefix positions, not over users
        key = extend_keys(key, symbols[:, pos])
        table[:, pos] = key
    return table


def _grid_per_item(items: Any, n: int, width: int) -> np.ndarray:
    """:func:`_utf8_grid` for bytes and numpy strings: one encoding per item."""
    if isinstance(items, np.ndarray) and items.dtype.kind == "S":
        raw = np.asarray(items, dtype=f"S{width}")
    else:
        try:
            encoded = [s.encode("utf-8") if type(s) is str else _bytes_of(s) for s in items]
        except UnicodeEncodeError:
            raise ValueError(
                "values must be strings encodable as UTF-8 (no lone surrogates)"
            ) from None
        raw = np.array(encoded, dtype=f"S{width}") if n else np.zeros(0, dtype=f"S{width}")
    grid = np.zeros((n, width), dtype=np.uint8)
    if n:
        view = raw.view(np.uint8).reshape(n, -1)
        grid[:, : view.shape[1]] = view
    return grid


def _utf8_grid(items: Any, n: int, width: int) -> tuple[np.ndarray, bool] | None:
    """Return the first ``width`` UTF-8 bytes of each string, zero-padded, or None.

    The strings are joined with NUL separators and encoded in one call; each one's bytes
    start after a separator, so no Python work is done per string. Also returns whether
    some string holds a NUL itself (then its separators are found from the lengths in
    characters). None when an item is not a ``str`` (the per-item path handles it).
    """
    if isinstance(items, np.ndarray) or not n or set(map(type, items)) != {str}:
        return None
    joined = "\x00".join(items)
    try:
        # a lone surrogate anywhere fails here, as it would in that string's own encoding
        raw = joined.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("values must be strings encodable as UTF-8 (no lone surrogates)") from None
    buf = np.frombuffer(raw, dtype=np.uint8)
    seps = np.flatnonzero(buf == 0)
    has_nul = seps.size != n - 1
    if has_nul:  # separator i is character sum(len[:i + 1]) + i of the joined string
        seps = np.cumsum(np.fromiter(map(len, items), dtype=np.int64, count=n) + 1)[:-1] - 1
        if len(raw) != len(joined):  # multi-byte characters: character to byte offsets
            seps = np.flatnonzero((buf & 0xC0) != 0x80)[seps]
    starts = np.zeros(n, dtype=np.intp)
    starts[1:] = seps + 1
    lengths = np.append(seps, buf.size) - starts
    padded = np.zeros(buf.size + width, dtype=np.uint8)  # no window runs past the end
    padded[: buf.size] = buf
    grid = sliding_window_view(padded, width)[starts]  # a copy: row i is string i's window
    within = np.arange(width, dtype=np.uint8) < np.minimum(lengths, width).astype(np.uint8)[:, None]
    np.multiply(grid, within, out=grid)  # zero the next strings' bytes (faster than a mask)
    return grid, has_nul


#: UTF-8 lead byte's marker bits by sequence length (index: bytes of the character).
_LEAD = np.array([0, 0, 0xC0, 0xE0, 0xF0], dtype=np.uint32)


def _unicode_grid(arr: np.ndarray, width: int) -> tuple[np.ndarray, bool]:
    """:func:`_utf8_grid` for a numpy ``U`` array, vectorized over its UCS-4 code points.

    ASCII rows are copied as they are; the others go through a vectorized UTF-8 encoder
    (each character's byte count, its bytes' positions by a running sum along the row,
    the lead and continuation bytes scattered into the grid). Also returns whether a row
    holds a NUL before other characters (the array's own padding is trailing NULs).
    """
    n = arr.shape[0]
    chars = arr.dtype.itemsize // 4
    grid = np.zeros((n, width), dtype=np.uint8)
    if n == 0 or chars == 0:
        return grid, False
    # native byte order first: the code points are read as uint32 (a '>U' array too)
    native = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    whole = native.view(np.uint32).reshape(n, chars)
    # a NUL with characters after it (the array's padding NULs are not counted in lengths)
    has_nul = np.count_nonzero(whole) != int(np.strings.str_len(arr).sum())
    codes = whole[:, :width]
    if int(whole.max()) < 0x80:  # ASCII: the code points are the bytes
        grid[:, : codes.shape[1]] = codes
        return grid, has_nul
    check_code_points(int(whole.max()))
    if ((whole >= 0xD800) & (whole < 0xE000)).any():
        raise ValueError("values must be strings encodable as UTF-8 (no lone surrogates)")
    high = codes.max(axis=1) >= 0x80
    low = np.flatnonzero(~high)
    grid[low, : codes.shape[1]] = codes[low]
    rows = np.flatnonzero(high)
    wide = codes[rows]
    count = 1 + (wide >= 0x80) + (wide >= 0x800) + (wide >= 0x10000).astype(np.int64)
    start = np.cumsum(count, axis=1) - count  # each character's first byte in the row
    base = (np.arange(rows.size, dtype=np.int64) * width)[:, None]
    flat = np.zeros((rows.size, width), dtype=np.uint8)
    out = flat.reshape(-1)
    for k in range(4):  # byte k of each character that has one (within the width)
        take = (count > k) & (start + k < width)
        c, m = wide[take], count[take]
        shift = (6 * (m - 1 - k)).astype(np.uint32)
        if k == 0:
            byte = _LEAD[m] | (c >> shift)
        else:
            byte = 0x80 | ((c >> shift) & 0x3F)
        out[(base + start + k)[take]] = byte.astype(np.uint8)
    grid[rows] = flat
    return grid, has_nul


def _end_at_nul(grid: np.ndarray) -> np.ndarray:
    """Make a NUL symbol end the string (in place).

    Every symbol after the first 0 becomes padding too (so the device's deeper prefixes are
    those the server tests for the shorter string).
    """
    ended = np.cumsum(grid == 0, axis=1, dtype=np.int32) > 0
    grid[ended] = 0
    return grid


def _bytes_of(item: Any) -> bytes:
    if isinstance(item, (bytes, np.bytes_)):
        return bytes(item)
    if isinstance(item, np.str_):
        return str(item).encode("utf-8")
    raise TypeError(f"values must be a sequence of strings, got an item {_show(item)}")


def _encode_alphabet(items: Any, n: int, max_length: int, alphabet: str) -> np.ndarray:
    if isinstance(items, np.ndarray) and items.dtype.kind == "U" and n >= _DISTINCT_MIN:
        # each distinct string once (a hash table of the fixed-width rows), then gathered
        first, inverse = distinct_rows(unicode_codes(items))
        if first.size * 2 <= n:
            return _encode_alphabet(items[first], first.size, max_length, alphabet)[inverse]
    if n and not (isinstance(items, np.ndarray) and items.dtype.kind == "U"):
        if not all(isinstance(s, str) for s in items):
            bad = next(s for s in items if not isinstance(s, str))
            raise TypeError(f"values must be a sequence of strings, got an item {_show(bad)}")
    text = np.asarray(items, dtype=f"U{max_length}") if n else np.zeros(0, f"U{max_length}")
    codes = text.view(np.uint32).reshape(n, max_length)
    if codes.size:
        check_code_points(int(codes.max()))
    table = np.array(sorted(ord(c) for c in alphabet), dtype=np.uint32)
    symbol_of = np.array([1 + alphabet.index(chr(c)) for c in table.tolist()], dtype=np.uint16)
    pos = np.searchsorted(table, codes)
    pos_c = np.minimum(pos, table.size - 1)
    known = table[pos_c] == codes
    if not np.all(known | (codes == 0)):
        bad = sorted({chr(c) for c in codes[~known & (codes != 0)].tolist()})[:5]
        raise ValueError(f"values must use only the spec's alphabet characters, got {bad}")
    return _end_at_nul(np.where(codes == 0, 0, symbol_of[pos_c]).astype(np.uint16))


def level_keys(symbols: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Key of each user's prefix of ``levels[i] + 1`` symbols (vectorized over users).

    The users are sorted by level (a radix sort of small integers), so that the prefixes
    still growing at position ``p`` are one slice: each key is extended only up to its level.
    """
    n, length = symbols.shape
    out = np.zeros(n, dtype=np.uint64)
    inside = (levels >= 0) & (levels < length)  # any other level keeps the key 0
    if not inside.all():
        users = np.flatnonzero(inside)
        out[users] = level_keys(symbols[users], levels[users])
        return out
    small = np.uint16 if length <= 1 << 16 else np.int64  # numpy radix-sorts 16-bit keys
    order = np.argsort(levels.astype(small), kind="stable")
    first = np.zeros(length + 1, dtype=np.intp)  # users of level p: first[p]:first[p + 1]
    first[1:] = np.cumsum(np.bincount(levels, minlength=length))
    rows = np.take(symbols, order, axis=0)  # ~5x faster than symbols[order] on 2-D
    key = empty_key(n)
    done = 0  # the sorted users before this one have keys of their level already
    for pos in range(length):  # a loop over prefix positions, not over users
        key = key[first[pos] - done :]
        done = first[pos]
        z = rows[done:, pos].astype(np.uint64)
        z += np.uint64(1)
        z *= _GAMMA
        z += key
        key = _mix64_inplace(z)
        out[order[done : first[pos + 1]]] = key[: first[pos + 1] - done]
    return out


#: Users from which the alphabet's encoding looks for repeated strings first.
_DISTINCT_MIN = 4096


def _mix64_inplace(z: np.ndarray) -> np.ndarray:
    """:func:`mix64` overwriting ``z`` (one temporary per shift, none per product)."""
    z ^= z >> np.uint64(30)
    z *= _MUL1
    z ^= z >> np.uint64(27)
    z *= _MUL2
    z ^= z >> np.uint64(31)
    return z


def decode_symbols(row: np.ndarray, alphabet: str | None) -> str:
    """Return the string a row of symbols stands for (trailing padding dropped)."""
    symbols = [int(s) for s in row]
    while symbols and symbols[-1] == 0:
        symbols.pop()
    if alphabet is None:
        # bytes the server assembled need not be valid UTF-8: keep them distinct and visible
        return bytes(symbols).decode("utf-8", errors="backslashreplace")
    return "".join("\\x00" if s == 0 else alphabet[s - 1] for s in symbols)


def checked_alphabet(alphabet: Any, name: str = "alphabet") -> Any:
    """Return ``alphabet`` after :func:`check_alphabet` (for the specs' declarations)."""
    check_alphabet(alphabet)
    return alphabet


def check_alphabet(alphabet: Any) -> None:
    """Refuse an ``alphabet`` that is not None or 1 to 4095 distinct characters.

    NUL is refused too: it pads the strings.
    """
    if alphabet is None:
        return
    if not isinstance(alphabet, str):
        raise TypeError(
            f"alphabet must be None or a string of distinct characters, got {_show(alphabet)}"
        )
    if not 1 <= len(alphabet) <= 4095 or len(set(alphabet)) != len(alphabet):
        raise ValueError(
            "alphabet must be None or a string of 1 to 4095 distinct characters, "
            f"got {alphabet[:40]!r}"
        )
    if "\x00" in alphabet:
        raise ValueError("alphabet must not contain NUL (the padding), got '\\x00'")


#: The declaration of the specs' ``alphabet`` field (None: bytes, any string).
ALPHABET = Check(
    checked_alphabet,
    "a string of 1 to 4095 distinct characters without NUL",
    kind="str",
    hostile_values=[3, "", "aa", "a\x00"],
)
