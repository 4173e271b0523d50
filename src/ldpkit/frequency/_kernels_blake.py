"""Compiled BLAKE2b item keys of many strings at once (format ``ldpkit.item/1``).

:func:`ldpkit.frequency._items.keys_of` hashes each distinct string with :mod:`hashlib`:
a Python call, an encoding and a digest object per string (~1 us each, the largest cost of
a sketch client at tens of thousands of distinct items). Here the strings arrive as one
buffer of UTF-8 bytes with their spans, and each key is BLAKE2b (RFC 7693) computed in a
compiled loop with the parameters of :func:`ldpkit.frequency._items.item_key`: a digest
of 8 bytes, no key, no salt, personalization ``b"ldpkit.item.v1"``, over ``b"s"`` followed
by the string's bytes (:func:`string_keys_compiled`), or ``b"i"`` followed by an int64's
minimal big-endian two's complement bytes (:func:`integer_keys_compiled`). The key is the digest read little-endian, which is the first state
word after the last compression. ``tests/frequency/test_item_keys_batch.py`` checks it
against :mod:`hashlib` on strings of every length class (one block, block boundaries,
several blocks).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .. import _parallel

__all__ = ["integer_keys_compiled", "string_keys_compiled"]

_U64 = np.uint64
#: Strings per thread below which one thread keys them all.
_MIN_BLOCK = 2048
_IV = np.array(
    [
        0x6A09E667F3BCC908,
        0xBB67AE8584CAA73B,
        0x3C6EF372FE94F82B,
        0xA54FF53A5F1D36F1,
        0x510E527FADE682D1,
        0x9B05688C2B3E6C1F,
        0x1F83D9ABFB41BD6B,
        0x5BE0CD19137E2179,
    ],
    dtype=np.uint64,
)


def _initial_state(person: bytes, digest_size: int) -> np.ndarray:
    """BLAKE2b's state after its parameter block (no key, no salt, ``person``)."""
    h = _IV.copy()
    h[0] ^= np.uint64(0x01010000 | digest_size)  # fanout 1, depth 1, no key
    words = np.frombuffer(person.ljust(16, b"\0"), dtype="<u8").astype(np.uint64)
    h[6] ^= words[0]
    h[7] ^= words[1]
    return h


@nb.njit(cache=True, inline="always")
def _rotr(x: np.uint64, n: int) -> np.uint64:  # pragma: no cover - compiled
    return (x >> _U64(n)) | (x << _U64(64 - n))


@nb.njit(cache=True, inline="always")
def _g(
    a: np.uint64, b: np.uint64, c: np.uint64, d: np.uint64, x: np.uint64, y: np.uint64
) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:  # pragma: no cover - compiled
    a = a + b + x
    d = _rotr(d ^ a, 32)
    c = c + d
    b = _rotr(b ^ c, 24)
    a = a + b + y
    d = _rotr(d ^ a, 16)
    c = c + d
    b = _rotr(b ^ c, 63)
    return a, b, c, d


@nb.njit(cache=True, inline="always")
def _round(v: tuple, a: tuple) -> tuple:  # pragma: no cover - compiled
    """One round of RFC 7693's F: ``a`` is the message in this round's schedule order."""
    v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15 = v
    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15 = a
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, a0, a1)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, a2, a3)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, a4, a5)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, a6, a7)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, a8, a9)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, a10, a11)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, a12, a13)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, a14, a15)
    return (v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15)


@nb.njit(cache=True)
def _compress(
    h: np.ndarray, m: np.ndarray, counter: int, last: bool, iv: np.ndarray
) -> None:  # pragma: no cover - compiled
    """RFC 7693's F, in place on ``h`` (``counter`` < 2^64: the high counter word is 0).

    The working vector and each round's message are tuples of scalars (kept in registers),
    the message schedule (RFC 7693's SIGMA, rows 0-9 then 0-1) written out as constant
    indices: ~2x faster than indexing the schedule and the message in a loop.
    """
    m0, m1, m2, m3, m4, m5, m6, m7 = m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]
    m8, m9, m10, m11, m12, m13, m14, m15 = (m[8], m[9], m[10], m[11], m[12], m[13], m[14], m[15])
    s0 = (m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15)
    s1 = (m14, m10, m4, m8, m9, m15, m13, m6, m1, m12, m0, m2, m11, m7, m5, m3)
    s2 = (m11, m8, m12, m0, m5, m2, m15, m13, m10, m14, m3, m6, m7, m1, m9, m4)
    s3 = (m7, m9, m3, m1, m13, m12, m11, m14, m2, m6, m5, m10, m4, m0, m15, m8)
    s4 = (m9, m0, m5, m7, m2, m4, m10, m15, m14, m1, m11, m12, m6, m8, m3, m13)
    s5 = (m2, m12, m6, m10, m0, m11, m8, m3, m4, m13, m7, m5, m15, m14, m1, m9)
    s6 = (m12, m5, m1, m15, m14, m13, m4, m10, m0, m7, m6, m3, m9, m2, m8, m11)
    s7 = (m13, m11, m7, m14, m12, m1, m3, m9, m5, m0, m15, m4, m8, m6, m2, m10)
    s8 = (m6, m15, m14, m9, m11, m3, m0, m8, m12, m2, m13, m7, m1, m4, m10, m5)
    s9 = (m10, m2, m8, m4, m7, m6, m1, m5, m15, m11, m9, m14, m3, m12, m13, m0)
    v0, v1, v2, v3, v4, v5, v6, v7 = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
    v8, v9, v10, v11, v13, v15 = iv[0], iv[1], iv[2], iv[3], iv[5], iv[7]
    v12 = iv[4] ^ _U64(counter)
    v14 = ~iv[6] if last else iv[6]
    v = (v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15)
    # 12 rounds, written out (a loop over the schedules would keep them in memory)
    v = _round(_round(_round(_round(v, s0), s1), s2), s3)
    v = _round(_round(_round(_round(v, s4), s5), s6), s7)
    v = _round(_round(_round(_round(v, s8), s9), s0), s1)  # rounds 10, 11 repeat 0, 1
    for k in range(8):
        h[k] ^= v[k] ^ v[k + 8]


