"""Compiled kernels for string items: group a list of ``str``, key a ``U`` array's rows.

The open-domain clients key each *distinct* item once (BLAKE2b, format ``ldpkit.item/1``,
:mod:`._items`) and read every user's key through her index into the distinct items.

:func:`group_segments` groups a list of ``str`` joined by NUL bytes and UTF-8 encoded in
one C call, without a Python step per item: the buffer is split into blocks of bytes, one
per thread (:mod:`ldpkit._parallel`); each block finds its segments eight bytes at a time
(a word's first zero byte by the usual bit trick) and groups them in an open-addressing
table of (fingerprint, group, first two words). A segment of up to 16 bytes (no NUL
inside) is its two zero-filled words, so it is compared in the table alone; a longer one
is compared byte for byte with its group's first segment, so the grouping never depends
on the hash. A short serial pass merges the blocks' groups (one entry per distinct string
and block) and each block relabels its users. Groups are numbered in order of first
appearance, as a dict of the strings numbers them, whatever the number of threads.

:func:`code_point_keys` keys rows of a numpy ``U`` array (fixed-width UTF-32 code points,
trailing zeros as padding) directly: each code point is encoded as UTF-8 on the fly into
the BLAKE2b message (the bytes ``str.encode("utf-8")`` gives), so no ``str`` object is
built, joined and encoded per distinct item; the rows are split over threads.
"""

from __future__ import annotations

import sys
from typing import Any

import numba as nb
import numpy as np

from .. import _parallel
from ._kernels_blake import _IV, _compress, _state

__all__ = ["code_point_keys", "group_segments"]

_U64 = np.uint64
#: Rows per thread below which one thread keys them all.
_MIN_BLOCK = 1024


@nb.njit(cache=True, nogil=True)
def _code_point_keys_block(
    codes: np.ndarray,
    rows: np.ndarray,
    init: np.ndarray,
    iv: np.ndarray,
    out: np.ndarray,
    start: int,
    stop: int,
) -> np.uint32:  # pragma: no cover - compiled
    """Keys of ``codes[rows[start:stop]]``; returns the largest code point seen (or a surrogate)."""
    width = codes.shape[1]
    data = np.zeros(4 * width + 1, dtype=np.uint8)
    h = np.empty(8, dtype=np.uint64)
    m = np.zeros(16, dtype=np.uint64)
    worst = np.uint32(0)
    for t in range(start, stop):
        i = rows[t]
        end = width  # trailing zero code points are the array's padding
        while end > 0 and codes[i, end - 1] == 0:
            end -= 1
        data[0] = np.uint8(ord("s"))
        size = 1
        for c in range(end):
            x = codes[i, c]
            if x < 0x80:
                data[size] = np.uint8(x)
                size += 1
            elif x < 0x800:
                data[size] = np.uint8(0xC0 | (x >> 6))
                data[size + 1] = np.uint8(0x80 | (x & 0x3F))
                size += 2
            elif x < 0x10000:
                if 0xD800 <= x < 0xE000:  # a surrogate has no UTF-8: refused as past U+10FFFF
                    worst = np.uint32(0xFFFFFFFF)
                data[size] = np.uint8(0xE0 | (x >> 12))
                data[size + 1] = np.uint8(0x80 | ((x >> 6) & 0x3F))
                data[size + 2] = np.uint8(0x80 | (x & 0x3F))
                size += 3
            else:
                if x > worst:
                    worst = x
                data[size] = np.uint8(0xF0 | ((x >> 18) & 0x07))
                data[size + 1] = np.uint8(0x80 | ((x >> 12) & 0x3F))
                data[size + 2] = np.uint8(0x80 | ((x >> 6) & 0x3F))
                data[size + 3] = np.uint8(0x80 | (x & 0x3F))
                size += 4
        h[:] = init
        done = 0
        while True:
            m[:] = 0
            take = min(128, size - done)
            for j in range(take):  # little-endian words of this block
                m[j >> 3] |= _U64(data[done + j]) << _U64(8 * (j & 7))
            done += take
            final = done == size
            _compress(h, m, done, final, iv)
            if final:
                break
        out[t] = h[0]
    return worst


