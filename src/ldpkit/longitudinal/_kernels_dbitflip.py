"""Compiled sampler of dBitFlipPM's seeded fresh reports (numba; loaded on first large batch).

:func:`dbitflip_streams` draws each report's sampled buckets (Floyd) and bits from
per-stream xoshiro256** generators; :func:`ldpkit.longitudinal._dbitflip_sampler.
sample_dbitflip_numpy` is its numpy twin, with the same bytes from the same seeds (checked
in ``tests/longitudinal/test_dbitflip.py``).
"""

from __future__ import annotations

import numba
import numpy as np

from ..frequency._kernels_unary import _seed_state, _xoshiro_next

__all__ = ["dbitflip_streams"]


# De Bruijn sequence for 64-bit words: the index of a word's lowest set bit without a branch
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _DEBRUIJN_INDEX[((1 << _i) * 0x03F79D71B4CB0A89 & 0xFFFFFFFFFFFFFFFF) >> 58] = _i


@numba.njit(cache=True, nogil=True)
def dbitflip_streams(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    floyd_reject: np.ndarray,
    other_lanes: np.ndarray,
    flip_lanes: np.ndarray,
    buckets: np.ndarray,
    bits: np.ndarray,
) -> None:  # pragma: no cover - compiled; tested against _dbitflip_sampler's numpy twin
    """Fill ``buckets`` and ``bits`` (n, d) from xoshiro256** streams (k <= 64, d <= 32).

    One stream per ``64 // d`` consecutive rows (one 64-lane word of bits), seeded with
    ``seeds[s]`` through splitmix64. Per row, Floyd's d steps draw ``t`` uniform in [0, j]
    (j = k - d + step) exactly by Lemire's multiply-shift on 32-bit halves of the stream's
    words (low half first): ``m = x (j + 1)``, accepted when ``m mod 2^32 >=
    floyd_reject[step]`` (= 2^32 mod (j + 1)), ``t = m >> 32``, else the next half. Then
    the word of the stream's rows' bits: lane ``r d + c`` is bit c of row r, compared with
    its own 64-bit threshold bit-sliced from bit 63 down (``other_lanes[b] ^ (flip_lanes[b]
    & true_lanes)``, the true lane where bucket c holds the value), until every lane is
    settled.
    """
    n, d = buckets.shape
    rows_per_word = 64 // d
    one = np.uint64(1)
    low32 = np.uint64(0xFFFFFFFF)
    row_lanes = (one << np.uint64(d)) - one
    n_streams = (n + rows_per_word - 1) // rows_per_word
    for s in range(n_streams):
        s0, s1, s2, s3 = _seed_state(seeds[s])
        half = np.uint64(0)
        have_half = False
        first = s * rows_per_word
        stop = min(n, first + rows_per_word)
        used = np.uint64(0)
        true_lanes = np.uint64(0)
        for i in range(first, stop):
            mask = np.uint64(0)
            for step in range(d):
                bound = np.uint64(domain_size - d + step + 1)
                while True:
                    if have_half:
                        x = half
                        have_half = False
                    else:
                        r, s0, s1, s2, s3 = _xoshiro_next(s0, s1, s2, s3)
                        x = r & low32
                        half = r >> np.uint64(32)
                        have_half = True
                    m = x * bound
                    if (m & low32) >= floyd_reject[step]:
                        break
                t = m >> np.uint64(32)
                t = bound - one if (mask >> t) & one else t
                mask |= one << t
            v = values[i]
            base = np.uint64((i - first) * d)
            used |= row_lanes << base
            for c in range(d):
                lowest = mask & (~mask + one)
                b = _DEBRUIJN_INDEX[(lowest * _DEBRUIJN) >> np.uint64(58)]
                mask ^= lowest
                buckets[i, c] = b
                if b == v:
                    true_lanes |= one << (base + np.uint64(c))
        ones = np.uint64(0)
        open_lanes = used
        for b in range(64):
            r, s0, s1, s2, s3 = _xoshiro_next(s0, s1, s2, s3)
            t = other_lanes[b] ^ (flip_lanes[b] & true_lanes)
            ones |= open_lanes & ~r & t
            open_lanes &= ~(r ^ t)
            if open_lanes == np.uint64(0):
                break
        for i in range(first, stop):
            base = np.uint64((i - first) * d)
            for c in range(d):
                bits[i, c] = np.uint8((ones >> (base + np.uint64(c))) & one)