@nb.njit(cache=True, nogil=True)
def _keys(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    prefix: np.uint8,
    init: np.ndarray,
    iv: np.ndarray,
    out: np.ndarray,
    first: int,
    stop: int,
) -> None:  # pragma: no cover - compiled
    h = np.empty(8, dtype=np.uint64)
    m = np.zeros(16, dtype=np.uint64)
    for i in range(first, stop):
        h[:] = init
        total = ends[i] - starts[i] + 1  # the prefix byte, then the string's bytes
        done = 0  # bytes compressed so far
        while True:
            m[:] = 0
            take = min(128, total - done)
            for j in range(take):  # little-endian words of this block
                p = done + j
                byte = prefix if p == 0 else buf[starts[i] + p - 1]
                m[j >> 3] |= _U64(byte) << _U64(8 * (j & 7))
            done += take
            last = done == total  # (a message of 128 k bytes ends on a full block)
            _compress(h, m, done, last, iv)
            if last:
                break
        out[i] = h[0]


@nb.njit(cache=True)
def _integer_keys(
    values: np.ndarray, init: np.ndarray, iv: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    n = values.shape[0]
    out = np.empty(n, dtype=np.uint64)
    h = np.empty(8, dtype=np.uint64)
    m = np.zeros(16, dtype=np.uint64)
    for i in range(n):
        x = values[i]
        # Python's x.bit_length() (of |x|, as an unsigned word: |-2^63| fits), then
        # x.to_bytes((bit_length + 8) // 8, "big", signed=True) after the b"i" prefix
        mag = _U64(0) - _U64(x) if x < 0 else _U64(x)
        length = 0
        while mag != _U64(0):
            mag >>= _U64(1)
            length += 1
        size = (length + 8) // 8  # 1 .. 9 bytes
        sign = _U64(0xFF) if x < 0 else _U64(0)
        m[:] = 0
        m[0] = _U64(ord("i"))
        for k in range(size):  # byte k of the big-endian two's complement
            shift = 8 * (size - 1 - k)
            byte = sign if shift >= 64 else (_U64(x) >> _U64(shift)) & _U64(0xFF)
            j = k + 1
            m[j >> 3] |= byte << _U64(8 * (j & 7))
        h[:] = init
        _compress(h, m, size + 1, True, iv)
        out[i] = h[0]
    return out


def integer_keys_compiled(values: np.ndarray, person: bytes) -> np.ndarray:
    """Return the 8-byte BLAKE2b keys of int64 ``values`` (``b"i"`` and their bytes).

    Each key equals :func:`ldpkit.frequency._items.item_key` of ``int(values[i])``.
    """
    return _integer_keys(  # type: ignore[no-any-return]
        np.ascontiguousarray(values, dtype=np.int64), _state(person), _IV
    )


_PERSON_STATE: dict[tuple[bytes, int], np.ndarray] = {}


def _state(person: bytes) -> np.ndarray:
    state = _PERSON_STATE.get((person, 8))
    if state is None:
        state = _PERSON_STATE[(person, 8)] = _initial_state(person, 8)
    return state


def string_keys_compiled(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, person: bytes
) -> np.ndarray:
    """Return the 8-byte BLAKE2b keys of ``b"s" + buf[starts[i]:ends[i]]`` (uint64).

    Each key equals ``int.from_bytes(blake2b(b"s" + data, digest_size=8,
    person=person).digest(), "little")``.
    """
    starts = np.ascontiguousarray(starts, dtype=np.intp)
    out = np.empty(starts.shape[0], dtype=np.uint64)
    args = (
        np.ascontiguousarray(buf, dtype=np.uint8),
        starts,
        np.ascontiguousarray(ends, dtype=np.intp),
        np.uint8(ord("s")),
        _state(person),
        _IV,
        out,
    )
    # one block per thread: ~0.5 us per string, so a few thousand strings pay a thread
    blocks = _parallel.row_blocks(starts.shape[0], min_rows=_MIN_BLOCK)
    _parallel.run_blocks(lambda a, b: _keys(*args, a, b), blocks)
    return out