def code_point_keys(codes: np.ndarray, rows: np.ndarray, person: bytes) -> np.ndarray | None:
    """BLAKE2b item keys of the strings ``codes[rows]`` (rows of UTF-32 code points).

    Each key is ``_items.item_key`` of the row's string (trailing zero code points are
    the ``U`` array's padding); the UTF-8 bytes are made on the fly. None when a row
    holds a surrogate or a code point past U+10FFFF (the caller's reference path names
    it).
    """
    codes = np.ascontiguousarray(codes, dtype=np.uint32)
    rows = np.ascontiguousarray(rows, dtype=np.intp)
    out = np.empty(rows.shape[0], dtype=np.uint64)
    init = _state(person)
    worst = _parallel.run_blocks(
        lambda a, b: _code_point_keys_block(codes, rows, init, _IV, out, a, b),
        _parallel.row_blocks(rows.shape[0], min_rows=_MIN_BLOCK),
    )
    if worst and max(int(w) for w in worst) > 0x10FFFF:
        return None
    return out


# -- a list of str: its joined UTF-8 bytes grouped by segment, on threads -----------------

_FOLD = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
#: Bytes per thread below which one thread groups the whole buffer.
_MIN_BLOCK_BYTES = 1 << 18
#: Segments of at most this many bytes are decided by their first two words alone.
_SHORT = 16


_LOW = np.uint64(0x0101010101010101)
_HIGH = np.uint64(0x8080808080808080)
_BYTE_INDEX = np.uint64(0x0001020304050607)


@nb.njit(cache=True, inline="always")
def _scan(words: np.ndarray, p: int) -> tuple[Any, np.uint64, np.uint64, np.uint64]:
    """Return the end, fingerprint and first two words of the segment at byte ``p``.

    The end is the next NUL; the words are little-endian and zero-filled past the end;
    eight bytes are read at a time. ``words`` is the buffer as little-endian words followed
    by a zero word, so every segment, the last one included, ends at a zero byte. A word's
    first zero byte is the lowest set bit of ``(w - 0x01..01) & ~w & 0x80..80`` (bits
    above it may be spurious, never below), its index read off by one multiply.
    """
    h = _U64(0)
    w0 = _U64(0)
    w1 = _U64(0)
    k = 0
    while True:
        at = p + 8 * k
        q = at >> 3
        o = _U64(8 * (at & 7))
        # the 8 bytes at ``at``: two aligned words (the second shift pair is 0 when o = 0)
        w = (words[q] >> o) | ((words[q + 1] << _U64(1)) << (_U64(63) - o))
        z = (w - _LOW) & ~w & _HIGH
        if z != _U64(0):
            low = z & (~z + _U64(1))  # the lowest set bit: the first zero byte's top bit
            index = np.intp((((low >> _U64(7)) * _BYTE_INDEX) >> _U64(56)) & _U64(7))
            if index:
                w &= (_U64(1) << _U64(8 * index)) - _U64(1)
                h = (h ^ (h >> _U64(29))) * _FOLD + w
                if k == 0:
                    w0 = w
                elif k == 1:
                    w1 = w
            e = at + index
            break
        h = (h ^ (h >> _U64(29))) * _FOLD + w
        if k == 0:
            w0 = w
        elif k == 1:
            w1 = w
        k += 1
    h ^= _U64(e - p)
    h = (h ^ (h >> _U64(30))) * _MUL1
    h = (h ^ (h >> _U64(27))) * _MUL2
    return e, h ^ (h >> _U64(31)), w0, w1


@nb.njit(cache=True, inline="always")
def _same_bytes(buf: np.ndarray, a: int, b: int, ra: int, rb: int) -> bool:  # pragma: no cover
    if b - a != rb - ra:
        return False
    for t in range(b - a):
        if buf[a + t] != buf[ra + t]:
            return False
    return True


