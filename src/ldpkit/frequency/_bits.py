"""Bit-packed report matrices: one bit per coordinate on the wire and in memory.

Layout is ``np.packbits(bits, axis=1)`` (big-endian inside each byte, one row per user),
so a report of d bits takes ceil(d / 8) bytes.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "check_packed",
    "column_counts",
    "independent_bits_matrix",
    "pack_bits",
    "packed_index",
    "unpack_bits",
]

# _BIT_TABLE[b, k] = k-th bit (big-endian) of byte value b.
_BIT_TABLE = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)


def packed_width(d: int) -> int:
    return (d + 7) // 8


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """Pack an (n, d) boolean matrix into (n, ceil(d/8)) uint8."""
    return np.packbits(np.asarray(bits, dtype=bool), axis=1)


def unpack_bits(packed: np.ndarray, d: int) -> np.ndarray:
    """Unpack to an (n, d) uint8 matrix of 0/1."""
    return np.unpackbits(packed, axis=1, count=d)


def check_packed(packed: np.ndarray, d: int, name: str = "reports.bits") -> np.ndarray:
    """Raise ValueError unless ``packed`` is an (n, ceil(d/8)) uint8 matrix with zero padding."""
    width = packed_width(d)
    if packed.dtype != np.uint8 or packed.ndim != 2 or packed.shape[1] != width:
        raise ValueError(
            f"{name} must be a uint8 array of shape (n, {width}) for {d} bits, "
            f"got dtype {packed.dtype} and shape {packed.shape}"
        )
    pad = 8 * width - d
    if pad and packed.shape[0] and np.any(packed[:, -1] & np.uint8((1 << pad) - 1)):
        raise ValueError(f"{name} must have zero padding bits after bit {d - 1}")
    return packed


def column_counts(packed: np.ndarray, d: int) -> np.ndarray:
    """Return the number of 1 bits in each of the d columns of a packed matrix (int64, shape (d,)).

    A compiled pass builds, per tile of 64 byte columns (kept in cache), a histogram of the
    256 byte values (``_kernels_unary.packed_column_counts``; ~20x faster than one
    ``bincount`` per column) and spreads it to bit counts, instead of unpacking n x d bits.
    """
    from ._kernels_unary import packed_column_counts  # numba: imported on first use

    if packed.shape[1] != packed_width(d):
        raise ValueError(
            f"packed must have {packed_width(d)} byte columns for {d} bits, got {packed.shape[1]}"
        )
    return packed_column_counts(np.asarray(packed, dtype=np.uint8), d)


def independent_bits_matrix(domain_size: int, p: float, q: float) -> np.ndarray:
    """Return P[bit vector | value] of independent bits, shape (d, 2^d); small d only.

    Bit v is 1 with probability ``p`` for the user's value v and ``q`` for every other
    item, independently (unary encodings); the outputs are the d-bit integers, item 0 the
    most significant bit.
    """
    d = int(domain_size)
    outputs = np.arange(1 << d)
    bits = (outputs[:, None] >> (d - 1 - np.arange(d))[None, :]) & 1  # (2^d, d)
    matrix = np.empty((d, 1 << d))
    for v in range(d):  # a loop over items of a small domain
        ones = np.full(d, q)
        ones[v] = p
        matrix[v] = np.prod(np.where(bits == 1, ones, 1.0 - ones), axis=1)
    return matrix


def packed_index(packed: np.ndarray, domain_size: int) -> np.ndarray:
    """Read each row of ``np.packbits`` bits as a ``domain_size``-bit integer.

    Item 0 is the most significant bit (the column of :func:`independent_bits_matrix`).
    """
    index = np.zeros(packed.shape[0], dtype=np.int64)
    for j in range(packed.shape[1]):  # a loop over bytes of one row, not over users
        index = (index << 8) | packed[:, j]
    return index >> (8 * packed.shape[1] - int(domain_size))
