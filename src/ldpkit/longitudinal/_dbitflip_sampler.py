"""dBitFlipPM's seeded fresh reports: the compiled kernel or its bit-exact numpy twin.

:func:`sample_dbitflip` fills a batch's sampled buckets and bits from per-stream
xoshiro256** generators (:func:`._kernels_dbitflip.dbitflip_streams` documents the law and
the order of the draws): the numba kernel for large batches when numba is installed (or
already loaded), :func:`sample_dbitflip_numpy` otherwise, with the same bytes for the same
seeds (``tests/longitudinal/test_dbitflip.py`` checks them). Every number is exact: Floyd's
draws are uniform on their ranges (Lemire's multiply-shift with rejection), every bit is
``U < T`` on a 64-bit U (T the SUE threshold of :meth:`DBitFlipPM._thresholds`).
"""

from __future__ import annotations

import numpy as np

from .. import _parallel
from ..frequency._unary_layout import threshold_lanes
from ..frequency._unary_sampler import _next, _seed_state

__all__ = ["sample_dbitflip", "sample_dbitflip_numpy", "stream_count", "MAX_DOMAIN", "MAX_BITS"]

#: Buckets and sampled bits the streamed sampler handles (a 64-bit mask per row, at least
#: two rows per 64-lane word); other configurations draw with numpy's generator directly.
MAX_DOMAIN = 64
MAX_BITS = 32
#: Batches of at least this many sampled bits load numba (smaller ones stay in numpy: the
#: twin runs ~3e6 reports/s, so from ~1e6 reports numba's import, ~0.4 s, pays off).
COMPILED_MIN_BITS = 1 << 22

_ONE = np.uint64(1)
_LOW32 = np.uint64(0xFFFFFFFF)
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _DEBRUIJN_INDEX[((1 << _i) * 0x03F79D71B4CB0A89 & 0xFFFFFFFFFFFFFFFF) >> 58] = _i


def stream_count(n: int, sampled_bits: int) -> int:
    """Return the number of seeds (one per ``64 // d`` rows) for ``n`` reports."""
    return -(-int(n) // (64 // int(sampled_bits)))


def _laws(domain_size: int, d: int, big: int, small: int) -> tuple[np.ndarray, ...]:
    """Return Floyd's rejection thresholds and the bits' per-lane threshold masks."""
    reject = np.asarray([(1 << 32) % (domain_size - d + s + 1) for s in range(d)], np.uint64)
    other, flip = threshold_lanes(big, small, 64)
    return reject, other, flip


def sample_dbitflip_numpy(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    big: int,
    small: int,
    buckets: np.ndarray,
    bits: np.ndarray,
) -> None:
    """Fill ``buckets`` and ``bits`` as the kernel does, vectorized over streams."""
    n, d = buckets.shape
    per = 64 // d
    reject, other, flip = _laws(domain_size, d, big, small)
    streams = seeds.shape[0]
    state = _seed_state(np.ascontiguousarray(seeds, dtype=np.uint64))
    half = np.zeros(streams, dtype=np.uint64)
    have = np.zeros(streams, dtype=bool)
    used = np.zeros(streams, dtype=np.uint64)
    true_lanes = np.zeros(streams, dtype=np.uint64)
    v = np.asarray(values, dtype=np.int64)
    for r in range(per):
        rows = np.arange(streams) * per + r
        live = np.flatnonzero(rows < n)  # the last stream may hold fewer rows
        if live.size == 0:
            break
        rows = rows[live]
        mask = np.zeros(live.size, dtype=np.uint64)
        for step in range(d):
            bound = np.uint64(domain_size - d + step + 1)
            t = np.zeros(live.size, dtype=np.uint64)
            pending = np.arange(live.size)
            while pending.size:
                who = live[pending]
                x = half[who].copy()
                fresh = ~have[who]
                if fresh.any():  # streams without a spare half draw a word: low half now
                    idx = who[fresh]
                    sub = [part[idx] for part in state]
                    word = _next(sub)
                    for k in range(4):
                        state[k][idx] = sub[k]
                    x[fresh] = word & _LOW32
                    half[idx] = word >> np.uint64(32)
                have[who] = fresh  # a used spare half is gone; a fresh word leaves one
                m = x * bound
                ok = (m & _LOW32) >= reject[step]
                t[pending[ok]] = m[ok] >> np.uint64(32)
                pending = pending[~ok]
            taken = ((mask >> t) & _ONE).astype(bool)
            t = np.where(taken, bound - _ONE, t)
            mask |= _ONE << t
        base = np.uint64(r * d)
        used[live] |= ((_ONE << np.uint64(d)) - _ONE) << base
        for c in range(d):
            lowest = mask & (~mask + _ONE)
            b = _DEBRUIJN_INDEX[(lowest * _DEBRUIJN) >> np.uint64(58)]
            mask ^= lowest
            buckets[rows, c] = b
            hit = b == v[rows]
            true_lanes[live[hit]] |= _ONE << (base + np.uint64(c))
    # the word of bits of every stream: bit-sliced from threshold bit 63 down
    ones = np.zeros(streams, dtype=np.uint64)
    active = np.arange(streams)
    open_lanes = used.copy()
    lanes = true_lanes
    for b in range(64):
        word = _next(state)
        t = other[b] ^ (flip[b] & lanes)
        ones[active] |= open_lanes & ~word & t
        open_lanes &= ~(word ^ t)
        keep = open_lanes != 0
        if not keep.all():
            active, open_lanes, lanes = active[keep], open_lanes[keep], lanes[keep]
            state = [part[keep] for part in state]
            if active.size == 0:
                break
    lane = np.arange(per * d, dtype=np.uint64)
    flat = ((ones[:, None] >> lane[None, :]) & _ONE).astype(np.uint8)
    bits[:] = flat.reshape(streams * per, d)[:n]


def sample_dbitflip(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    big: int,
    small: int,
    buckets: np.ndarray,
    bits: np.ndarray,
) -> None:
    """Fill ``buckets`` (n, d) and ``bits`` (n, d); identical bytes whichever path runs."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    if _parallel.use_compiled(buckets.size, COMPILED_MIN_BITS):
        from ._kernels_dbitflip import dbitflip_streams  # numba: loaded on first use

        reject, other, flip = _laws(domain_size, buckets.shape[1], big, small)
        dbitflip_streams(values, seeds, domain_size, reject, other, flip, buckets, bits)
    else:
        sample_dbitflip_numpy(values, seeds, domain_size, big, small, buckets, bits)