@nb.njit(cache=True, inline="always")
def _find(
    table: np.ndarray,
    bits: int,
    h: np.uint64,
    w0: np.uint64,
    w1: np.uint64,
    buf: np.ndarray,
    a: int,
    b: int,
    g_start: np.ndarray,
    g_end: np.ndarray,
    base: int,
) -> tuple[Any, Any]:  # pragma: no cover - compiled
    """Probe for a segment: (its group, -1) if present, else (-1, the free slot)."""
    mask = (1 << bits) - 1
    s = np.intp(h >> _U64(64 - bits))
    while True:
        tag = np.intp(table[s, 1])
        if tag == 0:
            return -1, s
        if table[s, 0] == h and table[s, 2] == w0 and table[s, 3] == w1:
            g = tag - 1
            # up to 16 bytes (no NUL inside) the two zero-filled words are the segment
            if b - a <= _SHORT or _same_bytes(buf, a, b, g_start[base + g], g_end[base + g]):
                return g, -1
        s = (s + 1) & mask


@nb.njit(cache=True, inline="always")
def _claim(
    table: np.ndarray, slot: int, h: np.uint64, group: int, w0: np.uint64, w1: np.uint64
) -> None:  # pragma: no cover - compiled
    """Fill a free slot: the print, ``group + 1`` (0 marks a free slot), the first words."""
    table[slot, 0] = h
    table[slot, 1] = _U64(group + 1)
    table[slot, 2] = w0
    table[slot, 3] = w1


@nb.njit(cache=True, inline="always")
def _grown(table: np.ndarray, bits: int) -> np.ndarray:  # pragma: no cover - compiled
    """Rebuild the table at ``bits`` (twice its size), each used slot moved by its print."""
    mask = (1 << bits) - 1
    out = np.zeros((mask + 1, 4), dtype=np.uint64)
    for t in range(table.shape[0]):
        if table[t, 1] != 0:
            u = np.intp(table[t, 0] >> _U64(64 - bits))
            while out[u, 1] != 0:
                u = (u + 1) & mask
            out[u] = table[t]
    return out


