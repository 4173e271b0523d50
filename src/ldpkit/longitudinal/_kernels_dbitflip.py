"""Compiled bookkeeping of dBitFlipPM's fresh reports (numba; loaded on first large batch).

:meth:`ldpkit.longitudinal.DBitFlipPM.randomize` draws every random number with numpy (the
Floyd draws of each device's sampled buckets, then one uniform 64-bit word per sampled
bit); this kernel only turns them into reports, row by row: Floyd's rule, the ascending
sort, and each bit's comparison with its threshold. Its numpy twin is the vectorized path
of ``dbitflip.py`` (``_sample_buckets`` and ``_bits``): the same reports from the same
draws, checked byte for byte in ``tests/longitudinal/test_dbitflip.py``.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["dbitflip_rows"]


# De Bruijn sequence for 64-bit words: the index of a word's lowest set bit without a branch
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _DEBRUIJN_INDEX[((1 << _i) * 0x03F79D71B4CB0A89 & 0xFFFFFFFFFFFFFFFF) >> 58] = _i


@numba.njit(cache=True, nogil=True)
def dbitflip_rows(
    draws: np.ndarray,
    values: np.ndarray,
    words: np.ndarray,
    domain_size: int,
    true_threshold: np.uint64,
    other_threshold: np.uint64,
    buckets: np.ndarray,
    bits: np.ndarray,
) -> None:  # pragma: no cover - compiled; tested against the numpy path
    """Fill ``buckets`` (n, d) and ``bits`` (n, d) from the numpy draws (k <= 64 buckets).

    ``draws[s, i]`` is uniform in [0, k - d + s] (Floyd's step s of device i: keep it unless
    already chosen, else take k - d + s); the d chosen buckets, ascending, are the set bits
    of a 64-bit mask read from the lowest; bit c is ``words[i, c] < true_threshold`` where
    bucket c holds ``values[i]``, else ``< other_threshold``. No data-dependent branch: the
    Floyd and threshold choices are selects, which keeps random draws from costing branch
    mispredictions.
    """
    d, n = draws.shape
    one = np.uint64(1)
    for i in range(n):
        mask = np.uint64(0)
        for s in range(d):
            t = np.uint64(draws[s, i])
            taken = (mask >> t) & one
            t = np.uint64(domain_size - d + s) if taken else t
            mask |= one << t
        v = values[i]
        for c in range(d):
            low = mask & (~mask + one)
            b = _DEBRUIJN_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]
            mask ^= low
            buckets[i, c] = b
            threshold = true_threshold if b == v else other_threshold
            bits[i, c] = np.uint8(words[i, c] < threshold)
