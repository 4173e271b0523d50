"""Compiled kernels for the local-hashing oracles (server side: support counting).

The hash family (see :mod:`ldpkit.frequency.hashing`): a 64-bit report seed s gives
``a = splitmix64(s + gamma) | 1`` and ``b = splitmix64(s + 2 gamma)``; item v hashes to
``h(v) = (((a v + b) mod 2^64) >> 32) * g >> 32``. This module holds the numba versions
of the mixer and of the O(n d) support count; the numpy versions live next to the
oracles and the tests check that both agree bit for bit.

Why numba: the support count visits every (report, item) pair. Written with numpy it
must materialize a (chunk, d) block of 64-bit hashes, several passes over memory per
pair (see benchmarks/hashing.py); compiled, the inner loop over items is an add, a
compare and an increment on registers, which the compiler vectorizes.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

from .. import _parallel

# splitmix64 constants (Steele, Lea and Flood 2014; the finalizer is Stafford's "Mix13").
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_GAMMA2 = np.uint64((2 * 0x9E3779B97F4A7C15) % (1 << 64))
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S32 = np.uint64(32)
_ONE = np.uint64(1)
_TWO32 = np.uint64(1 << 32)
_TABLE_MAX = 1 << 16
_U0 = np.uint64(0)


@nb.njit(cache=True, inline="always")
def _mix64(z: np.uint64) -> np.uint64:  # pragma: no cover - compiled
    z = (z ^ (z >> _S30)) * _MUL1
    z = (z ^ (z >> _S27)) * _MUL2
    return z ^ (z >> _S31)


@nb.njit(cache=True, inline="always")
def _bucket_window(y: np.uint64, g: np.uint64) -> tuple[np.uint64, np.uint64]:  # pragma: no cover
    """Return the window of h32 values that range-reduce to y: [lo, hi), lo = ceil(y 2^32 / g).

    Returned as (lo << 32, (hi - lo) << 32) so that x >> 32 in [lo, hi) becomes one unsigned
    compare ``(x - start) < width`` on the full 64-bit word.
    """
    lo = ((y << _S32) + g - _ONE) // g
    y1 = y + _ONE
    if y1 == g:
        hi = _TWO32
    else:
        hi = ((y1 << _S32) + g - _ONE) // g
    return lo << _S32, (hi - lo) << _S32


def _summed_blocks(block: Any, n: int, size: int, n_blocks: int) -> np.ndarray:
    """Run ``block(start, stop)`` over ``n_blocks`` contiguous blocks of n reports; sum.

    The blocks run on plain threads (see :mod:`ldpkit._parallel` for why not numba's
    ``parallel=True``), each with its own count array; the integer counts are summed, so
    the result does not depend on the number of blocks or threads.
    """
    if n_blocks <= 1:  # small batches (collector groups): no block list, no extra sum
        return block(0, n)
    bounds = [(t * n // n_blocks, (t + 1) * n // n_blocks) for t in range(max(1, n_blocks))]
    out = np.zeros(size, dtype=np.int64)
    for part in _parallel.run_blocks(block, bounds):
        out += part
    return out


def support_counts_kernel(
    seeds: np.ndarray, values: np.ndarray, g: int, d: int, n_blocks: int
) -> np.ndarray:
    """C_v = #{i : h_{seeds[i]}(v) == values[i]} for v in [0, d), as int64.

    Reports are split into ``n_blocks`` contiguous blocks (:func:`_summed_blocks`).
    """
    return _summed_blocks(
        lambda a, b: _support_counts_block(seeds, values, g, d, a, b),
        seeds.shape[0],
        d,
        n_blocks,
    )


@nb.njit(cache=True, inline="always")
def _window_table(g: int) -> tuple[bool, np.ndarray, np.ndarray]:  # pragma: no cover
    """Return whether the report windows are tabulated, and the table (first, width) per y.

    Two 64-bit divisions per report (~2 ns) are a large share of the cost at small d:
    the windows are tabulated once when the range is small (the common case, g ~ e^eps + 1).
    """
    gg = np.uint64(g)
    use_table = g <= _TABLE_MAX
    firsts = np.empty(g if use_table else 1, dtype=np.uint64)
    widths = np.empty(g if use_table else 1, dtype=np.uint64)
    if use_table:
        for y in range(g):
            firsts[y], widths[y] = _bucket_window(np.uint64(y), gg)
    return use_table, firsts, widths


@nb.njit(cache=True, inline="always")
def _report_window(
    s: np.uint64, y: int, use_table: bool, firsts: np.ndarray, widths: np.ndarray, gg: np.uint64
) -> tuple[np.uint64, np.uint64, np.uint64]:  # pragma: no cover - compiled
    """Return a report's ``a``, ``b - first`` and window width.

    ``h(key) == y`` exactly when ``(a key + b - first) mod 2^64 < width``.
    """
    a = _mix64(s + _GAMMA) | _ONE
    b = _mix64(s + _GAMMA2)
    if use_table:
        return a, b - firsts[y], widths[y]
    first, width = _bucket_window(np.uint64(y), gg)
    return a, b - first, width


@nb.njit(cache=True, nogil=True)
def _support_counts_block(
    seeds: np.ndarray, values: np.ndarray, g: int, d: int, start: int, stop: int
) -> np.ndarray:  # pragma: no cover - compiled
    """Support counts of reports start..stop-1 (serial; releases the GIL)."""
    gg = np.uint64(g)
    use_table, firsts, widths = _window_table(g)
    # A private array per block (no false sharing); int64 so no overflow at any n.
    local = np.zeros(d, dtype=np.int64)
    for i in range(start, stop):
        a, x, width = _report_window(seeds[i], values[i], use_table, firsts, widths, gg)
        # x_v = a v + b - first (mod 2^64): one wrapping add per item, no multiply.
        for v in range(d):
            local[v] += x < width
            x += a
    return local


def keyed_support_counts_kernel(
    seeds: np.ndarray, values: np.ndarray, g: int, keys: np.ndarray, n_blocks: int
) -> np.ndarray:
    """C_v = #{i : h_{seeds[i]}(keys[v]) == values[i]} for every v, as int64.

    The support count of ``OLH(mix_items=True)``: item v is hashed by its key ``keys[v]``
    (uint64 below 2^32), so each pair costs a multiply instead of an add. Blocks as in
    :func:`support_counts_kernel`.
    """
    return _summed_blocks(
        lambda a, b: _keyed_counts_block(seeds, values, g, keys, a, b),
        seeds.shape[0],
        keys.shape[0],
        n_blocks,
    )


@nb.njit(cache=True, nogil=True)
def _keyed_counts_block(
    seeds: np.ndarray, values: np.ndarray, g: int, keys: np.ndarray, start: int, stop: int
) -> np.ndarray:  # pragma: no cover - compiled
    """Support counts over given keys of reports start..stop-1 (serial; releases the GIL)."""
    gg = np.uint64(g)
    use_table, firsts, widths = _window_table(g)
    d = keys.shape[0]
    local = np.zeros(d, dtype=np.int64)
    for i in range(start, stop):
        a, shift, width = _report_window(seeds[i], values[i], use_table, firsts, widths, gg)
        for v in range(d):
            local[v] += (a * keys[v] + shift) < width
    return local


@nb.njit(cache=True, inline="always")
def _row_hash(s: np.uint64, key: np.uint64, w: np.uint64) -> np.uint64:  # pragma: no cover
    """Return ``h_s(key)`` in ``[0, w)``, the sketches' row hash.

    Seed s's ``(a, b)`` (``hashing.hash_parameters``), the multiply-add, the splitmix64
    finalizer and the range reduction.
    """
    a = _mix64(s + _GAMMA) | _ONE
    b = _mix64(s + _GAMMA2)
    return ((_mix64(a * key + b) >> _S32) * w) >> _S32


@nb.njit(cache=True, nogil=True)
def _row_hash_users(
    rows: np.ndarray, keys: np.ndarray, width: int, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    w = np.uint64(width)
    for i in range(rows.shape[0]):
        out[i] = np.int64(_row_hash(np.uint64(rows[i]), keys[i], w))


def row_hash_users(rows: np.ndarray, keys: np.ndarray, width: int) -> np.ndarray:
    """``h_{rows[i]}(keys[i])`` in ``[0, width)`` per user (int64), in one pass.

    The sketches' row hashes of :func:`ldpkit.frequency._items.row_hash` (the same
    arithmetic, so the same values): the row's ``(a, b)``, the multiply-add, the
    splitmix64 finalizer and the range reduction per user, with no temporary array
    between them (the numpy version makes about ten passes over memory).
    """
    out = np.empty(rows.shape[0], dtype=np.int64)
    _row_hash_users(
        np.ascontiguousarray(rows, dtype=np.int64),
        np.ascontiguousarray(keys, dtype=np.uint64),
        int(width),
        out,
    )
    return out


@nb.njit(cache=True, inline="always")
def _quotient(x: np.int64, d: np.int64, inverse: float) -> np.int64:  # pragma: no cover
    """Return ``x // d`` exactly for ``0 <= x < 2^62`` and ``1 <= d``, without a division.

    A 64-bit division costs ~40 cycles, more than the rest of a report. The float
    estimate ``x * (1/d)`` is within one of the quotient (here below 2^32, relative error
    ~2^-51) and one integer multiply corrects it: the result is the integer quotient,
    not an approximation.
    """
    q = np.int64(np.float64(x) * inverse)
    r = x - q * d
    while r < 0:
        q -= 1
        r += d
    while r >= d:
        q += 1
        r -= d
    return q


@nb.njit(cache=True, nogil=True)
def _grr_from_uniform(
    values: np.ndarray, u: np.ndarray, w_keep: int, w_other: int, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    inverse = 1.0 / w_other
    for i in range(values.shape[0]):
        x = u[i]
        if x < w_keep:
            out[i] = values[i]
        else:  # uniform over the d - 1 other values
            o = _quotient(x - w_keep, np.int64(w_other), inverse)
            out[i] = o + 1 if o >= values[i] else o


def grr_from_uniform(values: np.ndarray, u: np.ndarray, w_keep: int, w_other: int) -> np.ndarray:
    """Randomized response from one uniform integer per user, as ``grr.grr_sample`` maps it.

    ``u < w_keep`` keeps the value; otherwise ``(u - w_keep) // w_other``, skipping the
    value, is the report. The same map as the numpy version (so the same reports), in one
    pass with a division only for the users who do not keep their value.
    """
    out = np.empty(values.shape[0], dtype=np.int64)
    _grr_from_uniform(
        np.ascontiguousarray(values, dtype=np.int64),
        np.ascontiguousarray(u, dtype=np.int64),
        int(w_keep),
        int(w_other),
        out,
    )
    return out


@nb.njit(cache=True, nogil=True)
def _hashed_grr_block(
    keys: np.ndarray,
    inverse: np.ndarray,
    rows: np.ndarray,
    u: np.ndarray,
    table_a: np.ndarray,
    table_b: np.ndarray,
    width: int,
    w_keep: int,
    w_other: int,
    rows_out: np.ndarray,
    y_out: np.ndarray,
    start: int,
    stop: int,
) -> None:  # pragma: no cover - compiled
    w = np.uint64(width)
    keep = np.int64(w_keep)
    other = np.int64(w_other)
    reciprocal = 1.0 / w_other
    for i in range(start, stop):
        r = rows[i]
        x = _mix64(table_a[r] * keys[inverse[i]] + table_b[r])
        h = np.int64(((x >> _S32) * w) >> _S32)
        c = u[i]
        if c < keep:
            y = h
        else:  # uniform over the other values: grr_from_uniform's map
            y = _quotient(c - keep, other, reciprocal)
            if y >= h:
                y += 1
        rows_out[i] = r
        y_out[i] = y


def hashed_grr(
    keys: np.ndarray,
    inverse: np.ndarray,
    rows: np.ndarray,
    u: np.ndarray,
    tables: tuple[np.ndarray, np.ndarray],
    width: int,
    weights: tuple[int, int],
    dtypes: tuple[np.dtype, np.dtype],
) -> tuple[np.ndarray, np.ndarray]:
    """FLH's client in one pass: the row hash of each user's key, then GRR over ``[width]``.

    User i's key is ``keys[inverse[i]]``, her row ``rows[i]`` (in ``[0, len(tables[0]))``) and
    her coin ``u[i]`` (uniform in ``[0, w_keep + (width - 1) w_other)``). The values are
    those of :func:`row_hash_users` followed by :func:`grr_from_uniform` (the same
    arithmetic: ``tables`` holds every row's ``(a, b)``, ``hashing.hash_parameters`` of
    the row numbers, tabulated by the caller since this module does not import it), cast
    to ``dtypes`` (rows, reports), over row blocks on threads (:mod:`ldpkit._parallel`):
    the bytes do not depend on the split.
    """
    table_a, table_b = tables
    n = rows.shape[0]
    rows_out = np.empty(n, dtype=dtypes[0])
    y_out = np.empty(n, dtype=dtypes[1])
    args = (
        np.ascontiguousarray(keys, dtype=np.uint64),
        np.ascontiguousarray(inverse, dtype=np.intp),
        np.ascontiguousarray(rows, dtype=np.int64),
        np.ascontiguousarray(u, dtype=np.int64),
        table_a,
        table_b,
        int(width),
        int(weights[0]),
        int(weights[1]),
        rows_out,
        y_out,
    )
    _parallel.run_blocks(lambda a, b: _hashed_grr_block(*args, a, b), _parallel.row_blocks(n))
    return rows_out, y_out


@nb.njit(cache=True, inline="always")
def _parity(x: np.uint64) -> np.uint64:  # pragma: no cover - compiled
    x ^= x >> np.uint64(32)
    x ^= x >> np.uint64(16)
    x ^= x >> np.uint64(8)
    x ^= x >> np.uint64(4)
    x ^= x >> np.uint64(2)
    x ^= x >> _ONE
    return x & _ONE


@nb.njit(cache=True, nogil=True)
def _hadamard_signs(
    rows: np.ndarray,
    keys: np.ndarray,
    index: np.ndarray,
    u: np.ndarray,
    w_keep: int,
    width: int,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    w = np.uint64(width)
    for i in range(rows.shape[0]):
        h = _row_hash(np.uint64(rows[i]), keys[i], w)
        minus = _parity(np.uint64(index[i]) & h)  # H[l, h] = (-1)^popcount(l & h)
        keep = u[i] < w_keep
        out[i] = np.uint8((minus == _U0) == keep)


def hadamard_signs(
    rows: np.ndarray, keys: np.ndarray, index: np.ndarray, u: np.ndarray, w_keep: int, width: int
) -> np.ndarray:
    """HCMS report bits (1 for a +1 sign) in one pass, as ``sketch.HCMS`` computes them.

    User i's sign ``H[index, h_rows(key)]`` is kept when ``u[i] < w_keep`` and flipped
    otherwise; the row hash is :func:`row_hash_users`'s.
    """
    out = np.empty(rows.shape[0], dtype=np.uint8)
    _hadamard_signs(
        np.ascontiguousarray(rows, dtype=np.int64),
        np.ascontiguousarray(keys, dtype=np.uint64),
        np.ascontiguousarray(index, dtype=np.int64),
        np.ascontiguousarray(u, dtype=np.int64),
        int(w_keep),
        int(width),
        out,
    )
    return out


@nb.njit(cache=True, nogil=True)
def _xor_seed_hashes(
    keys: np.ndarray, seeds: np.ndarray, hash_range: int, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    g = np.uint64(hash_range)
    for i in range(keys.shape[0]):
        out[i] = np.int64(((_mix64(keys[i] ^ seeds[i]) >> _S32) * g) >> _S32)


def xor_seed_hashes(keys: np.ndarray, seeds: np.ndarray, hash_range: int) -> np.ndarray:
    """``((mix64(key ^ seed) >> 32) * g) >> 32`` per user (int64): the discovery hash family.

    :func:`ldpkit.discovery._strings.hash_keys` in one pass (the same values).
    """
    out = np.empty(keys.shape[0], dtype=np.int64)
    _xor_seed_hashes(
        np.ascontiguousarray(keys, dtype=np.uint64),
        np.ascontiguousarray(seeds, dtype=np.uint64),
        int(hash_range),
        out,
    )
    return out


@nb.njit(cache=True, nogil=True)
def _gathered_xor_seed_hashes(
    key_table: np.ndarray,
    inverse: np.ndarray,
    groups: np.ndarray,
    seed_table: np.ndarray,
    hashes: np.ndarray,
    hash_range: int,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    g = np.uint64(hash_range)
    width = key_table.shape[1]
    family = seed_table.shape[0] // width
    for i in range(inverse.shape[0]):
        key = key_table[inverse[i], groups[i]]
        seed = seed_table[groups[i] * family + hashes[i]]
        out[i] = np.int64(((_mix64(key ^ seed) >> _S32) * g) >> _S32)


def gathered_xor_seed_hashes(
    key_table: np.ndarray,
    inverse: np.ndarray,
    groups: np.ndarray,
    seed_table: np.ndarray,
    hashes: np.ndarray,
    hash_range: int,
) -> np.ndarray:
    """:func:`xor_seed_hashes` of ``key_table[inverse, groups]`` and ``seed_table[groups H + hashes]``.

    The discovery client's per-user lookups (its distinct string's prefix key at its
    group, its group's public seed) and hash in one pass; ``H = len(seed_table) //
    key_table.shape[1]``.
    """
    out = np.empty(inverse.shape[0], dtype=np.int64)
    _gathered_xor_seed_hashes(
        np.ascontiguousarray(key_table, dtype=np.uint64),
        np.ascontiguousarray(inverse, dtype=np.intp),
        np.ascontiguousarray(groups, dtype=np.intp),
        np.ascontiguousarray(seed_table, dtype=np.uint64),
        np.ascontiguousarray(hashes, dtype=np.intp),
        int(hash_range),
        out,
    )
    return out