@nb.njit(cache=True, nogil=True)
def _segments_block(
    buf: np.ndarray,
    words: np.ndarray,
    lo: int,
    hi: int,
    last: bool,
    local: np.ndarray,
    g_first: np.ndarray,
    g_start: np.ndarray,
    g_end: np.ndarray,
    g_print: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Group the segments starting in bytes lo..hi-1 (and at the end, for the last block).

    A block's j-th segment writes its group to ``local[lo + j]`` and its g-th group writes
    its first segment (``lo + j``), span and print at ``lo + g``: at most one segment
    starts per byte, so blocks never overlap. Returns (segments, groups).
    """
    size = buf.shape[0]
    p = lo
    if lo > 0 and buf[lo - 1] != 0:  # inside a segment that started in an earlier block
        while p < size and buf[p] != 0:
            p += 1
        p += 1
    bits = 10
    table = np.zeros((1 << bits, 4), dtype=np.uint64)  # print, group + 1, w0, w1
    groups = 0
    j = 0
    while p < hi or (last and p == size):
        e, h, w0, w1 = _scan(words, p)
        g, free = _find(table, bits, h, w0, w1, buf, p, e, g_start, g_end, lo)
        if g < 0:
            g = groups
            _claim(table, free, h, g, w0, w1)
            g_first[lo + g] = lo + j
            g_start[lo + g] = p
            g_end[lo + g] = e
            g_print[lo + g] = h
            groups += 1
            if 2 * groups > table.shape[0]:  # half full: rebuild at twice the size
                bits += 1
                table = _grown(table, bits)
        local[lo + j] = g
        j += 1
        if e >= size:
            break
        p = e + 1
    return j, groups


@nb.njit(cache=True)
def _merge_segments(
    buf: np.ndarray,
    bases: np.ndarray,
    counts: np.ndarray,
    groups: np.ndarray,
    g_first: np.ndarray,
    g_start: np.ndarray,
    g_end: np.ndarray,
    g_print: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Merge the blocks' groups in block order.

    Returns the merged groups' first users and spans, and each block group's merged
    number (blocks' groups laid end to end).
    """
    blocks = bases.shape[0]
    total = 0
    for b in range(blocks):
        total += groups[b]
    bits = 10
    while (1 << bits) < 2 * total + 2:
        bits += 1
    table = np.zeros((1 << bits, 4), dtype=np.uint64)
    first = np.empty(total, dtype=np.intp)
    m_start = np.empty(total, dtype=np.intp)
    m_end = np.empty(total, dtype=np.intp)
    mapping = np.empty(total, dtype=np.intp)
    merged = 0
    at = 0
    users = 0  # users in the blocks before this one
    for b in range(blocks):
        lo = bases[b]
        for g in range(groups[b]):
            a = g_start[lo + g]
            e = g_end[lo + g]
            h = g_print[lo + g]
            w0 = _U64(0)
            w1 = _U64(0)
            for t in range(min(16, e - a)):  # the zero-filled first two words
                if t < 8:
                    w0 |= _U64(buf[a + t]) << _U64(8 * t)
                else:
                    w1 |= _U64(buf[a + t]) << _U64(8 * (t - 8))
            k, free = _find(table, bits, h, w0, w1, buf, a, e, m_start, m_end, 0)
            if k < 0:
                k = merged
                _claim(table, free, h, k, w0, w1)
                first[k] = users + (g_first[lo + g] - lo)
                m_start[k] = a
                m_end[k] = e
                merged += 1
            mapping[at] = k
            at += 1
        users += counts[b]
    return first[:merged].copy(), m_start[:merged].copy(), m_end[:merged].copy(), mapping


@nb.njit(cache=True, nogil=True)
def _relabel(
    local: np.ndarray,
    lo: int,
    count: int,
    mapping: np.ndarray,
    offset: int,
    out: np.ndarray,
    user: int,
) -> None:  # pragma: no cover - compiled
    for j in range(count):
        out[user + j] = mapping[offset + local[lo + j]]


def group_segments(
    buf: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Group the ``n`` NUL-separated segments of ``buf`` (uint8) by their bytes.

    Returns
    -------
    first : ndarray of intp
        The first user of each distinct segment, in order of first appearance.
    starts, ends : ndarray of intp
        The byte span ``buf[starts[g]:ends[g]]`` of each distinct segment.
    inverse : ndarray of intp
        Each user's group: ``first[inverse[i]]`` holds the same bytes as user i.

    None when ``buf`` does not hold exactly ``n`` segments (a string held a NUL itself).
    Blocks of bytes are grouped on threads and merged (module docstring).
    """
    buf = np.ascontiguousarray(buf, dtype=np.uint8)
    size = buf.shape[0]
    if sys.byteorder != "little":  # the words are read as little-endian byte runs
        return None
    words = np.zeros(size // 8 + 2, dtype=np.uint64)  # a zero word past the end
    words.view(np.uint8)[:size] = buf
    blocks = _parallel.row_blocks(size + 1, min_rows=_MIN_BLOCK_BYTES)
    cap = size + 1  # at most one segment (and group) starts per byte, plus the last
    local = np.empty(cap, dtype=np.intp)
    g_first = np.empty(cap, dtype=np.intp)
    g_start = np.empty(cap, dtype=np.intp)
    g_end = np.empty(cap, dtype=np.intp)
    g_print = np.empty(cap, dtype=np.uint64)
    last = blocks[-1][0]
    found = _parallel.run_blocks(
        lambda a, b: _segments_block(
            buf, words, a, min(b, size), a == last, local, g_first, g_start, g_end, g_print
        ),
        blocks,
    )
    if n < 1 or sum(j for j, _ in found) != n:
        return None
    bases = np.array([a for a, _ in blocks], dtype=np.intp)
    counts = np.array([j for j, _ in found], dtype=np.intp)
    groups = np.array([g for _, g in found], dtype=np.intp)
    if len(blocks) == 1:  # one block: its groups are the merged ones
        k = int(groups[0])
        return g_first[:k].copy(), g_start[:k].copy(), g_end[:k].copy(), local[:n]
    first, starts, ends, mapping = _merge_segments(
        buf, bases, counts, groups, g_first, g_start, g_end, g_print
    )
    inverse = np.empty(n, dtype=np.intp)
    offsets = np.concatenate(([0], np.cumsum(groups)[:-1]))
    users = np.concatenate(([0], np.cumsum(counts)[:-1]))
    tasks = list(
        zip(bases.tolist(), counts.tolist(), offsets.tolist(), users.tolist(), strict=True)
    )
    _parallel.run_blocks(
        lambda a, _: _relabel(
            local, tasks[a][0], tasks[a][1], mapping, tasks[a][2], inverse, tasks[a][3]
        ),
        [(t, t + 1) for t in range(len(tasks))],
    )
    return first, starts, ends, inverse
