"""Correctly rounded ``exp``, ``expm1`` and ``log1p`` for the grid laws' constants.

The integer weights of the exact grid laws (:mod:`ldpkit._exact`) and the grids' shapes
are computed from ``e^eps`` and friends. ``math.exp`` is the platform's libm: glibc's is
not always correctly rounded (about 0.07% of inputs for exp, 2-3% for expm1 and log1p,
measured on [1e-6, 40]), other libms and JavaScript engines differ again, and a one-ulp
difference changes ``w_high = floor(w_low e^eps)``, so two platforms would draw from
different laws and disagree on the report grid. These functions evaluate the true value
to 80 significant digits (``decimal``) and round it once to float64, so every platform
(and the JavaScript client, clients/js/src/exact.js) gets the same double. Results are
cached: the callers pass a handful of distinct budgets.
"""

from __future__ import annotations

import functools
from decimal import Context, Decimal

__all__ = ["exp", "expm1", "log1p", "exp_powers"]

_CTX = Context(prec=80, Emax=10**6, Emin=-(10**6))


@functools.lru_cache(maxsize=1024)
def exp(x: float) -> float:
    """``e^x`` correctly rounded (overflows to inf like ``math.exp`` would raise)."""
    return float(_CTX.exp(Decimal(x)))


@functools.lru_cache(maxsize=1024)
def expm1(x: float) -> float:
    """``e^x - 1`` correctly rounded (for |x| >= 1e-20; smaller x returns x)."""
    if abs(x) < 1e-20:
        return float(x)
    return float(_CTX.subtract(_CTX.exp(Decimal(x)), Decimal(1)))


@functools.lru_cache(maxsize=1024)
def log1p(x: float) -> float:
    """``log(1 + x)`` correctly rounded, x > -1."""
    if x == 0.0:
        return 0.0
    return float(_CTX.ln(_CTX.add(Decimal(1), Decimal(x))))


def exp_powers(x: float, count: int, scale: int) -> list[int]:
    """``round(scale e^(t x))`` for ``t = 0 .. count - 1``, in integer arithmetic only.

    ``e^x`` is evaluated once to 80 digits and held as a 160-bit fixed-point integer; its
    powers are integer products (truncation error below ``count 2^-160`` relative), so the
    table is the same on every platform, unlike ``np.exp`` of an array (the platform libm).
    For x <= 0 and ``scale < 2^64`` each entry is within 1 of the exact value.
    """
    bits = 160
    one = 1 << bits
    factor = int(_CTX.multiply(_CTX.exp(Decimal(x)), Decimal(one)).to_integral_value())
    out = []
    power = one
    half = one >> 1
    for _ in range(count):
        out.append((scale * power + half) >> bits)
        power = (power * factor) >> bits
    return out
